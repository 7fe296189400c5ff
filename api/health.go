package api

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
)

type healthOutput struct{ Body service.Health }

func (s *Server) registerHealth() {
	huma.Register(s.api, huma.Operation{OperationID: "get-subscription-health", Method: http.MethodGet, Path: "/v1/subscriptions/{id}/health",
		Summary: "A subscription's delivery health", Description: "Its circuit breaker (from Redis, as every deliverer sees it), " +
			"success rate and p50/p99 request duration over the last hour and day, and its last success and failure " +
			"(from ClickHouse).", Tags: []string{"Subscriptions"}, Security: secured},
		func(ctx context.Context, in *subscriptionIDInput) (*healthOutput, error) {
			sub, err := s.visible(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			h := service.Health{SubscriptionID: sub.ID, Enabled: sub.Enabled, Breaker: s.breaker(ctx, sub.ID)}
			if s.ch == nil {
				return nil, huma.Error503ServiceUnavailable("subscription health needs ClickHouse (WEBHOOKS_CLICKHOUSE_ADDR)")
			}
			for _, w := range []struct {
				dst   *service.Window
				since time.Duration
			}{{&h.LastHour, time.Hour}, {&h.LastDay, 24 * time.Hour}} {
				if *w.dst, err = s.window(ctx, sub.Tenant, sub.ID, w.since); err != nil {
					return nil, s.internal(err)
				}
			}
			if h.LastSuccess, err = s.last(ctx, sub.Tenant, sub.ID, "outcome = 'success'"); err != nil {
				return nil, s.internal(err)
			}
			if h.LastFailure, err = s.last(ctx, sub.Tenant, sub.ID, "outcome IN ('retry', 'dead')"); err != nil {
				return nil, s.internal(err)
			}
			return &healthOutput{Body: h}, nil
		})
}

// breaker reads the breaker from Redis; without Redis it is closed (no
// breaker runs), and while Redis is down unknown.
func (s *Server) breaker(ctx context.Context, sub string) service.Breaker {
	if s.guard == nil {
		return service.Breaker{State: redisstate.StateClosed}
	}
	st, err := s.guard.ReadBreaker(ctx, sub)
	if err != nil {
		return service.Breaker{State: "unknown"}
	}
	b := service.Breaker{State: st.State, Calls: st.Calls, Failures: st.Failures}
	if !st.Since.IsZero() {
		b.Since = &st.Since
	}
	if !st.Until.IsZero() {
		b.Until = &st.Until
	}
	return b
}

// breakerStates are the breaker states of subs that are not closed, read
// with one call for the set of breakers not closed and one per member of it
// among subs; a subscription missing from the map is closed. While Redis is
// down every one is "unknown".
func (s *Server) breakerStates(ctx context.Context, subs []string) map[string]string {
	out := map[string]string{}
	if s.guard == nil {
		return out
	}
	open, err := s.guard.BreakersNotClosed(ctx)
	if err != nil {
		for _, id := range subs {
			out[id] = "unknown"
		}
		return out
	}
	for _, id := range open {
		if slices.Contains(subs, id) {
			if b := s.breaker(ctx, id); b.State != redisstate.StateClosed {
				out[id] = b.State
			}
		}
	}
	return out
}

// window sums the per-minute views over the last d.
func (s *Server) window(ctx context.Context, tenant, sub string, d time.Duration) (service.Window, error) {
	var w service.Window
	since := time.Now().Add(-d).UTC().Truncate(time.Minute)
	db := s.cfg.Database
	err := s.ch.QueryRow(ctx, "SELECT sumIf(attempts, outcome IN ('success', 'retry', 'dead')), sumIf(attempts, outcome = 'success'), "+
		"sumIf(attempts, outcome = 'retry'), sumIf(attempts, outcome = 'dead') FROM "+db+"."+schema.TableOutcomes+
		" WHERE tenant = ? AND subscription_id = ? AND minute >= ?", tenant, sub, since).Scan(&w.Requests, &w.Succeeded, &w.Retried, &w.Dead)
	if err != nil {
		return w, fmt.Errorf("outcomes of %s: %w", sub, err)
	}
	if w.Requests > 0 {
		w.SuccessRate = float64(w.Succeeded) / float64(w.Requests)
	}
	var q []float64
	err = s.ch.QueryRow(ctx, "SELECT quantilesMerge("+schema.Quantiles+")(duration_ms_quantiles) FROM "+db+"."+schema.TableLatency+
		" WHERE tenant = ? AND subscription_id = ? AND minute >= ?", tenant, sub, since).Scan(&q)
	if err != nil {
		return w, fmt.Errorf("latency of %s: %w", sub, err)
	}
	if len(q) == 3 && w.Requests > 0 {
		w.P50MS, w.P99MS = q[0], q[2]
	}
	return w, nil
}

// last is the latest attempt of sub matching cond (a fixed SQL condition).
func (s *Server) last(ctx context.Context, tenant, sub, cond string) (*service.LastAttempt, error) {
	var a service.LastAttempt
	var status uint16
	err := s.ch.QueryRow(ctx, "SELECT ts, event_id, http_status, failure_category FROM "+s.cfg.Database+"."+schema.TableAttempts+
		" WHERE tenant = ? AND subscription_id = ? AND "+cond+" ORDER BY ts DESC LIMIT 1", tenant, sub).
		Scan(&a.At, &a.EventID, &status, &a.FailureCategory)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("last attempt of %s: %w", sub, err)
	}
	a.HTTPStatus = int(status)
	return &a, nil
}

type breakerInput struct {
	ID   string `path:"id"`
	Body struct {
		Action   string `json:"action" enum:"reset,force_open,force_close" doc:"reset: close it and forget the attempts counted; force_open: deliveries wait in the retry tiers for duration, then it probes; force_close: keep it closed for duration whatever fails."`
		Duration string `json:"duration,omitempty" doc:"For force_open and force_close: how long, e.g. 30m (1s to 7 days)."`
	}
}

type breakerOutput struct{ Body service.Breaker }

func (s *Server) registerBreaker() {
	huma.Register(s.api, huma.Operation{OperationID: "control-subscription-breaker", Method: http.MethodPost, Path: "/v1/subscriptions/{id}/breaker",
		Summary: "Reset, open or close a subscription's circuit breaker", Description: "Every deliverer replica honours it within a " +
			"second (the breaker lives in Redis). Answers the breaker as it is then.", Tags: []string{"Subscriptions"}, Security: secured},
		func(ctx context.Context, in *breakerInput) (*breakerOutput, error) {
			sub, err := s.visible(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			control, d := redisstate.Reset, time.Duration(0)
			if in.Body.Action != "reset" {
				control = map[string]string{"force_open": redisstate.ForceOpen, "force_close": redisstate.ForceClose}[in.Body.Action]
				if d, err = time.ParseDuration(in.Body.Duration); err != nil || d < time.Second || d > 7*24*time.Hour {
					return nil, huma.Error422UnprocessableEntity("invalid breaker control", &huma.ErrorDetail{Location: "body.duration",
						Message: "a duration from 1s to 168h is required with " + in.Body.Action, Value: in.Body.Duration})
				}
			}
			if s.guard == nil {
				return nil, huma.Error503ServiceUnavailable("the circuit breakers need Redis (WEBHOOKS_REDIS_URL)")
			}
			if err := s.guard.ForceBreaker(ctx, sub.ID, control, d); err != nil {
				return nil, huma.Error503ServiceUnavailable("Redis did not answer; the breaker is unchanged")
			}
			s.log.Info("breaker control", zap.String("subscription", sub.ID), zap.String("action", in.Body.Action),
				zap.Duration("for", d), zap.String("key", principalOf(ctx).KeyID))
			return &breakerOutput{Body: s.breaker(ctx, sub.ID)}, nil
		})
}
