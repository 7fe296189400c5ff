package api

import (
	"context"
	"net/http"

	"github.com/hookpipe/hookpipe/api/internal/ui"
)

// pagesAPI is the API as the dashboard and the portal see it (package
// internal/ui): its routes, and the answers no route gives.
type pagesAPI struct{ s *Server }

func (a pagesAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.s.mux.ServeHTTP(w, r) }

func (a pagesAPI) BreakerStates(ctx context.Context, subs []string) map[string]string {
	return a.s.breakerStates(ctx, subs)
}

// registerPages serves the dashboard and the portal.
func (s *Server) registerPages() {
	ui.New(ui.Options{API: pagesAPI{s}, Callers: s.callers, Subscriptions: s.subscriptions, EventTypes: s.eventTypes,
		Operations: s.operations, AlertChannels: s.alertChannels, Reports: s.reports, Lag: s.lag, Signer: s.signer, Assets: assets,
		AlertEmail: s.cfg.Alert.Email(), Log: s.log}).Register(s.mux)
}
