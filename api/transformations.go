package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/transform"
	"github.com/hookpipe/hookpipe/topics"
)

type transformationTestInput struct {
	Body struct {
		Script string            `json:"script" maxLength:"65536" doc:"The transformation: a JavaScript function handler(webhook)."`
		Type   string            `json:"type,omitempty" doc:"The sample event's type; default webhook.test."`
		Data   json.RawMessage   `json:"data,omitempty" doc:"The sample event's data; default {}."`
		Key    string            `json:"key,omitempty" doc:"The sample event's ordering key."`
		URL    string            `json:"url,omitempty" doc:"The endpoint the request would go to; default https://example.com/webhooks."`
		Header map[string]string `json:"headers,omitempty" doc:"The subscription's headers."`
	}
}

func (s *Server) registerTransformations() {
	huma.Register(s.api, huma.Operation{OperationID: "test-transformation", Method: http.MethodPost, Path: "/v1/transformations/test",
		Summary: "Run a transformation on a sample event",
		Description: "Compiles the script (422 naming the error) and runs it on the sample event under the limits a deliverer " +
			"applies, answering the request it would make, or why it fails. Nothing is sent.",
		Tags: []string{"Subscriptions"}, Security: secured},
		func(ctx context.Context, in *transformationTestInput) (*service.TransformationTestOutput, error) {
			script, err := transform.Compile(in.Body.Script)
			if err != nil {
				return nil, huma.Error422UnprocessableEntity("invalid transformation",
					&huma.ErrorDetail{Location: "body.script", Message: err.Error()})
			}
			sample := transform.Input{ID: topics.NewID("evt_test_"), Type: cmp.Or(in.Body.Type, service.TestEventType), Timestamp: time.Now().UTC(),
				Tenant: principalOf(ctx).Tenant, Key: in.Body.Key, Data: in.Body.Data, URL: cmp.Or(in.Body.URL, "https://example.com/webhooks"),
				Header: http.Header{}}
			if len(sample.Data) == 0 {
				sample.Data = json.RawMessage(`{}`)
			}
			for k, v := range in.Body.Header {
				sample.Header.Set(k, v)
			}
			out := &service.TransformationTestOutput{}
			res, err := script.Run(ctx, sample)
			switch {
			case errors.Is(err, transform.ErrFailed):
				out.Body.Error = err.Error()
				return out, nil
			case err != nil:
				return nil, huma.Error422UnprocessableEntity("invalid sample", &huma.ErrorDetail{Location: "body.url", Message: err.Error()})
			}
			out.Body.OK, out.Body.Cancel, out.Body.Method, out.Body.URL, out.Body.Body = true, res.Cancel, res.Method, res.URL, string(res.Body)
			if len(res.Header) > 0 {
				out.Body.Headers = map[string]string{}
				for k := range res.Header {
					out.Body.Headers[k] = res.Header.Get(k)
				}
			}
			return out, nil
		})
}
