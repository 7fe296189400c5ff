package dispatcher

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/catalog"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
)

// Event dedup (docs/design.md, "Endpoint protection"): an event whose
// idempotency_key was used by another event record of the same tenant
// within the window is not fanned out again.
//
// The claim on a key is the first event record that used it: its
// partition, offset and id are stored as the key's value (SET NX PX
// window, in a script that compares otherwise). A record is a duplicate
// only when the key holds a different record. So a claim made in a
// transaction that then aborts is not lost: when the batch is dispatched
// again (here or by another replica) the same record finds its own claim
// and goes out; a producer's second copy of an event (same id, another
// offset) is a duplicate. Claims of one batch go to Redis in one
// pipeline, in offset order, so duplicates within a batch are found too.
//
// With Redis unreachable nothing is dropped (fail open).

// claimScript claims an idempotency key for an event record.
// KEYS[1] the key, ARGV[1] the record ("partition/offset/event id"),
// ARGV[2] the window (ms). Returns 1 when the record holds the claim, 0
// when another record does.
var claimScript = redis.NewScript(claimScriptSource)

const claimScriptSource = `
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if v == ARGV[1] then
  return 1
end
return 0
`

// dedup finds the duplicate events of a batch; nil without Redis.
type dedup struct {
	g       *redisstate.Guard
	window  time.Duration
	log     *zap.Logger
	dropped atomic.Uint64
}

func newDedup(cfg Config, log *zap.Logger) (*dedup, error) {
	g, err := redisstate.Open(cfg.Redis, log)
	if err != nil || g == nil {
		return nil, err
	}
	return &dedup{g: g, window: cfg.DedupWindow, log: log}, nil
}

func (d *dedup) close() {
	if d != nil {
		_ = d.g.Close()
	}
}

// DroppedTotal counts the events not fanned out as duplicates (a metric).
func (d *dedup) DroppedTotal() uint64 {
	if d == nil {
		return 0
	}
	return d.dropped.Load()
}

// register adds the dedup metrics: Redis (package redisstate) and the
// events dropped as duplicates. Without Redis there are none.
func (d *dedup) register(reg prometheus.Registerer) {
	if d == nil {
		return
	}
	redisstate.Register(reg, d.g)
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "dispatcher",
		Name: "events_deduplicated_total", Help: "Events not fanned out because their idempotency key was seen within the dedup window."},
		func() float64 { return float64(d.DroppedTotal()) }))
}

// duplicates returns the records of a batch that repeat an idempotency
// key.
func (d *dedup) duplicates(ctx context.Context, batch []polled) map[*kgo.Record]bool {
	if d == nil {
		return nil
	}
	type claim struct {
		r     *kgo.Record
		key   string
		value string
		cmd   *redis.Cmd
	}
	var claims []claim
	for i := range batch {
		p := &batch[i]
		// Only events fanned out claim a key: one dead-lettered (invalid,
		// or refused by its schema) must not make a later valid one, or
		// its own redrive, a duplicate.
		if p.refused() || p.ev.IdempotencyKey == "" {
			continue
		}
		r := p.r
		claims = append(claims, claim{r: r, key: d.g.Keys().Dedup(p.ev.Tenant, p.ev.IdempotencyKey),
			value: strconv.Itoa(int(r.Partition)) + "/" + strconv.FormatInt(r.Offset, 10) + "/" + p.ev.ID})
	}
	if len(claims) == 0 {
		return nil
	}
	err := d.g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error {
		claim := func() error {
			p := rdb.Pipeline()
			for i := range claims {
				claims[i].cmd = claimScript.EvalSha(ctx, p, []string{claims[i].key}, claims[i].value, d.window.Milliseconds())
			}
			_, err := p.Exec(ctx)
			return err
		}
		// A server (a Cluster node) that has not got the script yet says
		// NOSCRIPT: load it (on every master of a Cluster, which a SCRIPT
		// LOAD in the pipeline would not) and claim again, which finds
		// the claims already made as this record's.
		err := claim()
		if err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return err
		}
		if err := claimScript.Load(ctx, rdb).Err(); err != nil {
			return err
		}
		return claim()
	})
	if err != nil {
		d.log.Debug("dedup skipped for this batch", zap.Error(err))
		return nil
	}
	var dups map[*kgo.Record]bool
	for _, c := range claims {
		if n, err := c.cmd.Int64(); err == nil && n == 0 {
			if dups == nil {
				dups = map[*kgo.Record]bool{}
			}
			dups[c.r] = true
			d.log.Debug("dropping a duplicate event", zap.Int32("partition", c.r.Partition), zap.Int64("offset", c.r.Offset))
		}
	}
	d.dropped.Add(uint64(len(dups)))
	return dups
}

// countSchema adds a committed batch's invalid and unknown events to the
// counts Redis keeps for the dashboard (best effort: Redis down loses them,
// the metrics keep them).
func (d *dedup) countSchema(ctx context.Context, now time.Time, v validationCounts) {
	if d == nil {
		return
	}
	faults := map[[2]string]int{}
	for k, n := range v {
		if k[1] == catalog.OutcomeInvalid || k[1] == catalog.OutcomeUnknown {
			faults[k] = n
		}
	}
	if err := d.g.CountSchema(ctx, now, faults); err != nil {
		d.log.Debug("counting invalid events in Redis", zap.Error(err))
	}
}
