package transform

import (
	"testing"

	"github.com/dop251/goja"
)

// FuzzData checks that the decoder of the event's data makes what
// JSON.parse makes of the same bytes: the same JSON out, the same failure.
func FuzzData(f *testing.F) {
	for _, seed := range []string{
		`{"name":"Ada","amount":42,"tags":["a","b"]}`, `{"a":1,"b":2,"a":3}`, `{"__proto__":{"x":1}}`,
		`["\u00e9\ud83d\ude00","\ud800","é","\"\\\/\b\f\n\r\t"]`, `[1e400]`, `[-0, 1.5e-7, 123456789012345678901]`,
		` { "a" : [ true , false , null ] } `, `{"a":`, `[1,]`, "\"\xff\"", `{"10":1,"2":2,"b":3}`,
	} {
		f.Add([]byte(seed))
	}
	s, err := Compile(`function handler(webhook) { return webhook }`)
	if err != nil {
		f.Fatal(err)
	}
	rm, err := newRealm()
	if err != nil {
		f.Fatal(err)
	}
	c := &call{s: s, rm: rm, rt: rm.rt}
	rm.g.c = c
	encode := func(v goja.Value) string {
		res, err := rm.g.stringify(goja.Undefined(), v)
		if err != nil {
			f.Fatal(err)
		}
		return res.String()
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got, want goja.Value
		errGot := c.try(func() { got = rm.g.data(b) })
		errWant := c.try(func() { want = rm.g.parseJSON(string(b)) })
		if (errGot == nil) != (errWant == nil) {
			t.Fatalf("%q: data: %v; JSON.parse: %v", b, errGot, errWant)
		}
		if errGot == nil && encode(got) != encode(want) {
			t.Fatalf("%q: data makes %s; JSON.parse %s", b, encode(got), encode(want))
		}
	})
}
