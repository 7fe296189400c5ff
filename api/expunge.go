package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/recorder/retention"
)

// Expunged is the answer of an expunge: what was removed, and what stays
// until when.
type Expunged struct {
	EventID        string    `json:"event_id"`
	Tenant         string    `json:"tenant,omitempty"`
	ExpungedAt     time.Time `json:"expunged_at"`
	SamplesCleared uint64    `json:"samples_cleared" doc:"Attempts whose response sample is being cleared in ClickHouse (a mutation, done within seconds to minutes)."`
	Removed        []string  `json:"removed" doc:"What is gone from now on."`
	Remains        []string  `json:"remains" doc:"What stays, and until when."`
	// EventsTopicUntil is when the events topic drops the record at the
	// latest, at the retention topics ensure gives it.
	EventsTopicUntil time.Time `json:"events_topic_until" doc:"When the events topic drops the event's record at the latest (its retention, 7 days as created); until then the API neither shows nor resends it."`
}

type expungeOutput struct{ Body Expunged }

func (s *Server) registerExpunge() {
	huma.Register(s.api, huma.Operation{OperationID: "expunge-message", Method: http.MethodPost, Path: "/v1/messages/{event_id}/expunge",
		Summary: "Expunge an event (privacy)", Description: "Clears the response samples of the event's attempts in ClickHouse and " +
			"records the expunge, after which the message log no longer shows its payload and retries and replays no longer send it. " +
			"The events topic cannot drop one record: it keeps it until its retention, unread by the API. A tenant key expunges its " +
			"own tenant's events; expunging again is harmless.",
		Tags: []string{"Messages"}, Security: secured},
		func(ctx context.Context, in *messageInput) (*expungeOutput, error) {
			if s.ch == nil {
				return nil, huma.Error503ServiceUnavailable("the message log needs ClickHouse (WEBHOOKS_CLICKHOUSE_ADDR)")
			}
			m, err := s.message(ctx, in.EventID, principalOf(ctx))
			if err != nil {
				return nil, err
			}
			out := &expungeOutput{Body: Expunged{EventID: in.EventID, Tenant: m.Tenant, ExpungedAt: time.Now().UTC().Truncate(time.Second)}}
			if out.Body.SamplesCleared, err = retention.Expunge(ctx, s.ch, s.cfg.Database, in.EventID, m.Tenant, out.Body.ExpungedAt); err != nil {
				return nil, s.internal(err)
			}
			b := &out.Body
			b.EventsTopicUntil = m.PublishedAt.Add(s.names.Retention(s.names.Events()))
			b.Removed = []string{
				fmt.Sprintf("the response samples of %d attempts in ClickHouse", b.SamplesCleared),
				"the event's payload from the message log, retries and replays",
			}
			b.Remains = []string{
				"the event's record on the events topic, unread by the API, until " + b.EventsTopicUntil.Format(time.RFC3339) + " at the latest",
				"its attempts' other columns (times, status codes, outcomes) in ClickHouse, until the tenant's retention",
			}
			return out, nil
		})
}

// expungedAmong is the set of the expunged events among ids (of dead
// letters): their data is not shown (the runner does not redrive them); empty
// without ClickHouse.
func (s *Server) expungedAmong(ctx context.Context, ids []string) (map[string]bool, error) {
	if s.ch == nil {
		return map[string]bool{}, nil
	}
	return retention.ExpungedAmong(ctx, s.ch, s.cfg.Database, ids)
}
