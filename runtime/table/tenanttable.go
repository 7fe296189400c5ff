package table

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/topics"
)

// TenantTable is a materialised view of the compacted tenants topic: the
// quotas of the tenants that override the defaults.
type TenantTable struct {
	v   *view
	log *zap.Logger

	mu   sync.RWMutex
	byID map[string]*topics.Tenant
}

// NewTenantTable starts consuming the tenants topic; Run applies records.
func NewTenantTable(base []kgo.Opt, topic string, log *zap.Logger) (*TenantTable, error) {
	t := &TenantTable{log: log.Named("tenants"), byID: map[string]*topics.Tenant{}}
	v, err := newView(base, topic, t.apply)
	if err != nil {
		return nil, fmt.Errorf("tenant table: %w", err)
	}
	t.v = v
	return t, nil
}

// Run applies records until ctx is done.
func (t *TenantTable) Run(ctx context.Context) { t.v.run(ctx, t.log) }

// Close stops the table's client.
func (t *TenantTable) Close() { t.v.close() }

// WaitCaughtUp returns once every record written before the call has been
// applied, or ctx is done. A nil table has nothing to wait for.
func (t *TenantTable) WaitCaughtUp(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.v.waitCaughtUp(ctx)
}

// Get returns a tenant's overrides, nil when it has none (the defaults
// apply: see topics.Tenant's methods, which take a nil tenant). A nil
// table has none.
func (t *TenantTable) Get(id string) *topics.Tenant {
	if t == nil {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.byID[id]
}

// All returns every tenant with overrides, by id.
func (t *TenantTable) All() []topics.Tenant {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]topics.Tenant, 0, len(t.byID))
	for _, v := range t.byID {
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b topics.Tenant) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (t *TenantTable) apply(recs []*kgo.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range recs {
		id := string(r.Key)
		delete(t.byID, id)
		if r.Value == nil {
			continue
		}
		v, err := topics.DecodeTenant(r.Value)
		if err != nil || v.ID != id {
			t.log.Warn("ignoring invalid tenant record", zap.String("tenant", id), zap.Error(err))
			continue
		}
		t.byID[id] = &v
	}
}

// ErrSubscriptionLimit refuses a subscription whose tenant has its most.
var ErrSubscriptionLimit = errors.New("subscription limit reached")

// Room checks that sub may be written: its tenant, if it has one, has fewer
// other subscriptions in subs than its limit (its override, else def; 0:
// unlimited). Writers check against their own view, so two writers racing
// may pass the limit by one each.
func (t *TenantTable) Room(subs *Table, def int, sub *topics.Subscription) error {
	if sub.Tenant == "" {
		return nil
	}
	limit := t.Get(sub.Tenant).SubscriptionLimit(def)
	if limit == 0 {
		return nil
	}
	n := subs.TenantLen(sub.Tenant)
	if old, ok := subs.Get(sub.ID); ok && old.Tenant == sub.Tenant {
		n--
	}
	if n >= limit {
		return fmt.Errorf("%w: tenant %s has %d subscriptions, its limit", ErrSubscriptionLimit, sub.Tenant, n)
	}
	return nil
}
