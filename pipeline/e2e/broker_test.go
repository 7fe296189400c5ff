package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/pipeline/internal/stack"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// ownKafka is an Apache Kafka broker of one test's own, started with
// pipeline/scripts/services.sh: the faults below stop it, which the other
// tests sharing the suite's broker must not see.
type ownKafka struct {
	t    testing.TB
	port int
	dir  string
}

// startOwnKafka starts a broker for the test; it needs Apache Kafka
// installed (services.sh install-kafka), which make test and make bench do.
func startOwnKafka(t testing.TB) *ownKafka {
	t.Helper()
	// Three ports in a row (PLAINTEXT, SASL_SSL, controller), free now.
	port := testkit.FreePorts(t, 3)
	k := &ownKafka{t: t, port: port, dir: t.TempDir()}
	k.run("start", "kafka", strconv.Itoa(port), k.dir)
	t.Cleanup(func() {
		k.run("stop", "kafka", k.dir)
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(k.dir, "kafka.out"))
			t.Logf("--- broker log ---\n%s", tail(b, 6000))
		}
	})
	return k
}

func (k *ownKafka) brokers() []string { return []string{"127.0.0.1:" + strconv.Itoa(k.port)} }

// pid is the broker's process id.
func (k *ownKafka) pid() int {
	k.t.Helper()
	b, err := os.ReadFile(filepath.Join(k.dir, "kafka.pid"))
	if err != nil {
		k.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		k.t.Fatal(err)
	}
	return pid
}

// run runs services.sh with args, failing the test if it fails.
func (k *ownKafka) run(args ...string) {
	k.t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "services.sh")
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		k.t.Fatalf("services.sh %v: %v\n%s", args, err, out)
	}
}

// TestBrokerKilledMidStream (invariants 1, 2 and 4): the broker killed with
// SIGKILL while events flow and started again on its data, and stopped
// cleanly (SIGTERM) and started again: the components (processes, as
// deployed) keep running through it, every event arrives at both
// subscriptions, the ordered one's first arrivals in publish order per key,
// and fan-out stays exactly once; and stopped cleanly with the dispatcher
// killed as soon as the broker is back and replaced by a new one (a new
// transactional id), which must end a transaction the old one may have
// left open on the group's offsets (ADR 0045), or its group dispatches
// nothing again. Duplicates and the time
// from the restart to the next delivery are logged.
func TestBrokerKilledMidStream(t *testing.T) {
	if _, ok := testkit.ApacheKafka(t); !ok {
		t.Skip("stops and restarts a broker on its data, which kfake cannot: runs on Apache Kafka (WEBHOOKS_TEST_KAFKA=apache)")
	}
	for _, stop := range []string{"kill", "stop"} {
		t.Run(stop, func(t *testing.T) { brokerRestartedMidStream(t, stop, false) })
	}
	t.Run("stop-replaced", func(t *testing.T) { brokerRestartedMidStream(t, "stop", true) })
}

// brokerRestartedMidStream is TestBrokerKilledMidStream with the broker
// stopped by services.sh's kill (SIGKILL) or stop (SIGTERM), and with
// replace the dispatcher killed once the broker is back and a new one
// started.
func brokerRestartedMidStream(t *testing.T, stop string, replace bool) {
	k := startOwnKafka(t)
	e := newEnvOn(t, k.brokers(), func() {}, nil)
	bin := binaries(t)
	r := newReceiver(t)
	e.subscribePair(r, "*", nil)
	dispatcher := e.startProc(filepath.Join(bin, "dispatcher"), "dispatcher")
	dispatchers := []*stack.Process{dispatcher}
	procs := map[string]interface{ Done() <-chan struct{} }{
		"dispatcher": dispatcher,
		"deliverer":  e.startProc(filepath.Join(bin, "deliverer"), "deliverer"),
		"retrier":    e.startProc(filepath.Join(bin, "retrier"), "retrier"),
	}

	const n, keys, batch = 2000, 100, 50
	evs := keyedEvents(n, keys, "order.updated")
	// Published in batches, the broker's outage in the middle: the
	// producer waits it out (kgo retries until the broker is back).
	published, done := publishPaced(e, evs, batch, 100*time.Millisecond)
	wait(t, 60*time.Second, "a third of the deliveries", func() bool { return r.count() >= 2*n/3 })
	k.run(stop, "kafka", k.dir)
	killedAt := published.Load()
	k.run("start", "kafka", strconv.Itoa(k.port), k.dir)
	if replace {
		// Before the old one's own repair (two looks 10 s apart) can run.
		if err := dispatcher.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-dispatcher.Done()
		dispatchers = append(dispatchers, e.startProc(filepath.Join(bin, "dispatcher"), "dispatcher"))
		procs["dispatcher"] = dispatchers[1]
	}
	restarted, before := time.Now(), r.count()
	wait(t, 120*time.Second, "a delivery after the restart", func() bool { return r.count() > before })
	recovered := time.Since(restarted)
	wait(t, 60*time.Second, "every event published", testkit.Done(done))
	waitEveryEvent(t, e, r, evs, 180*time.Second)
	for name, p := range procs {
		select {
		case <-p.Done():
			t.Errorf("the %s exited during the broker's outage", name)
		default:
		}
	}
	dups := duplicates(r)
	t.Logf("broker stopped (%s) after %d of %d events were published and %d deliveries made; first delivery %v after the restart; duplicates: ordered %d, unordered %d; lost 0; marker repairs logged: %d",
		stop, killedAt, n, before, recovered.Round(time.Millisecond), dups["ordered"], dups["unordered"], markerRepairs(t, dispatchers))
	assertKeyOrder(t, r, keys)
	assertFannedOutOnce(t, e, n*2)
}

// markerRepairs counts the transactions the dispatchers' logs say they
// ended again (ADR 0045).
func markerRepairs(t *testing.T, dispatchers []*stack.Process) int {
	n := 0
	for _, p := range dispatchers {
		b, err := os.ReadFile(p.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		n += bytes.Count(b, []byte("wrote its marker again")) + bytes.Count(b, []byte("committed it there"))
	}
	return n
}

// TestDispatcherThroughBrokerKills (invariant 2): the broker SIGKILLed and
// started again on its data four times while events are published without
// pause, so that the kills find the dispatcher (a process) at work, most
// with a transaction open; afterwards every event published is fanned out
// to both subscriptions, once. A dispatcher that rewinds wrongly after a
// transaction the outage aborted loses events; one that commits them twice
// duplicates them; one whose next transaction can write before the last
// one's markers loses the committed one to its abort and stalls its group
// (docs/adr/0043-transactions-v1.md).
func TestDispatcherThroughBrokerKills(t *testing.T) {
	if _, ok := testkit.ApacheKafka(t); !ok {
		t.Skip("kills and restarts a broker on its data, which kfake cannot: runs on Apache Kafka (WEBHOOKS_TEST_KAFKA=apache)")
	}
	k := startOwnKafka(t)
	e := newEnvOn(t, k.brokers(), func() {}, nil)
	r := newReceiver(t)
	e.subscribePair(r, "*", nil)
	e.startProc(filepath.Join(binaries(t), "dispatcher"), "dispatcher")

	var published atomic.Int64
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- publishUntil(e, stop, &published) }()
	for kill := range 4 {
		at := published.Load()
		wait(t, 60*time.Second, "events published since the last restart", func() bool { return published.Load() >= at+400 })
		k.run("kill", "kafka", k.dir)
		k.run("start", "kafka", strconv.Itoa(k.port), k.dir)
		t.Logf("kill %d after %d events published", kill+1, published.Load())
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	n := int(published.Load())
	// A stalled group is reported, not fatal: what follows says what the
	// stall left undispatched and how it was written.
	if !testkit.Within(2*time.Minute, func() bool { return caughtUp(e, topics.GroupDispatcher, e.names.Events()) }) {
		t.Errorf("the dispatcher group did not catch up with the events in 2m0s")
	}
	fanned, total := fannedOut(t, e)
	var missing []string
	for i := range n {
		for _, sub := range []string{"ordered/", "unordered/"} {
			if fanned[sub+streamID(i)] == 0 {
				missing = append(missing, sub+streamID(i))
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d deliveries never fanned out; the first: %v", len(missing), 2*n, missing[:min(len(missing), 20)])
		logTransactions(t, e, missing)
	}
	checkFannedOutOnce(t, fanned, total, 2*n)
}

// streamID is the id of publishUntil's i-th event.
func streamID(i int) string { return fmt.Sprintf("s%06d", i) }

// publishUntil publishes events in batches of 20, on 100 keys, until stop
// closes, each batch waiting for the broker's acknowledgement (through its
// outages: kgo retries); published counts the events acknowledged.
func publishUntil(e *env, stop <-chan struct{}, published *atomic.Int64) error {
	const batch = 20
	for i := 0; ; i += batch {
		select {
		case <-stop:
			return nil
		default:
		}
		evs := make([]topics.Event, batch)
		for j := range evs {
			evs[j] = topics.Event{ID: streamID(i + j), Type: "order.updated", Key: fmt.Sprintf("k%03d", (i+j)%100), Data: json.RawMessage(`{}`)}
		}
		recs, err := e.eventRecords(evs)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err = e.cl.ProduceSync(ctx, recs...).FirstErr()
		cancel()
		if err != nil {
			return fmt.Errorf("publishing through the outage: %w", err)
		}
		published.Store(int64(i + batch))
	}
}

// flakyReceiver is a receiver that answers 503 to one request in ten, at
// random, each request taking up to delay.
func flakyReceiver(t *testing.T, delay time.Duration) *receiver {
	r := newReceiver(t)
	r.delay = delay
	r.answer(func(request, http.ResponseWriter) int {
		if rand.N(10) == 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	return r
}

// subscribePair subscribes r as "ordered" (ordering key) and "unordered"
// to the event types pattern matches, with schedule (nil: the default).
func (e *env) subscribePair(r *receiver, pattern string, schedule []string) {
	for _, s := range []topics.Subscription{
		{ID: "ordered", Ordering: topics.OrderingKey},
		{ID: "unordered"},
	} {
		s.URL, s.EventTypes, s.Enabled, s.RetrySchedule = r.url(s.ID), []string{pattern}, true, schedule
		r.trust(e.subscribe(s))
	}
}

// keyedEvents are n events "e<i>" of type typ, keyed "k<i modulo keys>".
func keyedEvents(n, keys int, typ string) []topics.Event {
	evs := make([]topics.Event, n)
	for i := range evs {
		evs[i] = topics.Event{ID: fmt.Sprintf("e%05d", i), Type: typ, Key: fmt.Sprintf("k%03d", i%keys), Data: json.RawMessage(`{}`)}
	}
	return evs
}

// publishPaced publishes evs in batches, pause between them, in a
// goroutine: published counts the events published so far, done closes
// after the last.
func publishPaced(e *env, evs []topics.Event, batch int, pause time.Duration) (published *atomic.Int64, done chan struct{}) {
	published, done = new(atomic.Int64), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(pause)
		defer tick.Stop()
		for i := 0; i < len(evs); i += batch {
			e.publish(evs[i:min(i+batch, len(evs))]...)
			published.Store(int64(min(i+batch, len(evs))))
			<-tick.C
		}
	}()
	return published, done
}

// waitEveryEvent waits until every one of evs arrived at both the ordered
// and the unordered subscription. When it times out it logs what is
// missing, and whether the missing deliveries were fanned out at all: a
// lost delivery record and a record the deliverer passed over fail alike
// here, and are told apart in the log.
func waitEveryEvent(t *testing.T, e *env, r *receiver, evs []topics.Event, timeout time.Duration) {
	t.Helper()
	var missing []string
	t.Cleanup(func() {
		if !t.Failed() || len(missing) == 0 {
			return
		}
		fanned, _ := fannedOut(t, e)
		var lost []string
		for _, pair := range missing {
			if fanned[pair] == 0 {
				lost = append(lost, pair)
			}
		}
		t.Logf("%d deliveries missing, %d of them fanned out (read committed); the first: %v",
			len(missing), len(missing)-len(lost), missing[:min(len(missing), 20)])
		if len(lost) > 0 {
			logTransactions(t, e, lost)
		}
		if len(lost) < len(missing) {
			var fannedMissing []string
			for _, pair := range missing {
				if fanned[pair] > 0 {
					fannedMissing = append(fannedMissing, pair)
				}
			}
			logTransactions(t, e, fannedMissing)
			if offs, err := kadm.NewClient(e.cl).FetchOffsets(context.Background(), e.group(topics.GroupDeliverer)); err == nil {
				offs.Each(func(o kadm.OffsetResponse) {
					t.Logf("deliverer group committed %s/%d at %d", o.Topic, o.Partition, o.At)
				})
			}
			logDelivererStacks(t)
		}
	})
	wait(t, timeout, "every event at both subscriptions", func() bool {
		p := r.pairs()
		missing = missing[:0]
		for _, ev := range evs {
			for _, sub := range []string{"ordered/", "unordered/"} {
				if p[sub+ev.ID] == 0 {
					missing = append(missing, sub+ev.ID)
				}
			}
		}
		return len(missing) == 0
	})
}

// logDelivererStacks logs the goroutines of a deliverer running in the
// test's process (startDeliverer) that are in its or the sender's code:
// where the deliveries fanned out but never sent wait.
func logDelivererStacks(t *testing.T) {
	var all bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&all, 2)
	var b strings.Builder
	for g := range strings.SplitSeq(all.String(), "\n\n") {
		if strings.Contains(g, "hookpipe/deliverer") || strings.Contains(g, "hookpipe/runtime/send") {
			b.WriteString(g + "\n\n")
		}
	}
	t.Logf("goroutines of the deliverer in this process:\n%s", b.String())
}

// duplicates counts, per subscription, the requests accepted beyond the
// first of each event.
func duplicates(r *receiver) map[string]int {
	dups := map[string]int{}
	for pair, c := range r.pairs() {
		sub, _, _ := strings.Cut(pair, "/")
		dups[sub] += c - 1
	}
	return dups
}

// assertFannedOutOnce reads the delivery topics read committed, as the
// deliverer does, and checks that there are want deliveries, none of them
// twice (invariant 2).
func assertFannedOutOnce(t *testing.T, e *env, want int) {
	t.Helper()
	count, total := fannedOut(t, e)
	checkFannedOutOnce(t, count, total, want)
}

// checkFannedOutOnce checks fannedOut's counts: want deliveries, none of
// them twice.
func checkFannedOutOnce(t *testing.T, count map[string]int, total, want int) {
	t.Helper()
	for pair, c := range count {
		if c > 1 {
			t.Errorf("%s fanned out %d times", pair, c)
		}
	}
	if total != want {
		t.Errorf("%d deliveries fanned out, want %d", total, want)
	}
}

// fannedOut reads the delivery topics read committed up to their last
// stable offsets, counting the deliveries of each "subscription/event" pair
// and in all.
func fannedOut(t *testing.T, e *env) (count map[string]int, total int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := e.names.DeliveryTopics()
	// The client learns of topics it never produced to on the first ask.
	var stable kadm.ListedOffsets
	wait(t, 10*time.Second, "the last stable offsets of "+strings.Join(names, ","), func() bool {
		var err error
		stable, err = kadm.NewClient(e.cl).ListCommittedOffsets(ctx, names...)
		return err == nil && stable.Error() == nil
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumeTopics(names...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	next := map[string]map[int32]int64{}
	behind := func() bool {
		b := false
		stable.Each(func(o kadm.ListedOffset) { b = b || next[o.Topic][o.Partition] < o.Offset })
		return b
	}
	count = map[string]int{}
	for behind() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %v: %v", names, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if next[r.Topic] == nil {
				next[r.Topic] = map[int32]int64{}
			}
			next[r.Topic][r.Partition] = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			d, err := topics.DecodeDelivery(r.Value)
			if err != nil {
				t.Errorf("a delivery record: %v", err)
				return
			}
			count[d.SubscriptionID+"/"+d.EventID]++
			total++
		})
	}
	return count, total
}

// TestDispatcherKilledMidTransaction (invariant 2): a dispatcher process
// killed with SIGKILL while events flow leaves its transaction open; the
// broker aborts it within the dispatcher's transaction timeout (10 s), so
// read-committed consumers stall no longer than that, and the next
// dispatcher (another transactional id, as another pod has) dispatches what
// the dead one had not committed: every delivery exists once. The stall,
// from the kill to the next delivery, is logged.
func TestDispatcherKilledMidTransaction(t *testing.T) {
	e := newEnv(t)
	bin := filepath.Join(binaries(t), "dispatcher")
	r := newReceiver(t)
	e.subscribePair(r, "*", nil)
	e.startDeliverer()
	// The retrier too: on a loaded machine the deliverer finds the
	// endpoint slow and spills deliveries to the retry path (invariant
	// 5), and an ordered key stays held until its spilled delivery comes
	// back; without a retrier it never does.
	e.startRetrier()
	a := e.startProc(bin, "dispatcher-a")

	const n, keys, batch = 1500, 50, 50
	evs := keyedEvents(n, keys, "order.updated")
	published, done := publishPaced(e, evs, batch, 10*time.Millisecond)
	wait(t, 60*time.Second, "a third of the deliveries", func() bool { return r.count() >= 2*n/3 })
	if err := a.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.Done()
	killed, before, from := time.Now(), r.count(), int(published.Load())
	e.startProc(bin, "dispatcher-b")
	wait(t, 60*time.Second, "every event published", testkit.Done(done))
	// Events published after the kill are dispatched by the next
	// dispatcher, once the dead one's transaction no longer holds the
	// partitions' last stable offset.
	wait(t, 120*time.Second, "an event published after the kill delivered", func() bool {
		p := r.pairs()
		for _, ev := range evs[min(from, n-1):] {
			if p["unordered/"+ev.ID] > 0 {
				return true
			}
		}
		return false
	})
	stall := time.Since(killed)
	waitEveryEvent(t, e, r, evs, 120*time.Second)
	t.Logf("dispatcher killed with %d of %d events published and %d deliveries made; the first event published after the kill delivered %v after it",
		from, n, before, stall.Round(time.Millisecond))
	assertKeyOrder(t, r, keys)
	assertFannedOutOnce(t, e, 2*n)
}

// TestKilledDelivererTakenOver (invariant 1; ADR 0029): with the default
// session timeout (10 s), a deliverer killed with SIGKILL while events flow
// has its partitions taken over by the other one: every event arrives at
// both subscriptions, fan-out once. The longest publish-to-receipt of the
// events published after the kill (the wait for the takeover) is logged.
func TestKilledDelivererTakenOver(t *testing.T) {
	e := newEnv(t)
	delete(e.vars, kafka.EnvSessionTimeout)
	bin := filepath.Join(binaries(t), "deliverer")
	r := newReceiver(t)
	e.subscribePair(r, "*", nil)
	e.startDispatcher()
	e.startRetrier() // spilled deliveries come back (TestDispatcherKilledMidTransaction)
	a := e.startProc(bin, "deliverer-a")
	e.startProc(bin, "deliverer-b")
	e.waitDeliverers(2)

	const n, keys, batch = 1200, 40, 10
	evs := keyedEvents(n, keys, "order.updated")
	published := make([]time.Time, n)
	var killed time.Time
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < n; i += batch {
		if i == n/4 {
			if err := a.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-a.Done()
			killed = time.Now()
		}
		e.publish(evs[i : i+batch]...)
		for j := i; j < i+batch; j++ {
			published[j] = time.Now()
		}
		<-tick.C
	}
	waitEveryEvent(t, e, r, evs, 120*time.Second)
	first := map[string]time.Time{}
	for _, rq := range r.requests() {
		if k := rq.Sub + "/" + rq.ID; first[k].IsZero() || rq.At.Before(first[k]) {
			first[k] = rq.At
		}
	}
	var longest time.Duration
	for i, ev := range evs[n/4:] {
		for _, sub := range []string{"ordered", "unordered"} {
			longest = max(longest, first[sub+"/"+ev.ID].Sub(published[n/4+i]))
		}
	}
	t.Logf("deliverer killed %v after the first event; the longest publish-to-receipt after the kill: %v",
		killed.Sub(published[0]).Round(time.Millisecond), longest.Round(time.Millisecond))
	assertFannedOutOnce(t, e, 2*n)
}

// logTransactions logs, for deliveries missing read committed, where they
// are read uncommitted: each one's partition, offset and producer id and
// epoch, and the layout of the transactions on those partitions around
// them (runs of one producer's records, commit and abort markers). A
// delivery written in a transaction that committed on one partition and
// not another, or whose abort marker landed after a later transaction's
// records, shows here.
func logTransactions(t *testing.T, e *env, missing []string) {
	t.Helper()
	want := map[string]bool{}
	for _, pair := range missing {
		want[pair] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := e.names.DeliveryTopics()
	ends, err := kadm.NewClient(e.cl).ListEndOffsets(ctx, names...)
	if err != nil || ends.Error() != nil {
		t.Logf("transactions: listing end offsets: %v %v", err, ends.Error())
		return
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumeTopics(names...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Logf("transactions: %v", err)
		return
	}
	defer cl.Close()
	type tp struct {
		topic string
		p     int32
	}
	logs := map[tp][]*kgo.Record{}
	next := map[tp]int64{}
	behind := func() bool {
		b := false
		ends.Each(func(o kadm.ListedOffset) { b = b || next[tp{o.Topic, o.Partition}] < o.Offset })
		return b
	}
	hit := map[tp][]int{} // indexes in logs of the missing deliveries
	for behind() && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			at := tp{r.Topic, r.Partition}
			next[at] = r.Offset + 1
			if !r.Attrs.IsControl() {
				if d, err := topics.DecodeDelivery(r.Value); err == nil && want[d.SubscriptionID+"/"+d.EventID] {
					hit[at] = append(hit[at], len(logs[at]))
				}
			}
			logs[at] = append(logs[at], r)
		})
	}
	for at, idx := range hit {
		recs := logs[at]
		t.Logf("transactions: %d missing deliveries in %s/%d, the first at offset %d (producer %d epoch %d)",
			len(idx), at.topic, at.p, recs[idx[0]].Offset, recs[idx[0]].ProducerID, recs[idx[0]].ProducerEpoch)
		from, to := max(idx[0]-300, 0), min(idx[len(idx)-1]+300, len(recs))
		var b strings.Builder
		for i := from; i < to; {
			r := recs[i]
			if r.Attrs.IsControl() {
				kind := "abort"
				if len(r.Key) == 4 && r.Key[3] == 1 {
					kind = "commit"
				}
				fmt.Fprintf(&b, "\n  %d %s producer %d epoch %d", r.Offset, kind, r.ProducerID, r.ProducerEpoch)
				i++
				continue
			}
			j, lost := i, 0
			for ; j < to && !recs[j].Attrs.IsControl() && recs[j].ProducerID == r.ProducerID && recs[j].ProducerEpoch == r.ProducerEpoch; j++ {
				if slices.Contains(idx, j) {
					lost++
				}
			}
			fmt.Fprintf(&b, "\n  %d-%d records of producer %d epoch %d (%d missing)", r.Offset, recs[j-1].Offset, r.ProducerID, r.ProducerEpoch, lost)
			i = j
		}
		t.Logf("transactions: %s/%d from offset %d:%s", at.topic, at.p, recs[from].Offset, b.String())
	}
	if len(hit) == 0 {
		t.Logf("transactions: none of the %d missing deliveries was written, even uncommitted", len(missing))
	}
}
