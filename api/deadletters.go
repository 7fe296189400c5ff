package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/dlq"
	"github.com/hookpipe/hookpipe/topics"
)

type listDLQInput struct {
	SubscriptionID string    `query:"subscription_id" doc:"Only this subscription's."`
	EventType      string    `query:"event_type" doc:"Only this type, prefix.* or *."`
	Category       string    `query:"category" doc:"Only this failure category (an exhausted one's last failure counts too)."`
	Since          time.Time `query:"since" doc:"Only those dead at or after this time."`
	Until          time.Time `query:"until" doc:"Only those dead before this time."`
	All            bool      `query:"all" doc:"Also those already redriven."`
	Limit          int       `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"The newest this many."`
}

func (s *Server) registerDeadLetters() {
	huma.Register(s.api, huma.Operation{OperationID: "list-dead-letters", Method: http.MethodGet, Path: "/v1/dlq",
		Summary: "List dead letters", Description: "As `webhookctl dlq list`: read from the dlq topic as it is now, redriven " +
			"ones hidden unless all.", Tags: []string{"Dead letters"}, Security: secured},
		func(ctx context.Context, in *listDLQInput) (*service.ListDLQOutput, error) {
			f := dlq.Filter{Subscription: in.SubscriptionID, Type: in.EventType, Category: in.Category, Since: in.Since, Until: in.Until}
			if p := principalOf(ctx); !p.Admin() {
				f.Tenant = p.Tenant
			}
			if f.Type != "" && topics.ValidatePattern(f.Type) != nil {
				return nil, huma.Error422UnprocessableEntity("invalid dead-letter query", &huma.ErrorDetail{Location: "query.event_type",
					Message: "a type, prefix.* or *", Value: f.Type})
			}
			found, err := dlq.Read(ctx, s.cfg.Kafka.ClientOpts(), kadm.NewClient(s.cl), s.names, &f)
			if err != nil {
				return nil, s.internal(fmt.Errorf("dead letters: %w", err))
			}
			out := &service.ListDLQOutput{}
			out.Body.Data = []service.DeadLetter{}
			for i := len(found) - 1; i >= 0 && len(out.Body.Data) < in.Limit; i-- {
				e := found[i]
				if e.Redriven && !in.All {
					continue
				}
				out.Body.Data = append(out.Body.Data, deadLetterOf(e))
			}
			ids := make([]string, len(out.Body.Data))
			for i, dl := range out.Body.Data {
				ids[i] = dl.EventID
			}
			// Which events were expunged is in ClickHouse: when it cannot
			// be read, the list is still answered, every event's data
			// withheld.
			expunged, err := s.expungedAmong(ctx, ids)
			if err != nil {
				s.log.Warn("dead letters listed without their data: the expunged events could not be read", zap.Error(err))
			}
			for i, dl := range out.Body.Data {
				switch {
				case err != nil:
					out.Body.Data[i].Data, out.Body.Data[i].DataWithheld = nil, true
				case expunged[dl.EventID]:
					out.Body.Data[i].Data, out.Body.Data[i].Expunged = nil, true
				}
			}
			out.Body.ByCategory = map[string]int{}
			for _, e := range found {
				if !e.Redriven || in.All {
					out.Body.Matched++
					out.Body.ByCategory[e.DeadLetter.FailureCategory]++
				}
			}
			return out, nil
		})
}

func deadLetterOf(e *dlq.Entry) service.DeadLetter {
	dl := e.DeadLetter
	out := service.DeadLetter{Partition: e.Partition, Offset: e.Offset, DeadAt: dl.DeadAt, Reason: dl.Reason, FailureCategory: dl.FailureCategory,
		LastFailureCategory: dl.LastFailureCategory, HTTPStatus: dl.HTTPStatus, Attempts: dl.Attempts, Redriven: e.Redriven}
	if d := dl.Delivery; d != nil {
		out.EventID, out.EventType, out.Tenant, out.SubscriptionID, out.Data = d.EventID, d.EventType, d.Tenant, d.SubscriptionID, d.Data
	} else if ev, ok := dl.Event(); ok {
		// An event the dispatcher refused (its schema): no subscription.
		out.EventID, out.EventType, out.Tenant, out.Data = ev.ID, ev.Type, ev.Tenant, ev.Data
	}
	return out
}
