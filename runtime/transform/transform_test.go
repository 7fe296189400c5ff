package transform

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"
)

// bound is how long any call may take in these tests, hostile or not: far
// above the limits, so a loaded machine does not fail them, far below
// "forever".
const bound = 10 * time.Second

var event = Input{
	ID: "evt_1", Type: "order.paid", Timestamp: time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC),
	Tenant: "acme", Key: "order-7", Data: json.RawMessage(`{"name":"Ada","amount":42,"tags":["a","b"]}`),
	URL: "https://example.com/hooks?x=1", Header: http.Header{"X-Team": {"blue"}},
}

// run compiles src under l (a time limit of bound/2 when l has none) and
// runs it on in, failing the test when the call takes longer than bound.
func run(t testing.TB, src string, l Limits, in Input) (Output, error) {
	t.Helper()
	if l.Time == 0 {
		// Not a test of the time limit, whose tests set it: these leave
		// the race detector's slowdown a wide margin.
		l.Time = bound / 2
	}
	s, err := CompileWith(src, l)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	start := time.Now()
	out, err := s.Run(context.Background(), in)
	if d := time.Since(start); d > bound {
		t.Fatalf("the call took %v", d)
	}
	return out, err
}

func TestCompile(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		ok        bool
	}{
		{"handler", `function handler(webhook) { return webhook }`, true},
		{"syntax error", `function handler(webhook) { return webhook `, false},
		{"no handler", `function transform(webhook) { return webhook }`, false},
		{"handler not a declaration", `var handler = function(webhook) { return webhook }`, false},
		{"too long", `function handler(webhook) { return webhook }//` + strings.Repeat("x", DefaultLimits.Source), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.src)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v", err)
			}
			if err != nil && !errors.Is(err, ErrCompile) {
				t.Fatalf("err = %v, not ErrCompile", err)
			}
		})
	}
}

func TestRunChangesTheRequest(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       Output
	}{
		{"pass through", `return webhook`, Output{
			Body: []byte(`{"name":"Ada","amount":42,"tags":["a","b"]}`), Header: http.Header{"X-Team": {"blue"}},
			Method: "POST", URL: event.URL}},
		{"rename a field, add a header", `webhook.data.full_name = webhook.data.name; delete webhook.data.name;
			webhook.headers["x-added"] = "1"; return webhook`, Output{
			Body:   []byte(`{"amount":42,"tags":["a","b"],"full_name":"Ada"}`),
			Header: http.Header{"X-Team": {"blue"}, "X-Added": {"1"}}, Method: "POST", URL: event.URL}},
		{"sees the event", `webhook.data = [webhook.id, webhook.type, webhook.timestamp, webhook.tenant, webhook.key,
			webhook.method, webhook.url, webhook.path]; return webhook`, Output{
			Body:   []byte(`["evt_1","order.paid","2026-09-01T12:00:00Z","acme","order-7","POST","https://example.com/hooks?x=1","/hooks?x=1"]`),
			Header: http.Header{"X-Team": {"blue"}}, Method: "POST", URL: event.URL}},
		{"method, path and query", `webhook.method = "PUT"; webhook.path = "/v2/orders/" + webhook.key + "?y=2"; return webhook`, Output{
			Body: []byte(event.Data), Header: http.Header{"X-Team": {"blue"}}, Method: "PUT", URL: "https://example.com/v2/orders/order-7?y=2"}},
		{"payload string verbatim", `webhook.payload = "a=1&b=2"; webhook.headers = {}; return webhook`, Output{
			Body: []byte("a=1&b=2"), Header: http.Header{}, Method: "POST", URL: event.URL}},
		{"payload any JSON value", `webhook.payload = {text: webhook.data.name + " paid " + webhook.data.amount}; return webhook`, Output{
			Body: []byte(`{"text":"Ada paid 42"}`), Header: http.Header{"X-Team": {"blue"}}, Method: "POST", URL: event.URL}},
		{"a new object", `return {data: 1, method: "PATCH", path: "/", headers: {"X-A": "b"}}`, Output{
			Body: []byte(`1`), Header: http.Header{"X-A": {"b"}}, Method: "PATCH", URL: "https://example.com/"}},
		{"cancel", `webhook.cancel = true; return webhook`, Output{Cancel: true}},
		{"cancel false", `webhook.cancel = false; return webhook`, Output{
			Body: []byte(event.Data), Header: http.Header{"X-Team": {"blue"}}, Method: "POST", URL: event.URL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, "function handler(webhook) {\n"+tc.body+"\n}", Limits{}, event)
			if err != nil {
				t.Fatal(err)
			}
			if string(out.Body) != string(tc.want.Body) || out.Method != tc.want.Method || out.URL != tc.want.URL ||
				out.Cancel != tc.want.Cancel || !sameHeader(out.Header, tc.want.Header) {
				t.Fatalf("got %+v (body %s)\nwant %+v (body %s)", out, out.Body, tc.want, tc.want.Body)
			}
		})
	}
}

func sameHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.Join(v, ",") != strings.Join(b[k], ",") {
			return false
		}
	}
	return true
}

func TestBadOutput(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"number", `return 42`},
		{"null", `return null`},
		{"undefined", `return`},
		{"string", `return "x"`},
		{"array", `return [webhook]`},
		{"header not a string", `webhook.headers["x-n"] = 1; return webhook`},
		{"header reserved", `webhook.headers["webhook-signature"] = "v1,x"; return webhook`},
		{"header content-length", `webhook.headers["Content-Length"] = "1"; return webhook`},
		{"header host", `webhook.headers.host = "evil.example"; return webhook`},
		{"header named twice", `webhook.headers["x-a"] = "1"; webhook.headers["X-A"] = "2"; return webhook`},
		{"header with a newline", `webhook.headers["x-a"] = "1\r\nx-b: 2"; return webhook`},
		{"headers not an object", `webhook.headers = "x"; return webhook`},
		{"method GET", `webhook.method = "GET"; return webhook`},
		{"method missing", `delete webhook.method; return webhook`},
		{"path without /", `webhook.path = "hooks"; return webhook`},
		{"path to another host", `webhook.path = "//evil.example/x"; return webhook`},
		{"data undefined", `delete webhook.data; return webhook`},
		{"data a function", `webhook.data = function() {}; return webhook`},
		{"data cyclic", `webhook.data.self = webhook.data; return webhook`},
		{"data BigInt", `webhook.data = 1n; return webhook`},
		{"cancel not a boolean", `webhook.cancel = "yes"; return webhook`},
		{"getter throws", `Object.defineProperty(webhook, "method", {get() { throw new Error("no") }}); return webhook`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, "function handler(webhook) {\n"+tc.body+"\n}", Limits{}, event)
			if !errors.Is(err, ErrBadOutput) || !errors.Is(err, ErrFailed) {
				t.Fatalf("err = %v, not ErrBadOutput", err)
			}
		})
	}
}

func TestThrowNamesMessageAndLine(t *testing.T) {
	for _, tc := range []struct {
		name, src, message string
		line               int
	}{
		{"error", "function handler(webhook) {\n  throw new TypeError('no amount')\n}", "TypeError: no amount", 2},
		{"at the top level", "function handler(webhook) { return webhook }\nnull.x", "TypeError: Cannot read property 'x'", 2},
		{"not an Error", "function handler(webhook) {\n\n  throw 'plain'\n}", "plain", 3},
		{"toString throws", "function handler(webhook) {\n  throw {toString() { throw 1 }}\n}", "a value whose toString failed", 2},
		{"handler replaced", "function handler(webhook) { return webhook }\nhandler = 1", "TypeError: handler is not a function", 0},
		{"no require", "function handler(webhook) { require('fs') }", "ReferenceError: require is not defined", 1},
		{"no eval", "function handler(webhook) { eval('1') }", "ReferenceError: eval is not defined", 1},
		{"no Function", "function handler(webhook) { (function(){}).constructor('return 1') }", "TypeError: code generation from strings is disabled", 1},
		{"no async Function", "function handler(webhook) { Object.getPrototypeOf(async function(){}).constructor('return 1') }", "TypeError: code generation from strings is disabled", 1},
		{"no typed arrays", "function handler(webhook) { new Uint8Array(4e9) }", "ReferenceError: Uint8Array is not defined", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, tc.src, Limits{}, event)
			var te *ThrowError
			if !errors.As(err, &te) || !errors.Is(err, ErrThrew) {
				t.Fatalf("err = %v, not a ThrowError", err)
			}
			if !strings.HasPrefix(te.Message, tc.message) || (tc.line != 0 && te.Line != tc.line) {
				t.Fatalf("got %q at line %d, want %q at line %d", te.Message, te.Line, tc.message, tc.line)
			}
		})
	}
}

func TestBuiltinsStillWork(t *testing.T) {
	src := `function handler(webhook) {
		var a = [3, 1, 2];
		webhook.data = {
			join: a.join("-"), str: String([a, [4, [5]]]), sorted: a.toSorted(), flat: [1, [2, [3]]].flat(Infinity),
			spread: [...a, ..."ab"], from: Array.from({length: 2}, (_, i) => i), concat: a.concat([4], 5),
			replaced: "2026-09-01".replace(/(\d+)-(\d+)-(?<d>\d+)/, "$<d>/$2/$1 $$ $& $9"),
			replacedAll: "a.b.c".replaceAll(".", (m) => m + m), pad: "7".padStart(3, "0"),
			json: JSON.stringify({a: [1, {b: "c"}], d: new Date(0)}, null, 2), parsed: JSON.parse('{"x":[1]}').x[0],
			applied: Math.max.apply(null, a), keys: Object.keys("abc"), flatMap: a.flatMap(x => [x, x]),
			isFunction: handler instanceof Function, cyclic: (function() { var c = [1]; c.push(c); return String(c) })(),
		};
		return webhook;
	}`
	out, err := run(t, src, Limits{}, event)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"join":"3-1-2","str":"3,1,2,4,5","sorted":[1,2,3],"flat":[1,2,3],"spread":[3,1,2,"a","b"],"from":[0,1],` +
		`"concat":[3,1,2,4,5],"replaced":"01/09/2026 $ 2026-09-01 $9","replacedAll":"a..b..c","pad":"007",` +
		`"json":"{\n  \"a\": [\n    1,\n    {\n      \"b\": \"c\"\n    }\n  ],\n  \"d\": \"1970-01-01T00:00:00.000Z\"\n}",` +
		`"parsed":1,"applied":3,"keys":["0","1","2"],"flatMap":[3,3,1,1,2,2],"isFunction":true,"cyclic":"1,"}`
	if string(out.Body) != want {
		t.Fatalf("got  %s\nwant %s", out.Body, want)
	}
}

// stateful is a script that, given {"mode": "pollute"}, tries every change
// it can leave behind, each in its own try, and says how many did not
// throw; given anything else, it reports what it sees of them.
const stateful = `var leaked = (typeof leaked === "undefined") ? 1 : leaked + 1;
let calls = 0;
function handler(webhook) {
	calls++;
	if (webhook.data.mode === "pollute") {
		var attempts = [
			function () { globalThis.x = 1 },
			function () { y = 2 },
			function () { Object.defineProperty(globalThis, "z", {value: 3}) },
			function () { Object.prototype.polluted = 1 },
			function () { Array.prototype.push = function () { return -1 } },
			function () { JSON.parse = function () { return "pwned" } },
			function () { JSON.stringify = function () { return '"pwned"' } },
			function () { String.prototype.toUpperCase = function () { return "pwned" } },
			function () { Object.getPrototypeOf([][Symbol.iterator]()).next = function () { return {done: true} } },
			function () { Object.getPrototypeOf(function* () {}).prototype.polluted = 1 },
			function () { Object.getOwnPropertyDescriptor(Object.prototype, "toString").get.polluted = 1 },
			function () { handler.constructor.prototype.polluted = 1 },
			function () { if (Object.isFrozen(Object.prototype)) throw 1; Object.freeze(Object.prototype) },
		];
		var changed = 0;
		for (var i = 0; i < attempts.length; i++) {
			try { attempts[i](); changed++ } catch (e) {}
		}
		webhook.data = {changed: changed};
		return webhook;
	}
	var a = [];
	webhook.data = [calls, leaked, typeof x, typeof y, typeof z, ({}).polluted, a.push(1), JSON.parse("2"), JSON.stringify(3),
		"a".toUpperCase(), [...[1, 2]].length, (function* () {})().polluted, (function () {}).polluted,
		Object.isFrozen(Object.prototype)];
	return webhook;
}`

// seen is what stateful reports in a runtime no call changed.
const seen = `[1,1,"undefined","undefined","undefined",null,1,2,"3","A",2,null,null,true]`

func withMode(mode string) Input {
	in := event
	in.Data = json.RawMessage(`{"mode":"` + mode + `"}`)
	return in
}

// TestNoStateBetweenCalls runs the polluting script, then looks, through
// Run: whichever runtime the pool gives, nothing is left.
func TestNoStateBetweenCalls(t *testing.T) {
	s, err := Compile(stateful)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.Run(context.Background(), withMode("pollute")); err != nil || string(out.Body) != `{"changed":0}` {
		t.Fatalf("pollute: %s, %v; want no change made", out.Body, err)
	}
	out, err := s.Run(context.Background(), withMode("look"))
	if err != nil || string(out.Body) != seen {
		t.Fatalf("look: %s, %v; want %s", out.Body, err, seen)
	}
}

// TestRealmKeepsNoState runs the polluting call and the looking one on
// one realm, in a row, as the pool does, of one script and of two;
// without the freezing, the second sees what the first did.
func TestRealmKeepsNoState(t *testing.T) {
	for _, tc := range []struct {
		name     string
		freezing bool
	}{{"frozen", true}, {"not frozen", false}} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(f bool) { freezing = f }(freezing)
			freezing = tc.freezing
			s, err := Compile(stateful)
			if err != nil {
				t.Fatal(err)
			}
			other, err := Compile(stateful)
			if err != nil {
				t.Fatal(err)
			}
			rm, err := newRealm()
			if err != nil {
				t.Fatal(err)
			}
			call := func(s *Script, mode string) string {
				t.Helper()
				out, reuse, err := rm.run(context.Background(), s, withMode(mode), mustURL(t, event.URL))
				if err != nil || !reuse {
					t.Fatalf("%s: %v, reuse %v", mode, err, reuse)
				}
				return string(out.Body)
			}
			before := call(s, "look")
			changed := call(s, "pollute")
			after := call(s, "look")
			if afterOther := call(other, "look"); afterOther != after {
				t.Fatalf("after pollution, another script saw %s, the polluting one %s", afterOther, after)
			}
			if tc.freezing && before != seen {
				t.Fatalf("a fresh realm sees %s, want %s", before, seen)
			}
			if tc.freezing && (changed != `{"changed":0}` || after != before) {
				t.Fatalf("pollute made %s; then the call saw %s, want %s", changed, after, before)
			}
			if !tc.freezing && after == before {
				t.Fatalf("without the freezing, the call after pollution saw %s, as before: the test shows nothing", after)
			}
		})
	}
}

// TestRealmAfterThrow throws from inside builtins that keep state while
// they run (join's stack of arrays, JSON's replacer, sort), then checks
// that the same realm runs a normal call as a fresh one does.
func TestRealmAfterThrow(t *testing.T) {
	src := `function handler(webhook) {
		var bad = {toString() { throw new Error("no") }, toJSON() { throw new Error("no") }};
		switch (webhook.data.mode) {
		case "join": String([[[1, [bad]]]]); break;
		case "json": JSON.stringify([[{a: bad}]]); break;
		case "sort": [3, 1, 2].sort(function () { throw new Error("no") }); break;
		case "replace": "aaa".replace(/a/g, function () { throw new Error("no") }); break;
		}
		var a = [1, [2, [3]]];
		webhook.data = [String(a), JSON.stringify(a), a.flat(Infinity).join("-")];
		return webhook;
	}`
	s, rm := onRealm(t, src)
	u := mustURL(t, event.URL)
	for _, mode := range []string{"join", "json", "sort", "replace"} {
		_, reuse, err := rm.run(context.Background(), s, withMode(mode), u)
		if !errors.Is(err, ErrThrew) || !reuse {
			t.Fatalf("%s: %v, reuse %v; want a ThrowError and the realm kept", mode, err, reuse)
		}
		out, _, err := rm.run(context.Background(), s, withMode("none"), u)
		if want := `["1,2,3","[1,[2,[3]]]","1-2-3"]`; err != nil || string(out.Body) != want {
			t.Fatalf("after %s: %s, %v; want %s", mode, out.Body, err, want)
		}
	}
}

// TestOverrideOnFrozenBuiltins: assigning a method or an error's name on
// one's own object still works when the prototype it comes from is frozen;
// assigning on the builtin itself throws.
func TestOverrideOnFrozenBuiltins(t *testing.T) {
	src := `function handler(webhook) {
		var o = {}; o.toString = function () { return "mine" };
		function F() {} F.prototype.toString = function () { return "F" };
		var e = new TypeError(); e.name = "Custom"; e.message = "m";
		var fn = function () {}; fn.toString = function () { return "fn" };
		var threw = false;
		try { Object.prototype.toString = function () {} } catch (x) { threw = x instanceof TypeError }
		webhook.data = [String(o), String(new F()), String(e), String(fn), threw, ({}).toString()];
		return webhook;
	}`
	out, err := run(t, src, Limits{}, event)
	if want := `["mine","F","Custom: m","fn",true,"[object Object]"]`; err != nil || string(out.Body) != want {
		t.Fatalf("got %s, %v; want %s", out.Body, err, want)
	}
}

func TestStrictMode(t *testing.T) {
	for _, tc := range []struct{ name, src, message string }{
		{"undeclared assignment", "function handler(webhook) { leak = 1; return webhook }", "ReferenceError"},
		{"assigning a frozen builtin", "function handler(webhook) { JSON.parse = null; return webhook }", "TypeError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, tc.src, Limits{}, event)
			var te *ThrowError
			if !errors.As(err, &te) || !strings.HasPrefix(te.Message, tc.message) {
				t.Fatalf("err = %v, want %s", err, tc.message)
			}
		})
	}
	for _, src := range []string{
		"function handler(webhook) { with (webhook) { return data } }",
		"function handler(webhook) { return webhook }\n}); var x = 1; (function () {",
		"function handler(webhook) { return webhook }\n})\n(function () {",
		"function handler(webhook) { return webhook }\n}).call(this), (function () {",
	} {
		if _, err := Compile(src); !errors.Is(err, ErrCompile) {
			t.Fatalf("Compile(%q) = %v, want ErrCompile", src, err)
		}
	}
}

// onRealm compiles src and prepares a realm to run it on.
func onRealm(t *testing.T, src string) (*Script, *realm) {
	t.Helper()
	s, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := newRealm()
	if err != nil {
		t.Fatal(err)
	}
	return s, rm
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestCancelledContext(t *testing.T) {
	s, err := Compile(`function handler(webhook) { while (true) {} }`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Run(ctx, event); !errors.Is(err, context.Canceled) || errors.Is(err, ErrFailed) {
		t.Fatalf("err = %v, want context.Canceled alone", err)
	}
}

// TestHostile runs scripts that try to exhaust the process, each of which
// must come back as a LimitError well within bound, its realm not to be
// reused, then checks that the process carries on: its goroutines end and
// a normal call works.
func TestHostile(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		limits     Limits
		limit      string // "" when either the time or the memory limit may come first
	}{
		{"infinite loop", `while (true) {}`, Limits{}, LimitTime},
		{"string doubling", `var s = "x"; while (true) s += s`, Limits{}, ""},
		{"array push loop", `var a = []; while (true) a.push({n: a.length})`, Limits{}, ""},
		{"allocation past memory", `var a = []; while (true) a.push("x".repeat(1000) + a.length)`, Limits{Time: bound}, LimitMemory},
		{"Array(1e9).fill", `new Array(1e9).fill(0)`, Limits{Time: bound}, LimitMemory},
		{"repeat", `"x".repeat(1e9)`, Limits{Time: bound}, LimitMemory},
		{"padEnd", `"x".padEnd(2 ** 31)`, Limits{Time: bound}, LimitMemory},
		{"array-like every", `Array.prototype.every.call({length: 1e15}, function() { return true })`, Limits{Time: bound}, LimitMemory},
		{"spread of a sparse array", `var a = []; a.length = 2 ** 32 - 1; Math.max(...a)`, Limits{Time: bound}, LimitMemory},
		{"Set of a sparse array's keys", `new Set(new Array(1e9).keys())`, Limits{Time: bound}, LimitMemory},
		{"Array.from array-like", `Array.from({length: 1e12})`, Limits{Time: bound}, LimitMemory},
		{"apply", `Math.max.apply(null, {length: 1e12})`, Limits{Time: bound}, LimitMemory},
		{"concat spreadable", `[].concat({length: 1e12, [Symbol.isConcatSpreadable]: true})`, Limits{Time: bound}, LimitMemory},
		{"String.raw", `String.raw({raw: {length: 1e12}})`, Limits{Time: bound}, LimitMemory},
		{"join of large references", `var a = []; for (var i = 0; i < 1000; i++) a.push("x".repeat(1e4)); a.join("")`, Limits{Time: bound}, LimitMemory},
		{"join separator", `new Array(1e6).join("x".repeat(1e4))`, Limits{Time: bound}, LimitMemory},
		{"replace blow-up", `"x".repeat(1e5).replaceAll("x", "$&".repeat(1000))`, Limits{Time: bound}, LimitMemory},
		{"replace of a long string", `"x".repeat(4e6).replaceAll("x", "y")`, Limits{Time: bound}, LimitMemory},
		{"match of a long string", `"x".repeat(4e6).match(/x/g)`, Limits{Time: bound}, LimitMemory},
		{"split of a long string", `"x".repeat(4e6).split("")`, Limits{Time: bound}, LimitMemory},
		{"replace function blow-up", `var b = "y".repeat(1e6); "x".repeat(1e4).replace(/x/g, () => b)`, Limits{Time: bound}, LimitMemory},
		{"stringify of large references", `JSON.stringify(new Array(1e5).fill("x".repeat(1e4)))`, Limits{Time: bound}, LimitMemory},
		{"flat of itself", `var a = [1]; a.push(a); a.flat(Infinity)`, Limits{Time: bound}, LimitCallStack},
		{"join of deep nesting", `var a = []; for (var i = 0; i < 2000; i++) a = [a]; String(a)`, Limits{Time: bound}, LimitCallStack},
		{"JSON.parse deep nesting", `JSON.parse("[".repeat(1e5) + "]".repeat(1e5))`, Limits{Time: bound}, LimitCallStack},
		{"deep recursion", `function f(n) { return f(n + 1) + 1 } f(0)`, Limits{Time: bound}, LimitCallStack},
		{"recursion caught", `function f() { try { f() } catch (e) { f() } } f()`, Limits{}, ""},
		{"limit caught", `while (true) { try { "x".repeat(1e9) } catch (e) {} }`, Limits{Time: bound}, LimitMemory},
		{"backtracking regexp", `/(a*)*b\1/.test("a".repeat(40))`, Limits{}, LimitTime},
		{"output too large", `webhook.data = "x".repeat(2 << 20); return webhook`, Limits{Time: bound}, LimitOutput},
		{"payload too large", `webhook.payload = "x".repeat(2 << 20); return webhook`, Limits{Time: bound}, LimitOutput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			s, err := CompileWith("function handler(webhook) {\n"+tc.body+"\n}", tc.limits)
			if err != nil {
				t.Fatal(err)
			}
			rm, err := newRealm()
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, reuse, err := rm.run(context.Background(), s, event, mustURL(t, event.URL))
			if d := time.Since(start); d > bound {
				t.Fatalf("the call took %v", d)
			}
			if reuse {
				t.Fatalf("the realm of a call stopped at a limit would be reused")
			}
			var le *LimitError
			if !errors.As(err, &le) || !errors.Is(err, ErrLimit) || !errors.Is(err, ErrFailed) {
				t.Fatalf("err = %v, not a LimitError", err)
			}
			if tc.limit != "" && le.Limit != tc.limit {
				t.Fatalf("went over %s (%v), want %s", le.Limit, le, tc.limit)
			}
			waitFor(t, bound, func() bool { return runtime.NumGoroutine() <= before })
		})
	}
	out, err := run(t, `function handler(webhook) { webhook.headers["x-ok"] = "1"; return webhook }`, Limits{}, event)
	if err != nil || out.Header.Get("X-Ok") != "1" {
		t.Fatalf("a normal call after the hostile ones: %+v, %v", out, err)
	}
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not so after %v", timeout)
		}
		runtime.Gosched()
	}
}

// TestRealmGoroutineEnds: the goroutine of a realm ends when the realm is
// closed, and when the garbage collector takes a realm the pool let go.
func TestRealmGoroutineEnds(t *testing.T) {
	s, err := Compile(`function handler(webhook) { return webhook }`)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := newRealm()
	if err != nil {
		t.Fatal(err)
	}
	ended := rm.ended
	rm.close()
	waitFor(t, bound, func() bool { return isClosed(ended) })
	rm, err = newRealm()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := rm.run(context.Background(), s, event, mustURL(t, event.URL)); err != nil {
		t.Fatal(err)
	}
	ended = rm.ended
	rm = nil
	waitFor(t, bound, func() bool { runtime.GC(); return isClosed(ended) })
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestRealmKeepsNothingForLater: what goja would keep for the life of the
// runtime (the Symbol.for registry, a cleanup per weak key) is per call.
func TestRealmKeepsNothingForLater(t *testing.T) {
	src := `function handler(webhook) {
		var s = Symbol.for("k"), own = {};
		var weak = new WeakMap([[own, 1]]);
		var refused = [];
		for (const f of [() => weak.set(Object.prototype, 1), () => new WeakSet([Array]), () => new WeakMap([[JSON, 1]])]) {
			try { f(); refused.push(false) } catch (e) { refused.push(e instanceof TypeError) }
		}
		webhook.data = [s === Symbol.for("k"), Symbol.keyFor(s), Symbol.keyFor(Symbol.iterator) === undefined,
			Symbol.keyFor(Symbol("x")) === undefined, weak.get(own), refused];
		return webhook;
	}`
	out, err := run(t, src, Limits{}, event)
	if want := `[true,"k",true,true,1,[true,true,true]]`; err != nil || string(out.Body) != want {
		t.Fatalf("got %s, %v; want %s", out.Body, err, want)
	}
}

// TestEverythingReachableIsFrozen walks from the global object and from
// the prototypes of what syntax makes (functions of every kind,
// iterators, promises, regular expressions, arguments) and fails on any
// object that is not frozen.
func TestEverythingReachableIsFrozen(t *testing.T) {
	src := `function handler(webhook) {
		var P = Object.getPrototypeOf;
		var roots = [globalThis, P(function* () {}), P(P((function* () {})())), P(async function () {}), P(async () => {}),
			P(() => {}), P(class {}), P([][Symbol.iterator]()), P([].entries()), P(""[Symbol.iterator]()),
			P(new Map().entries()), P(new Set().values()), P(/x/g[Symbol.matchAll]("x")), P(Promise.resolve()),
			P(/x/), P(new Error()), P(new Date()), P(Symbol()), P(1n),
			(function () { "use strict"; return Object.getOwnPropertyDescriptor(arguments, "callee").get })(),
			P((function () { return arguments })())];
		var seen = new Set(), todo = roots.map(function (r, i) { return [r, "root " + i] }), open = [];
		while (todo.length > 0) {
			var [o, path] = todo.pop();
			if (o === null || (typeof o !== "object" && typeof o !== "function") || seen.has(o)) continue;
			seen.add(o);
			if (!Object.isFrozen(o)) open.push(path);
			todo.push([P(o), path + ".__proto__"]);
			for (var k of Reflect.ownKeys(o)) {
				var d = Object.getOwnPropertyDescriptor(o, k);
				var name = path + "." + String(k);
				if ("value" in d) todo.push([d.value, name]); else todo.push([d.get, name + ".get"], [d.set, name + ".set"]);
			}
		}
		webhook.data = {objects: seen.size, open: open};
		return webhook;
	}`
	out, err := run(t, src, Limits{Time: bound}, event)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Objects int
		Open    []string
	}
	if err := json.Unmarshal(out.Body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Objects < 400 || len(got.Open) > 0 {
		t.Fatalf("%d objects reachable, not frozen: %v", got.Objects, got.Open)
	}
	t.Logf("%d objects reachable, all frozen", got.Objects)
}
