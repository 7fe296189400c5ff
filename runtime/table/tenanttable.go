package table

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/topics"
)

// TenantTable is a materialised view of the compacted tenants topic: the
// quotas of the tenants that override the defaults.
type TenantTable struct {
	*Keyed[*topics.Tenant]
}

// NewTenantTable starts consuming the tenants topic; Run applies records.
func NewTenantTable(base []kgo.Opt, topic string, log *zap.Logger) (*TenantTable, error) {
	k, err := NewKeyed(base, topic, log.Named("tenants"), func(id string, b []byte) (*topics.Tenant, error) {
		t, err := topics.DecodeTenant(b)
		if err == nil && t.ID != id {
			err = fmt.Errorf("tenant record %q under key %q", t.ID, id)
		}
		return &t, err
	})
	if err != nil {
		return nil, err
	}
	return &TenantTable{k}, nil
}

// WaitCaughtUp returns once every record written before the call has been
// applied, or ctx is done. A nil table has nothing to wait for.
func (t *TenantTable) WaitCaughtUp(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.Keyed.WaitCaughtUp(ctx)
}

// Get returns a tenant's overrides, nil when it has none (the defaults
// apply: see topics.Tenant's methods, which take a nil tenant). A nil
// table has none.
func (t *TenantTable) Get(id string) *topics.Tenant {
	if t == nil {
		return nil
	}
	v, _ := t.Keyed.Get(id)
	return v
}

// ErrSubscriptionLimit refuses a subscription whose tenant has its most.
var ErrSubscriptionLimit = errors.New("subscription limit reached")

// Room checks that sub may be written: its tenant, if it has one, has fewer
// other subscriptions in subs than its limit (its override, else def; 0:
// unlimited). Writers check against their own view, so two writers racing
// may pass the limit by one each.
func (t *TenantTable) Room(subs *Table, def int, sub *topics.Subscription) error {
	return t.RoomBeside(subs, def, sub, 0)
}

// RoomBeside is Room for a writer with pending more subscriptions of
// sub's tenant written or being written that subs does not show yet.
func (t *TenantTable) RoomBeside(subs *Table, def int, sub *topics.Subscription, pending int) error {
	if sub.Tenant == "" {
		return nil
	}
	limit := t.Get(sub.Tenant).SubscriptionLimit(def)
	if limit == 0 {
		return nil
	}
	n := subs.TenantLen(sub.Tenant) + pending
	if old, ok := subs.Get(sub.ID); ok && old.Tenant == sub.Tenant {
		n--
	}
	if n >= limit {
		return fmt.Errorf("%w: tenant %s has %d subscriptions, its limit", ErrSubscriptionLimit, sub.Tenant, n)
	}
	return nil
}
