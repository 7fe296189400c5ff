package dispatcher

import (
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookpipe/hookpipe/topics"
)

// orderEvents renders events e<from>..e<from+n-1> of type order.created,
// spread over three ordering keys.
func orderEvents(t *testing.T, from, n int) (ids []string, values [][]byte) {
	t.Helper()
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("e%02d", i)
		ids = append(ids, id)
		values = append(values, event(t, topics.Event{ID: id, Type: "order.created", Key: fmt.Sprintf("o%d", i%3)}, `{"i":1}`))
	}
	return ids, values
}

// exactlyOnceSetup writes two subscriptions that every order event matches,
// so each event must yield exactly two deliveries. publish publishes order
// events and waits until they are dispatched.
func exactlyOnceSetup(t *testing.T, h *harness) (publish func(from, n int) []string) {
	t.Helper()
	h.sub(topics.Subscription{ID: "all", EventTypes: []string{"*"}, Enabled: true})
	h.sub(topics.Subscription{ID: "orders", EventTypes: []string{"order.*"}, Enabled: true, Ordering: topics.OrderingKey})
	return func(from, n int) []string {
		ids, values := orderEvents(t, from, n)
		h.waitDispatched(h.publish(values...))
		return ids
	}
}

// assertExactlyOnce fails unless the committed deliveries are exactly one
// per (subscription, event) for the given events.
func assertExactlyOnce(t *testing.T, h *harness, ids []string) {
	t.Helper()
	counts := map[string]int{}
	for _, d := range h.deliveries() {
		counts[pairKey(d.SubscriptionID, d.EventID)]++
	}
	for _, id := range ids {
		for _, sub := range []string{"all", "orders"} {
			if n := counts[pairKey(sub, id)]; n != 1 {
				t.Errorf("%s: %d committed deliveries, want exactly 1", pairKey(sub, id), n)
			}
		}
	}
	if len(counts) != 2*len(ids) {
		t.Errorf("%d distinct deliveries, want %d", len(counts), 2*len(ids))
	}
}

// TestExactlyOnceAcrossCrash kills dispatcher A after it produced the
// deliveries of a batch but before that batch's commit reached the broker,
// then lets dispatcher B (another process: another transactional id, same
// group) take over. Read committed, every delivery must exist exactly once.
//
// Why this fails without transactions: a dispatcher that produced the
// deliveries as plain records and then committed the events' offsets would
// have the second batch's deliveries visible at once (the test checks that
// A did write them), while its OffsetCommit is held back like A's EndTxn.
// B would then start from the first batch's offsets and produce the second
// batch's deliveries again: two committed deliveries per pair (verified by
// swapping in such a dispatcher). With the transaction, A's deliveries and
// its offset commit stay in one open transaction that the broker aborts
// when it times out; B's offset fetch waits for that (KIP-447 stable
// offsets, UNSTABLE_OFFSET_COMMIT meanwhile), then B dispatches the batch
// once. A dispatcher that never committed the first batch's offsets would
// duplicate the first batch instead.
func TestExactlyOnceAcrossCrash(t *testing.T) {
	h := newFaultHarness(t, 3)
	publish := exactlyOnceSetup(t, h)

	const idA = "dispatcher-a"
	var armed atomic.Bool
	stuck := make(chan struct{})
	var stuckOnce sync.Once
	errCrashed := errors.New("dispatcher A crashed")
	// While armed, A cannot end its transaction: neither commit nor abort
	// (an abort would also come as InitProducerID, which bumps the epoch),
	// and no one can commit offsets outside a transaction. The broker
	// never sees these requests: the connection just drops, as when a
	// process dies.
	hold := func(req kmsg.Request) (kmsg.Response, error, bool) {
		h.cluster.KeepControl()
		if !armed.Load() {
			return nil, nil, false
		}
		switch r := req.(type) {
		case *kmsg.EndTxnRequest:
			if r.TransactionalID != idA {
				return nil, nil, false
			}
			// A commit, or an abort (a produce of the batch can fail:
			// kfake has been seen to answer OUT_OF_ORDER_SEQUENCE_NUMBER):
			// either way A dies with the batch's transaction open, and
			// what it wrote (checked below) waits for the broker to abort.
			stuckOnce.Do(func() { close(stuck) })
		case *kmsg.InitProducerIDRequest:
			if r.TransactionalID == nil || *r.TransactionalID != idA {
				return nil, nil, false
			}
		case *kmsg.OffsetCommitRequest:
			stuckOnce.Do(func() { close(stuck) })
		}
		return nil, errCrashed, true
	}
	for _, key := range []kmsg.Key{kmsg.EndTxn, kmsg.InitProducerID, kmsg.OffsetCommit} {
		h.cluster.ControlKey(int16(key), hold)
	}

	cfgA := h.config(idA)
	cfgA.TransactionTimeout = 2 * time.Second // how long A's open transaction blocks B
	cfgA.ShutdownTimeout = 200 * time.Millisecond
	a := h.start(cfgA)
	first := publish(0, 6) // dispatched and committed by A

	armed.Store(true)
	second, values := orderEvents(t, 6, 6)
	h.publish(values...)
	select {
	case <-stuck:
	case <-time.After(20 * time.Second):
		t.Fatal("dispatcher A never tried to end the second batch's transaction")
	}
	if err := a.Stop(t); err != nil {
		t.Logf("dispatcher A died with: %v", err)
	}
	armed.Store(false)

	// A did write deliveries for the second batch: they are in the log,
	// uncommitted. Visible to read-committed consumers, they would be the
	// duplicates.
	written := 0
	for _, r := range h.readAll(h.names().Deliveries(), false) {
		d, err := topics.DecodeDelivery(r.Value)
		if err == nil && d.EventID >= second[0] {
			written++
		}
	}
	if written == 0 {
		t.Fatal("dispatcher A wrote no delivery of the second batch before it crashed: the test tests nothing")
	}

	h.start(h.config("dispatcher-b"))
	third := publish(12, 3)
	assertExactlyOnce(t, h, append(append(first, second...), third...))
}

// TestExactlyOnceProduceFailure fails the produce of some deliveries: the
// dispatcher must abort the transaction (its offsets uncommitted) and
// dispatch the batch again, rather than commit a batch with a delivery
// missing.
func TestExactlyOnceProduceFailure(t *testing.T) {
	h := newFaultHarness(t, 3)
	publish := exactlyOnceSetup(t, h)
	fault := h.cluster.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.Produce},
		Topic: h.names().Deliveries(),
		Err:   kerr.CorruptMessage, // not retriable: the record fails
		Count: 1,
	})
	h.start(h.config("produce-failure"))
	ids := publish(0, 9)
	if fault.Hits() == 0 {
		t.Fatal("no produce failed: the test tests nothing")
	}
	assertExactlyOnce(t, h, ids)
}

// TestExactlyOnceCommitUnconfirmed (invariant 2; ADR 0046): the
// coordinator commits a transaction and the dispatcher never learns it.
// kfake holds the dispatcher's EndTxn, another client sends the same one
// (the coordinator commits), and the dispatcher is answered
// UNKNOWN_SERVER_ERROR, as when the answer is lost with a broker that dies
// (a retry then finds it unreachable). franz-go reports no commit and
// rewinds to the offsets it last saw committed; a dispatcher that polled
// from there would dispatch the batch a second time. Every delivery must
// exist once.
func TestExactlyOnceCommitUnconfirmed(t *testing.T) {
	h := newFaultHarness(t, 3)
	publish := exactlyOnceSetup(t, h)
	const id = "unconfirmed"
	var armed atomic.Bool
	var carried atomic.Int32
	h.cluster.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		h.cluster.KeepControl()
		r := req.(*kmsg.EndTxnRequest)
		if r.TransactionalID != id || !r.Commit || !armed.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		same := *r
		var resp *kmsg.EndTxnResponse
		var err error
		h.cluster.SleepControl(func() { resp, err = same.RequestWith(h.ctx, h.cl) })
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			t.Errorf("committing the dispatcher's transaction from another client: %v", err)
		} else {
			carried.Add(1)
		}
		lost := r.ResponseKind().(*kmsg.EndTxnResponse)
		lost.ErrorCode = kerr.UnknownServerError.Code
		return lost, nil, true
	})
	h.start(h.config(id))
	first := publish(0, 6)
	armed.Store(true)
	second := publish(6, 6)
	if carried.Load() == 0 {
		t.Fatal("no commit was carried out for the dispatcher: the test tests nothing")
	}
	third := publish(12, 3) // after the second batch on every partition it used
	assertExactlyOnce(t, h, append(append(first, second...), third...))
}

// TestFencedByTransactionalID starts a second dispatcher with the first
// one's transactional id: one of them must stop with an error naming it
// once it tries to dispatch, the other go on, and every event must still
// be delivered once. On Apache Kafka the one fenced is the first: a
// producer that lost its epoch cannot take it back. kfake lets a
// producer re-initialize with a stale epoch (KIP-360 recovery, which
// Kafka allows only after a timeout), so there the first, aborting a
// produce the second fenced, can fence the second in turn.
func TestFencedByTransactionalID(t *testing.T) {
	h := newHarness(t, 3)
	publish := exactlyOnceSetup(t, h)
	a := h.start(h.config("shared-id"))
	first := publish(0, 3)
	b := h.start(h.config("shared-id"))

	// Events keep coming until one notices (its next transaction fails),
	// at most 300 of them.
	var ids []string
	// Twice in CI a fenced dispatcher's Run did not return: it logged
	// "stopping" and then waited in its deferred closes, leaving the group
	// behind a join the broker held (kafka.Leaver now bounds that at 5 s).
	// Should it stop returning again, our goroutines are logged before the
	// wait fails, to show where.
	dumpAt := time.Now().Add(25 * time.Second)
	testkit.WaitFor(t, 30*time.Second, "one of the dispatchers to stop, fenced", func() bool {
		if a.Exited() || b.Exited() {
			return true
		}
		if !dumpAt.IsZero() && time.Now().After(dumpAt) {
			dumpAt = time.Time{}
			var stacks strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 2)
			var ours []string
			for _, g := range strings.Split(stacks.String(), "\n\n") {
				if strings.Contains(g, "hookpipe/dispatcher.") && !strings.Contains(g, "TestFencedByTransactionalID") {
					ours = append(ours, g)
				}
			}
			t.Logf("neither dispatcher has stopped after 25 s; their goroutines:\n%s", strings.Join(ours, "\n\n"))
		}
		if len(ids) < 300 {
			ids = append(ids, publish(3+len(ids), 3)...)
		}
		return false
	})
	fenced, survivor := a, b
	if !a.Exited() {
		if h.cluster == nil {
			t.Fatal("on Apache Kafka the second dispatcher stopped: the first, fenced, took the transactional id back")
		}
		fenced, survivor = b, a
	}
	err := fenced.Err()
	if err == nil {
		t.Fatal("the fenced dispatcher returned nil")
	}
	if !strings.Contains(err.Error(), "shared-id") {
		t.Errorf("error %q does not name the transactional id", err)
	}
	// The survivor dispatches what follows, and what the fenced one left.
	ids = append(ids, publish(3+len(ids), 3)...)
	assertExactlyOnce(t, h, append(first, ids...))
	if survivor.Exited() {
		t.Fatalf("the other dispatcher stopped too: %v", survivor.Err())
	}
}
