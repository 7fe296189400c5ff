package service

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/topics"
)

// GroupLag is how far one consumer group of the pipeline is behind on one
// topic.
type GroupLag struct {
	Group string `json:"group"`
	Topic string `json:"topic"`
	Lag   int64  `json:"lag" doc:"Records after the group's committed offsets, summed over partitions; for the retrier, the retries held until due."`
}

// HeldKeys sums up the ordered keys held behind a failed delivery (the
// holds topic): how many, and the one held longest.
type HeldKeys struct {
	Keys    int        `json:"keys" doc:"Ordered keys held now."`
	Longest string     `json:"longest,omitempty" doc:"The delivery key held longest: subscription id, '/', ordering key."`
	Head    string     `json:"head,omitempty" doc:"The event whose outcome releases that key."`
	Since   *time.Time `json:"since,omitempty" doc:"Since when that key has been held."`
}

// LagOutput is the answer of GET /v1/lag.
type LagOutput struct {
	Body struct {
		Data  []GroupLag `json:"data"`
		Holds *HeldKeys  `json:"holds,omitempty" doc:"The ordered keys held; absent when this replica does not read the holds topic."`
	}
}

// Lag is how far behind each component's consumer group is, and the
// ordered keys held.
type Lag struct {
	adm   *kadm.Client
	names topics.Names
	holds *table.HoldTable // nil: not shown
}

// NewLag reads the groups' lag through adm, and the keys held in holds
// (nil: not shown).
func NewLag(adm *kadm.Client, names topics.Names, holds *table.HoldTable) *Lag {
	return &Lag{adm: adm, names: names, holds: holds}
}

// Get is each component's consumer group (by its default name) and how
// many records it has yet to read, per topic, for an admin.
func (l *Lag) Get(ctx context.Context, c Caller) (*LagOutput, error) {
	if err := adminOnly(c); err != nil {
		return nil, err
	}
	n := l.names
	out := &LagOutput{}
	out.Body.Data = []GroupLag{}
	for _, g := range []struct {
		group  string
		topics []string
	}{
		{topics.GroupDispatcher, []string{n.Events()}},
		{topics.GroupDeliverer, append(n.DeliveryTopics(), n.Redeliveries())},
		{topics.GroupRetrier, n.RetryTopics()},
		{topics.GroupRecorder, []string{n.Attempts()}},
	} {
		lags, err := ops.GroupLag(ctx, l.adm, g.group, g.topics...)
		if err != nil {
			return nil, fmt.Errorf("lag of %s: %w", g.group, err)
		}
		for _, t := range g.topics {
			row := GroupLag{Group: g.group, Topic: t}
			for _, pl := range lags {
				if pl.Topic == t {
					row.Lag += pl.Lag
				}
			}
			out.Body.Data = append(out.Body.Data, row)
		}
	}
	if l.holds != nil {
		h := &HeldKeys{Keys: l.holds.Len()}
		if key, hold, ok := l.holds.Oldest(); ok {
			h.Longest, h.Head, h.Since = key, hold.Head, &hold.Since
		}
		out.Body.Holds = h
	}
	return out, nil
}
