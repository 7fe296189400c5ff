package recorder

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookpipe/hookpipe/recorder/chtest"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

func TestWindowOf(t *testing.T) {
	for _, tc := range []struct {
		meta string
		ok   bool
		want window
	}{
		{markClean, false, window{}},
		{markInFlight + "42", true, window{below: 42}},
		{markInFlight + "0", false, window{below: 0}},
		// Not ours (an older recorder's commit carries its member id; an
		// operator's reset, nothing): the widest window.
		{"", true, window{below: -1, count: 7}},
		{"member-1-0a3c", true, window{below: -1, count: 7}},
		{markInFlight + "-3", true, window{below: -1, count: 7}},
		{markInFlight + "x", true, window{below: -1, count: 7}},
	} {
		got, ok := windowOf(tc.meta, 7)
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("windowOf(%q) = %+v, %t; want %+v, %t", tc.meta, got, ok, tc.want, tc.ok)
		}
	}

	below := window{below: 12}
	for _, c := range []struct {
		offset        int64
		suspect, more bool
	}{{10, true, true}, {11, true, false}, {12, false, false}} {
		if s, m := below.suspect(c.offset); s != c.suspect || m != c.more {
			t.Errorf("below 12: suspect(%d) = %t, %t; want %t, %t", c.offset, s, m, c.suspect, c.more)
		}
	}
	count := window{below: -1, count: 2}
	if s, m := count.suspect(100); !s || !m {
		t.Errorf("count 2: first record: %t, %t", s, m)
	}
	if s, m := count.suspect(200); !s || m {
		t.Errorf("count 2: second record: %t, %t", s, m)
	}
}

// refuseCommits makes the broker fail, while on is set, every commit of
// the recorder whose mark starts with prefix: markClean, the commits after
// inserts (the recorder inserts and never commits, as if it died right
// after each insert); markInFlight, the marks before inserts.
func (h *harness) refuseCommits(prefix string, on *atomic.Bool, refused *atomic.Int64) {
	h.kfake.ControlKey(kmsg.OffsetCommit.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		h.kfake.KeepControl()
		req := kr.(*kmsg.OffsetCommitRequest)
		if !on.Load() || len(req.Topics) == 0 || len(req.Topics[0].Partitions) == 0 {
			return nil, nil, false
		}
		if m := req.Topics[0].Partitions[0].Metadata; m == nil || !strings.HasPrefix(*m, prefix) {
			return nil, nil, false
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewOffsetCommitResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewOffsetCommitResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, kerr.UnknownServerError.Code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
}

// recordedFirst runs a recorder (batches of up to 1,000) until 30
// attempts are inserted and committed.
func recordedFirst(t *testing.T) (*harness, *testkit.Running, []topics.Attempt) {
	t.Helper()
	h := newHarness(t)
	h.env["WEBHOOKS_RECORDER_BATCH_ROWS"] = "1000"
	a := h.start(h.config())
	first := attempts(30, "first")
	h.produce(first...)
	h.waitRows(60*time.Second, len(first))
	waitFor(t, 30*time.Second, "the first commits", func() bool { return h.committedAll(topics.GroupRecorder) })
	return h, a, first
}

// takeOver starts a recorder that serves its metrics (at addr), produces
// n more attempts and waits until ClickHouse holds them after the before
// already there and the group committed to the end.
func (h *harness) takeOver(t *testing.T, n int, prefix string, before int) (addr string, more []topics.Attempt) {
	t.Helper()
	cfg := h.config()
	cfg.HTTPAddr = testkit.FreeAddr(t)
	h.start(cfg)
	more = attempts(n, prefix)
	h.produce(more...)
	h.waitRows(60*time.Second, before+n)
	waitFor(t, 30*time.Second, "the group to commit to the end", func() bool { return h.committedAll(topics.GroupRecorder) })
	return cfg.HTTPAddr, more
}

// TestCrashBetweenInsertAndCommit (ADR 0044): a recorder that inserted a
// batch and died before committing it leaves its mark; the next owner
// looks up exactly the records the mark names, finds them, and inserts
// no copy. It fails if the next owner does not look up (copies) or looks
// up more than the records in flight.
func TestCrashBetweenInsertAndCommit(t *testing.T) {
	t.Parallel()
	h, a, first := recordedFirst(t)

	var refuse atomic.Bool
	var refused atomic.Int64
	refuse.Store(true)
	h.refuseCommits(markClean, &refuse, &refused)
	lost := attempts(40, "lost")
	h.produce(lost...)
	h.waitRows(60*time.Second, len(first)+len(lost))
	waitFor(t, 30*time.Second, "a commit after the insert refused", func() bool { return refused.Load() > 0 })
	a.StopOK(t)
	if h.committedAll(topics.GroupRecorder) {
		t.Fatal("the group is committed to the end: the crash between insert and commit did not happen")
	}
	marked := 0
	offsets, err := h.adm.FetchOffsets(chtest.Ctx(t, 10*time.Second), topics.GroupRecorder)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offsets[h.names.Attempts()] {
		if strings.HasPrefix(o.Metadata, markInFlight) {
			marked++
		}
	}
	if marked == 0 {
		t.Fatalf("no commit marked in flight: %+v", offsets)
	}

	refuse.Store(false)
	addr, after := h.takeOver(t, 20, "after", len(first)+len(lost))
	all := len(first) + len(lost) + len(after)
	if got := h.count(false); got != uint64(all) {
		t.Errorf("count() without FINAL = %d, want %d: the records in flight were inserted again", got, all)
	}
	lookedUp := metric(t, addr, "webhooks_recorder_rows_looked_up_total")
	present := metric(t, addr, "webhooks_recorder_rows_already_present_total")
	if present == 0 || lookedUp != present {
		t.Errorf("looked up %v records and found %v: want only the records in flight looked up, all found", lookedUp, present)
	}
	checkRows(t, h, append(append(first, lost...), after...))
}

// TestHandOverLooksUpNothing (ADR 0044): a recorder that stops cleanly
// leaves its partitions marked clean; the next owner looks nothing up.
func TestHandOverLooksUpNothing(t *testing.T) {
	t.Parallel()
	h, a, first := recordedFirst(t)
	a.StopOK(t)

	addr, second := h.takeOver(t, 30, "second", len(first))
	if n := metric(t, addr, "webhooks_recorder_rows_looked_up_total"); n != 0 {
		t.Errorf("looked up %v records after a clean hand-over, want 0", n)
	}
	if got := h.count(false); got != uint64(len(first)+len(second)) {
		t.Errorf("count() without FINAL = %d, want %d", got, len(first)+len(second))
	}
}

// TestNoInsertWithoutMark (ADR 0044): while the broker refuses the mark
// before an insert, the batch is not inserted (a crash after it would
// leave rows no mark names): it is held, and inserted once a mark is
// accepted.
func TestNoInsertWithoutMark(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var refuse atomic.Bool
	var refused atomic.Int64
	refuse.Store(true)
	h.refuseCommits(markInFlight, &refuse, &refused)
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(zapcore.NewTee(testLogger(t).Core(), core))
	cfg := h.config()
	testkit.Go(t, func(ctx context.Context) error { return Run(ctx, cfg, log) })
	as := attempts(20, "held")
	h.produce(as...)
	waitFor(t, 30*time.Second, "two refused marks", func() bool { return refused.Load() >= 2 })
	if got := h.count(false); got != 0 {
		t.Fatalf("%d rows inserted while the marks were refused, want 0", got)
	}
	if n := logs.FilterMessageSnippet("could not mark the batch in flight").Len(); n != 1 {
		t.Errorf("logged the refused marks %d times, want once", n)
	}
	refuse.Store(false)
	h.waitRows(60*time.Second, len(as))
	waitFor(t, 30*time.Second, "the group to commit to the end", func() bool { return h.committedAll(topics.GroupRecorder) })
	if got := h.count(false); got != uint64(len(as)) {
		t.Errorf("count() without FINAL = %d, want %d", got, len(as))
	}
}

// metric reads a counter or gauge without labels from a recorder's
// /metrics.
func metric(t *testing.T, addr, name string) float64 {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("%s not in /metrics", name)
	return 0
}
