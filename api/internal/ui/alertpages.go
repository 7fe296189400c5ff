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

// alertChannelPage shows one channel's settings in a form that changes
// them.
func (s *Pages) alertChannelPage(w http.ResponseWriter, r *http.Request, v *view) page {
	ch, err := s.alerts.Get(r.Context(), v.p, r.PathValue("id"))
	if err != nil {
		if refusedAs(err, service.NotFound) {
			return notFound(w, "alert channel "+r.PathValue("id"))
		}
		return page{Title: "Alert channel", Section: "alerts", template: "alert", Error: problemText(s.logged(err))}
	}
	return page{Title: "Alert channel " + ch.ID, Section: "alerts", template: "alert",
		Data: map[string]any{"Channel": ch, "Email": s.email, "DigestMinutes": strconv.FormatFloat(float64(ch.DigestMS)/60000, 'f', -1, 64)}}
}

// alertForm is the settings an alert channel form gives: kind, recipients
// and URL when filled in, the types (empty: all, given as such only when
// all is true, as a change does) and the digest window; false with a
// message when the window is not a number.
func alertForm(r *http.Request, all bool) (map[string]any, string) {
	body := map[string]any{"kind": r.PostFormValue("kind")}
	if to := splitTypes(r.PostFormValue("to")); len(to) > 0 {
		body["to"] = to
	}
	if u := strings.TrimSpace(r.PostFormValue("url")); u != "" {
		body["url"] = u
	}
	if t := splitTypes(r.PostFormValue("types")); len(t) > 0 || all {
		body["types"] = append([]string{}, t...)
	}
	if m := strings.TrimSpace(r.PostFormValue("digest_minutes")); m != "" {
		n, err := strconv.ParseFloat(m, 64)
		if err != nil {
			return nil, "the digest window is a number of minutes."
		}
		body["digest_ms"] = int64(n * 60000)
	}
	return body, ""
}

func (s *Pages) createAlertChannel(w http.ResponseWriter, r *http.Request, v *view) page {
	body, bad := alertForm(r, false)
	if bad != "" {
		pg := s.alertsPage(w, r, v)
		pg.Error = "Not added: " + bad
		return pg
	}
	if t := r.PostFormValue("tenant"); t != "" && !v.Portal {
		body["tenant"] = t
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

// alertChannelAction changes, tests or deletes a channel.
func (s *Pages) alertChannelAction(w http.ResponseWriter, r *http.Request, v *view) page {
	id := r.PathValue("id")
	switch r.PathValue("action") {
	case "edit":
		body, bad := alertForm(r, true)
		if bad == "" {
			var ch service.AlertChannel
			if _, err := s.call(r.Context(), v.p, "PATCH", "/v1/alert-channels/"+id, body, &ch); err != nil {
				bad = problemText(err)
			}
		}
		if bad != "" {
			pg := s.alertChannelPage(w, r, v)
			pg.Error = "Not saved: " + bad
			return pg
		}
		pg := s.alertsPage(w, r, v)
		pg.Flash = "Saved alert channel " + id + "."
		return pg
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
