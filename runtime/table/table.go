package table

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/topics"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Table is a materialised view of the compacted subscriptions topic: every
// replica that holds one sees every subscription, kept up to date by a
// group-less consumer reading the topic from the start.
//
// Reads never block: they see an immutable snapshot, swapped after each
// fetch is applied. WaitCaughtUp waits until the view includes everything
// written to the topic before the call.
type Table struct {
	v    *view
	log  *zap.Logger
	keys *topics.Keyring
	snap atomic.Pointer[snapshot]
	// plainWarned: a plaintext secret under a keyring was logged once.
	plainWarned bool
}

// snapshot is an immutable view of the table with a matching index.
type snapshot struct {
	byID     map[string]*topics.Subscription
	exact    map[string][]*topics.Subscription // event type -> subscriptions with that exact pattern
	prefixes []prefixed                        // "prefix.*" patterns
	any      []*topics.Subscription            // "*" patterns
}

type prefixed struct {
	prefix string // with the trailing '.'
	sub    *topics.Subscription
}

// NewTable starts consuming the subscriptions topic. base are the
// connection options (seed brokers, TLS, SASL, logger); the table adds its
// own consuming options. keys opens sealed secrets (nil: plaintext only,
// for development). Run must be called to apply records.
func NewTable(base []kgo.Opt, topic string, keys *topics.Keyring, log *zap.Logger) (*Table, error) {
	t := &Table{log: log.Named("subscriptions"), keys: keys}
	if keys == nil {
		t.log.Warn("no " + config.EnvSecretsKey + " (" + config.EnvDev + "=1): subscription secrets are stored in plaintext")
	}
	t.snap.Store(build(map[string]*topics.Subscription{}))
	v, err := newView(base, topic, t.apply)
	if err != nil {
		return nil, fmt.Errorf("subscription table: %w", err)
	}
	t.v = v
	return t, nil
}

// Run applies records until ctx is done.
func (t *Table) Run(ctx context.Context) { t.v.run(ctx, t.log) }

// Close stops the table's client.
func (t *Table) Close() { t.v.close() }

// WaitCaughtUp returns once every record written to the topic before the
// call has been applied, or when ctx is done.
func (t *Table) WaitCaughtUp(ctx context.Context) error { return t.v.waitCaughtUp(ctx) }

func (t *Table) apply(recs []*kgo.Record) {
	cur := t.snap.Load().byID
	byID := make(map[string]*topics.Subscription, len(cur))
	for k, v := range cur {
		byID[k] = v
	}
	for _, r := range recs {
		id := string(r.Key)
		if r.Value == nil {
			delete(byID, id)
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
		byID[id] = &s
	}
	t.snap.Store(build(byID))
}

// Get returns the subscription with the given id.
func (t *Table) Get(id string) (*topics.Subscription, bool) {
	s, ok := t.snap.Load().byID[id]
	return s, ok
}

// Len is the number of subscriptions.
func (t *Table) Len() int { return len(t.snap.Load().byID) }

// All returns every subscription, in no particular order.
func (t *Table) All() []*topics.Subscription {
	byID := t.snap.Load().byID
	out := make([]*topics.Subscription, 0, len(byID))
	for _, s := range byID {
		out = append(out, s)
	}
	return out
}

// Match returns the subscriptions that want the event (see
// topics.Subscription.Matches), each once. The returned subscriptions must not be
// modified.
func (t *Table) Match(e *topics.Event) []*topics.Subscription {
	s := t.snap.Load()
	var out []*topics.Subscription
	seen := map[*topics.Subscription]bool{}
	add := func(sub *topics.Subscription) {
		if !seen[sub] && sub.Matches(e) {
			seen[sub] = true
			out = append(out, sub)
		}
	}
	for _, sub := range s.exact[e.Type] {
		add(sub)
	}
	for _, p := range s.prefixes {
		if strings.HasPrefix(e.Type, p.prefix) {
			add(p.sub)
		}
	}
	for _, sub := range s.any {
		add(sub)
	}
	return out
}

func build(byID map[string]*topics.Subscription) *snapshot {
	s := &snapshot{byID: byID, exact: map[string][]*topics.Subscription{}}
	for _, sub := range byID {
		if !sub.Enabled {
			continue
		}
		for _, p := range sub.EventTypes {
			switch {
			case p == "*":
				s.any = append(s.any, sub)
			case strings.HasSuffix(p, ".*"):
				s.prefixes = append(s.prefixes, prefixed{prefix: strings.TrimSuffix(p, "*"), sub: sub})
			default:
				s.exact[p] = append(s.exact[p], sub)
			}
		}
	}
	return s
}
