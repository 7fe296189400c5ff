package table

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/topics"

	"github.com/google/btree"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Table is a materialised view of the compacted subscriptions topic: every
// replica that holds one sees every subscription, kept up to date by a
// group-less consumer reading the topic from the start.
//
// A fetched batch is decoded outside the lock, then applied to the maps and
// indexes in place under it: the work per change does not grow with the
// number of subscriptions (a copy of everything per batch did, which made a
// replica's start quadratic and every change cost milliseconds at 100,000).
// Reads share the lock and see every batch whole or not at all.
// WaitCaughtUp waits until the view includes everything written to the
// topic before the call.
type Table struct {
	v    *view
	log  *zap.Logger
	keys *topics.Keyring
	// plainWarned: a plaintext secret under a keyring was logged once.
	plainWarned bool

	mu   sync.RWMutex
	byID map[string]*topics.Subscription
	// ordered holds every subscription by id, tenants by (tenant, id):
	// pages of a list cost their length, not the table's.
	ordered *btree.BTreeG[*topics.Subscription]
	tenants *btree.BTreeG[*topics.Subscription]
	count   map[string]int // subscriptions per tenant
	// match indexes the enabled subscriptions by tenant and pattern (see
	// matchKey), so an event looks at its own tenant's subscriptions and
	// the tenant-less ones with a pattern that can match its type.
	match map[string][]*topics.Subscription
}

// btreeDegree: nodes of 64 items keep the trees' overhead near 10 bytes
// per subscription.
const btreeDegree = 32

// NewTable starts consuming the subscriptions topic. base are the
// connection options (seed brokers, TLS, SASL, logger); the table adds its
// own consuming options. keys opens sealed secrets (nil: plaintext only,
// for development). Run must be called to apply records.
func NewTable(base []kgo.Opt, topic string, keys *topics.Keyring, log *zap.Logger) (*Table, error) {
	t := &Table{log: log.Named("subscriptions"), keys: keys,
		byID:    map[string]*topics.Subscription{},
		ordered: btree.NewG(btreeDegree, byID),
		tenants: btree.NewG(btreeDegree, byTenant),
		count:   map[string]int{},
		match:   map[string][]*topics.Subscription{},
	}
	if keys == nil {
		t.log.Warn("no " + config.EnvSecretsKey + " (" + config.EnvDev + "=1): subscription secrets are stored in plaintext")
	}
	v, err := newView(base, topic, t.apply)
	if err != nil {
		return nil, fmt.Errorf("subscription table: %w", err)
	}
	t.v = v
	return t, nil
}

func byID(a, b *topics.Subscription) bool { return a.ID < b.ID }

func byTenant(a, b *topics.Subscription) bool {
	if a.Tenant != b.Tenant {
		return a.Tenant < b.Tenant
	}
	return a.ID < b.ID
}

// Run applies records until ctx is done.
func (t *Table) Run(ctx context.Context) { t.v.run(ctx, t.log) }

// Close stops the table's client.
func (t *Table) Close() { t.v.close() }

// WaitCaughtUp returns once every record written to the topic before the
// call has been applied, or when ctx is done.
func (t *Table) WaitCaughtUp(ctx context.Context) error { return t.v.waitCaughtUp(ctx) }

// WaitApplied returns once r, a record produced to the topic (its
// partition and offset set by the broker's acknowledgement), has been
// applied, or when ctx is done: one write's read-your-write without a
// listing of end offsets.
func (t *Table) WaitApplied(ctx context.Context, r *kgo.Record) error {
	return t.v.waitApplied(ctx, r.Partition, r.Offset)
}

// change is one decoded record: sub nil deletes id.
type change struct {
	id  string
	sub *topics.Subscription
}

func (t *Table) apply(recs []*kgo.Record) {
	changes := make([]change, 0, len(recs))
	for _, r := range recs {
		id := string(r.Key)
		if r.Value == nil {
			changes = append(changes, change{id: id})
			continue
		}
		s, plaintext, err := topics.DecodeSubscriptionPlain(r.Value, t.keys)
		if err == nil && s.ID != id {
			err = fmt.Errorf("record key %q differs from id %q", id, s.ID)
		}
		if err != nil {
			// The value may hold a secret: log the reason only.
			t.log.Warn("ignoring invalid subscription record", zap.String("key", id),
				zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset), zap.Error(err))
			continue
		}
		if plaintext && !t.plainWarned {
			t.plainWarned = true
			t.log.Warn("subscription secrets stored in plaintext although "+config.EnvSecretsKey+" is set; "+
				"any webhookctl change to a subscription (update, enable, rotate-secret) rewrites it encrypted",
				zap.String("first", id))
		}
		changes = append(changes, change{id: id, sub: &s})
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range changes {
		if old, ok := t.byID[c.id]; ok {
			t.remove(old)
		}
		if c.sub != nil {
			t.insert(c.sub)
		}
	}
}

func (t *Table) insert(s *topics.Subscription) {
	t.byID[s.ID] = s
	t.ordered.ReplaceOrInsert(s)
	t.tenants.ReplaceOrInsert(s)
	t.count[s.Tenant]++
	if !s.Enabled {
		return
	}
	for _, p := range s.EventTypes {
		k := matchKey(s.Tenant, p)
		t.match[k] = append(t.match[k], s)
	}
}

func (t *Table) remove(s *topics.Subscription) {
	delete(t.byID, s.ID)
	t.ordered.Delete(s)
	t.tenants.Delete(s)
	if t.count[s.Tenant]--; t.count[s.Tenant] == 0 {
		delete(t.count, s.Tenant)
	}
	if !s.Enabled {
		return
	}
	for _, p := range s.EventTypes {
		k := matchKey(s.Tenant, p)
		// Linear in the subscriptions sharing this tenant and pattern.
		subs := t.match[k]
		if i := slices.Index(subs, s); i >= 0 {
			subs[i] = subs[len(subs)-1]
			subs[len(subs)-1] = nil
			subs = subs[:len(subs)-1]
		}
		if len(subs) == 0 {
			delete(t.match, k)
		} else {
			t.match[k] = subs
		}
	}
}

// matchKey is the index key of a tenant's pattern.
func matchKey(tenant, pattern string) string { return tenant + "\x00" + pattern }

// Get returns the subscription with the given id.
func (t *Table) Get(id string) (*topics.Subscription, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s, ok := t.byID[id]
	return s, ok
}

// Len is the number of subscriptions.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byID)
}

// Register exports the table's size on reg as webhooks_subscriptions: a
// replica holds every subscription in memory (docs/capacity.md), and a
// replica whose count differs from its peers' has not caught up.
func (t *Table) Register(reg prometheus.Registerer) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ops.Namespace, Name: "subscriptions",
		Help: "Subscriptions in this replica's table (enabled or not)."},
		func() float64 { return float64(t.Len()) }))
}

// TenantLen is the number of subscriptions of a tenant ("": those without
// one).
func (t *Table) TenantLen(tenant string) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.count[tenant]
}

// All returns every subscription, in no particular order.
func (t *Table) All() []*topics.Subscription {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]*topics.Subscription, 0, len(t.byID))
	for _, s := range t.byID {
		out = append(out, s)
	}
	return out
}

// Page returns, by id, up to limit subscriptions with an id above after
// that keep says to, of one tenant (the tenant-less ones when tenant is ""
// and one is true) or of all; more reports whether another matching one
// follows. keep is called with the table locked: it must not call the
// table.
func (t *Table) Page(tenant string, one bool, after string, limit int, keep func(*topics.Subscription) bool) (page []*topics.Subscription, more bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	tree := t.ordered
	if one {
		tree = t.tenants
	}
	tree.AscendGreaterOrEqual(&topics.Subscription{Tenant: tenant, ID: after}, func(s *topics.Subscription) bool {
		switch {
		case one && s.Tenant != tenant:
			return false
		case s.ID == after || !keep(s):
			return true
		case len(page) == limit:
			more = true
			return false
		}
		page = append(page, s)
		return true
	})
	return page, more
}

// Match returns the subscriptions that want the event (see
// topics.Subscription.Matches), each once. The returned subscriptions must not be
// modified.
func (t *Table) Match(e *topics.Event) []*topics.Subscription {
	var out []*topics.Subscription
	var seen map[*topics.Subscription]bool
	add := func(subs []*topics.Subscription) {
		for _, s := range subs {
			if !s.Matches(e) {
				continue
			}
			// Only a subscription with several patterns can be found twice.
			if len(s.EventTypes) > 1 {
				if seen[s] {
					continue
				}
				if seen == nil {
					seen = map[*topics.Subscription]bool{}
				}
				seen[s] = true
			}
			out = append(out, s)
		}
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	// The keys are built in one buffer and looked up as string(key), which
	// allocates nothing (a concatenation over 32 bytes did): this runs for
	// every event the dispatcher reads.
	var buf [128]byte
	lookup := func(tenant, pattern, suffix string) {
		k := append(append(append(append(buf[:0], tenant...), 0), pattern...), suffix...)
		add(t.match[string(k)])
	}
	for i, tenant := range [2]string{e.Tenant, ""} {
		if i == 1 && e.Tenant == "" {
			break // an event without a tenant: its tenant is the tenant-less one
		}
		lookup(tenant, e.Type, "")
		lookup(tenant, "*", "")
		// "a.*" and "a.b.*" for an event of type "a.b.c".
		for j := 0; j < len(e.Type)-1; j++ {
			if e.Type[j] == '.' {
				lookup(tenant, e.Type[:j+1], "*")
			}
		}
	}
	return out
}
