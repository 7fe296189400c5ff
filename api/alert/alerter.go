package alert

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/topics"
)

// maxTries is how many times a digest is sent before it is dropped (and
// counted), so a channel that cannot be reached does not hold back the
// commits of every other channel's notices.
const maxTries = 3

// Channels are the alert channels the alerter reads (table.AlertTable).
type Channels interface {
	Hearing(tenant, typ string) []*topics.AlertChannel
	Get(id string) (*topics.AlertChannel, bool)
}

// Alerter consumes the notices topic and sends each channel its digests.
type Alerter struct {
	cl     *kgo.Client
	leaver *kafka.Leaver
	chans  Channels
	send   func(context.Context, *topics.AlertChannel, *Digest) error
	log    *zap.Logger
	m      metrics
	b      *batcher
	now    func() time.Time
	// retryWait is the pause before a failed digest is sent again.
	retryWait time.Duration
	// lost is set when the partition is revoked or lost: what was polled
	// is dropped, its new owner sends it.
	lost atomic.Bool
}

// New joins the alerter's consumer group (cfg.Group) on the notices topic
// with the client options base; Run sends.
func New(cfg Config, base []kgo.Opt, names topics.Names, chans Channels, s *Sender, reg prometheus.Registerer, log *zap.Logger) (*Alerter, error) {
	a := &Alerter{chans: chans, send: s.Send, log: log.Named("alerter"), m: newMetrics(reg), b: newBatcher(),
		now: time.Now, retryWait: time.Minute, leaver: kafka.NewLeaver(log)}
	drop := func(context.Context, *kgo.Client, map[string][]int32) { a.lost.Store(true) }
	cl, err := kgo.NewClient(append(base[:len(base):len(base)], a.leaver.Opt(),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(names.Notices()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Offsets are committed up to the first notice whose digest is
		// not sent yet (marked in order), and rebalances happen only
		// while polling, so no mark follows a revocation.
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(time.Second),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(drop),
		kgo.OnPartitionsLost(drop),
	)...)
	if err != nil {
		return nil, err
	}
	a.cl = cl
	return a, nil
}

// Run sends digests until ctx is done, then leaves the group. Digests not
// sent by then are not committed: the partition's next owner sends them.
func (a *Alerter) Run(ctx context.Context) {
	defer func() {
		a.cl.AllowRebalance() // leaving the group revokes, which a blocked rebalance would hold up
		a.leaver.Close(a.cl)
	}()
	for {
		a.cl.AllowRebalance()
		poll, cancel := ctx, context.CancelFunc(func() {})
		if due, ok := a.b.next(); ok {
			poll, cancel = context.WithDeadline(ctx, due)
		}
		fs := a.cl.PollRecords(poll, 1000)
		cancel()
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		if a.lost.Swap(false) {
			a.b.reset()
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				a.log.Warn("fetching notices", zap.String("topic", topic), zap.Int32("partition", p), zap.Error(err))
			}
		})
		for r := range fs.RecordsAll() {
			a.add(r)
		}
		a.sendDue(ctx)
		if done := a.b.done(); len(done) > 0 {
			a.cl.MarkCommitRecords(done...)
		}
	}
}

// add files a notices record in the digests of the channels hearing of it.
func (a *Alerter) add(r *kgo.Record) {
	ev, err := topics.DecodeEvent(r.Value, topics.DefaultMaxEventBytes)
	var n Notice
	if err == nil {
		n, err = NoticeOf(&ev)
	}
	if err != nil {
		a.log.Warn("ignoring a notice that does not decode", zap.Int64("offset", r.Offset), zap.Error(err))
		a.b.track(r)
		return
	}
	a.b.add(r, n, a.chans.Hearing(ev.Tenant, ev.Type), a.now())
}

// sendDue sends the digests whose window is over (or whose retry is due),
// each to its channel as it is now; a channel deleted meanwhile is not sent
// to.
func (a *Alerter) sendDue(ctx context.Context) {
	for _, p := range a.b.due(a.now()) {
		c, ok := a.chans.Get(p.channel)
		if !ok {
			a.b.release(p)
			continue
		}
		err := a.send(ctx, c, p.d)
		if ctx.Err() != nil {
			return // not released: the next owner sends it
		}
		log := a.log.With(zap.String("channel", c.ID), zap.String("kind", c.Kind), zap.String("tenant", c.Tenant),
			zap.Int("notices", p.d.Total))
		if err == nil {
			a.m.sent.WithLabelValues(c.Kind).Inc()
			log.Info("alert sent")
			a.b.release(p)
			continue
		}
		a.m.failed.WithLabelValues(c.Kind).Inc()
		if p.tries++; p.tries >= maxTries {
			a.m.dropped.WithLabelValues(c.Kind).Inc()
			log.Error("alert dropped after failing every attempt", zap.Int("attempts", maxTries), zap.Error(err))
			a.b.release(p)
			continue
		}
		log.Warn("alert not sent; trying again", zap.Duration("in", a.retryWait), zap.Error(err))
		a.b.retry(p, a.now().Add(a.retryWait))
	}
}

// pending is a digest of one channel, collecting or waiting to be sent
// again, and the records it holds uncommitted.
type pending struct {
	channel string
	d       *Digest
	due     time.Time
	tries   int
	recs    []*kgo.Record
}

// batcher keeps the channels' digests and which polled records they hold:
// a record is done (its offset may be committed) once every digest it is
// in was sent or dropped.
type batcher struct {
	open    map[string]*pending // by channel: collecting notices
	waiting []*pending          // failed, to be sent again
	refs    map[*kgo.Record]int // digests not done, by record
	fifo    []*kgo.Record       // polled records not yet done, in order
}

func newBatcher() *batcher {
	return &batcher{open: map[string]*pending{}, refs: map[*kgo.Record]int{}}
}

// reset drops everything: the partitions were revoked.
func (b *batcher) reset() { *b = *newBatcher() }

// track takes a record in, done once the digests it is added to are.
func (b *batcher) track(r *kgo.Record) {
	b.fifo = append(b.fifo, r)
	b.refs[r] += 0
}

// add files notice n of record r in the open digest of each channel,
// opening one (due a window after now) for a channel that has none.
func (b *batcher) add(r *kgo.Record, n Notice, chans []*topics.AlertChannel, now time.Time) {
	b.track(r)
	at := n.Data.At
	if at.IsZero() {
		at = now
	}
	for _, c := range chans {
		p := b.open[c.ID]
		if p == nil {
			p = &pending{channel: c.ID, d: NewDigest(c), due: now.Add(c.Digest())}
			b.open[c.ID] = p
		}
		p.d.Add(n, at)
		p.recs = append(p.recs, r)
		b.refs[r]++
	}
}

// next is when the first digest is due; false when none is.
func (b *batcher) next() (time.Time, bool) {
	var first time.Time
	for _, p := range b.open {
		if first.IsZero() || p.due.Before(first) {
			first = p.due
		}
	}
	for _, p := range b.waiting {
		if first.IsZero() || p.due.Before(first) {
			first = p.due
		}
	}
	return first, !first.IsZero()
}

// due takes out the digests due at now, oldest first.
func (b *batcher) due(now time.Time) []*pending {
	var out []*pending
	for id, p := range b.open {
		if !p.due.After(now) {
			out = append(out, p)
			delete(b.open, id)
		}
	}
	b.waiting = slices.DeleteFunc(b.waiting, func(p *pending) bool {
		if !p.due.After(now) {
			out = append(out, p)
			return true
		}
		return false
	})
	slices.SortFunc(out, func(x, y *pending) int { return x.due.Compare(y.due) })
	return out
}

// retry puts a digest that failed back, due at due.
func (b *batcher) retry(p *pending, due time.Time) {
	p.due = due
	b.waiting = append(b.waiting, p)
}

// release ends a digest: sent, dropped or its channel gone.
func (b *batcher) release(p *pending) {
	for _, r := range p.recs {
		b.refs[r]--
	}
}

// done takes out the records, in order, up to the first one a digest
// still holds: their offsets may be committed.
func (b *batcher) done() []*kgo.Record {
	i := 0
	for i < len(b.fifo) && b.refs[b.fifo[i]] == 0 {
		delete(b.refs, b.fifo[i])
		i++
	}
	out := b.fifo[:i:i]
	b.fifo = b.fifo[i:]
	return out
}

// metrics count the alerter's sends by channel kind.
type metrics struct {
	sent, failed, dropped *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) metrics {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "alerter", Name: name, Help: help}, []string{"kind"})
	}
	m := metrics{
		sent:    vec("sent_total", "Alert digests sent, by channel kind (email, slack, webhook)."),
		failed:  vec("failed_total", "Attempts at sending an alert digest that failed, by channel kind."),
		dropped: vec("dropped_total", "Alert digests dropped after failing every attempt, by channel kind."),
	}
	reg.MustRegister(m.sent, m.failed, m.dropped)
	return m
}
