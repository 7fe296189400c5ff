package recorder

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookpipe/hookpipe/recorder/internal/batch"
	"github.com/hookpipe/hookpipe/recorder/internal/store"
	"github.com/hookpipe/hookpipe/topics"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestZZProbe(t *testing.T) {
	if os.Getenv("PROBE") == "" {
		t.Skip()
	}
	h := newHarness(t)
	const n = 200000
	as := attempts(n, "probe")
	recs := make([]*kgo.Record, n)
	for i := range as {
		recs[i] = &kgo.Record{Topic: h.names.Attempts(), Key: []byte(as[i].SubscriptionID), Value: as[i].Encode()}
	}
	h.produceRaw(recs...)
	h.env["WEBHOOKS_RECORDER_BATCH_WAIT"] = "1s"
	cfg := h.config()
	rawCfg := cfg
	rawCfg.Database = h.db + "_raw"
	defer h.ch.Exec(context.Background(), "DROP DATABASE IF EXISTS "+rawCfg.Database)
	if err := Migrate(context.Background(), rawCfg); err != nil {
		t.Fatal(err)
	}
	rawStart := time.Now()
	w := store.New(h.ch, rawCfg.Database)
	for i := 0; i < n; i += 5000 {
		bb := batch.New(5000)
		for j := i; j < i+5000; j++ {
			bb.Add(&kgo.Record{}, &as[j], false, time.Now())
		}
		if _, err := w.Write(context.Background(), bb.Rows()); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("raw (columnar writer) %v, %.0f rows/s\n", time.Since(rawStart), n/time.Since(rawStart).Seconds())
	core, logs := observer.New(zapcore.DebugLevel)
	start := time.Now()
	r := &run{done: make(chan struct{})}
	ctx, cancel := contextWithCancel()
	r.cancel = cancel
	go func() { defer close(r.done); r.err = Run(ctx, cfg, zap.New(core)) }()
	defer r.stop(t)
	h.waitRows(5*time.Minute, n)
	took := time.Since(start)
	fmt.Printf("total %v, %.0f rows/s\n", took, n/took.Seconds())
	var ins time.Duration
	for _, e := range logs.FilterMessage("inserted").All() {
		d := e.ContextMap()["took"].(time.Duration)
		ins += d
		fmt.Printf("%s rows %v took %v\n", e.Time.Sub(start).Round(time.Millisecond), e.ContextMap()["rows"], d.Round(time.Millisecond))
	}
	fmt.Println("sum insert", ins)
	_ = topics.OutcomeDead
}
