package deliverer

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestAttemptLog: a message at an enabled level carries the attempt's
// subscription, event and number before its own fields; one below the
// level is not written.
func TestAttemptLog(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := attemptLog{zap.New(core), [3]zap.Field{zap.String("subscription", "sub_1"), zap.String("event", "evt_1"), zap.Int("attempt", 3)}}
	l.Debug("delivered", zap.Int("status", 204))
	l.Warn("dead-lettered", zap.Int("status", 500))
	l.Warn("again")
	all := logs.All()
	if len(all) != 2 {
		t.Fatalf("%d entries, want the two warnings: %v", len(all), all)
	}
	want := map[string]any{"subscription": "sub_1", "event": "evt_1", "attempt": int64(3), "status": int64(500)}
	got := all[0].ContextMap()
	if all[0].Message != "dead-lettered" || len(got) != len(want) {
		t.Fatalf("%q %v, want dead-lettered %v", all[0].Message, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if n := len(all[1].ContextMap()); n != 3 {
		t.Errorf("the second warning has %d fields, want 3 (no field of the first one left over)", n)
	}
}
