package topics

import (
	"strings"
	"testing"
	"time"
)

func TestOperationRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	o := Operation{ID: "op_1", Kind: OperationReplay, Tenant: "acme", Subscription: "sub_1", EventType: "order.*",
		Since: at, Rate: 50, State: OperationRunning, Matched: 10, Done: 4, Sent: 3, Skipped: 1,
		Next: map[int32]int64{0: 7, 1: 3}, Stop: map[int32]int64{0: 9, 1: 12}, CreatedAt: at, UpdatedAt: at}
	got, err := DecodeOperation(o.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Encode()) != string(o.Encode()) {
		t.Fatalf("round trip:\n got %s\nwant %s", got.Encode(), o.Encode())
	}
	if got.Finished() {
		t.Fatal("a running operation is not finished")
	}
	for _, s := range []string{OperationDone, OperationFailed} {
		got.State = s
		if !got.Finished() {
			t.Fatalf("%s is finished", s)
		}
	}
}

func TestDecodeOperationRejects(t *testing.T) {
	for _, tc := range []struct{ value, field string }{
		{`{"id":"op_1","kind":"redrive","rate":1,"state":"pending","created_at":"2026-11-24T10:00:00Z","updated_at":"2026-11-24T10:00:00Z","extra":1}`, "extra"},
		{`{"id":"","kind":"redrive","rate":1,"state":"pending"}`, "id"},
		{`{"id":"op_1","kind":"delete","rate":1,"state":"pending"}`, "kind"},
		{`{"id":"op_1","kind":"replay","rate":1,"state":"pending"}`, "subscription_id"},
		{`{"id":"op_1","kind":"redrive","rate":0,"state":"pending"}`, "rate"},
		{`{"id":"op_1","kind":"redrive","rate":1,"state":"paused"}`, "state"},
		{`{"id":"op_1","kind":"replay","subscription_id":"s","dead_letters":[{"partition":0,"offset":1}],"rate":1,"state":"pending"}`, "dead_letters"},
	} {
		if _, err := DecodeOperation([]byte(tc.value)); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want one naming %s", tc.value, err, tc.field)
		}
	}
}
