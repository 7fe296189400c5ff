package table

import (
	"fmt"
	"slices"

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
// group-less consumer reading the topic from the start. Its indexes change
// in place with each batch: the work per change does not grow with the
// number of subscriptions (a copy of everything per batch did, which made a
// replica's start quadratic and every change cost milliseconds at 100,000).
// A record that does not decode leaves the subscription as it was.
type Table struct {
	*Keyed[*topics.Subscription]
	idx *subIndexes
}

// subIndexes are the subscriptions by order and by pattern, kept under the
// table's lock.
type subIndexes struct {
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
	log = log.Named("subscriptions")
	if keys == nil {
		log.Warn("no " + config.EnvSecretsKey + " (" + config.EnvDev + "=1): subscription secrets are stored in plaintext")
	}
	idx := &subIndexes{
		ordered: btree.NewG(btreeDegree, byID),
		tenants: btree.NewG(btreeDegree, byTenant),
		count:   map[string]int{},
		match:   map[string][]*topics.Subscription{},
	}
	d := &subDecoder{keys: keys, log: log}
	k, err := newKeyed(base, topic, log, rules[*topics.Subscription]{decode: d.decode, keepInvalid: true, index: idx})
	if err != nil {
		return nil, err
	}
	return &Table{Keyed: k, idx: idx}, nil
}

func byID(a, b *topics.Subscription) bool { return a.ID < b.ID }

func byTenant(a, b *topics.Subscription) bool {
	if a.Tenant != b.Tenant {
		return a.Tenant < b.Tenant
	}
	return a.ID < b.ID
}

// subDecoder opens the secrets of subscription records.
type subDecoder struct {
	keys *topics.Keyring
	log  *zap.Logger
	// plainWarned: a plaintext secret under a keyring was logged once.
	plainWarned bool
}

func (d *subDecoder) decode(r *kgo.Record) (*topics.Subscription, error) {
	s, plaintext, err := topics.DecodeSubscriptionPlain(r.Value, d.keys)
	if err == nil && s.ID != string(r.Key) {
		err = fmt.Errorf("record key %q differs from id %q", r.Key, s.ID)
	}
	if err != nil {
		return nil, err
	}
	if plaintext && !d.plainWarned {
		d.plainWarned = true
		d.log.Warn("subscription secrets stored in plaintext although "+config.EnvSecretsKey+" is set; "+
			"any webhookctl change to a subscription (update, enable, rotate-secret) rewrites it encrypted",
			zap.String("first", s.ID))
	}
	return &s, nil
}

func (x *subIndexes) insert(_ string, s *topics.Subscription) {
	x.ordered.ReplaceOrInsert(s)
	x.tenants.ReplaceOrInsert(s)
	x.count[s.Tenant]++
	if !s.Enabled {
		return
	}
	for _, p := range s.EventTypes {
		k := matchKey(s.Tenant, p)
		x.match[k] = append(x.match[k], s)
	}
}

func (x *subIndexes) remove(_ string, s *topics.Subscription) {
	x.ordered.Delete(s)
	x.tenants.Delete(s)
	if x.count[s.Tenant]--; x.count[s.Tenant] == 0 {
		delete(x.count, s.Tenant)
	}
	if !s.Enabled {
		return
	}
	for _, p := range s.EventTypes {
		k := matchKey(s.Tenant, p)
		// Linear in the subscriptions sharing this tenant and pattern.
		subs := x.match[k]
		if i := slices.Index(subs, s); i >= 0 {
			subs[i] = subs[len(subs)-1]
			subs[len(subs)-1] = nil
			subs = subs[:len(subs)-1]
		}
		if len(subs) == 0 {
			delete(x.match, k)
		} else {
			x.match[k] = subs
		}
	}
}

// matchKey is the index key of a tenant's pattern.
func matchKey(tenant, pattern string) string { return tenant + "\x00" + pattern }

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
	return t.idx.count[tenant]
}

// Page returns, by id, up to limit subscriptions with an id above after
// that keep says to, of one tenant (the tenant-less ones when tenant is ""
// and one is true) or of all; more reports whether another matching one
// follows. keep is called with the table locked: it must not call the
// table.
func (t *Table) Page(tenant string, one bool, after string, limit int, keep func(*topics.Subscription) bool) (page []*topics.Subscription, more bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	tree := t.idx.ordered
	if one {
		tree = t.idx.tenants
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
		add(t.idx.match[string(k)])
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
