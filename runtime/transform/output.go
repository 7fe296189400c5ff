package transform

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/dop251/goja"
	"golang.org/x/net/http/httpguts"
)

// reserved are the headers a script cannot set, as a subscription cannot
// (topics.Subscription.Validate): the signature, the framing, hop-by-hop.
var reserved = map[string]bool{
	"Webhook-Id": true, "Webhook-Timestamp": true, "Webhook-Signature": true,
	"Content-Type": true, "Content-Length": true, "Host": true, "Connection": true,
	"Transfer-Encoding": true, "Te": true, "Upgrade": true, "Trailer": true,
	"Keep-Alive": true, "Proxy-Authorization": true, "Proxy-Connection": true,
}

// methods are those a transformed HTTP delivery may use: each sends a body.
var methods = map[string]bool{http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true}

// output reads what the handler returned. The script's code (getters,
// toJSON) may run while it does, so it runs inside call.try: an exception
// there is a bad output, a limit stays a limit.
func (c *call) output(g *guards, res goja.Value) (Output, error) {
	var out Output
	var bad error
	if err := c.try(func() { out, bad = c.convert(g, res) }); err != nil {
		var ex *goja.Exception
		if errors.As(err, &ex) && c.cause() == nil {
			return Output{}, badOutput("reading it threw %s", c.message(ex.Value()))
		}
		return Output{}, c.scriptError(err)
	}
	return out, bad
}

func (c *call) convert(g *guards, res goja.Value) (Output, error) {
	w, ok := res.(*goja.Object)
	if !ok || w.ClassName() == "Array" || w.ClassName() == "Function" {
		return Output{}, badOutput("handler returned %s, not the webhook object", describe(res))
	}
	if cancel := w.Get("cancel"); defined(cancel) {
		if _, ok := cancel.Export().(bool); !ok {
			return Output{}, badOutput("cancel is %s, not a boolean", describe(cancel))
		}
		if cancel.ToBoolean() {
			return Output{Cancel: true}, nil
		}
	}
	method, err := c.method(w.Get("method"))
	if err != nil {
		return Output{}, err
	}
	u, err := c.target(w.Get("path"))
	if err != nil {
		return Output{}, err
	}
	header, size, err := headers(w.Get("headers"))
	if err != nil {
		return Output{}, err
	}
	body, err := g.body(w, c.s.limits.Output-size)
	if err != nil {
		return Output{}, err
	}
	return Output{Body: body, Header: header, Method: method, URL: u}, nil
}

func (c *call) method(v goja.Value) (string, error) {
	s, ok := str(v)
	if !ok || !methods[s] {
		return "", badOutput("method is %s; it must be POST, PUT or PATCH", describe(v))
	}
	return s, nil
}

// target is the URL to request: the input's, with the script's path and
// query when it changed them. A path must start with one "/" (two would
// name another host).
func (c *call) target(v goja.Value) (string, error) {
	p, ok := str(v)
	if !ok || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return "", badOutput("path is %s; it must start with /", describe(v))
	}
	if p == c.url.RequestURI() {
		return c.in.URL, nil
	}
	ref, err := url.ParseRequestURI(p)
	if err != nil || strings.ContainsAny(p, "#\x00\r\n") {
		return "", badOutput("path %q is not a path and query", p)
	}
	u := *c.url
	u.Path, u.RawPath, u.RawQuery = ref.Path, ref.RawPath, ref.RawQuery
	return u.String(), nil
}

// headers reads the script's headers: an object of strings, none
// reserved, none named twice in different cases. size is their bytes,
// which count against the output limit.
func headers(v goja.Value) (http.Header, int, error) {
	if !defined(v) {
		return nil, 0, nil
	}
	o, ok := v.(*goja.Object)
	if !ok || o.ClassName() == "Array" {
		return nil, 0, badOutput("headers is %s, not an object", describe(v))
	}
	h := http.Header{}
	size := 0
	for _, k := range o.Keys() {
		val := o.Get(k)
		s, ok := str(val)
		switch {
		case !httpguts.ValidHeaderFieldName(k):
			return nil, 0, badOutput("header name %q is not valid", k)
		case !ok:
			return nil, 0, badOutput("header %q is %s, not a string", k, describe(val))
		case !httpguts.ValidHeaderFieldValue(s):
			return nil, 0, badOutput("header %q has a character a header cannot hold", k)
		case reserved[http.CanonicalHeaderKey(k)]:
			return nil, 0, badOutput("header %q is reserved: the deliverer sets it", k)
		case h[http.CanonicalHeaderKey(k)] != nil:
			return nil, 0, badOutput("header %q is named twice", k)
		}
		h.Set(k, s)
		size += len(k) + len(s)
	}
	return h, size, nil
}

// str is v when it is a string.
func str(v goja.Value) (string, bool) {
	if s, ok := v.(goja.String); ok {
		return s.String(), true
	}
	return "", false
}

func defined(v goja.Value) bool { return v != nil && !goja.IsUndefined(v) && !goja.IsNull(v) }

// describe names a value's kind for an error, without running the
// script's code.
func describe(v goja.Value) string {
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	}
	if o, ok := v.(*goja.Object); ok {
		return "an " + o.ClassName()
	}
	switch v.Export().(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	}
	return "a " + v.ExportType().String()
}
