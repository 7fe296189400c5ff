package table

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// TestTableIndexesFollowChanges: after subscriptions are created, changed
// (patterns, tenant, enabled) and deleted in place, Match, Page and
// TenantLen agree with a scan of every subscription.
func TestTableIndexesFollowChanges(t *testing.T) {
	e := newTableEnv(t, 1)
	tbl := e.startTable(t)
	rng := rand.New(rand.NewPCG(1, 2))
	tenants := []string{"", "acme", "globex"}
	patterns := []string{"order.created", "order.*", "order.line.*", "*", "invoice.paid", "webhook.*"}
	events := []topics.Event{}
	for _, typ := range []string{"order.created", "order.line.added", "invoice.paid", "user.x", "webhook.endpoint.failing"} {
		for _, tenant := range tenants {
			events = append(events, topics.Event{ID: "evt_1", Type: typ, Tenant: tenant})
		}
	}
	for round := range 6 {
		for range 40 {
			id := "s" + strconv.Itoa(rng.IntN(60))
			if rng.IntN(5) == 0 {
				e.put(t, id, nil)
				continue
			}
			s := sub(t, id, patterns[rng.IntN(len(patterns))])
			if rng.IntN(3) == 0 {
				s.EventTypes = append(s.EventTypes, patterns[rng.IntN(len(patterns))])
				s.EventTypes = slices.Compact(s.EventTypes)
			}
			s.Tenant = tenants[rng.IntN(len(tenants))]
			s.Enabled = rng.IntN(4) != 0
			e.putSub(t, s)
		}
		waitCaughtUp(t, tbl)
		all := tbl.All()
		for _, ev := range events {
			var want []*topics.Subscription
			for _, s := range all {
				if s.Matches(&ev) {
					want = append(want, s)
				}
			}
			if got := tbl.Match(&ev); !slices.Equal(ids(got), ids(want)) {
				t.Fatalf("round %d: Match(%s, tenant %q) = %q, a scan finds %q", round, ev.Type, ev.Tenant, ids(got), ids(want))
			}
		}
		for _, tenant := range tenants {
			n := 0
			for _, s := range all {
				if s.Tenant == tenant {
					n++
				}
			}
			if got := tbl.TenantLen(tenant); got != n {
				t.Fatalf("round %d: TenantLen(%q) = %d, a scan finds %d", round, tenant, got, n)
			}
		}
		checkPages(t, tbl, all, "", false)
		for _, tenant := range tenants {
			checkPages(t, tbl, all, tenant, true)
		}
	}
}

// checkPages walks Page three at a time, keeping the enabled ones, and
// compares the walk with a sorted scan of all.
func checkPages(t *testing.T, tbl *Table, all []*topics.Subscription, tenant string, one bool) {
	t.Helper()
	var want []string
	for _, s := range all {
		if s.Enabled && (!one || s.Tenant == tenant) {
			want = append(want, s.ID)
		}
	}
	slices.Sort(want)
	var got []string
	after := ""
	for range len(all) + 1 {
		page, more := tbl.Page(tenant, one, after, 3, func(s *topics.Subscription) bool { return s.Enabled })
		if len(page) > 3 || (more && len(page) < 3) {
			t.Fatalf("a page of %d, more %v", len(page), more)
		}
		got = append(got, ids(page)...)
		if !more {
			break
		}
		after = page[len(page)-1].ID
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages of tenant %q (one %v): %s, want %s", tenant, one, strings.Join(got, ","), strings.Join(want, ","))
	}
}

// TestWaitCaughtUpSharesListings: callers that wait while a listing of end
// offsets is in flight share the next one: 16 callers, two listings, not 16
// (a broker answers one connection's requests in order, so each caller
// listing on its own waited for all the others).
func TestWaitCaughtUpSharesListings(t *testing.T) {
	e := newTableEnv(t, 1)
	tbl := e.startTable(t)
	e.putSub(t, sub(t, "s1", "*"))
	var listings atomic.Int32
	release := make(chan struct{})
	e.c.ControlKey(kmsg.ListOffsets.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		if listings.Add(1) == 1 {
			e.c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	const callers = 16
	errs := make(chan error, callers)
	call := func() { errs <- tbl.WaitCaughtUp(testCtx(t, catchUpTimeout)) }
	go call()
	testkit.WaitFor(t, catchUpTimeout, "the first listing at the broker", func() bool { return listings.Load() == 1 })
	for range callers - 1 {
		go call()
	}
	testkit.WaitFor(t, catchUpTimeout, "every caller waiting", func() bool {
		buf := make([]byte, 1<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "(*view).endOffsets(") == callers
	})
	close(release)
	for range callers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := listings.Load(); n != 2 {
		t.Fatalf("%d callers sent %d listings, want 2", callers, n)
	}
	if _, ok := tbl.Get("s1"); !ok {
		t.Fatal("s1 not in the table after WaitCaughtUp")
	}
}

// TestWaitAllCaughtUp: the dispatcher waits for its subscription table and
// its catalog before each batch. WaitAllCaughtUp sees what was written to
// either topic before the call, with one listing of both topics' end
// offsets a call, not one a table.
func TestWaitAllCaughtUp(t *testing.T) {
	e := newTableEnv(t, 2)
	types := &tableEnv{c: e.c, cl: e.cl, adm: e.adm, topic: "webhooks.event-types"}
	if _, err := e.adm.CreateTopic(testCtx(t, 10*time.Second), 1, -1, nil, types.topic); err != nil {
		t.Fatal(err)
	}
	tbl := e.startTable(t)
	cat := types.startKeyed(t, rules[string]{decode: decodeString})
	var mu sync.Mutex
	var listings [][]string // the topics of each listing of end offsets
	e.c.ControlKey(kmsg.ListOffsets.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		var named []string
		for _, topic := range req.(*kmsg.ListOffsetsRequest).Topics {
			if len(topic.Partitions) > 0 && topic.Partitions[0].Timestamp == -1 { // not a reset to the start (-2)
				named = append(named, topic.Topic)
			}
		}
		if named != nil {
			mu.Lock()
			listings = append(listings, named)
			mu.Unlock()
		}
		return nil, nil, false
	})
	const rounds = 5
	for i := range rounds {
		s := sub(t, "s"+strconv.Itoa(i), "*")
		e.putSub(t, s)
		types.put(t, "type"+strconv.Itoa(i), []byte("v"))
		if err := WaitAllCaughtUp(testCtx(t, catchUpTimeout), tbl, cat); err != nil {
			t.Fatal(err)
		}
		if _, ok := tbl.Get(s.ID); !ok {
			t.Fatalf("%s not in the table after WaitAllCaughtUp", s.ID)
		}
		if _, ok := cat.Get("type" + strconv.Itoa(i)); !ok {
			t.Fatalf("type%d not in the catalog after WaitAllCaughtUp", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(listings) != rounds {
		t.Fatalf("%d calls sent %d listings of end offsets, want %d: %v", rounds, len(listings), rounds, listings)
	}
	for _, named := range listings {
		slices.Sort(named)
		if !slices.Equal(named, []string{types.topic, e.topic}) {
			t.Fatalf("a listing named %v, want both topics", named)
		}
	}
}

// TestWaitApplied: a writer waits for its own record without listing end
// offsets: the record is in the table when WaitApplied returns, and a table
// that is not running never applies it (WaitApplied ends with its context).
func TestWaitApplied(t *testing.T) {
	e := newTableEnv(t, 3)
	idle := e.newTable(t)
	tbl := e.startTable(t)
	var listings atomic.Int32
	e.c.ControlKey(kmsg.ListOffsets.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		// End offsets (timestamp -1), not the consumers' resets to the
		// start (-2).
		for _, topic := range req.(*kmsg.ListOffsetsRequest).Topics {
			for _, p := range topic.Partitions {
				if p.Timestamp == -1 {
					listings.Add(1)
				}
			}
		}
		return nil, nil, false
	})
	for i := range 10 {
		s := sub(t, "s"+strconv.Itoa(i), "*")
		r := e.put(t, s.ID, subValue(t, s))
		if err := tbl.WaitApplied(testCtx(t, catchUpTimeout), r); err != nil {
			t.Fatal(err)
		}
		if got, ok := tbl.Get(s.ID); !ok || got.Secret != s.Secret {
			t.Fatalf("%s not in the table after WaitApplied", s.ID)
		}
		if i == 9 {
			ctx := testCtx(t, 50*time.Millisecond)
			if err := idle.WaitApplied(ctx, r); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("WaitApplied on a table not running = %v, want the context's deadline", err)
			}
		}
	}
	if n := listings.Load(); n != 0 {
		t.Fatalf("WaitApplied listed end offsets %d times", n)
	}
}

// TestMatchAllocatesOnlyItsResult: matching an event (the dispatcher does
// it for every one) allocates nothing but the slice it returns, with
// tenant and type names as long as real ones (a concatenated index key of
// over 32 bytes was allocated on every lookup).
func TestMatchAllocatesOnlyItsResult(t *testing.T) {
	e := newTableEnv(t, 1)
	s := sub(t, "acme", "order.fulfilment.*")
	s.Tenant = "acme-corporation-eu-west"
	e.putSub(t, s)
	tbl := e.startTable(t)
	waitCaughtUp(t, tbl)
	none := &topics.Event{ID: "evt_1", Type: "invoice.payment.succeeded", Tenant: "acme-corporation-eu-west"}
	if n := testing.AllocsPerRun(100, func() { tbl.Match(none) }); n != 0 {
		t.Errorf("an event matching nothing: %.0f allocations, want 0", n)
	}
	one := &topics.Event{ID: "evt_2", Type: "order.fulfilment.shipped", Tenant: "acme-corporation-eu-west"}
	if n := testing.AllocsPerRun(100, func() { tbl.Match(one) }); n != 1 {
		t.Errorf("an event matching one subscription: %.0f allocations, want 1 (the result)", n)
	}
}
