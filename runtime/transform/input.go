package transform

import (
	"strings"
	"time"

	"github.com/dop251/goja"
)

// input builds the webhook object the handler receives. It runs inside
// call.try: parsing the data may go over a limit.
func (c *call) input(g *guards) goja.Value {
	r := c.rt
	w := r.NewObject()
	set := func(k string, v any) {
		if err := w.Set(k, v); err != nil {
			panic(err)
		}
	}
	set("id", c.in.ID)
	set("type", c.in.Type)
	set("timestamp", c.in.Timestamp.UTC().Format(time.RFC3339Nano))
	set("tenant", c.in.Tenant)
	set("key", c.in.Key)
	data := goja.Null()
	if len(c.in.Data) > 0 {
		data = g.data(c.in.Data)
	}
	set("data", data)
	set("method", "POST")
	set("url", c.in.URL)
	set("path", c.url.RequestURI())
	h := r.NewObject()
	for k, vs := range c.in.Header {
		if err := h.Set(strings.ToLower(k), strings.Join(vs, ", ")); err != nil {
			panic(err)
		}
	}
	set("headers", h)
	return w
}
