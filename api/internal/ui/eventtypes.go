package ui

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/topics"
)

// The event catalog's pages: the list of types (admins: with their
// invalid and unknown events of the last 24 hours, and the form to add
// one), a type's page (its description, schema as a table, examples;
// admins: its edit form and delete), and the catalog's part of the
// endpoint pages (the types to pick, the examples to test-send). Tenants
// read the catalog through the portal, never its counts.

// typeForm is the add or edit form of an event type, as typed: shown again
// with the API's messages next to its fields when refused.
type typeForm struct {
	Name, Description, Schema, Examples, Validation string
	Deprecated                                      bool
	// Edit: the form changes an existing type (the name is fixed).
	Edit bool
	// Errors are the messages of the fields by name (name, description,
	// schema, examples, validation).
	Errors map[string]string
	// Breaking are the reasons a change would refuse data the current
	// version accepts: the form then offers to save anyway.
	Breaking []string
}

// typeFormFields are the fields a message of the API can be put next to.
var typeFormFields = map[string]bool{"name": true, "description": true, "schema": true, "examples": true, "validation": true}

// readTypeForm reads a posted add or edit form.
func readTypeForm(r *http.Request) typeForm {
	return typeForm{Name: strings.TrimSpace(r.PostFormValue("name")), Description: r.PostFormValue("description"),
		Schema: r.PostFormValue("schema"), Examples: r.PostFormValue("examples"), Validation: r.PostFormValue("validation"),
		Deprecated: r.PostFormValue("deprecated") != "", Errors: map[string]string{}}
}

// formOf is the edit form of a type as it is.
func formOf(et service.EventType) typeForm {
	f := typeForm{Name: et.Name, Description: et.Description, Validation: et.Validation, Deprecated: et.Deprecated, Edit: true}
	if len(et.Schema) > 0 {
		f.Schema = prettyJSON(et.Schema)
	}
	if len(et.Examples) > 0 {
		b, _ := json.Marshal(et.Examples)
		f.Examples = prettyJSON(b)
	}
	return f
}

// body is the API's body of the form; false when the examples are not a
// JSON array (its message then next to the field). The schema goes as
// typed: the catalog's compiler judges it.
func (f *typeForm) body() (service.EventTypeBody, bool) {
	b := service.EventTypeBody{Description: f.Description, Validation: f.Validation, Deprecated: f.Deprecated}
	if s := strings.TrimSpace(f.Schema); s != "" {
		b.Schema = json.RawMessage(s)
	}
	if e := strings.TrimSpace(f.Examples); e != "" {
		if !strings.HasPrefix(e, "[") {
			f.Errors["examples"] = "a JSON array of data values: [{...}, ...]"
			return b, false
		}
		if err := json.Unmarshal([]byte(e), &b.Examples); err != nil {
			f.Errors["examples"] = "not a JSON array: " + err.Error()
			return b, false
		}
	}
	return b, true
}

// refused puts the refusal of a catalog write on the form: a breaking
// change's reasons in its list, a message naming a field next to it. It
// answers what the page says above the form.
func (f *typeForm) refused(err error) string {
	var e *service.Error
	if !errors.As(err, &e) {
		return "Not saved: " + internalError
	}
	if e.Kind == service.Conflict && len(e.Fields) > 0 {
		for _, d := range e.Fields {
			f.Breaking = append(f.Breaking, d.Why)
		}
		return "Not saved: this change would refuse events that the current version accepts."
	}
	msg := e.Msg
	for _, d := range e.Fields {
		if typeFormFields[d.Field] {
			f.Errors[d.Field] = d.Why
			continue
		}
		msg += "; " + d.Why
	}
	return "Not saved: " + msg
}

// typeFaults are the invalid and unknown events of the last 24 hours by
// type (the unknown types together under ""), most first, for admins; ok
// is false without Redis.
func (s *Pages) typeFaults(ctx context.Context, v *view) (faults []service.EventTypeFaults, ok bool) {
	var out service.EventTypeFaultsOutput
	if _, err := s.call(ctx, v.p, "GET", "/v1/stats/event-types", nil, &out.Body); err != nil || !out.Body.Available {
		return nil, false
	}
	return out.Body.Types, true
}

func (s *Pages) eventTypesPage(_ http.ResponseWriter, r *http.Request, v *view) page {
	return s.renderEventTypes(r, v, typeForm{Validation: topics.ValidationWarn}, "", "")
}

// typeRow is a row of the event types page.
type typeRow struct {
	service.EventType
	Invalid, Unknown int64
}

func (s *Pages) renderEventTypes(r *http.Request, v *view, form typeForm, flash, msg string) page {
	ctx := r.Context()
	pg := page{Title: "Event types", Section: "event-types", Flash: flash, Error: msg, template: "event-types"}
	data := struct {
		List []typeRow
		// Counted: the counts are available (admins, with Redis).
		Counted bool
		// Others are the counted types not in the catalog: "" for the
		// unknown types together, a removed type by its name.
		Others []service.EventTypeFaults
		Form   typeForm
	}{Form: form}
	var faults []service.EventTypeFaults
	if !v.Portal {
		faults, data.Counted = s.typeFaults(ctx, v)
	}
	byType := map[string]service.EventTypeFaults{}
	for _, f := range faults {
		byType[f.Type] = f
	}
	listed := map[string]bool{}
	for _, et := range s.types.List() {
		f := byType[et.Name]
		listed[et.Name] = true
		data.List = append(data.List, typeRow{EventType: et, Invalid: f.Invalid, Unknown: f.Unknown})
	}
	for _, f := range faults {
		if !listed[f.Type] {
			data.Others = append(data.Others, f)
		}
	}
	pg.Data = data
	return pg
}

func (s *Pages) eventTypePage(w http.ResponseWriter, r *http.Request, v *view) page {
	return s.renderEventType(w, r, v, r.PathValue("name"), nil, "", "")
}

// renderEventType renders a type's page; form, when set, is the edit form
// as posted (with its messages), otherwise the type as it is.
func (s *Pages) renderEventType(w http.ResponseWriter, r *http.Request, v *view, name string, form *typeForm, flash, msg string) page {
	ctx := r.Context()
	et, err := s.types.Get(name)
	if err != nil {
		return notFound(w, "event type "+name)
	}
	doc, err := readSchema(et.Schema)
	data := map[string]any{"Type": et, "Doc": doc, "SchemaText": prettyJSON(et.Schema)}
	if err != nil {
		data["DocError"] = "the schema could not be read as a table: see it as written below"
	}
	examples := make([]string, len(et.Examples))
	for i, ex := range et.Examples {
		examples[i] = prettyJSON(ex)
	}
	data["Examples"] = examples
	if !v.Portal {
		if form == nil {
			f := formOf(et)
			form = &f
		}
		data["Form"] = *form
		if faults, ok := s.typeFaults(ctx, v); ok {
			f := service.EventTypeFaults{Type: et.Name}
			for _, x := range faults {
				if x.Type == et.Name {
					f = x
				}
			}
			data["Faults"] = f
		}
	}
	return page{Title: "Event type " + et.Name, Section: "event-types", Flash: flash, Error: msg, Data: data, template: "event-type"}
}

// createEventTypeForm adds a type from the form of the event types page.
func (s *Pages) createEventTypeForm(w http.ResponseWriter, r *http.Request, v *view) page {
	form := readTypeForm(r)
	b, ok := form.body()
	if !ok {
		return s.renderEventTypes(r, v, form, "", "Not added: see the fields marked.")
	}
	out, err := s.types.Create(r.Context(), v.p, form.Name, b)
	if err != nil {
		return s.renderEventTypes(r, v, form, "", strings.Replace(form.refused(s.logged(err)), "Not saved", "Not added", 1))
	}
	return s.renderEventType(w, r, v, out.Name, nil, "Added "+out.Name+" as version 1.", "")
}

// editEventTypeForm writes the next version of a type from its edit form;
// a breaking change is written only when the form says force (its "save
// anyway" button, offered with the reasons).
func (s *Pages) editEventTypeForm(w http.ResponseWriter, r *http.Request, v *view) page {
	name := r.PathValue("name")
	form := readTypeForm(r)
	form.Name, form.Edit = name, true
	b, ok := form.body()
	if !ok {
		return s.renderEventType(w, r, v, name, &form, "", "Not saved: see the fields marked.")
	}
	out, err := s.types.Update(r.Context(), v.p, name, b, r.PostFormValue("force") == "true")
	if refusedAs(err, service.NotFound) {
		return notFound(w, "event type "+name)
	}
	if err != nil {
		return s.renderEventType(w, r, v, name, &form, "", form.refused(s.logged(err)))
	}
	return s.renderEventType(w, r, v, name, nil, "Saved as version "+strconv.Itoa(out.Version)+".", "")
}

// deleteEventTypePage asks to confirm a type's removal.
func (s *Pages) deleteEventTypePage(w http.ResponseWriter, r *http.Request, _ *view) page {
	et, err := s.types.Get(r.PathValue("name"))
	if err != nil {
		return notFound(w, "event type "+r.PathValue("name"))
	}
	return page{Title: "Remove " + et.Name, Section: "event-types", Data: map[string]any{"Type": et}, template: "event-type-delete"}
}

// deleteEventType removes a type, confirmed on deleteEventTypePage.
func (s *Pages) deleteEventType(w http.ResponseWriter, r *http.Request, v *view) page {
	name := r.PathValue("name")
	if err := s.types.Delete(r.Context(), v.p, name); err != nil {
		if refusedAs(err, service.NotFound) {
			return notFound(w, "event type "+name)
		}
		return s.renderEventType(w, r, v, name, nil, "", "Not removed: "+problemText(s.logged(err)))
	}
	return s.renderEventTypes(r, v, typeForm{Validation: topics.ValidationWarn}, "Removed "+name+": its events are now of an unknown type.", "")
}

// typePick is the event types field of an endpoint's forms: the catalog's
// types to tick, and the other types and patterns typed.
type typePick struct {
	Types  []service.EventType
	Picked map[string]bool
	// Other are the patterns that are not catalog types, comma-separated.
	Other string
}

// pickOf splits an endpoint's patterns into the catalog's types and the
// others.
func pickOf(types []service.EventType, patterns []string) typePick {
	p := typePick{Types: types, Picked: map[string]bool{}}
	known := map[string]bool{}
	for _, t := range types {
		known[t.Name] = true
	}
	var other []string
	for _, pat := range patterns {
		if known[pat] {
			p.Picked[pat] = true
		} else {
			other = append(other, pat)
		}
	}
	p.Other = strings.Join(other, ", ")
	return p
}

// pickedTypes are the patterns of a posted endpoint form: the types
// ticked, then those typed.
func pickedTypes(r *http.Request) []string {
	typed := splitTypes(r.PostFormValue("event_types")) // parses the form
	return append(slices.Clone(r.PostForm["event_type"]), typed...)
}

// testChoice is an example test-send can send.
type testChoice struct{ Value, Label string }

// testChoices are the examples of the catalog's types the endpoint's
// patterns match, for test-send; values are type#index.
func testChoices(types []service.EventType, patterns []string) []testChoice {
	var out []testChoice
	for _, t := range types {
		matched := false
		for _, p := range patterns {
			matched = matched || topics.MatchType(p, t.Name)
		}
		if !matched {
			continue
		}
		for i := range t.Examples {
			label := t.Name
			if len(t.Examples) > 1 {
				label += ", example " + strconv.Itoa(i+1)
			}
			out = append(out, testChoice{Value: t.Name + "#" + strconv.Itoa(i), Label: label})
		}
	}
	return out
}

// testBody is the test-send body of the example picked (type#index): nil,
// no body, for a webhook.test event.
func testBody(picked string) any {
	name, i, ok := strings.Cut(picked, "#")
	n, err := strconv.Atoi(i)
	if !ok || err != nil || name == "" {
		return nil
	}
	return map[string]any{"event_type": name, "example": n}
}
