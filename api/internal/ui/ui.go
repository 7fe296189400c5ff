// Package ui is the dashboard (/ui, admins) and the tenant portal
// (/portal/{token}, one tenant): server-rendered pages over the API
// itself. Each page calls the API's routes in-process as the session's
// caller (Pages.call), so they validate and scope to a tenant exactly as
// the API does.
package ui

import (
	"cmp"
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/api/internal/session"
	"github.com/hookpipe/hookpipe/recorder/report"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/topics"
)

// uiFiles are the pages' templates, stylesheet and script.
//
//go:embed web
var uiFiles embed.FS

var pages = template.Must(template.New("pages").Funcs(template.FuncMap{
	"join": func(s []string) string { return strings.Join(s, ", ") },
	"list": func(s ...string) []string { return s },
	"percent": func(v any) string {
		switch f := v.(type) {
		case *float64:
			if f == nil {
				return "-"
			}
			return fmt.Sprintf("%.1f %%", *f*100)
		case float64:
			return fmt.Sprintf("%.1f %%", f*100)
		}
		return "-"
	},
	"ms": func(v any) string {
		switch f := v.(type) {
		case *float64:
			if f == nil {
				return "-"
			}
			return fmt.Sprintf("%.1f ms", *f)
		case float64:
			return fmt.Sprintf("%.1f ms", f)
		}
		return "-"
	},
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"finished": func(o service.Operation) bool {
		return o.State == topics.OperationDone || o.State == topics.OperationFailed
	},
	"destLabel":   destLabel,
	"destDetails": destDetails,
}).ParseFS(uiFiles, "web/pages.html"))

const (
	sessionCookie = "hookpipe_session"
	loginCookie   = "hookpipe_login"
	// sessionTTL is how long a dashboard session lasts.
	sessionTTL = 12 * time.Hour
)

// view is who a page is rendered for, and where its links point.
type view struct {
	Base   string // /ui or /portal/{token}
	Assets string
	CSRF   string
	Portal bool
	Tenant string
	p      service.Caller
	tls    bool
}

// page is what a template renders.
type page struct {
	V        *view
	Title    string
	Section  string
	Flash    string
	Error    string
	Data     any
	template string
}

type pageFunc func(w http.ResponseWriter, r *http.Request, v *view) page

// uiSecurity sets the headers of every dashboard and portal answer: scripts
// and styles of the API's origin only, no referrer (a portal link holds its
// token), framed only where framing is allowed.
func uiSecurity(w http.ResponseWriter, frameAncestors string) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors "+frameAncestors)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
}

// API is what the pages ask of the API: its routes, which they call
// in-process, and the few answers no route gives.
type API interface {
	http.Handler
	// BreakerStates are the breaker states of subs that are not closed.
	BreakerStates(ctx context.Context, subs []string) map[string]string
}

// Options are what the pages are served with.
type Options struct {
	API     API
	Callers service.Callers // who signs in
	// Subscriptions are the endpoints the pages show, EventTypes the
	// event catalog, Operations the bulk operations, AlertChannels the
	// alert channels, Reports the statistics and charts, Lag the
	// consumer groups' lag.
	Subscriptions *service.Subscriptions
	EventTypes    *service.EventTypes
	Operations    *service.Operations
	AlertChannels *service.AlertChannels
	Reports       *service.Reports
	Lag           *service.Lag
	Signer        session.Signer // of dashboard sessions and portal links
	// Assets are the API's front-end assets (uPlot, htmx) under
	// assets/dist; missing ones are not served.
	Assets fs.FS
	// AlertEmail tells whether alert channels may send email.
	AlertEmail bool
	Log        *zap.Logger
}

// Pages are the dashboard's and the portal's pages.
type Pages struct {
	api     API
	callers service.Callers
	subs    *service.Subscriptions
	types   *service.EventTypes
	ops     *service.Operations
	alerts  *service.AlertChannels
	reports *service.Reports
	lag     *service.Lag
	signer  session.Signer
	assets  fs.FS
	email   bool
	log     *zap.Logger
}

// New makes the pages.
func New(o Options) *Pages {
	return &Pages{api: o.API, callers: o.Callers, subs: o.Subscriptions, types: o.EventTypes, ops: o.Operations, alerts: o.AlertChannels, reports: o.Reports, lag: o.Lag, signer: o.Signer, assets: o.Assets, email: o.AlertEmail, log: o.Log}
}

// Register serves the pages and their assets on mux.
func (s *Pages) Register(mux *http.ServeMux) {
	own, _ := fs.Sub(uiFiles, "web")
	mux.Handle("GET /ui/assets/app.css", http.StripPrefix("/ui/assets/", http.FileServerFS(own)))
	mux.Handle("GET /ui/assets/app.js", http.StripPrefix("/ui/assets/", http.FileServerFS(own)))
	if uplot, err := fs.Sub(s.assets, "assets/dist/uplot"); err == nil {
		mux.Handle("GET /ui/assets/uPlot.iife.min.js", http.StripPrefix("/ui/assets/", http.FileServerFS(uplot)))
		mux.Handle("GET /ui/assets/uPlot.min.css", http.StripPrefix("/ui/assets/", http.FileServerFS(uplot)))
	}
	if htmx, err := fs.Sub(s.assets, "assets/dist/htmx.org"); err == nil {
		mux.Handle("GET /ui/assets/htmx.min.js", http.StripPrefix("/ui/assets/", http.FileServerFS(htmx)))
	}
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) })
	mux.HandleFunc("GET /ui/login", s.loginPage)
	mux.HandleFunc("POST /ui/login", s.login)
	mux.HandleFunc("POST /ui/logout", s.admin(func(w http.ResponseWriter, r *http.Request, v *view) page {
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/ui", MaxAge: -1, HttpOnly: true, Secure: v.tls, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
		return page{}
	}))
	mux.HandleFunc("GET /ui/{$}", s.admin(s.overviewPage))
	for _, area := range []struct {
		prefix string
		wrap   func(pageFunc) http.HandlerFunc
	}{{"/ui", s.admin}, {"/portal/{token}", s.portal}} {
		for pattern, h := range map[string]pageFunc{
			"GET /subscriptions":                s.subscriptionsPage,
			"POST /subscriptions":               s.createSubscription,
			"GET /subscriptions/{id}":           s.subscriptionPage,
			"POST /subscriptions/{id}/{action}": s.subscriptionAction,
			"GET /messages":                     s.messagesPage,
			"GET /messages/{id}":                s.messagePage,
			"POST /messages/{id}/retry":         s.retryMessage,
			"GET /dlq":                          s.dlqPage,
			"POST /dlq/redrive":                 s.redriveDLQ,
			"GET /operations":                   s.operationsPage,
			"GET /operations/{id}":              s.operationPage,
			"GET /operations/{id}/progress":     s.operationProgress,
			"GET /event-types":                  s.eventTypesPage,
			"GET /event-types/{name}":           s.eventTypePage,
			"GET /alerts":                       s.alertsPage,
			"POST /alerts":                      s.createAlertChannel,
			"GET /alerts/{id}":                  s.alertChannelPage,
			"POST /alerts/{id}/{action}":        s.alertChannelAction,
		} {
			method, path, _ := strings.Cut(pattern, " ")
			mux.HandleFunc(method+" "+area.prefix+path, area.wrap(h))
		}
	}
	// Admins write the catalog; tenants only read it.
	mux.HandleFunc("POST /ui/event-types", s.admin(s.createEventTypeForm))
	mux.HandleFunc("POST /ui/event-types/{name}/edit", s.admin(s.editEventTypeForm))
	mux.HandleFunc("GET /ui/event-types/{name}/delete", s.admin(s.deleteEventTypePage))
	mux.HandleFunc("POST /ui/event-types/{name}/delete", s.admin(s.deleteEventType))
	mux.HandleFunc("GET /portal/{token}/{$}", s.portal(func(w http.ResponseWriter, r *http.Request, v *view) page {
		http.Redirect(w, r, v.Base+"/subscriptions", http.StatusFound)
		return page{}
	}))
}

// admin serves h to a signed-in admin: a valid session cookie of a key that
// is still valid, and on POST the session's CSRF token.
func (s *Pages) admin(h pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		uiSecurity(w, "'none'")
		v, ok := s.adminView(r)
		if !ok {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
				return
			}
			http.Error(w, "sign in first", http.StatusUnauthorized)
			return
		}
		s.serve(w, r, v, h)
	}
}

func (s *Pages) adminView(r *http.Request) (*view, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, false
	}
	sess, err := s.signer.Verify(c.Value, time.Now())
	if err != nil || sess.Portal {
		return nil, false
	}
	// The key signed in with must still be valid: revoking it ends its
	// sessions.
	if sess.Boot {
		if s.callers.AdminKey == "" || sess.KeyID != session.BootID(s.callers.AdminKey) {
			return nil, false
		}
	} else if !s.callers.AdminKeyValid(sess.KeyID) {
		return nil, false
	}
	p := service.Caller{KeyID: sess.KeyID}
	if sess.Boot {
		p.KeyID = ""
	}
	return &view{Base: "/ui", Assets: "/ui/assets", CSRF: s.signer.CSRF(sess), p: p, tls: r.TLS != nil}, true
}

// portal serves h to the holder of a portal link: the token in the path,
// signed and not expired, scoping every page to its tenant. The token is
// the secret: a form posted from elsewhere cannot know it.
func (s *Pages) portal(h pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		uiSecurity(w, "*")
		token := r.PathValue("token")
		sess, err := s.signer.Verify(token, time.Now())
		if err != nil || !sess.Portal || sess.Tenant == "" {
			http.Error(w, "this portal link is invalid or has expired: ask for a new one", http.StatusUnauthorized)
			return
		}
		v := &view{Base: "/portal/" + token, Assets: "/ui/assets", CSRF: s.signer.CSRF(sess), Portal: true, Tenant: sess.Tenant,
			p: service.Caller{KeyID: "portal:" + sess.Tenant, Tenant: sess.Tenant}, tls: r.TLS != nil}
		s.serve(w, r, v, h)
	}
}

// serve checks the CSRF token of a POST, runs h and renders its page.
func (s *Pages) serve(w http.ResponseWriter, r *http.Request, v *view, h pageFunc) {
	if r.Method == http.MethodPost {
		token := r.Header.Get("X-CSRF-Token")
		if token == "" {
			token = r.PostFormValue("_csrf")
		}
		if subtle.ConstantTimeCompare([]byte(token), []byte(v.CSRF)) != 1 {
			http.Error(w, "missing or wrong CSRF token: reload the page", http.StatusForbidden)
			return
		}
	}
	pg := h(w, r, v)
	if pg.template == "" {
		return // answered already (a redirect)
	}
	pg.V = v
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pages.ExecuteTemplate(w, pg.template, pg); err != nil {
		s.log.Error("rendering a page", zap.String("page", pg.template), zap.Error(err))
	}
}

// notFound answers a page that does not exist for v (or is another
// tenant's).
func notFound(w http.ResponseWriter, what string) page {
	http.Error(w, what+" not found", http.StatusNotFound)
	return page{}
}

func (s *Pages) loginPage(w http.ResponseWriter, r *http.Request) {
	uiSecurity(w, "'none'")
	if _, ok := s.adminView(r); ok {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	// A login form's CSRF token: a random value in a cookie and the form.
	sess := session.New(session.Session{}, 10*time.Minute)
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: sess.Nonce, Path: "/ui/login", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: 600})
	s.renderLogin(w, sess.Nonce, "")
}

func (s *Pages) renderLogin(w http.ResponseWriter, csrf, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pages.ExecuteTemplate(w, "login", map[string]string{"CSRF": csrf, "Error": msg}); err != nil {
		s.log.Error("rendering the login page", zap.Error(err))
	}
}

func (s *Pages) login(w http.ResponseWriter, r *http.Request) {
	uiSecurity(w, "'none'")
	c, err := r.Cookie(loginCookie)
	if err != nil || c.Value == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostFormValue("_csrf"))) != 1 {
		http.Error(w, "missing or wrong CSRF token: reload the sign-in page", http.StatusForbidden)
		return
	}
	p, ok := s.callers.Of(strings.TrimSpace(r.PostFormValue("key")))
	if !ok || !p.Admin() {
		w.WriteHeader(http.StatusUnauthorized)
		s.renderLogin(w, c.Value, "That is not a valid admin key.")
		return
	}
	sess := session.New(session.Session{KeyID: p.KeyID}, sessionTTL)
	if p.KeyID == "" {
		// The bootstrap key: a session ends when the key changes.
		sess.Boot, sess.KeyID = true, session.BootID(s.callers.AdminKey)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.signer.Sign(sess), Path: "/ui", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: int(sessionTTL.Seconds())})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// internalError is what a page says of a failure that is no refusal: the
// log has it.
const internalError = "internal error: see the API's log"

// problemText is the message of a refusal (of the API or the service) for
// a page.
func problemText(err error) string {
	var e *apiError
	var se *service.Error
	switch {
	case errors.As(err, &e):
		return e.Error()
	case errors.As(err, &se):
		return se.Error()
	}
	return internalError
}

// refusedAs reports whether err is the service's refusal of kind k.
func refusedAs(err error, k service.Kind) bool {
	var e *service.Error
	return errors.As(err, &e) && e.Kind == k
}

// logged logs err when it is the service's own failure, which a page does
// not show, and returns it.
func (s *Pages) logged(err error) error {
	var e *service.Error
	if err != nil && !errors.As(err, &e) {
		s.log.Error("request failed", zap.Error(err))
	}
	return err
}

// windowOf is the page's chart window: 1h, 24h (default) or 7d.
func windowOf(r *http.Request) string {
	if w := r.URL.Query().Get("window"); service.SeriesWindows[w].Span > 0 {
		return w
	}
	return "24h"
}

// chart is what a page draws of a series: the JSON the charts read, and
// the window's totals.
type chart struct {
	Window       string
	JSON         string
	Requests     uint64
	SuccessRate  *float64
	P50MS, P99MS *float64
	Error        string
}

// chartOf reads the series of the window (one subscription's when sub is
// set) as v's principal.
func (s *Pages) chartOf(ctx context.Context, v *view, window, sub string) chart {
	c := chart{Window: window}
	out, err := s.reports.Series(ctx, v.p, service.SeriesQuery{Window: window, Subscription: sub, By: "all"})
	if err != nil {
		c.Error = problemText(s.logged(err))
		return c
	}
	var points []service.Point
	if len(out.Body.Series) > 0 {
		points = out.Body.Series[0].Points
		c.P50MS, c.P99MS = out.Body.Series[0].P50MS, out.Body.Series[0].P99MS
	}
	var ok uint64
	for _, p := range points {
		c.Requests += p.Success + p.Retry + p.Dead
		ok += p.Success
	}
	if c.Requests > 0 {
		r := float64(ok) / float64(c.Requests)
		c.SuccessRate = &r
	}
	b, _ := json.Marshal(map[string]any{"step": out.Body.StepSeconds, "points": points})
	c.JSON = string(b)
	return c
}

func (s *Pages) overviewPage(_ http.ResponseWriter, r *http.Request, v *view) page {
	ctx := r.Context()
	window := windowOf(r)
	data := struct {
		Chart         chart
		Windows       []string
		Subscriptions int
		Dead          int
		ByCategory    map[string]int
		BreakersOpen  []string
		Lag           []service.GroupLag
		Held          *service.HeldKeys
		LagError      string
		Stats         []report.Row
		StatsError    string
		// TypeFaults are the event types with invalid (or unknown)
		// events in the last 24 hours, the most first.
		TypeFaults []service.EventTypeFaults
	}{Chart: s.chartOf(ctx, v, window, ""), Windows: []string{"1h", "24h", "7d"}}
	if subs, _, err := s.subs.List(ctx, v.p, service.SubscriptionQuery{Limit: 1000}); err == nil {
		data.Subscriptions = len(subs)
		ids := make([]string, len(subs))
		for i, sub := range subs {
			ids[i] = sub.ID
		}
		states := s.api.BreakerStates(ctx, ids)
		for _, id := range ids {
			if st, ok := states[id]; ok {
				data.BreakersOpen = append(data.BreakersOpen, id+" ("+st+")")
			}
		}
	}
	var dl service.ListDLQOutput
	if _, err := s.call(ctx, v.p, "GET", "/v1/dlq?limit=1", nil, &dl.Body); err == nil {
		data.Dead, data.ByCategory = dl.Body.Matched, dl.Body.ByCategory
	}
	if lag, err := s.lag.Get(ctx, v.p); err != nil {
		data.LagError = problemText(s.logged(err))
	} else {
		data.Lag, data.Held = lag.Body.Data, lag.Body.Holds
	}
	since := time.Now().Add(-service.SeriesWindows[window].Span).Truncate(time.Second)
	if st, err := s.reports.Stats(ctx, v.p, service.StatsQuery{By: "subscription", Since: since}); err != nil {
		data.StatsError = problemText(s.logged(err))
	} else {
		data.Stats = st.Body.Rows
	}
	faults, _ := s.typeFaults(ctx, v)
	data.TypeFaults = faults[:min(len(faults), 5)]
	return page{Title: "Overview", Section: "overview", Data: data, template: "overview"}
}

func (s *Pages) subscriptionsPage(_ http.ResponseWriter, r *http.Request, v *view) page {
	ctx := r.Context()
	pg := page{Title: "Endpoints", Section: "subscriptions", template: "subscriptions"}
	list, next, err := s.subs.List(ctx, v.p, service.SubscriptionQuery{Cursor: r.URL.Query().Get("cursor"), Limit: 100})
	if err != nil {
		pg.Error = problemText(s.logged(err))
	}
	type row struct {
		service.Subscription
		Breaker   string
		Sparkline template.HTML
		Rate      *float64
	}
	spark := map[string]service.Series{}
	if series, err := s.reports.Series(ctx, v.p, service.SeriesQuery{Window: "24h", By: "subscription"}); err == nil {
		for _, se := range series.Body.Series {
			spark[se.Key] = se
		}
	}
	ids := make([]string, len(list))
	for i, sub := range list {
		ids[i] = sub.ID
	}
	states := s.api.BreakerStates(ctx, ids)
	rows := make([]row, 0, len(list))
	for _, sub := range list {
		svg, rate := sparkline(spark[sub.ID].Points)
		st := cmp.Or(states[sub.ID], redisstate.StateClosed)
		rows = append(rows, row{Subscription: sub, Breaker: st, Sparkline: svg, Rate: rate})
	}
	pick := pickOf(s.types.List(), nil)
	if len(pick.Types) == 0 {
		pick.Other = "*"
	}
	pg.Data = map[string]any{"List": rows, "Next": next, "Pick": pick, "Dest": destFormOf(nil, "", false)}
	return pg
}

// sparkline draws the success rate of each step of points as an inline SVG
// line (steps without requests are gaps), and returns the rate of them all.
// It is built from numbers only.
func sparkline(points []service.Point) (template.HTML, *float64) {
	if len(points) == 0 {
		return "", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="spark" viewBox="0 0 %d 20" preserveAspectRatio="none" role="img" aria-label="success rate, last 24 h">`, len(points)-1)
	var ok, all uint64
	var line []string
	flush := func() {
		if len(line) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="#1b6e3a" stroke-width="1.5" vector-effect="non-scaling-stroke" points="%s"/>`, strings.Join(line, " "))
			line = line[:0]
		}
	}
	for i, p := range points {
		n := p.Success + p.Retry + p.Dead
		ok, all = ok+p.Success, all+n
		if n == 0 {
			flush()
			continue
		}
		line = append(line, fmt.Sprintf("%d,%.1f", i, 19-18*float64(p.Success)/float64(n)))
		if len(line) == 1 && (i+1 == len(points) || points[i+1].Success+points[i+1].Retry+points[i+1].Dead == 0) {
			line = append(line, fmt.Sprintf("%.1f,%.1f", float64(i)+0.5, 19-18*float64(p.Success)/float64(n)))
		}
	}
	flush()
	b.WriteString(`</svg>`)
	if all == 0 {
		return template.HTML(b.String()), nil // #nosec G203 -- numbers only
	}
	rate := float64(ok) / float64(all)
	return template.HTML(b.String()), &rate // #nosec G203 -- numbers only
}

func (s *Pages) createSubscription(w http.ResponseWriter, r *http.Request, v *view) page {
	body := map[string]any{"event_types": pickedTypes(r)}
	dest, endpoint := readDestination(r)
	destinationBody(body, dest, endpoint, false)
	if o := r.PostFormValue("ordering"); o != "" {
		body["ordering"] = o
	}
	if t := r.PostFormValue("tenant"); t != "" && !v.Portal {
		body["tenant"] = t
	}
	var sub service.Subscription
	if _, err := s.call(r.Context(), v.p, "POST", "/v1/subscriptions", body, &sub); err != nil {
		pg := s.subscriptionsPage(w, r, v)
		pg.Error = "Not added: " + problemText(err)
		// The form as typed (secrets aside), the messages by its fields.
		form := destFormOf(dest, endpoint, false)
		form.refused(err)
		data := pg.Data.(map[string]any)
		data["Dest"], data["Tenant"] = form, r.PostFormValue("tenant")
		data["Pick"] = pickOf(s.types.List(), pickedTypes(r))
		return pg
	}
	return s.renderSubscription(w, r, v, sub.ID, "Added. Its signing secret, shown this once: "+sub.Secret, nil)
}

func splitTypes(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

func (s *Pages) subscriptionPage(w http.ResponseWriter, r *http.Request, v *view) page {
	return s.renderSubscription(w, r, v, r.PathValue("id"), "", nil)
}

func (s *Pages) renderSubscription(w http.ResponseWriter, r *http.Request, v *view, id, flash string, test any) page {
	ctx := r.Context()
	sub, err := s.subs.Get(ctx, v.p, id)
	if err != nil {
		return notFound(w, "endpoint "+id)
	}
	types := s.types.List()
	data := map[string]any{"Sub": sub, "Test": test, "Chart": s.chartOf(ctx, v, windowOf(r), sub.ID), "Windows": []string{"1h", "24h", "7d"},
		"Pick": pickOf(types, sub.EventTypes), "Examples": testChoices(types, sub.EventTypes), "Dest": destFormOf(sub.Destination, sub.URL, true),
		"Transform": transformFormOf(sub, types)}
	var h service.Health
	if _, err := s.call(ctx, v.p, "GET", "/v1/subscriptions/"+url.PathEscape(id)+"/health", nil, &h); err != nil {
		data["HealthError"] = problemText(err)
	} else {
		data["Health"] = h
	}
	return page{Title: "Endpoint " + id, Section: "subscriptions", Flash: flash, Data: data, template: "subscription"}
}

// subscriptionAction runs a button of the endpoint page.
func (s *Pages) subscriptionAction(w http.ResponseWriter, r *http.Request, v *view) page {
	ctx := r.Context()
	id := r.PathValue("id")
	path := "/v1/subscriptions/" + url.PathEscape(id)
	var flash string
	var err error
	switch action := r.PathValue("action"); action {
	case "test":
		var out service.TestSendOutput
		// A catalog type's example when one is picked, else webhook.test.
		_, err = s.call(ctx, v.p, "POST", path+"/test", testBody(r.PostFormValue("example")), &out.Body)
		if r.Header.Get("HX-Request") == "true" && err != nil && !notFoundErr(err) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			if err := pages.ExecuteTemplate(w, "test-error", problemText(err)); err != nil {
				s.log.Error("rendering a test result", zap.Error(err))
			}
			return page{}
		}
		if err == nil {
			if r.Header.Get("HX-Request") == "true" {
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				if err := pages.ExecuteTemplate(w, "test-result", out.Body); err != nil {
					s.log.Error("rendering a test result", zap.Error(err))
				}
				return page{}
			}
			return s.renderSubscription(w, r, v, id, "", out.Body)
		}
	case "transformation":
		return s.transformationAction(w, r, v)
	case "enable", "disable":
		_, err = s.call(ctx, v.p, "POST", path+"/"+action, nil, nil)
		flash = "Endpoint " + action + "d."
	case "rotate-secret":
		var sub service.Subscription
		_, err = s.call(ctx, v.p, "POST", path+"/rotate-secret", nil, &sub)
		flash = "Secret rotated; the new one, shown this once: " + sub.Secret + " (the old one signs for 24 h more)."
	case "edit":
		body := map[string]any{"event_types": pickedTypes(r), "filter": strings.TrimSpace(r.PostFormValue("filter"))}
		dest, endpoint := readDestination(r)
		destinationBody(body, dest, endpoint, true)
		if o := r.PostFormValue("ordering"); o != "" {
			body["ordering"] = o
		}
		if _, err = s.call(ctx, v.p, "PATCH", path, body, nil); err != nil && !notFoundErr(err) {
			// The form as typed (secrets aside), the messages by its fields.
			pg := s.renderSubscription(w, r, v, id, "", nil)
			if data, ok := pg.Data.(map[string]any); ok {
				form := destFormOf(dest, endpoint, sameKind(data["Sub"].(service.Subscription).Destination, dest))
				form.refused(err)
				data["Dest"], data["Pick"] = form, pickOf(s.types.List(), pickedTypes(r))
				pg.Error = problemText(err)
			}
			return pg
		}
		flash = "Saved."
	case "breaker-reset":
		_, err = s.call(ctx, v.p, "POST", path+"/breaker", map[string]any{"action": "reset"}, nil)
		flash = "Breaker reset."
	case "recover":
		var op service.Operation
		if op, err = s.recoverWindow(r, v, path); err == nil {
			http.Redirect(w, r, v.Base+"/operations/"+op.ID, http.StatusSeeOther)
			return page{}
		}
	default:
		return notFound(w, "action "+action)
	}
	if notFoundErr(err) {
		return notFound(w, "endpoint "+id)
	}
	pg := s.renderSubscription(w, r, v, id, flash, nil)
	if err != nil {
		pg.Flash, pg.Error = "", problemText(err)
	}
	return pg
}

// recoverWindow starts a recover of the endpoint at path for the window
// the form gives (datetime-local fields, read as UTC).
func (s *Pages) recoverWindow(r *http.Request, v *view, path string) (service.Operation, error) {
	body := map[string]any{}
	for _, k := range []string{"since", "until"} {
		x := r.PostFormValue(k)
		if x == "" {
			continue
		}
		t, err := time.Parse("2006-01-02T15:04", x)
		if err != nil {
			return service.Operation{}, &apiError{Status: http.StatusUnprocessableEntity, Detail: k + ": " + x + " is not a time"}
		}
		body[k] = t
	}
	var op service.Operation
	_, err := s.call(r.Context(), v.p, "POST", path+"/recover", body, &op)
	return op, err
}

// notFoundErr reports whether an in-process API call answered 404.
func notFoundErr(err error) bool {
	var e *apiError
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

var messageStatuses = []string{"delivered", "retrying", "pending", "scheduled", "dead", "skipped"}

func (s *Pages) messagesPage(_ http.ResponseWriter, r *http.Request, v *view) page {
	in := r.URL.Query()
	q := url.Values{"limit": {"100"}}
	for _, k := range []string{"status", "event_type", "subscription_id"} {
		if x := in.Get(k); x != "" {
			q.Set(k, x)
		}
	}
	since := in.Get("since")
	if service.SeriesWindows[since].Span == 0 {
		since = "24h"
	}
	q.Set("since", time.Now().Add(-service.SeriesWindows[since].Span).UTC().Format(time.RFC3339))
	var out service.ListMessagesOutput
	data := map[string]any{"Statuses": messageStatuses, "Status": in.Get("status"), "Type": in.Get("event_type"), "Sub": in.Get("subscription_id"),
		"Since": since, "Sinces": []string{"1h", "24h", "7d"}}
	if _, err := s.call(r.Context(), v.p, "GET", "/v1/messages?"+q.Encode(), nil, &out.Body); err != nil {
		data["ListError"] = problemText(err)
	}
	data["List"] = out.Body.Data
	return page{Title: "Messages", Section: "messages", Data: data, template: "messages"}
}

func (s *Pages) messagePage(w http.ResponseWriter, r *http.Request, v *view) page {
	return s.renderMessage(w, r, v, r.PathValue("id"), "", "")
}

func (s *Pages) renderMessage(w http.ResponseWriter, r *http.Request, v *view, id, flash, msg string) page {
	var m service.Message
	if _, err := s.call(r.Context(), v.p, "GET", "/v1/messages/"+url.PathEscape(id), nil, &m); err != nil {
		return notFound(w, "message "+id)
	}
	return page{Title: "Message " + id, Section: "messages", Flash: flash, Error: msg, Data: map[string]any{"Msg": m}, template: "message"}
}

func (s *Pages) retryMessage(w http.ResponseWriter, r *http.Request, v *view) page {
	id := r.PathValue("id")
	sub := r.PostFormValue("subscription_id")
	if _, err := s.call(r.Context(), v.p, "POST", "/v1/messages/"+url.PathEscape(id)+"/retry", map[string]string{"subscription_id": sub}, nil); err != nil {
		var e *apiError
		if errors.As(err, &e) && e.Status == http.StatusNotFound {
			return notFound(w, "message "+id)
		}
		return s.renderMessage(w, r, v, id, "", "Not sent: "+problemText(err))
	}
	return s.renderMessage(w, r, v, id, "Sent again to "+sub+"; the new attempt shows here in a few seconds.", "")
}

type dlqFilter struct{ Sub, Type, Category string }

func (s *Pages) dlqPage(_ http.ResponseWriter, r *http.Request, v *view) page {
	in := r.URL.Query()
	f := dlqFilter{Sub: in.Get("subscription_id"), Type: in.Get("event_type"), Category: in.Get("category")}
	q := url.Values{"limit": {"200"}}
	for k, x := range map[string]string{"subscription_id": f.Sub, "event_type": f.Type, "category": f.Category} {
		if x != "" {
			q.Set(k, x)
		}
	}
	var out service.ListDLQOutput
	data := map[string]any{"Filter": f}
	if _, err := s.call(r.Context(), v.p, "GET", "/v1/dlq?"+q.Encode(), nil, &out.Body); err != nil {
		data["ListError"] = problemText(err)
	}
	data["List"], data["Matched"], data["ByCategory"] = out.Body.Data, out.Body.Matched, out.Body.ByCategory
	return page{Title: "Dead letters", Section: "dlq", Data: data, template: "dlq"}
}

func (s *Pages) redriveDLQ(w http.ResponseWriter, r *http.Request, v *view) page {
	body := map[string]any{}
	for _, k := range []string{"subscription_id", "event_type", "category"} {
		if x := r.PostFormValue(k); x != "" {
			body[k] = x
		}
	}
	if x := r.PostFormValue("rate"); x != "" {
		rate, err := strconv.ParseFloat(x, 64)
		if err != nil {
			pg := s.dlqPage(w, r, v)
			pg.Error = "The rate must be a number."
			return pg
		}
		body["rate"] = rate
	}
	if r.PostFormValue("scope") == "selected" {
		var refs []service.DeadLetterRef
		for _, x := range r.PostForm["dl"] {
			p, o, ok := strings.Cut(x, ":")
			partition, err1 := strconv.ParseInt(p, 10, 32)
			offset, err2 := strconv.ParseInt(o, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				pg := s.dlqPage(w, r, v)
				pg.Error = "Not started: " + x + " is not a dead letter's place."
				return pg
			}
			refs = append(refs, service.DeadLetterRef{Partition: int32(partition), Offset: offset})
		}
		if len(refs) == 0 {
			pg := s.dlqPage(w, r, v)
			pg.Error = "Select the dead letters to redrive first."
			return pg
		}
		body["dead_letters"] = refs
	}
	var op service.Operation
	if _, err := s.call(r.Context(), v.p, "POST", "/v1/dlq/redrive", body, &op); err != nil {
		pg := s.dlqPage(w, r, v)
		pg.Error = "Not started: " + problemText(err)
		return pg
	}
	http.Redirect(w, r, v.Base+"/operations/"+op.ID, http.StatusSeeOther)
	return page{}
}

func (s *Pages) operationsPage(_ http.ResponseWriter, r *http.Request, v *view) page {
	pg := page{Title: "Operations", Section: "operations", template: "operations"}
	list, err := s.ops.List(r.Context(), v.p, 100)
	if err != nil {
		pg.Error = problemText(s.logged(err))
	}
	pg.Data = map[string]any{"List": list}
	return pg
}

func (s *Pages) operation(ctx context.Context, v *view, id string) (service.Operation, bool) {
	op, err := s.ops.Get(ctx, v.p, id)
	return op, s.logged(err) == nil
}

func (s *Pages) operationPage(w http.ResponseWriter, r *http.Request, v *view) page {
	op, ok := s.operation(r.Context(), v, r.PathValue("id"))
	if !ok {
		return notFound(w, "operation "+r.PathValue("id"))
	}
	return page{Title: "Operation " + op.ID, Section: "operations", Data: map[string]any{"Op": op}, template: "operation"}
}

// operationProgress is the progress fragment the operation page polls.
func (s *Pages) operationProgress(w http.ResponseWriter, r *http.Request, v *view) page {
	op, ok := s.operation(r.Context(), v, r.PathValue("id"))
	if !ok {
		return notFound(w, "operation "+r.PathValue("id"))
	}
	return page{Data: map[string]any{"Op": op}, template: "progress"}
}
