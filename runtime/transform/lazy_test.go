package transform

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// lazyData has what makes an object differ from another: key order with
// array indices, a key named twice, an own __proto__, nesting, arrays,
// escapes.
const lazyData = `{"b":1,"10":{"x":[1,{"y":2}]},"2":"two","a":{"n":null,"t":true},"b":3,` +
	`"__proto__":{"p":1},"s":"\u00e9\n","arr":[{"k":1},[2]]}`

// observe is a script that does one thing to d, an object of lazyData,
// and reports what it sees: the same whether d is webhook.data (a lazy)
// or what JSON.parse makes of the same text.
func observe(d, body string) string {
	return `function handler(webhook) {
		var d = ` + d + `;
		var seen = [];
		function see(f) {
			try { seen.push(f()) } catch (e) { seen.push("threw " + e.name) }
		}
		` + body + `
		see(() => JSON.stringify(d));
		see(() => Object.keys(d));
		see(() => { var ks = []; for (var k in d) ks.push(k); return ks });
		see(() => Reflect.ownKeys(d).map(String));
		see(() => Object.getPrototypeOf(d) === Object.prototype);
		see(() => [Object.isFrozen(d), Object.isExtensible(d)]);
		webhook.payload = JSON.stringify(seen);
		return webhook;
	}`
}

// TestLazyActsAsJSONParse runs scripts that read, change, freeze, redefine
// and re-prototype the event's data, and checks that each sees and sends
// what it would with JSON.parse's object.
func TestLazyActsAsJSONParse(t *testing.T) {
	in := event
	in.Data = json.RawMessage(lazyData)
	parsed := "JSON.parse(" + mustQuote(t, lazyData) + ")"
	for _, tc := range []struct{ name, body string }{
		{"read", `see(() => [d.b, d[10].x[1].y, d["2"], d.a.n, d.s, d.__proto__.p, d.missing, "b" in d, "toString" in d,
			d.hasOwnProperty("b"), d.hasOwnProperty("toString"), String(d), Object.prototype.toString.call(d),
			d[10] === d[10], Array.isArray(d.arr), d.arr.length, d.arr[0].k])`},
		{"descriptors", `see(() => [Object.getOwnPropertyDescriptor(d, "b"), Object.getOwnPropertyDescriptor(d, "no"),
			Object.getOwnPropertyDescriptors(d.a)])`},
		{"copies", `see(() => [{...d}, Object.assign({}, d.a), Object.entries(d.a), Object.values(d.a)])`},
		{"change", `d.c = 4; d.b = 5; delete d.a; d[5] = "five"; d["01"] = "not an index"; d[1] = "one";
			d[10].x.push(3); d[10].x[1].y = "why"; delete d.nothing`},
		{"override a method", `d.toString = function () { return "mine" }; see(() => String(d))`},
		{"freeze", `Object.freeze(d); see(() => { d.b = 9 }); see(() => { d.z = 9 }); see(() => { delete d.b }); see(() => d.b)`},
		{"seal, then change", `Object.seal(d); d.b = 9; see(() => { d.z = 1 }); see(() => { delete d.b })`},
		{"prevent extensions", `Object.preventExtensions(d); see(() => { d.z = 1 }); d.b = 9; delete d.a`},
		{"accessor", `Object.defineProperty(d, "g", {get() { return this.b * 2 }, enumerable: true}); see(() => d.g)`},
		{"hidden", `Object.defineProperty(d, "h", {value: 1}); Object.defineProperty(d, "b", {enumerable: false});
			see(() => [d.h, d.propertyIsEnumerable("b")])`},
		{"symbol", `var s = Symbol("s"); d[s] = 1; see(() => [d[s], Object.getOwnPropertySymbols(d).length])`},
		{"no prototype", `Object.setPrototypeOf(d, null); see(() => "toString" in d)`},
		{"__proto__ assigned", `d.a.__proto__ = {inherited: 1}; see(() => [d.a.inherited, Object.keys(d.a)])`},
		{"prototype pollution", `see(() => { d.__proto__.polluted = 1 }); see(() => { Object.getPrototypeOf(d.a).polluted = 1 });
			see(() => { d.a.constructor.prototype.polluted = 1 }); see(() => ({}).polluted)`},
		{"mutate while listing", `for (var k in d) { delete d.s; d["added_" + k] = 1 }`},
		{"cycle", `d.self = d; see(() => JSON.stringify(d)); delete d.self`},
		{"into a new object", `webhook.data = {whole: d, part: d[10].x, a: d.a}; see(() => JSON.stringify(webhook.data))`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errGot := run(t, observe("webhook.data", tc.body), Limits{}, in)
			want, errWant := run(t, observe(parsed, tc.body), Limits{}, in)
			if errGot != nil || errWant != nil {
				t.Fatalf("lazy: %v; JSON.parse: %v", errGot, errWant)
			}
			if string(got.Body) != string(want.Body) {
				t.Fatalf("lazy:       %s\nJSON.parse: %s", got.Body, want.Body)
			}
		})
	}
}

func mustQuote(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLazyBody: what the script did not touch is sent as the producer's
// bytes; what it changed or made, as JSON.stringify writes it.
func TestLazyBody(t *testing.T) {
	const data = ` { "a" : 1.0, "b": [1, 2], "n": {"x": "\u00e9"}, "10": 1e2 } `
	in := event
	in.Data = json.RawMessage(data)
	for _, tc := range []struct{ name, body, want string }{
		{"untouched", `webhook.headers["x-a"] = "1"`, strings.TrimSpace(data)},
		{"read", `if (webhook.data.a !== 1) throw new Error("a")`, `{"10":1e2,"a":1.0,"b":[1, 2],"n":{"x": "\u00e9"}}`},
		{"renamed", `webhook.data.c = webhook.data.a; delete webhook.data.a`, `{"10":1e2,"b":[1, 2],"n":{"x": "\u00e9"},"c":1}`},
		{"nested changed", `webhook.data.n.y = 2`, `{"10":1e2,"a":1.0,"b":[1, 2],"n":{"x":"\u00e9","y":2}}`},
		{"array changed", `webhook.data.b.push(3)`, `{"10":1e2,"a":1.0,"b":[1,2,3],"n":{"x": "\u00e9"}}`},
		{"part moved", `webhook.data = {m: webhook.data.n}`, `{"m":{"x": "\u00e9"}}`},
		{"assigned the same", `webhook.data.a = webhook.data.a`, `{"10":1e2,"a":1,"b":[1, 2],"n":{"x": "\u00e9"}}`},
		{"frozen", `Object.freeze(webhook.data)`, `{"10":100,"a":1,"b":[1,2],"n":{"x": "\u00e9"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, "function handler(webhook) {\n"+tc.body+";\nreturn webhook }", Limits{}, in)
			if err != nil || string(out.Body) != tc.want {
				t.Fatalf("got %s, %v\nwant %s", out.Body, err, tc.want)
			}
		})
	}
}

// TestLazyKeepsNothing: a call cannot leave the event's data where the
// next call, on the same realm, would find it, and an idle realm does not
// hold it.
func TestLazyKeepsNothing(t *testing.T) {
	src := `function handler(webhook) {
		var d = webhook.data, stashed = 0;
		for (const f of [() => { globalThis.kept = d }, () => { Object.prototype.kept = d }, () => { JSON.kept = d },
			() => { Object.getPrototypeOf(d).kept = d }, () => { d.constructor.kept = d },
			() => { Object.setPrototypeOf(Object.getPrototypeOf(d), d) }, () => new WeakMap([[Object.prototype, d]])]) {
			try { f(); stashed++ } catch (e) {}
		}
		webhook.data = [stashed, typeof kept, ({}).kept, JSON.kept, d.secret === undefined];
		return webhook;
	}`
	s, rm := onRealm(t, src)
	u := mustURL(t, event.URL)
	for i, data := range []string{`{"secret":"first tenant's"}`, `{}`} {
		in := event
		in.Data = json.RawMessage(data)
		out, reuse, err := rm.run(context.Background(), s, in, u)
		if want := `[0,"undefined",null,null,` + map[bool]string{true: "false", false: "true"}[i == 0] + `]`; err != nil || !reuse || string(out.Body) != want {
			t.Fatalf("call %d: %s, %v, reuse %v; want %s", i, out.Body, err, reuse, want)
		}
		if len(rm.g.lazies) != 0 {
			t.Fatalf("call %d: the realm still holds %d objects of the data", i, len(rm.g.lazies))
		}
	}
}

// TestLazyLimits: the limits hold for data decoded lazily: data nested too
// deep is refused before the handler runs, whether it reads it or not;
// data sent untouched still counts against the output limit; a walk down
// data as deep as allowed works (given the time a loaded machine under
// the race detector needs).
func TestLazyLimits(t *testing.T) {
	deep := func(n int) json.RawMessage {
		return json.RawMessage(strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n))
	}
	for _, tc := range []struct {
		name, body string
		data       json.RawMessage
		limits     Limits
		limit      string
	}{
		{"deep data untouched", `return webhook`, deep(maxNesting + 1), Limits{}, LimitCallStack},
		{"deep data in an array", `return webhook`, json.RawMessage(strings.Repeat("[", maxNesting+1) + strings.Repeat("]", maxNesting+1)), Limits{}, LimitCallStack},
		{"large data untouched", `return webhook`, json.RawMessage(`{"s":"` + strings.Repeat("x", 4096) + `"}`), Limits{Output: 1024}, LimitOutput},
		{"large data read", `webhook.data.t = webhook.data.s; return webhook`, json.RawMessage(`{"s":"` + strings.Repeat("x", 1000) + `"}`), Limits{Output: 1024}, LimitOutput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := event
			in.Data = tc.data
			_, err := run(t, "function handler(webhook) {\n"+tc.body+"\n}", tc.limits, in)
			var le *LimitError
			if !errors.As(err, &le) || le.Limit != tc.limit {
				t.Fatalf("err = %v, want the %s limit", err, tc.limit)
			}
		})
	}
	in := event
	in.Data = deep(maxNesting)
	out, err := run(t, `function handler(webhook) {
		var d = webhook.data, n = 0;
		while (typeof d === "object") { d = d.a; n++ }
		webhook.data = n;
		return webhook;
	}`, Limits{Time: bound}, in)
	if err != nil || string(out.Body) != "1000" {
		t.Fatalf("walking down: %s, %v", out.Body, err)
	}
}

// TestLazyNotJSON: data that is not JSON fails as JSON.parse does, before
// the handler runs.
func TestLazyNotJSON(t *testing.T) {
	for _, data := range []string{`{"a":1,}`, `{"a" 1}`, `[01]`, `{"a":"\x"}`, "{\"a\":\"\x01\"}", `{"a":1} x`, `nul`} {
		in := event
		in.Data = json.RawMessage(data)
		_, err := run(t, `function handler(webhook) { return {data: 1, method: "POST", path: "/"} }`, Limits{}, in)
		var te *ThrowError
		if !errors.As(err, &te) || !strings.HasPrefix(te.Message, "SyntaxError") {
			t.Fatalf("%q: err = %v, want a SyntaxError", data, err)
		}
	}
}
