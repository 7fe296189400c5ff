package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestLoggerSamplesRepeats: a warning the client repeats a thousand times
// at once is logged a few times, another warning still is, and the
// client is told to log nothing below warnings.
func TestLoggerSamplesRepeats(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	l := newLogger(zap.New(core))
	for range 1000 {
		l.Log(kgo.LogLevelWarn, "unable to open connection to broker", "broker", "1")
	}
	l.Log(kgo.LogLevelWarn, "another warning")
	if n := logs.FilterMessage("unable to open connection to broker").Len(); n < 1 || n > 15 {
		t.Errorf("a warning repeated 1000 times was logged %d times; want 1 to 15", n)
	}
	if logs.FilterMessage("another warning").Len() != 1 {
		t.Error("a warning after a sampled one was not logged")
	}
	if l.Level() != kgo.LogLevelWarn {
		t.Errorf("the client logs from level %v; want warnings and errors", l.Level())
	}
	if e := logs.All()[0]; e.LoggerName != "kafka" {
		t.Errorf("logger name %q, want kafka", e.LoggerName)
	}
}
