package ui

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/hookpipe/hookpipe/api/internal/service"
)

// alertsPage lists the alert channels the view sees, with a form to add
// one: the dashboard every tenant's and the operators', the portal its
// tenant's.
func (s *Pages) alertsPage(_ http.ResponseWriter, r *http.Request, v *view) page {
	pg := page{Title: "Alerts", Section: "alerts", template: "alerts"}
	list, err := s.alerts.List(r.Context(), v.p)
	if err != nil {
		pg.Error = problemText(s.logged(err))
	}
	pg.Data = map[string]any{"List": list, "Email": s.email}
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
	id := r.PathValue("id")
	switch r.PathValue("action") {
	case "test":
		why, err := s.alerts.Test(r.Context(), v.p, id)
		pg := s.alertsPage(w, r, v)
		switch {
		case err != nil:
			pg.Error = "Not sent: " + problemText(s.logged(err))
		case why != "":
			pg.Error = "Not sent: " + why
		default:
			pg.Flash = "Sent a test message to " + id + "."
		}
		return pg
	case "delete":
		err := s.alerts.Delete(r.Context(), v.p, id)
		pg := s.alertsPage(w, r, v)
		if err != nil {
			pg.Error = "Not deleted: " + problemText(s.logged(err))
		} else {
			pg.Flash = "Deleted alert channel " + id + "."
		}
		return pg
	}
	return notFound(w, "action "+r.PathValue("action"))
}
