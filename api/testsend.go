package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/topics"
)

type testSendInput struct {
	ID   string `path:"id" doc:"The subscription's id."`
	Body *struct {
		EventType string `json:"event_type,omitempty" doc:"Send this catalog type's example instead of a webhook.test event."`
		Example   int    `json:"example,omitempty" minimum:"0" doc:"Which of the type's examples, from 0."`
	} `required:"false"`
}

func (s *Server) registerTestSend() {
	huma.Register(s.api, huma.Operation{OperationID: "test-subscription", Method: http.MethodPost, Path: "/v1/subscriptions/{id}/test",
		Summary: "Send a test event", Description: "Sends a signed " + service.TestEventType + " event (or, with event_type, an example of that " +
			"catalog type) to the endpoint now, through the same HTTP client, SSRF guard and signing as the deliverer, and answers what " +
			"the endpoint did. Nothing is recorded or retried.",
		Tags: []string{"Subscriptions"}, Security: secured},
		func(ctx context.Context, in *testSendInput) (*service.TestSendOutput, error) {
			sub, err := s.visible(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			now := time.Now().UTC()
			typ := service.TestEventType
			data, _ := json.Marshal(map[string]string{"subscription_id": sub.ID, "message": "a test event from hookpipe"})
			if in.Body != nil && in.Body.EventType != "" {
				typ = in.Body.EventType
				if data, err = s.example(typ, in.Body.Example); err != nil {
					return nil, err
				}
			}
			del := topics.Delivery{SubscriptionID: sub.ID, EventID: topics.NewID("evt_test_"), EventType: typ,
				Tenant: sub.Tenant, Timestamp: now.Format(time.RFC3339Nano), Data: data, Attempt: 1, PublishedAt: now}
			res := s.prober.Probe(ctx, sub, &del)
			out := &service.TestSendOutput{}
			out.Body.EventID, out.Body.Delivered, out.Body.Status = del.EventID, res.Delivered, res.Status
			out.Body.DurationMS = float64(res.Duration.Microseconds()) / 1000
			out.Body.FailureCategory, out.Body.Error, out.Body.ResponseBody = res.Category, res.Error, res.Body
			return out, nil
		})
}

// example is a catalog type's example i; a 422 names what is missing.
func (s *Server) example(eventType string, i int) ([]byte, error) {
	t, ok := s.catalog.Get(eventType)
	if !ok {
		return nil, huma.Error422UnprocessableEntity("no such event type",
			&huma.ErrorDetail{Location: "body.event_type", Message: "not in the event catalog", Value: eventType})
	}
	if i >= len(t.Examples) {
		return nil, huma.Error422UnprocessableEntity("no such example",
			&huma.ErrorDetail{Location: "body.example", Message: fmt.Sprintf("%s has %d examples", eventType, len(t.Examples)), Value: i})
	}
	return t.Examples[i], nil
}

// VerifyEventType is the type of the event that verifies an endpoint.
const VerifyEventType = "webhook.verify"

// verify sends the endpoint a signed challenge it must echo in a 2xx
// answer; otherwise a 422 says what it answered.
func (s *Server) verify(ctx context.Context, sub *topics.Subscription) error {
	challenge := topics.NewID("")
	now := time.Now().UTC()
	data, _ := json.Marshal(map[string]string{"challenge": challenge})
	del := topics.Delivery{SubscriptionID: sub.ID, EventID: topics.NewID("evt_verify_"), EventType: VerifyEventType,
		Tenant: sub.Tenant, Timestamp: now.Format(time.RFC3339Nano), Data: data, Attempt: 1, PublishedAt: now}
	res := s.prober.Probe(ctx, sub, &del)
	var why string
	switch {
	case res.Error != "":
		why = "the endpoint did not answer: " + res.Error
	case !res.Delivered:
		why = fmt.Sprintf("the endpoint answered %d", res.Status)
	case !sub.Destination.IsHTTP():
		// A queue or topic takes the event; it has no answer to echo.
		return nil
	case !strings.Contains(res.Body, challenge):
		why = fmt.Sprintf("the endpoint answered %d without the challenge in its body", res.Status)
	default:
		return nil
	}
	where := "body.url"
	if !sub.Destination.IsHTTP() {
		where = "body.destination"
	}
	detail := &huma.ErrorDetail{Location: where, Message: why}
	if res.Body != "" {
		detail.Value = res.Body
	}
	return huma.Error422UnprocessableEntity("endpoint verification failed", detail)
}
