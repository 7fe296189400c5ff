package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/topics"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// catchUpTimeout bounds every WaitCaughtUp that is expected to succeed:
// only a failure takes it all (5 s was once too short in CI, under -race
// beside the other packages' tests).
const catchUpTimeout = 30 * time.Second

// tableEnv is a kfake cluster with a compacted subscriptions topic and a
// producer on it.
type tableEnv struct {
	c     *kfake.Cluster
	cl    *kgo.Client // producer, like webhookctl
	adm   *kadm.Client
	topic string
}

func newTableEnv(tb testing.TB, partitions int32) *tableEnv {
	tb.Helper()
	c, cl, adm := newCluster(tb)
	e := &tableEnv{c: c, cl: cl, adm: adm, topic: "webhooks.subscriptions"}
	compact := "compact"
	r, err := adm.CreateTopic(testCtx(tb, 10*time.Second), partitions, -1,
		map[string]*string{"cleanup.policy": &compact}, e.topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		tb.Fatalf("create %s: %v", e.topic, err)
	}
	return e
}

// newTable builds a table on the topic without running it.
func (e *tableEnv) newTable(tb testing.TB) *Table {
	tb.Helper()
	tbl, err := NewTable([]kgo.Opt{kgo.SeedBrokers(e.c.ListenAddrs()...)}, e.topic, testKeys(tb), zap.NewNop())
	if err != nil {
		tb.Fatalf("NewTable: %v", err)
	}
	tb.Cleanup(tbl.Close)
	return tbl
}

// startTable builds a table and runs it until the end of the test.
func (e *tableEnv) startTable(tb testing.TB) *Table {
	tb.Helper()
	tbl := e.newTable(tb)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tbl.Run(ctx)
	}()
	// Registered after newTable's Close, so this runs first: stop Run, then
	// close the client.
	tb.Cleanup(func() {
		cancel()
		if !waitDone(done, 5*time.Second) {
			tb.Errorf("Table.Run did not return after its context was cancelled")
		}
	})
	return tbl
}

// put produces a record synchronously; a nil value is a tombstone.
func (e *tableEnv) put(tb testing.TB, key string, value []byte) *kgo.Record {
	tb.Helper()
	r, err := e.cl.ProduceSync(testCtx(tb, 10*time.Second), &kgo.Record{Topic: e.topic, Key: []byte(key), Value: value}).First()
	if err != nil {
		tb.Fatalf("produce %s: %v", key, err)
	}
	return r
}

func (e *tableEnv) putSub(tb testing.TB, s topics.Subscription) {
	tb.Helper()
	e.put(tb, s.ID, subValue(tb, s))
}

func subValue(tb testing.TB, s topics.Subscription) []byte {
	tb.Helper()
	if err := s.Validate(); err != nil {
		tb.Fatalf("test subscription %s is invalid: %v", s.ID, err)
	}
	return s.EncodeWith(testKeys(tb))
}

// sub returns a valid enabled subscription with the given id and patterns.
func sub(tb testing.TB, id string, patterns ...string) topics.Subscription {
	tb.Helper()
	return topics.Subscription{
		ID: id, URL: "https://example.com/" + id, EventTypes: patterns, Enabled: true, Secret: mustSecret(tb),
	}
}

func waitCaughtUp(tb testing.TB, tbl *Table) {
	tb.Helper()
	if err := tbl.WaitCaughtUp(testCtx(tb, catchUpTimeout)); err != nil {
		tb.Fatalf("WaitCaughtUp: %v", err)
	}
}

func ids(subs []*topics.Subscription) []string {
	out := make([]string, 0, len(subs))
	for _, s := range subs {
		out = append(out, s.ID)
	}
	slices.Sort(out)
	return out
}

// state renders the whole table, for comparing two tables.
func state(tb testing.TB, tbl *Table) map[string]string {
	tb.Helper()
	out := map[string]string{}
	for _, s := range tbl.All() {
		b, err := json.Marshal(s)
		if err != nil {
			tb.Fatal(err)
		}
		out[s.ID] = string(b)
	}
	return out
}

func TestTableLoadsSubscriptions(t *testing.T) {
	for _, parts := range []int32{1, 3} {
		t.Run(fmt.Sprintf("%d partitions", parts), func(t *testing.T) {
			e := newTableEnv(t, parts)
			want := map[string]topics.Subscription{}
			for i, patterns := range [][]string{{"order.created"}, {"order.*"}, {"*"}, {"invoice.paid", "invoice.*"}} {
				s := sub(t, fmt.Sprintf("sub_%d", i), patterns...)
				want[s.ID] = s
				e.putSub(t, s)
			}
			// Written before the table starts: it must read from the start.
			tbl := e.startTable(t)
			waitCaughtUp(t, tbl)

			if tbl.Len() != len(want) {
				t.Fatalf("Len = %d, want %d", tbl.Len(), len(want))
			}
			if got := ids(tbl.All()); !slices.Equal(got, []string{"sub_0", "sub_1", "sub_2", "sub_3"}) {
				t.Fatalf("All = %q", got)
			}
			for id, w := range want {
				got, ok := tbl.Get(id)
				if !ok {
					t.Fatalf("Get(%s): missing", id)
				}
				if got.URL != w.URL || got.Secret != w.Secret || !slices.Equal(got.EventTypes, w.EventTypes) {
					t.Fatalf("Get(%s) = %+v, want %+v", id, got, w)
				}
			}
			if _, ok := tbl.Get("sub_404"); ok {
				t.Fatal("Get of an unknown id succeeded")
			}
			if got := ids(tbl.Match(&topics.Event{ID: "e", Type: "order.created"})); !slices.Equal(got, []string{"sub_0", "sub_1", "sub_2"}) {
				t.Fatalf("Match(order.created) = %q", got)
			}
		})
	}
}

func TestTableUpdatesAndDeletes(t *testing.T) {
	e := newTableEnv(t, 1)
	tbl := e.startTable(t)
	waitCaughtUp(t, tbl)

	a := sub(t, "sub_a", "order.created")
	e.putSub(t, a)
	e.putSub(t, sub(t, "sub_b", "*"))
	waitCaughtUp(t, tbl)
	if tbl.Len() != 2 {
		t.Fatalf("Len = %d, want 2", tbl.Len())
	}

	t.Run("update replaces", func(t *testing.T) {
		a2 := a
		a2.URL = "https://example.com/v2"
		a2.EventTypes = []string{"invoice.paid"}
		e.putSub(t, a2)
		waitCaughtUp(t, tbl)
		got, ok := tbl.Get("sub_a")
		if !ok || got.URL != a2.URL || !slices.Equal(got.EventTypes, a2.EventTypes) {
			t.Fatalf("Get(sub_a) = %+v, %v; want the update", got, ok)
		}
		if tbl.Len() != 2 {
			t.Fatalf("Len = %d after an update, want 2", tbl.Len())
		}
		// The index follows the update: old pattern gone, new one in.
		if got := ids(tbl.Match(&topics.Event{ID: "e", Type: "order.created"})); !slices.Equal(got, []string{"sub_b"}) {
			t.Fatalf("Match(order.created) = %q after the update, want [sub_b]", got)
		}
		if got := ids(tbl.Match(&topics.Event{ID: "e", Type: "invoice.paid"})); !slices.Equal(got, []string{"sub_a", "sub_b"}) {
			t.Fatalf("Match(invoice.paid) = %q after the update", got)
		}
	})

	t.Run("disable removes from Match, not from Get", func(t *testing.T) {
		b := sub(t, "sub_b", "*")
		b.Enabled = false
		e.putSub(t, b)
		waitCaughtUp(t, tbl)
		if got, ok := tbl.Get("sub_b"); !ok || got.Enabled {
			t.Fatalf("Get(sub_b) = %+v, %v; want disabled", got, ok)
		}
		if got := ids(tbl.Match(&topics.Event{ID: "e", Type: "invoice.paid"})); !slices.Equal(got, []string{"sub_a"}) {
			t.Fatalf("Match = %q, want [sub_a]", got)
		}
	})

	t.Run("tombstone deletes", func(t *testing.T) {
		e.put(t, "sub_a", nil)
		waitCaughtUp(t, tbl)
		if _, ok := tbl.Get("sub_a"); ok {
			t.Fatal("sub_a still present after its tombstone")
		}
		if tbl.Len() != 1 || len(tbl.All()) != 1 {
			t.Fatalf("Len = %d, All = %q; want only sub_b", tbl.Len(), ids(tbl.All()))
		}
		if got := tbl.Match(&topics.Event{ID: "e", Type: "invoice.paid"}); len(got) != 0 {
			t.Fatalf("Match = %q after the delete, want none", ids(got))
		}
	})

	t.Run("tombstone of an unknown id is harmless", func(t *testing.T) {
		e.put(t, "sub_never", nil)
		waitCaughtUp(t, tbl)
		if tbl.Len() != 1 {
			t.Fatalf("Len = %d, want 1", tbl.Len())
		}
	})

	t.Run("re-create after delete", func(t *testing.T) {
		e.putSub(t, sub(t, "sub_a", "order.*"))
		waitCaughtUp(t, tbl)
		if _, ok := tbl.Get("sub_a"); !ok {
			t.Fatal("sub_a not re-created")
		}
	})
}

func TestTableIgnoresBadRecords(t *testing.T) {
	e := newTableEnv(t, 1)
	tbl := e.startTable(t)
	good := sub(t, "sub_1", "order.*")
	e.putSub(t, good)
	waitCaughtUp(t, tbl)

	other := sub(t, "sub_2", "*")
	badURL := sub(t, "sub_1", "*")
	badURL.URL = "ftp://example.com/"
	badURLValue, _ := json.Marshal(badURL)
	for _, tc := range []struct {
		name  string
		key   string
		value []byte
	}{
		{"not JSON", "sub_1", []byte("{not json")},
		{"empty value", "sub_1", []byte{}},
		{"unknown field", "sub_1", []byte(`{"id":"sub_1","url":"https://e.com/","event_types":["*"],"secret":"` + good.Secret + `","x":1}`)},
		{"invalid subscription", "sub_1", badURLValue},
		{"key differs from id", "sub_1", subValue(t, other)},
		{"invalid record under a new key", "sub_3", []byte(`{"id":"sub_3"}`)},
		{"id of an existing subscription under another key", "sub_4", subValue(t, good)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.put(t, tc.key, tc.value)
			waitCaughtUp(t, tbl)
			got, ok := tbl.Get("sub_1")
			if !ok || got.URL != good.URL || !slices.Equal(got.EventTypes, good.EventTypes) {
				t.Fatalf("Get(sub_1) = %+v, %v; want the previous state", got, ok)
			}
			if got := ids(tbl.All()); !slices.Equal(got, []string{"sub_1"}) {
				t.Fatalf("All = %q, want [sub_1]", got)
			}
		})
	}
	// Still live: a valid record after the bad ones is applied.
	e.putSub(t, other)
	waitCaughtUp(t, tbl)
	if _, ok := tbl.Get("sub_2"); !ok {
		t.Fatal("valid record after bad ones not applied")
	}
}

func TestTableWaitCaughtUpEmptyTopic(t *testing.T) {
	for _, parts := range []int32{1, 3} {
		t.Run(fmt.Sprintf("%d partitions", parts), func(t *testing.T) {
			e := newTableEnv(t, parts)
			t.Run("running", func(t *testing.T) {
				tbl := e.startTable(t)
				waitCaughtUp(t, tbl)
				if tbl.Len() != 0 {
					t.Fatalf("Len = %d", tbl.Len())
				}
			})
			t.Run("not running", func(t *testing.T) {
				// Nothing to apply: no need for Run.
				waitCaughtUp(t, e.newTable(t))
			})
		})
	}
}

// The dispatcher's promise (docs/webhookctl.md): an event produced after
// `subscriptions create` returns is matched against the new subscription,
// because the dispatcher calls WaitCaughtUp before each batch.
func TestTableWaitCaughtUpSeesPrecedingWrite(t *testing.T) {
	for _, parts := range []int32{1, 4} {
		t.Run(fmt.Sprintf("%d partitions", parts), func(t *testing.T) {
			e := newTableEnv(t, parts)
			tbl := e.startTable(t)
			for i := range 20 {
				s := sub(t, fmt.Sprintf("sub_%d", i), "order.created")
				e.putSub(t, s)
				waitCaughtUp(t, tbl)
				got, ok := tbl.Get(s.ID)
				if !ok || got.Secret != s.Secret {
					t.Fatalf("iteration %d: Get(%s) = %v, %v right after WaitCaughtUp", i, s.ID, got, ok)
				}
				if n := len(tbl.Match(&topics.Event{ID: "e", Type: "order.created"})); n != i+1 {
					t.Fatalf("iteration %d: Match found %d subscriptions, want %d", i, n, i+1)
				}
			}
		})
	}
}

func TestTableWaitCaughtUpRespectsContext(t *testing.T) {
	e := newTableEnv(t, 1)
	e.putSub(t, sub(t, "sub_1", "*"))
	// Not running: the table never catches up, so only ctx can end the wait.
	tbl := e.newTable(t)

	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := tbl.WaitCaughtUp(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitCaughtUp = %v, want a deadline error", err)
		}
	})
	t.Run("cancel while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- tbl.WaitCaughtUp(ctx) }()
		// It must still be waiting: nothing can catch it up.
		select {
		case err := <-errc:
			t.Fatalf("WaitCaughtUp returned %v before its context was cancelled", err)
		default:
		}
		cancel()
		timer := time.NewTimer(5 * time.Second)
		defer timer.Stop()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("WaitCaughtUp = %v, want context.Canceled", err)
			}
		case <-timer.C:
			t.Fatal("WaitCaughtUp ignored the cancellation")
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := tbl.WaitCaughtUp(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("WaitCaughtUp with a cancelled context = %v, want context.Canceled", err)
		}
	})
}

// countRecords reads the topic from the start with a fresh consumer and
// returns how many records it holds now.
func countRecords(tb testing.TB, e *tableEnv) int {
	tb.Helper()
	ctx := testCtx(tb, 10*time.Second)
	ends, err := e.adm.ListEndOffsets(ctx, e.topic)
	if err != nil || ends.Error() != nil {
		tb.Fatalf("end offsets: %v %v", err, ends.Error())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.c.ListenAddrs()...), kgo.ConsumeTopics(e.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	n := 0
	next := map[int32]int64{}
	caughtUp := func() bool {
		ok := true
		ends.Each(func(o kadm.ListedOffset) {
			if next[o.Partition] < o.Offset {
				ok = false
			}
		})
		return ok
	}
	for !caughtUp() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			tb.Fatalf("reading %s: %v", e.topic, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			next[r.Partition] = r.Offset + 1
		})
	}
	return n
}

func TestTableAfterCompaction(t *testing.T) {
	e := newTableEnv(t, 1)
	live := e.startTable(t)

	s1 := sub(t, "sub_1", "order.*")
	s1v2 := s1
	s1v2.URL = "https://example.com/v2"
	s3 := sub(t, "sub_3", "*")
	s3off := s3
	s3off.Enabled = false
	// One batch per record (ProduceSync each), so compaction can drop
	// every superseded one; kfake never compacts the last batch.
	e.putSub(t, s1)
	e.putSub(t, sub(t, "sub_2", "invoice.paid"))
	e.putSub(t, s1v2)
	e.putSub(t, s3)
	e.put(t, "sub_2", nil)
	e.putSub(t, s3off)
	e.putSub(t, sub(t, "sub_4", "order.created"))
	const produced = 7
	waitCaughtUp(t, live)
	before := state(t, live)
	if got := ids(live.All()); !slices.Equal(got, []string{"sub_1", "sub_3", "sub_4"}) {
		t.Fatalf("before compaction All = %q", got)
	}

	if n := countRecords(t, e); n != produced {
		t.Fatalf("topic holds %d records before compaction, want %d", n, produced)
	}
	e.c.Compact()
	if n := countRecords(t, e); n >= produced {
		t.Fatalf("topic holds %d records after Compact, want fewer than %d: the test would not exercise compaction", n, produced)
	}

	fresh := e.startTable(t)
	waitCaughtUp(t, fresh)
	after := state(t, fresh)
	if len(after) != len(before) {
		t.Fatalf("after compaction the table has %d subscriptions, before %d", len(after), len(before))
	}
	for id, v := range before {
		if after[id] != v {
			t.Errorf("%s after compaction = %s\nbefore = %s", id, after[id], v)
		}
	}
	if got, _ := fresh.Get("sub_1"); got == nil || got.URL != s1v2.URL {
		t.Errorf("sub_1 after compaction = %+v, want the update", got)
	}
	if _, ok := fresh.Get("sub_2"); ok {
		t.Error("deleted sub_2 reappeared after compaction")
	}
	if got := ids(fresh.Match(&topics.Event{ID: "e", Type: "order.created"})); !slices.Equal(got, []string{"sub_1", "sub_4"}) {
		t.Errorf("Match after compaction = %q", got)
	}

	// The live table keeps working on the compacted topic.
	e.putSub(t, sub(t, "sub_5", "*"))
	waitCaughtUp(t, live)
	waitCaughtUp(t, fresh)
	if live.Len() != 4 || fresh.Len() != 4 {
		t.Fatalf("after a new write: live Len %d, fresh Len %d, want 4", live.Len(), fresh.Len())
	}
}

func TestTableMatch(t *testing.T) {
	e := newTableEnv(t, 1)
	subs := []topics.Subscription{
		sub(t, "exact", "order.created"),
		sub(t, "prefix", "order.*"),
		sub(t, "nested", "order.line.*"),
		sub(t, "all", "*"),
		sub(t, "overlap", "order.*", "order.created", "*", "order.line.*"),
		sub(t, "invoices", "invoice.paid", "invoice.voided"),
		func() topics.Subscription {
			s := sub(t, "disabled", "*", "order.created", "order.*")
			s.Enabled = false
			return s
		}(),
		func() topics.Subscription { s := sub(t, "acme", "order.*"); s.Tenant = "acme"; return s }(),
		func() topics.Subscription { s := sub(t, "acme_all", "*"); s.Tenant = "acme"; return s }(),
		func() topics.Subscription { s := sub(t, "globex", "order.created"); s.Tenant = "globex"; return s }(),
	}
	for _, s := range subs {
		e.putSub(t, s)
	}
	tbl := e.startTable(t)
	waitCaughtUp(t, tbl)

	for _, tc := range []struct {
		name   string
		event  topics.Event
		expect []string
	}{
		{"exact and prefix and star", topics.Event{Type: "order.created"}, []string{"all", "exact", "overlap", "prefix"}},
		{"prefix only", topics.Event{Type: "order.paid"}, []string{"all", "overlap", "prefix"}},
		{"nested prefix", topics.Event{Type: "order.line.added"}, []string{"all", "nested", "overlap", "prefix"}},
		{"prefix itself does not match", topics.Event{Type: "order"}, []string{"all", "overlap"}},
		{"similar prefix does not match", topics.Event{Type: "orders.created"}, []string{"all", "overlap"}},
		{"second exact pattern", topics.Event{Type: "invoice.voided"}, []string{"all", "invoices", "overlap"}},
		{"only star", topics.Event{Type: "user.signed_up"}, []string{"all", "overlap"}},
		{"tenant acme", topics.Event{Type: "order.created", Tenant: "acme"}, []string{"acme", "acme_all", "all", "exact", "overlap", "prefix"}},
		{"tenant acme, other type", topics.Event{Type: "user.x", Tenant: "acme"}, []string{"acme_all", "all", "overlap"}},
		{"tenant globex", topics.Event{Type: "order.created", Tenant: "globex"}, []string{"all", "exact", "globex", "overlap", "prefix"}},
		{"other tenant", topics.Event{Type: "order.created", Tenant: "initech"}, []string{"all", "exact", "overlap", "prefix"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.event.ID = "evt_1"
			got := tbl.Match(&tc.event)
			if ids := ids(got); !slices.Equal(ids, tc.expect) {
				t.Fatalf("Match(%s, tenant %q) = %q, want %q", tc.event.Type, tc.event.Tenant, ids, tc.expect)
			}
			// Each at most once (ids() sorts, so a duplicate would show
			// above, but check by pointer too).
			seen := map[*topics.Subscription]bool{}
			for _, s := range got {
				if seen[s] {
					t.Fatalf("%s returned twice", s.ID)
				}
				seen[s] = true
				if !s.Matches(&tc.event) {
					t.Fatalf("%s returned but does not match", s.ID)
				}
			}
			// Match agrees with a brute-force scan of All.
			var brute []*topics.Subscription
			for _, s := range tbl.All() {
				if s.Matches(&tc.event) {
					brute = append(brute, s)
				}
			}
			if !slices.Equal(ids(brute), ids(got)) {
				t.Fatalf("Match = %q, scan of All = %q", ids(got), ids(brute))
			}
		})
	}
}

// Readers see immutable snapshots: reading while the table applies updates
// must be race-free (run with -race) and never show a half-applied batch.
func TestTableConcurrentReads(t *testing.T) {
	e := newTableEnv(t, 1)
	tbl := e.startTable(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := &topics.Event{ID: "e", Type: "order.created"}
			for ctx.Err() == nil {
				for _, s := range tbl.Match(ev) {
					_ = s.URL
				}
				_ = tbl.All()
				_, _ = tbl.Get("sub_1")
				_ = tbl.Len()
			}
		}()
	}
	for i := range 10 {
		e.putSub(t, sub(t, fmt.Sprintf("sub_%d", i%3), "order.*"))
		if i%4 == 3 {
			e.put(t, fmt.Sprintf("sub_%d", i%3), nil)
		}
	}
	waitCaughtUp(t, tbl)
	cancel()
	wg.Wait()
}

// putInTransaction writes s in a transaction of its own, committed or
// aborted as end says.
func (e *tableEnv) putInTransaction(t *testing.T, s topics.Subscription, end kgo.TransactionEndTry) {
	t.Helper()
	txn, err := kgo.NewClient(kgo.SeedBrokers(e.c.ListenAddrs()...), kgo.TransactionalID("webhookctl-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	ctx := testCtx(t, 10*time.Second)
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Topic: e.topic, Key: []byte(s.ID), Value: subValue(t, s)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, end); err != nil {
		t.Fatal(err)
	}
}

// A producer may write subscriptions in a Kafka transaction. The commit
// marker then takes the last offset of the partition; it is never returned
// as a record, yet WaitCaughtUp must not wait for it forever.
func TestTableWaitCaughtUpAfterTransactionalWrite(t *testing.T) {
	e := newTableEnv(t, 1)
	tbl := e.startTable(t)
	s := sub(t, "sub_tx", "*")
	e.putInTransaction(t, s, kgo.TryCommit)
	waitCtx, cancel := context.WithTimeout(context.Background(), catchUpTimeout)
	defer cancel()
	if err := tbl.WaitCaughtUp(waitCtx); err != nil {
		t.Fatalf("WaitCaughtUp after a committed transactional write: %v", err)
	}
	if _, ok := tbl.Get(s.ID); !ok {
		t.Fatal("committed transactional subscription not applied")
	}
}

// Records of an aborted transaction were never written, as far as readers of
// committed data are concerned; the table must not apply them.
func TestTableIgnoresAbortedTransactions(t *testing.T) {
	e := newTableEnv(t, 1)
	tbl := e.startTable(t)
	aborted := sub(t, "sub_aborted", "*")
	e.putInTransaction(t, aborted, kgo.TryAbort)
	e.putSub(t, sub(t, "sub_ok", "*")) // a plain record after the abort marker
	waitCaughtUp(t, tbl)
	if _, ok := tbl.Get("sub_ok"); !ok {
		t.Fatal("sub_ok not applied")
	}
	if _, ok := tbl.Get(aborted.ID); ok {
		t.Fatal("a subscription from an aborted transaction was applied")
	}
}

// Run must end when the table's client is closed, not spin on
// ErrClientClosed until its context ends.
func TestTableRunReturnsAfterClose(t *testing.T) {
	e := newTableEnv(t, 1)
	tbl, err := NewTable([]kgo.Opt{kgo.SeedBrokers(e.c.ListenAddrs()...)}, e.topic, testKeys(t), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tbl.Run(ctx)
	}()
	waitCaughtUp(t, tbl)
	tbl.Close()
	if !waitDone(done, 2*time.Second) {
		cancel() // stop the spinning loop before failing
		<-done
		t.Fatal("Table.Run kept running (spinning on a closed client) after Close")
	}
}

// A transaction still open when WaitCaughtUp is called has written nothing
// yet as far as committed readers go: its records must not be applied, and
// WaitCaughtUp must not wait for it to end (that could take the whole
// transaction timeout and stall the dispatcher).
func TestTableOpenTransaction(t *testing.T) {
	e := newTableEnv(t, 1)
	tbl := e.startTable(t)
	e.putSub(t, sub(t, "sub_before", "*"))
	txn, err := kgo.NewClient(kgo.SeedBrokers(e.c.ListenAddrs()...), kgo.TransactionalID("webhookctl-open"))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	ctx := testCtx(t, 10*time.Second)
	open := sub(t, "sub_open", "*")
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = txn.EndTransaction(ctx, kgo.TryAbort) }()
	if err := txn.ProduceSync(ctx, &kgo.Record{Topic: e.topic, Key: []byte(open.ID), Value: subValue(t, open)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(context.Background(), catchUpTimeout)
	defer cancel()
	if err := tbl.WaitCaughtUp(waitCtx); err != nil {
		t.Fatalf("WaitCaughtUp with an open transaction on the topic: %v", err)
	}
	if _, ok := tbl.Get("sub_before"); !ok {
		t.Fatal("sub_before, committed before the call, not applied")
	}
	if _, ok := tbl.Get(open.ID); ok {
		t.Fatal("a subscription from a transaction that is still open was applied")
	}
}

// TestTableSecrets: the table opens sealed secrets, accepts plaintext ones
// with one warning, and ignores (with a warning naming no secret) records it
// cannot open, keeping the previous state.
func TestTableSecrets(t *testing.T) {
	e := newTableEnv(t, 1)
	core, logs := observer.New(zapcore.DebugLevel)
	tbl, err := NewTable([]kgo.Opt{kgo.SeedBrokers(e.c.ListenAddrs()...)}, e.topic, testKeys(t), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tbl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; tbl.Close() })

	sealed := rotated(t, "sub_sealed")
	plain1, plain2 := rotated(t, "sub_plain1"), rotated(t, "sub_plain2")
	foreign := rotated(t, "sub_foreign")
	copied := rotated(t, "sub_copied")
	e.put(t, sealed.ID, sealed.EncodeWith(testKeys(t)))
	e.put(t, plain1.ID, plain1.Encode())
	e.put(t, plain2.ID, plain2.Encode())
	e.put(t, copied.ID, copied.EncodeWith(testKeys(t)))
	e.put(t, foreign.ID, foreign.EncodeWith(mustKeyring(t, keyB)))
	m := storedSecrets(t, copied.EncodeWith(testKeys(t)))
	m["secret"] = storedSecrets(t, sealed.EncodeWith(testKeys(t)))["secret"]
	b, _ := json.Marshal(m)
	e.put(t, copied.ID, b)
	waitCaughtUp(t, tbl)

	for _, want := range []topics.Subscription{sealed, plain1, plain2, copied} {
		got, ok := tbl.Get(want.ID)
		if !ok || got.Secret != want.Secret || got.PreviousSecret != want.PreviousSecret {
			t.Errorf("Get(%s) = %v, %v; want its secrets opened (copied: the state before the bad record)", want.ID, got != nil, ok)
		}
	}
	if _, ok := tbl.Get(foreign.ID); ok {
		t.Error("a record sealed with an unknown key was applied")
	}
	if n := logs.FilterMessageSnippet("plaintext").Len(); n != 1 {
		t.Errorf("%d plaintext warnings, want 1", n)
	}
	if n := logs.FilterMessage("ignoring invalid record").Len(); n != 2 {
		t.Errorf("%d ignored records logged, want 2 (unknown key, copied ciphertext)", n)
	}
	var all strings.Builder
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	for _, l := range logs.All() {
		buf, err := enc.EncodeEntry(l.Entry, l.Context)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(buf.Bytes())
	}
	for _, s := range []topics.Subscription{sealed, plain1, plain2, foreign, copied} {
		for _, sec := range []string{s.Secret, s.PreviousSecret} {
			if strings.Contains(all.String(), strings.TrimPrefix(sec, topics.SecretPrefix)[:12]) {
				t.Fatalf("a secret is in the logs:\n%s", all.String())
			}
		}
	}
	if !strings.Contains(all.String(), keyBID) {
		t.Errorf("the warning does not name the unknown key id %s:\n%s", keyBID, all.String())
	}
}

func TestNewTableWarnsWithoutKeys(t *testing.T) {
	e := newTableEnv(t, 1)
	core, logs := observer.New(zapcore.WarnLevel)
	tbl, err := NewTable([]kgo.Opt{kgo.SeedBrokers(e.c.ListenAddrs()...)}, e.topic, nil, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	tbl.Close()
	if logs.FilterMessageSnippet(config.EnvSecretsKey).Len() != 1 {
		t.Fatalf("logs %v, want one warning naming %s", logs.All(), config.EnvSecretsKey)
	}
}
