package filter

import (
	"errors"
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/topics"
)

func event(data string) *topics.Event {
	return &topics.Event{ID: "evt_1", Type: "order.created", Tenant: "acme", Key: "order_42", Data: []byte(data)}
}

func TestCompileRefuses(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"data.total >", "Syntax error"},
		{"amount > 3", "undeclared reference to 'amount'"},
		{`type + "x"`, "a filter must be a bool"},
		{`tenant > 3`, "found no matching overload"},
		{strings.Repeat("true && ", 300) + "true", "at most 2048"},
	} {
		if _, err := Compile(tc.expr); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%.40q): %v, want an error saying %q", tc.expr, err, tc.want)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		expr, data string
		want       bool
		err        string
	}{
		{`data.total > 100`, `{"total": 142}`, true, ""},
		{`data.total > 100`, `{"total": 42.5}`, false, ""},
		{`type == "order.created" && tenant == "acme" && key.startsWith("order_")`, `{}`, true, ""},
		{`data.items.exists(i, i.sku == "A1")`, `{"items": [{"sku": "B2"}, {"sku": "A1"}]}`, true, ""},
		{`"vip" in data.tags`, `{"tags": ["new", "vip"]}`, true, ""},
		{`has(data.coupon) && data.coupon != ""`, `{"total": 1}`, false, ""},
		{`data.total > 100`, `{"amount": 1}`, false, "no such key"},
		{`data.total > 100`, `"a string"`, false, "no such key"},
		{`data.total > 100`, `{"total": "142"}`, false, "no such overload"},
		{`data.xs.all(a, data.xs.all(b, data.xs.all(c, a + b + c >= 0)))`, `{"xs": [` + strings.Repeat("1,", 99) + `1]}`, false, "cost limit"},
	} {
		p, err := Compile(tc.expr)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.expr, err)
		}
		got, err := p.Match(NewInput(event(tc.data)))
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s on %s: %v, %v; want %v, error %q", tc.expr, tc.data, got, err, tc.want, tc.err)
		}
	}
}

func TestCacheMatches(t *testing.T) {
	c := NewCache()
	sub := &topics.Subscription{ID: "sub_1", Tenant: "acme", EventTypes: []string{"order.*"}, Enabled: true, Filter: `data.total > 100`}
	in := NewInput(event(`{"total": 142}`))
	if ok, err := c.Matches(sub, in); !ok || err != nil {
		t.Fatalf("a matching event: %v, %v", ok, err)
	}
	other := *sub
	other.Tenant = "globex"
	if ok, err := c.Matches(&other, in); ok || err != nil {
		t.Fatalf("another tenant's subscription: %v, %v (the filter is not evaluated)", ok, err)
	}
	broken := *sub
	broken.Filter = "data.total >"
	if ok, err := c.Matches(&broken, in); ok || err == nil {
		t.Fatalf("a stored expression that does not compile: %v, %v; want no match and its error", ok, err)
	}
	if len(c.progs) != 2 {
		t.Fatalf("%d expressions cached, want 2", len(c.progs))
	}
	plain := *sub
	plain.Filter = ""
	if ok, err := c.Matches(&plain, NewInput(event(`not json`))); !ok || err != nil {
		t.Fatalf("no filter: %v, %v (data is not looked at)", ok, err)
	}
}

func TestValidate(t *testing.T) {
	sub := topics.Subscription{ID: "sub_1", URL: "https://example.com/", EventTypes: []string{"*"}, Enabled: true,
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Filter: "data.total >"}
	err := Validate(&sub)
	var ie *topics.InvalidError
	if !errors.As(err, &ie) || ie.Field != "filter" || !strings.Contains(ie.Reason, "Syntax error") {
		t.Fatalf("Validate: %v, want an invalid filter with the compiler's message", err)
	}
	sub.Filter = `data.total > 100`
	if err := Validate(&sub); err != nil {
		t.Fatal(err)
	}
}

// TestComprehensionsAreTracked: expressions with a comprehension run under
// the cost limit, the others (linear in the event) without its overhead.
func TestComprehensionsAreTracked(t *testing.T) {
	e, err := environment()
	if err != nil {
		t.Fatal(err)
	}
	for expr, want := range map[string]bool{
		`data.total > 100 && "vip" in data.tags`:     false,
		`has(data.coupon) && key.startsWith("o")`:    false,
		`data.items.exists(i, i.sku == "A1")`:        true,
		`data.xs.map(x, x * 2).size() > 3`:           true,
		`type == "a" || data.xs.all(x, x > 0)`:       true,
		`data.tags.filter(t, t == "vip").size() > 0`: true,
	} {
		ast, iss := e.Compile(expr)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		if got := hasComprehension(ast.NativeRep().Expr()); got != want {
			t.Errorf("%s: comprehension %v, want %v", expr, got, want)
		}
	}
}
