package transform

import (
	"errors"
	"testing"
)

// TestBodyAsJSONStringify checks that the body made of a webhook's data is
// what JSON.stringify makes of the same value, or fails when it throws.
func TestBodyAsJSONStringify(t *testing.T) {
	for _, expr := range []string{
		`webhook.data`, `{a: 1, b: [1, "two", null, true, false], c: {d: {}}}`, `[]`, `{}`, `"x"`, `42`, `null`, `true`,
		`[undefined, function () {}, Symbol("s"), NaN, Infinity, -Infinity, -0, 1e21, 1.5e-7, 0.1 + 0.2, 2 ** 53 + 1]`,
		`{u: undefined, f: function () {}, s: Symbol("s"), n: 1}`, `[, 1, , 2]`, `new Array(3)`,
		`{d: new Date(0), n: new Number(3), s: new String("s"), b: new Boolean(false), m: new Map([[1, 2]]), e: new Error("x")}`,
		`{t: {toJSON(key) { return "key " + key }}, a: [{toJSON(key) { return key + typeof key }}]}`,
		`{toJSON() { return undefined }}`, `{get g() { return [1, 2] }, v: 1}`,
		`["\u00e9\ud83d\ude00\ud800 \udc00x", "\"\\\/\b\f\n\r\t\u0001\u001f\u007f\u2028"]`,
		`{"\u00e9": 1, "\n\"": 2, "": 3, 10: 4, 2: 5, "__proto__": 6}`, `JSON.parse('{"__proto__": 1}')`,
		`JSON.rawJSON ? [JSON.rawJSON("1e3")] : [1000]`, `(function () { return arguments })(1, 2)`,
		`new (class A { constructor() { this.x = 1 } })()`, `Object.create({inherited: 1}, {own: {value: 2, enumerable: true}, hidden: {value: 3}})`,
		`new Proxy([1, 2], {})`, `{p: new Proxy({a: 1}, {})}`, `{"\ud800": 1}`, `(class extends Array {}).from([1, 2])`,
		`{n: {valueOf() { return 7 }, __proto__: Number.prototype}}`, `Object(1n)`,
		`(function () { var a = [1]; a.push(a); return a })()`, `{b: 1n}`, `Symbol("s")`, `undefined`, `function () {}`,
		`{t: {toJSON() { throw new Error("no") }}}`,
	} {
		t.Run(expr, func(t *testing.T) {
			got, errGot := run(t, "function handler(webhook) {\nwebhook.data = ("+expr+");\nreturn webhook }", Limits{}, event)
			want, errWant := run(t, "function handler(webhook) {\nwebhook.payload = JSON.stringify("+expr+");\n"+
				"if (webhook.payload === undefined) throw 'undefined';\nreturn webhook }", Limits{}, event)
			if (errGot == nil) != (errWant == nil) || (errGot != nil && !errors.Is(errGot, ErrBadOutput)) {
				t.Fatalf("data: %s, %v; JSON.stringify: %s, %v", got.Body, errGot, want.Body, errWant)
			}
			if string(got.Body) != string(want.Body) {
				t.Fatalf("data:           %s\nJSON.stringify: %s", got.Body, want.Body)
			}
		})
	}
}
