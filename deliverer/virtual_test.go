package deliverer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// These tests run a cluster, the real deliverer, an in-memory endpoint and
// a stand-in retrier in a testing/synctest bubble over kfake's virtual
// network, so a whole retry schedule (about 27.6 hours) passes in seconds
// and every time they check is virtual, exact and independent of the
// machine's load.

// memEndpoint is an http.RoundTripper standing in for a subscriber's
// endpoint: no sockets in the bubble. It records every request and answers
// the nth (1-based) with status(n).
type memEndpoint struct {
	status func(n int) int

	mu   sync.Mutex
	reqs []received
}

func (e *memEndpoint) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	// Canonical header keys, as a server reading them off the wire sees
	// them (the sender sets webhook-id and the like in lower case).
	h := http.Header{}
	for k, vs := range r.Header {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	e.mu.Lock()
	e.reqs = append(e.reqs, received{method: r.Method, header: h, body: body, at: time.Now()})
	n := len(e.reqs)
	e.mu.Unlock()
	code := e.status(n)
	return &http.Response{
		Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, Request: r,
	}, nil
}

func (e *memEndpoint) all() []received {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.reqs)
}

func (e *memEndpoint) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.reqs)
}

// released is a tier record the stand-in retrier sent back to the
// deliveries topic.
type released struct {
	topic   string
	attempt int       // the attempt the record is for
	due     time.Time // its not-before header
	at      time.Time
}

// bubbleEnv is a cluster with the pipeline topics on a virtual network, a
// client to produce with, and a tail of what the deliverer writes. It lives
// inside one synctest bubble.
type bubbleEnv struct {
	t       *testing.T
	cluster *kfake.Cluster
	dial    func(ctx context.Context, network, host string) (net.Conn, error)
	names   topics.Names
	env     map[string]string
	cl      *kgo.Client

	mu       sync.Mutex
	seen     map[string][]*kgo.Record // attempts, dlq, subscriptions
	releases []released
}

func newBubbleEnv(t *testing.T, vn *kfake.VirtualNetwork) *bubbleEnv {
	t.Helper()
	// Client telemetry (KIP-714) would push every 30 virtual seconds from
	// every client: real work for no virtual time; turn it off.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.GetTelemetrySubscriptions), -1)
	versions.SetMaxKeyVersion(int16(kmsg.PushTelemetry), -1)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(9092), kfake.ListenFn(vn.Listen), kfake.MaxVersions(versions))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	b := &bubbleEnv{t: t, cluster: c, dial: vn.DialContext, seen: map[string][]*kgo.Record{}, env: map[string]string{
		kafka.EnvBrokers:    c.ListenAddrs()[0],
		kafka.EnvRetryTiers: topics.DefaultRetryTiers, // 5s,5m,30m,2h,5h,10h
		// A session long enough that the group does not heartbeat for
		// nothing all day (every 30 virtual seconds instead of every 4.5).
		kafka.EnvSessionTimeout: "5m",
		// The commit loop wakes every interval: 1s would be 100,000 wakes
		// over the schedule, for nothing this test checks.
		"WEBHOOKS_DELIVERER_COMMIT_INTERVAL": "1m",
		// Subscriptions are written sealed with it, as webhookctl does.
		config.EnvSecretsKey: testSecretsKey,
		// No Redis (breakers, rate limits): no sockets in the bubble, and
		// the schedule is what is under test.
		redisstate.EnvURL: redisstate.Disabled,
	}}
	k, err := kafka.Load(b.getenv)
	if err != nil {
		t.Fatalf("LoadKafka: %v", err)
	}
	b.names = k.Names
	b.cl = b.client(kgo.RecordPartitioner(topics.Partitioner()), kgo.ProducerLinger(0))
	if _, err := kafka.Ensure(testCtx(t, time.Minute), kadm.NewClient(b.cl), b.names,
		kafka.Layout{Partitions: 3, ReplicationFactor: -1}); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	b.tail()
	return b
}

func (b *bubbleEnv) getenv(k string) string { return b.env[k] }

// client is a client of the bubble's cluster over the virtual network,
// closed at the end of the test.
func (b *bubbleEnv) client(opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(b.cluster.ListenAddrs()...), kgo.Dialer(b.dial)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.t.Fatalf("client: %v", err)
	}
	b.t.Cleanup(cl.Close)
	return cl
}

// consume runs each batch of records read from the start of the topics
// through each until the test ends. Its fetches wait long: there is
// nothing to gain from waking every 5 virtual seconds for 27 hours.
func (b *bubbleEnv) consume(ts []string, each func([]*kgo.Record)) {
	cl := b.client(kgo.ConsumeTopics(ts...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			if rs := fs.Records(); len(rs) > 0 {
				each(rs)
			}
		}
	}()
}

// tail keeps what the deliverer writes to the attempts, dlq and
// subscriptions topics.
func (b *bubbleEnv) tail() {
	b.consume([]string{b.names.Attempts(), b.names.DLQ(), b.names.Subscriptions()}, func(rs []*kgo.Record) {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, r := range rs {
			b.seen[r.Topic] = append(b.seen[r.Topic], r)
		}
	})
}

func (b *bubbleEnv) records(topic string) []*kgo.Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.seen[topic])
}

func (b *bubbleEnv) attempts() []topics.Attempt {
	b.t.Helper()
	var out []topics.Attempt
	for _, r := range b.records(b.names.Attempts()) {
		a, err := topics.DecodeAttempt(r.Value)
		if err != nil {
			b.t.Fatalf("attempt record %s: %v", r.Value, err)
		}
		out = append(out, a)
	}
	return out
}

func (b *bubbleEnv) attemptsOf(eventID string) []topics.Attempt {
	var out []topics.Attempt
	for _, a := range b.attempts() {
		if a.EventID == eventID {
			out = append(out, a)
		}
	}
	return out
}

func (b *bubbleEnv) releasesSoFar() []released {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.releases)
}

// tierRecords is how many records the tier topics hold.
func (b *bubbleEnv) tierRecords() int {
	b.t.Helper()
	ends, err := kadm.NewClient(b.cl).ListEndOffsets(testCtx(b.t, time.Minute), b.names.RetryTopics()...)
	if err != nil || ends.Error() != nil {
		b.t.Fatalf("list end offsets: %v, %v", err, ends.Error())
	}
	n := 0
	ends.Each(func(o kadm.ListedOffset) { n += int(o.Offset) })
	return n
}

// fakeRetrier stands in for the retrier: it reads every tier topic from the
// start and, per partition in offset order, waits until a record's
// not-before (virtual time passes) and then produces the same key and value
// (and a batch's mark) to the redeliveries topic. That is all one event
// needs. The real retrier's timing (holding back a partition, never sleeping in its poll loop,
// committing) is tested in retrier/virtual_test.go; here the deliverer is
// under test.
func (b *bubbleEnv) fakeRetrier() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// Registered before consume: cleanups run last first, so the poll
	// loop stops before the partition goroutines are waited for.
	b.t.Cleanup(func() { cancel(); wg.Wait() })
	parts := map[string]chan *kgo.Record{}
	b.consume(b.names.RetryTopics(), func(rs []*kgo.Record) {
		for _, r := range rs {
			k := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
			ch, ok := parts[k]
			if !ok {
				ch = make(chan *kgo.Record, 1024)
				parts[k] = ch
				wg.Go(func() { b.releaseDue(ctx, ch) })
			}
			select {
			case ch <- r:
			case <-ctx.Done():
				return
			}
		}
	})
}

// releaseDue releases one partition's tier records, each once it is due.
func (b *bubbleEnv) releaseDue(ctx context.Context, ch <-chan *kgo.Record) {
	for {
		var r *kgo.Record
		select {
		case <-ctx.Done():
			return
		case r = <-ch:
		}
		due, ok := topics.NotBeforeOf(r)
		if !ok {
			b.t.Errorf("tier record %s/%d@%d has no not-before header", r.Topic, r.Partition, r.Offset)
			continue
		}
		wait := time.NewTimer(time.Until(due))
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-wait.C:
		}
		d, err := topics.DecodeDelivery(r.Value)
		if err != nil {
			b.t.Errorf("tier record %s/%d@%d: %v", r.Topic, r.Partition, r.Offset, err)
			continue
		}
		b.mu.Lock()
		b.releases = append(b.releases, released{topic: r.Topic, attempt: d.Attempt, due: due, at: time.Now()})
		b.mu.Unlock()
		out := &kgo.Record{Topic: b.names.Redeliveries(), Key: r.Key, Value: r.Value}
		if id, n, ok := topics.BatchOf(r.Headers); ok {
			out.Headers = []kgo.RecordHeader{topics.BatchHeader(id, n)} // kept, as the retrier does
		}
		if err := b.cl.ProduceSync(ctx, out).FirstErr(); err != nil && ctx.Err() == nil {
			b.t.Errorf("releasing %s/%d@%d: %v", r.Topic, r.Partition, r.Offset, err)
		}
	}
}

// startDeliverer runs the real deliverer over the virtual network, posting
// through ep, until the returned stop is called (or the test ends); stop
// fails the test if Run does not return nil within a virtual minute.
func (b *bubbleEnv) startDeliverer(ep http.RoundTripper) (stop func()) {
	b.t.Helper()
	cfg, err := LoadConfig(b.getenv)
	if err != nil {
		b.t.Fatalf("LoadConfig: %v", err)
	}
	cfg.dial, cfg.transport = b.dial, ep
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := testLogger(b.t)
	go func() { done <- Run(ctx, cfg, log) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			timer := time.NewTimer(time.Minute)
			defer timer.Stop()
			select {
			case err := <-done:
				if err != nil {
					b.t.Errorf("Run = %v, want nil after cancel", err)
				}
			case <-timer.C:
				b.t.Errorf("Run did not return within a virtual minute of its context being canceled")
			}
		})
	}
	b.t.Cleanup(stop)
	return stop
}

// putSub publishes a subscription the way webhookctl does.
func (b *bubbleEnv) putSub(s topics.Subscription) {
	b.t.Helper()
	if err := s.Validate(); err != nil {
		b.t.Fatalf("test subscription: %v", err)
	}
	b.produce(&kgo.Record{Topic: b.names.Subscriptions(), Key: []byte(s.ID), Value: s.EncodeWith(testKeys(b.t))})
}

// deliver publishes the first attempt of an event the way the dispatcher does.
func (b *bubbleEnv) deliver(d topics.Delivery) {
	b.t.Helper()
	b.produce(&kgo.Record{Topic: b.names.Deliveries(), Key: []byte(d.SubscriptionID + "/" + d.EventID), Value: d.Encode()})
}

func (b *bubbleEnv) produce(rs ...*kgo.Record) {
	b.t.Helper()
	if err := b.cl.ProduceSync(testCtx(b.t, time.Minute), rs...).FirstErr(); err != nil {
		b.t.Fatalf("produce: %v", err)
	}
}

// TestVirtualFullSchedule: an endpoint that fails seven times and then
// succeeds is attempted eight times, each retry at the time the attempt
// before announced, over the whole default schedule (5s ... 10h, about
// 27.6 h of virtual time), each retry through the tier its delay selects.
func TestVirtualFullSchedule(t *testing.T) {
	t.Parallel()
	// 10-25 s of real time with -race (the deliverer's three clients
	// long-poll every 5 virtual seconds: 60,000 fetches over the
	// schedule); the watchdog only catches a stalled bubble.
	defer testkit.Watchdog(t, 5*time.Minute)()
	wall := time.Now()
	var virtual time.Duration
	synctest.Test(t, func(t *testing.T) {
		var vn kfake.VirtualNetwork
		b := newBubbleEnv(t, &vn)
		schedule := topics.DefaultSchedule // 5s, 5m, 30m, 2h, 5h, 10h, 10h
		want := len(schedule) + 1
		ep := &memEndpoint{status: func(n int) int {
			if n < want {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		}}
		sub := newSub(t, "sub_virtual", "https://receiver.example/hooks") // no retry_schedule: the default
		b.putSub(sub)
		b.fakeRetrier()
		stop := b.startDeliverer(ep)
		const event = "evt_full_schedule"
		b.deliver(newDelivery(sub.ID, event))

		waitVirtual(t, time.Minute, 40*time.Hour, fmt.Sprintf("%d requests", want), func() bool { return ep.count() >= want })
		waitVirtual(t, 10*time.Millisecond, time.Minute, fmt.Sprintf("%d attempt records", want), func() bool {
			return len(b.attemptsOf(event)) >= want
		})
		// Nothing follows a success: a virtual minute later (a retry
		// record would be in a tier topic at once) there are as many tier
		// records as retries and no other request.
		time.Sleep(time.Minute)
		if n := b.tierRecords(); n != len(schedule) {
			t.Errorf("%d records in the tier topics, want %d", n, len(schedule))
		}
		stop()

		reqs := ep.all()
		if len(reqs) != want {
			t.Fatalf("the endpoint saw %d requests, want %d", len(reqs), want)
		}
		for i, r := range reqs {
			if r.id() != event {
				t.Errorf("request %d has webhook-id %q, want %q", i+1, r.id(), event)
			}
			verify(t, r.header, r.body, sub.Secret)
		}
		atts := b.attemptsOf(event)
		if len(atts) != want {
			t.Fatalf("%d attempt records, want %d: %+v", len(atts), want, atts)
		}
		// One subscription, one partition of the attempts topic: in order.
		for i, a := range atts {
			outcome := topics.OutcomeRetry
			if i == want-1 {
				outcome = topics.OutcomeSuccess
			}
			if a.Attempt != i+1 || a.Outcome != outcome {
				t.Errorf("attempt record %d: attempt %d outcome %q, want attempt %d outcome %q", i, a.Attempt, a.Outcome, i+1, outcome)
			}
			if d := reqs[i].at.Sub(a.TS); d < 0 || d > time.Second {
				t.Errorf("attempt %d: record ts %v, the endpoint saw it at %v", i+1, a.TS, reqs[i].at)
			}
		}
		rels := b.releasesSoFar()
		if len(rels) != len(schedule) {
			t.Fatalf("the retrier released %d tier records, want %d: %+v", len(rels), len(schedule), rels)
		}
		for k, step := range schedule { // the delay after attempt k+1
			prev, rel, seen := atts[k], rels[k], reqs[k+1].at
			// The delay announced, jittered ±20% around the step.
			delay := prev.NextAttemptAt.Sub(prev.TS)
			if lo, hi := step*8/10, step*12/10; delay < lo || delay > hi {
				t.Errorf("attempt %d announced a delay of %v, want within ±20%% of %v", k+1, delay, step)
			}
			// Through the tier the step selects.
			if tier := b.names.Retry(b.names.TierFor(step)); rel.topic != tier || rel.attempt != k+2 {
				t.Errorf("retry %d went through %s for attempt %d, want %s for attempt %d", k+1, rel.topic, rel.attempt, tier, k+2)
			}
			// Attempted when due, and no earlier. The due time travels in
			// the not-before header in milliseconds, so a retrier releases
			// within the millisecond the attempt record announced.
			due := prev.NextAttemptAt
			if !rel.due.Equal(time.UnixMilli(due.UnixMilli())) {
				t.Errorf("retry %d: not-before header %v, the attempt record announced %v", k+1, rel.due, due)
			}
			if seen.Before(time.UnixMilli(due.UnixMilli())) {
				t.Errorf("attempt %d reached the endpoint at %v, %v before its due time %v", k+2, seen, due.Sub(seen), due)
			}
			if late := seen.Sub(due); late > 2*time.Second {
				t.Errorf("attempt %d reached the endpoint %v after its due time, want within 2s", k+2, late)
			}
			t.Logf("attempt %d: due after %v (step %v, tier %s), reached the endpoint %v after due", k+2, delay.Round(time.Millisecond), step, rel.topic, seen.Sub(due))
		}
		virtual = reqs[want-1].at.Sub(reqs[0].at)
		if virtual < 22*time.Hour || virtual > 34*time.Hour {
			t.Errorf("first to last attempt took %v of virtual time, want about 27.6h (22h..34h)", virtual)
		}
	})
	t.Logf("the schedule took %v of virtual time and %v of real time", virtual.Round(time.Second), time.Since(wall).Round(time.Millisecond))
}

// TestVirtualGoneMidSchedule: a 410 at the third attempt ends the schedule:
// the delivery is dead-lettered, the subscription is republished disabled,
// and a later delivery to it is skipped without a request.
func TestVirtualGoneMidSchedule(t *testing.T) {
	t.Parallel()
	defer testkit.Watchdog(t, 3*time.Minute)()
	wall := time.Now()
	synctest.Test(t, func(t *testing.T) {
		var vn kfake.VirtualNetwork
		b := newBubbleEnv(t, &vn)
		ep := &memEndpoint{status: func(n int) int {
			if n < 3 {
				return http.StatusInternalServerError
			}
			return http.StatusGone
		}}
		sub := newSub(t, "sub_gone", "https://receiver.example/hooks")
		b.putSub(sub)
		b.fakeRetrier()
		stop := b.startDeliverer(ep)
		const event = "evt_gone"
		b.deliver(newDelivery(sub.ID, event))

		waitVirtual(t, time.Second, time.Hour, "a dead letter", func() bool { return len(b.records(b.names.DLQ())) > 0 })
		var disabled topics.Subscription
		waitVirtual(t, 10*time.Millisecond, time.Minute, "the subscription republished disabled", func() bool {
			rs := b.records(b.names.Subscriptions())
			if len(rs) == 0 {
				return false
			}
			last := rs[len(rs)-1]
			if bytes.Contains(last.Value, []byte(sub.Secret)) {
				t.Fatalf("subscription record %s carries the secret in plaintext", last.Key)
			}
			s, err := topics.DecodeSubscriptionWith(last.Value, testKeys(t))
			if err != nil {
				t.Fatalf("subscription record %s: %v", last.Value, err)
			}
			disabled = s
			return string(last.Key) == sub.ID && !s.Enabled
		})
		if disabled.DisabledReason == "" || disabled.Secret != sub.Secret || disabled.URL != sub.URL {
			t.Errorf("republished subscription %+v: want the same one with a disabled reason", disabled)
		}
		// The deliverer's own table sees it: the next delivery is skipped.
		const later = "evt_after_gone"
		b.deliver(newDelivery(sub.ID, later))
		waitVirtual(t, 10*time.Millisecond, time.Minute, "an attempt record of "+later, func() bool { return len(b.attemptsOf(later)) > 0 })
		time.Sleep(time.Minute) // virtual: a retry record would be in a tier topic at once
		if n := b.tierRecords(); n != 2 {
			t.Errorf("%d records in the tier topics, want 2 (the retries before the 410)", n)
		}
		stop()

		if n := ep.count(); n != 3 {
			t.Fatalf("the endpoint saw %d requests, want 3", n)
		}
		atts := b.attemptsOf(event)
		outcomes := []string{topics.OutcomeRetry, topics.OutcomeRetry, topics.OutcomeDead}
		if len(atts) != len(outcomes) {
			t.Fatalf("%d attempt records, want %d: %+v", len(atts), len(outcomes), atts)
		}
		for i, a := range atts {
			if a.Attempt != i+1 || a.Outcome != outcomes[i] {
				t.Errorf("attempt record %d: attempt %d outcome %q, want attempt %d outcome %q", i, a.Attempt, a.Outcome, i+1, outcomes[i])
			}
		}
		if a := atts[2]; a.HTTPStatus != http.StatusGone || a.FailureCategory != topics.FailureGone {
			t.Errorf("third attempt: status %d category %q, want 410 %q", a.HTTPStatus, a.FailureCategory, topics.FailureGone)
		}
		// Two dead letters: the event the 410 ended, and the later one,
		// kept there for a redrive once the subscription is enabled again.
		dlq := b.records(b.names.DLQ())
		if len(dlq) != 2 {
			t.Fatalf("%d dead letters, want 2", len(dlq))
		}
		wantDL := []struct {
			event, category  string
			status, attempts int
		}{{event, topics.FailureGone, http.StatusGone, 3}, {later, topics.FailureDisabled, 0, 0}}
		for i, w := range wantDL {
			dl, err := topics.DecodeDeadLetter(dlq[i].Value)
			if err != nil {
				t.Fatalf("dead letter %s: %v", dlq[i].Value, err)
			}
			if dl.Delivery == nil || dl.Delivery.EventID != w.event || dl.FailureCategory != w.category ||
				dl.HTTPStatus != w.status || dl.Attempts != w.attempts {
				t.Errorf("dead letter %s: want %s, category %q, status %d, %d attempts", dlq[i].Value, w.event, w.category, w.status, w.attempts)
			}
		}
		if a := b.attemptsOf(later); len(a) != 1 || a[0].Outcome != topics.OutcomeSkipped || a[0].FailureCategory != topics.FailureDisabled {
			t.Errorf("attempt records of %s after the 410: %+v, want one skipped (%s)", later, a, topics.FailureDisabled)
		}
	})
	t.Logf("took %v of real time", time.Since(wall).Round(time.Millisecond))
}
