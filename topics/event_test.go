package topics

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// designEvent is the example event of docs/design.md (Contract).
const designEvent = `{"id": "evt_123", "type": "order.created", "tenant": "acme", "key": "order_42",
 "idempotency_key": "optional", "created_at": "2026-11-22T10:00:00Z", "data": {"any": "json"}}`

func TestDecodeEventDesignExample(t *testing.T) {
	e, err := DecodeEvent([]byte(designEvent), 0)
	if err != nil {
		t.Fatalf("DecodeEvent(design example): %v", err)
	}
	want := Event{
		ID: "evt_123", Type: "order.created", Tenant: "acme", Key: "order_42",
		IdempotencyKey: "optional", CreatedAt: "2026-11-22T10:00:00Z",
	}
	got := e
	got.Data = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeEvent = %+v, want %+v", got, want)
	}
	if !bytes.Equal(e.Data, []byte(`{"any": "json"}`)) {
		t.Fatalf("Data = %q, want the published bytes", e.Data)
	}
}

func TestDecodeEventMinimal(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"required fields only", `{"id":"e1","type":"t","data":1}`},
		{"data string", `{"id":"e1","type":"t","data":""}`},
		{"data false", `{"id":"e1","type":"t","data":false}`},
		{"data empty object", `{"id":"e1","type":"t","data":{}}`},
		{"data array", `{"id":"e1","type":"t","data":[null]}`},
		{"trailing whitespace", "{\"id\":\"e1\",\"type\":\"t\",\"data\":1}\n\t "},
		{"type charset", `{"id":"e1","type":"Az09_.-","data":1}`},
		{"type 255 bytes", `{"id":"e1","type":"` + strings.Repeat("t", 255) + `","data":1}`},
		{"id 255 bytes", `{"id":"` + strings.Repeat("i", 255) + `","type":"t","data":1}`},
		{"id printable punctuation", `{"id":"a~!:@#_-.","type":"t","data":1}`},
		{"created_at with fraction and offset", `{"id":"e1","type":"t","created_at":"2026-11-22T10:00:00.123456789+02:00","data":1}`},
		{"key 1024 bytes", `{"id":"e1","type":"t","key":"` + strings.Repeat("k", 1024) + `","data":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeEvent([]byte(tc.in), 0); err != nil {
				t.Fatalf("DecodeEvent(%.80s): %v", tc.in, err)
			}
		})
	}
}

func TestDecodeEventRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		field string // field of the *InvalidError
	}{
		{"not JSON", `not json`, ""},
		{"empty input", ``, ""},
		{"JSON array", `[1,2]`, ""},
		{"JSON null", `null`, "id"},
		{"truncated", `{"id":"e1","type":"t","data":{`, ""},
		{"trailing data", `{"id":"e1","type":"t","data":1} {"id":"e2"}`, ""},
		{"trailing garbage", `{"id":"e1","type":"t","data":1}x`, ""},
		{"trailing brace", `{"id":"e1","type":"t","data":1}}`, ""},
		{"unknown field", `{"id":"e1","type":"t","data":1,"extra":true}`, ""},
		{"missing id", `{"type":"t","data":1}`, "id"},
		{"empty id", `{"id":"","type":"t","data":1}`, "id"},
		{"id with space", `{"id":"e 1","type":"t","data":1}`, "id"},
		{"id with slash", `{"id":"sub/1","type":"t","data":1}`, "id"},
		{"id with newline", `{"id":"e\n1","type":"t","data":1}`, "id"},
		{"id non-ASCII", `{"id":"é","type":"t","data":1}`, "id"},
		{"id 256 bytes", `{"id":"` + strings.Repeat("i", 256) + `","type":"t","data":1}`, "id"},
		{"id wrong JSON type", `{"id":1,"type":"t","data":1}`, ""},
		{"missing type", `{"id":"e1","data":1}`, "type"},
		{"type with space", `{"id":"e1","type":"order created","data":1}`, "type"},
		{"type with slash", `{"id":"e1","type":"order/created","data":1}`, "type"},
		{"type with star", `{"id":"e1","type":"order.*","data":1}`, "type"},
		{"type with unicode", `{"id":"e1","type":"ordér","data":1}`, "type"},
		{"type with trailing newline", `{"id":"e1","type":"order\n","data":1}`, "type"},
		{"type 256 bytes", `{"id":"e1","type":"` + strings.Repeat("t", 256) + `","data":1}`, "type"},
		{"missing data", `{"id":"e1","type":"t"}`, "data"},
		{"data null", `{"id":"e1","type":"t","data":null}`, "data"},
		{"bad tenant", `{"id":"e1","type":"t","tenant":"a b","data":1}`, "tenant"},
		{"key too long", `{"id":"e1","type":"t","key":"` + strings.Repeat("k", 1025) + `","data":1}`, "key"},
		{"idempotency key too long", `{"id":"e1","type":"t","idempotency_key":"` + strings.Repeat("k", 1025) + `","data":1}`, "idempotency_key"},
		{"created_at not a time", `{"id":"e1","type":"t","created_at":"yesterday","data":1}`, "created_at"},
		{"created_at without zone", `{"id":"e1","type":"t","created_at":"2026-11-22T10:00:00","data":1}`, "created_at"},
		{"unknown priority", `{"id":"e1","type":"t","priority":"urgent","data":1}`, "priority"},
		{"priority in capitals", `{"id":"e1","type":"t","priority":"HIGH","data":1}`, "priority"},
		{"priority not a string", `{"id":"e1","type":"t","priority":1,"data":1}`, ""},
		{"created_at with space", `{"id":"e1","type":"t","created_at":"2026-11-22 10:00:00Z","data":1}`, "created_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := DecodeEvent([]byte(tc.in), 0)
			if err == nil {
				t.Fatalf("DecodeEvent(%.80q) = %+v, want an error", tc.in, e)
			}
			wantInvalid(t, err, "event", tc.field)
		})
	}
}

// eventOfSize returns a valid event value of exactly n bytes.
func eventOfSize(tb testing.TB, n int) []byte {
	tb.Helper()
	const head, tail = `{"id":"e1","type":"t","data":"`, `"}`
	pad := n - len(head) - len(tail)
	if pad < 0 {
		tb.Fatalf("cannot build an event of %d bytes", n)
	}
	b := []byte(head + strings.Repeat("x", pad) + tail)
	if len(b) != n {
		tb.Fatalf("built %d bytes, want %d", len(b), n)
	}
	return b
}

func TestDecodeEventSizeLimit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size     int
		maxBytes int
		ok       bool
	}{
		{"at explicit limit", 1000, 1000, true},
		{"one over explicit limit", 1001, 1000, false},
		{"well over explicit limit", 5000, 1000, false},
		{"at default limit", DefaultMaxEventBytes, 0, true},
		{"one over default limit", DefaultMaxEventBytes + 1, 0, false},
		{"negative max means default", DefaultMaxEventBytes, -1, true},
		{"negative max means default, over", DefaultMaxEventBytes + 1, -1, false},
		{"explicit limit above default", DefaultMaxEventBytes + 1, DefaultMaxEventBytes + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeEvent(eventOfSize(t, tc.size), tc.maxBytes)
			if tc.ok {
				if err != nil {
					t.Fatalf("DecodeEvent(%d bytes, max %d): %v", tc.size, tc.maxBytes, err)
				}
				return
			}
			wantInvalid(t, err, "event", "")
			if !strings.Contains(err.Error(), "limit") {
				t.Fatalf("error %q does not say it is about the size limit", err)
			}
		})
	}
	if DefaultMaxEventBytes != 256*1024 {
		t.Fatalf("DefaultMaxEventBytes = %d, want 256 KiB", DefaultMaxEventBytes)
	}
}

// The deliverer sends data "exactly as published": whitespace, escapes, key
// order, number spelling must all survive decoding.
func TestDecodeEventKeepsDataBytes(t *testing.T) {
	for _, tc := range []struct{ name, data string }{
		{"whitespace", "{ \"b\" :\t1 ,\n  \"a\" : [ 1 , 2 ] }"},
		{"key order", `{"z":1,"a":2,"m":3}`},
		{"unicode escapes", `{"s":"\u00e9\u0000\ud83d\ude00\u2028"}`},
		{"raw unicode", `{"s":"é😀 ` + "\u2028" + `"}`},
		{"html characters", `{"h":"<a href=\"x\">&amp;</a>"}`},
		{"escaped slash", `{"p":"a\/b"}`},
		{"number spelling", `{"n":1.0e+02,"m":-0,"big":123456789012345678901234567890}`},
		{"duplicate keys", `{"a":1,"a":2}`},
		{"scalar", `"just a string"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := `{"id":"e1","type":"t","data":` + tc.data + `}`
			e, err := DecodeEvent([]byte(in), 0)
			if err != nil {
				t.Fatalf("DecodeEvent: %v", err)
			}
			if !bytes.Equal(e.Data, []byte(tc.data)) {
				t.Fatalf("Data = %q, want %q", e.Data, tc.data)
			}
		})
	}
}

func TestEventValidate(t *testing.T) {
	ok := Event{ID: "e1", Type: "t", Data: []byte(`{}`)}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(%+v): %v", ok, err)
	}
	for _, tc := range []struct {
		name  string
		mut   func(*Event)
		field string
	}{
		{"whitespace-only data", func(e *Event) { e.Data = []byte(" \n") }, "data"},
		{"null data with spaces", func(e *Event) { e.Data = []byte(" null ") }, "data"},
		{"nil data", func(e *Event) { e.Data = nil }, "data"},
		{"no id", func(e *Event) { e.ID = "" }, "id"},
		{"no type", func(e *Event) { e.Type = "" }, "type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := ok
			tc.mut(&e)
			wantInvalid(t, e.Validate(), "event", tc.field)
		})
	}
}
