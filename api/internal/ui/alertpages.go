package ui

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/hookpipe/hookpipe/api/internal/service"
)

// alertsPage lists the alert channels the view sees, with a form to add
// one: the dashboard every tenant's and the operators', the portal its
// tenant's.
func (s *Pages) alertsPage(_ http.ResponseWriter, r *http.Request, v *view) page {
	var out service.AlertChannelsOutput
	pg := page{Title: "Alerts", Section: "alerts", template: "alerts"}
	if _, err := s.call(r.Context(), v.p, "GET", "/v1/alert-channels", nil, &out.Body); err != nil {
		pg.Error = problemText(err)
	}
	pg.Data = map[string]any{"List": out.Body.Data, "Email": s.email}
	return pg
}

func (s *Pages) createAlertChannel(w http.ResponseWriter, r *http.Request, v *view) page {
	body := map[string]any{"kind": r.PostFormValue("kind")}
	if to := splitTypes(r.PostFormValue("to")); len(to) > 0 {
		body["to"] = to
	}
	if u := strings.TrimSpace(r.PostFormValue("url")); u != "" {
		body["url"] = u
	}
	if t := splitTypes(r.PostFormValue("types")); len(t) > 0 {
		body["types"] = t
	}
	if t := r.PostFormValue("tenant"); t != "" && !v.Portal {
		body["tenant"] = t
	}
	if m := strings.TrimSpace(r.PostFormValue("digest_minutes")); m != "" {
		n, err := strconv.ParseFloat(m, 64)
		if err != nil {
			pg := s.alertsPage(w, r, v)
			pg.Error = "Not added: the digest window is a number of minutes."
			return pg
		}
		body["digest_ms"] = int64(n * 60000)
	}
	var ch service.AlertChannel
	_, err := s.call(r.Context(), v.p, "POST", "/v1/alert-channels", body, &ch)
	pg := s.alertsPage(w, r, v)
	if err != nil {
		pg.Error = "Not added: " + problemText(err)
	} else {
		pg.Flash = "Added alert channel " + ch.ID + "."
	}
	return pg
}

// alertChannelAction tests or deletes a channel.
func (s *Pages) alertChannelAction(w http.ResponseWriter, r *http.Request, v *view) page {
	id := url.PathEscape(r.PathValue("id"))
	switch r.PathValue("action") {
	case "test":
		var out service.AlertTestOutput
		_, err := s.call(r.Context(), v.p, "POST", "/v1/alert-channels/"+id+"/test", nil, &out.Body)
		pg := s.alertsPage(w, r, v)
		switch {
		case err != nil:
			pg.Error = "Not sent: " + problemText(err)
		case !out.Body.Sent:
			pg.Error = "Not sent: " + out.Body.Error
		default:
			pg.Flash = "Sent a test message to " + r.PathValue("id") + "."
		}
		return pg
	case "delete":
		_, err := s.call(r.Context(), v.p, "DELETE", "/v1/alert-channels/"+id, nil, nil)
		pg := s.alertsPage(w, r, v)
		if err != nil {
			pg.Error = "Not deleted: " + problemText(err)
		} else {
			pg.Flash = "Deleted alert channel " + r.PathValue("id") + "."
		}
		return pg
	}
	return notFound(w, "action "+r.PathValue("action"))
}
