package table

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/topics"
)

// AlertTable is a materialised view of the compacted alert-channels topic.
type AlertTable struct {
	*Keyed[*topics.AlertChannel]
}

// NewAlertTable starts consuming the alert-channels topic; Run applies
// records, opening sealed URLs with keys.
func NewAlertTable(base []kgo.Opt, topic string, keys *topics.Keyring, log *zap.Logger) (*AlertTable, error) {
	k, err := NewKeyed(base, topic, log.Named("alert-channels"), func(id string, b []byte) (*topics.AlertChannel, error) {
		c, err := topics.DecodeAlertChannelWith(b, keys)
		if err == nil && c.ID != id {
			err = fmt.Errorf("alert channel %q under key %q", c.ID, id)
		}
		return &c, err
	})
	if err != nil {
		return nil, err
	}
	return &AlertTable{k}, nil
}

// WaitCaughtUp returns once every record written before the call has been
// applied, or ctx is done. A nil table has nothing to wait for.
func (t *AlertTable) WaitCaughtUp(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.Keyed.WaitCaughtUp(ctx)
}

// Hearing are the channels told of an operational event of type typ in
// tenant: the tenant's own that take the type, and the operators'. A nil
// table has none. Operational events are rare, so it scans.
func (t *AlertTable) Hearing(tenant, typ string) []*topics.AlertChannel {
	if t == nil {
		return nil
	}
	var out []*topics.AlertChannel
	for _, c := range t.All() {
		if c.Hears(tenant, typ) {
			out = append(out, c)
		}
	}
	return out
}

// Get returns a channel by id; a nil table has none.
func (t *AlertTable) Get(id string) (*topics.AlertChannel, bool) {
	if t == nil {
		return nil, false
	}
	return t.Keyed.Get(id)
}

// All returns every channel, by id; a nil table has none.
func (t *AlertTable) All() []*topics.AlertChannel {
	if t == nil {
		return nil
	}
	return t.Keyed.All()
}
