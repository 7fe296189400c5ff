package send

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/runtime/transform"
	"github.com/hookpipe/hookpipe/topics"
)

// request is what one attempt sends: the subscription as the request sees
// it (its URL and headers, which a transformation may change), the body
// and the method.
type request struct {
	sub    *topics.Subscription
	body   []byte
	method string
	// id is the webhook-id: the event's id, or a batch's id (SendBatch);
	// batch lists a batch's event ids (HeaderBatch).
	id    string
	batch string
}

// prepare renders d for sub, through sub's transformation when it has one.
// A transformation that fails is classify.ErrTransformation, one that
// cancels classify.ErrCancelled.
func (s *Sender) prepare(ctx context.Context, sub *topics.Subscription, d *topics.Delivery) (request, error) {
	if sub.Transformation == "" {
		return request{sub: sub, body: body(d), method: http.MethodPost, id: d.EventID}, nil
	}
	script, err := s.scripts.get(sub.Transformation)
	if err != nil {
		return request{}, fmt.Errorf("%w: %w", classify.ErrTransformation, err)
	}
	ts, _ := time.Parse(time.RFC3339Nano, d.Timestamp) // validated with the event
	header := http.Header{}
	for k, v := range sub.Headers {
		header.Set(k, v)
	}
	out, err := script.Run(ctx, transform.Input{ID: d.EventID, Type: d.EventType, Timestamp: ts, Tenant: d.Tenant,
		Key: d.Key, Data: d.Data, URL: sub.URL, Header: header})
	switch {
	case ctx.Err() != nil:
		return request{}, ctx.Err()
	case err != nil:
		return request{}, fmt.Errorf("%w: %w", classify.ErrTransformation, err)
	case out.Cancel:
		return request{}, classify.ErrCancelled
	}
	changed := *sub
	changed.Headers = make(map[string]string, len(out.Header))
	for k := range out.Header {
		changed.Headers[k] = out.Header.Get(k)
	}
	if sub.Destination.IsHTTP() {
		changed.URL = out.URL
	}
	return request{sub: &changed, body: out.Body, method: out.Method, id: d.EventID}, nil
}

// maxScripts bounds the compiled transformations a Sender keeps; past it,
// it starts over.
const maxScripts = 1024

// scripts are the compiled transformations, by source: a script is
// compiled once, not per delivery.
type scripts struct {
	mu sync.Mutex
	m  map[string]*transform.Script
}

func (c *scripts) get(src string) (*transform.Script, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sc := c.m[src]; sc != nil {
		return sc, nil
	}
	sc, err := transform.Compile(src)
	if err != nil {
		return nil, err
	}
	if c.m == nil || len(c.m) >= maxScripts {
		c.m = map[string]*transform.Script{}
	}
	c.m[src] = sc
	return sc, nil
}
