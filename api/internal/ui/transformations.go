package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/hookpipe/hookpipe/api/internal/service"
)

// The endpoint page's transformation: the script in a textarea, a sample
// event (a type and its data as JSON) to try it on, and two buttons of one
// form. "Try it" runs POST /v1/transformations/test on the sample, with the
// endpoint's URL and headers, and shows the request it would make or why
// the script fails; "Save" PATCHes the subscription's transformation (an
// empty script removes it). Both re-render the page with what was typed
// and the API's messages next to the field they name: no script needed.

// transformForm is the transformation part of the endpoint page.
type transformForm struct {
	Script, Type, Data     string
	ScriptError, DataError string
	// Result is the answer of a try, nil before one.
	Result *service.TransformationTestOutput
}

// transformFormOf is the form showing sub's transformation, tried on the
// first example of a catalog type its patterns match, else on a type it
// names (data {}), else on webhook.test.
func transformFormOf(sub service.Subscription, types []service.EventType) transformForm {
	f := transformForm{Script: sub.Transformation, Type: service.TestEventType, Data: "{}"}
	for _, c := range testChoices(types, sub.EventTypes) {
		name, _, _ := strings.Cut(c.Value, "#")
		for _, t := range types {
			if t.Name == name && len(t.Examples) > 0 {
				f.Type, f.Data = name, indentJSON(t.Examples[0])
				return f
			}
		}
	}
	for _, p := range sub.EventTypes {
		if !strings.Contains(p, "*") {
			f.Type = p
			break
		}
	}
	return f
}

// indentJSON is a JSON value laid out for a textarea.
func indentJSON(v json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, v, "", "  ") != nil {
		return string(v)
	}
	return b.String()
}

// readTransformForm reads the posted transformation form: the script as
// typed (without a textarea's CRLF and the blank lines around it).
func readTransformForm(r *http.Request) transformForm {
	script := strings.TrimSpace(strings.ReplaceAll(r.PostFormValue("transformation"), "\r\n", "\n"))
	return transformForm{Script: script, Type: strings.TrimSpace(r.PostFormValue("sample_type")),
		Data: strings.TrimSpace(strings.ReplaceAll(r.PostFormValue("sample_data"), "\r\n", "\n"))}
}

// transformationAction runs the transformation form's button: op=save
// PATCHes the script, anything else tries it.
func (s *Pages) transformationAction(w http.ResponseWriter, r *http.Request, v *view) page {
	ctx := r.Context()
	id := r.PathValue("id")
	form := readTransformForm(r)
	if r.PostFormValue("op") == "save" {
		_, err := s.call(ctx, v.p, "PATCH", "/v1/subscriptions/"+url.PathEscape(id), map[string]any{"transformation": form.Script}, nil)
		if notFoundErr(err) {
			return notFound(w, "endpoint "+id)
		}
		flash := "Transformation saved."
		if form.Script == "" {
			flash = "Transformation removed."
		}
		pg := s.renderSubscription(w, r, v, id, flash, nil)
		if err != nil {
			form.refused(err, "body.transformation")
			pg.Flash, pg.Error = "", "Not saved: "+problemText(err)
		}
		return form.on(pg)
	}
	pg := s.renderSubscription(w, r, v, id, "", nil)
	data, ok := pg.Data.(map[string]any)
	if !ok {
		return pg
	}
	sub := data["Sub"].(service.Subscription)
	body := map[string]any{"script": form.Script, "type": form.Type, "headers": sub.Headers}
	if form.Data != "" {
		var sample json.RawMessage
		if err := json.Unmarshal([]byte(form.Data), &sample); err != nil {
			form.DataError = "not JSON: " + err.Error()
			return form.on(pg)
		}
		body["data"] = sample
	}
	if strings.HasPrefix(sub.URL, "http://") || strings.HasPrefix(sub.URL, "https://") {
		body["url"] = sub.URL
	}
	var out service.TransformationTestOutput
	if _, err := s.call(ctx, v.p, "POST", "/v1/transformations/test", body, &out.Body); err != nil {
		if !form.refused(err, "body.script") {
			pg.Error = "Not tried: " + problemText(err)
		}
		return form.on(pg)
	}
	form.Result = &out
	return form.on(pg)
}

// on puts f on the endpoint page pg (unless pg is not one).
func (f transformForm) on(pg page) page {
	if data, ok := pg.Data.(map[string]any); ok {
		data["Transform"] = f
	}
	return pg
}

// refused puts the API's messages about the script (at location) and the
// sample's data next to them, and reports whether it placed them all.
func (f *transformForm) refused(err error, location string) bool {
	var e *apiError
	if !errors.As(err, &e) || len(e.Errors) == 0 {
		return false
	}
	all := true
	for _, d := range e.Errors {
		switch d.Location {
		case location:
			f.ScriptError = d.Message
		case "body.data":
			f.DataError = d.Message
		default:
			all = false
		}
	}
	return all
}
