package service

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/table"
)

// claims are the subscription creates in progress on this replica: a
// create claims its id, so a second create of the id waits for the first
// and then finds it taken (409), and counts against its tenant's quota
// from its check until the table shows it. Across replicas the tables
// decide: a create sees every write acknowledged before it began
// (readBeforeCreate), so only creates of one id racing on two replicas at
// once may both succeed, the later write winning, as before.
type claims struct {
	subs *table.Table

	mu sync.Mutex
	// ids are the ids being created, each with a channel closed when its
	// create is over.
	ids map[string]chan struct{}
	// pending counts, per tenant, the creates that passed the quota check
	// and that the table does not show yet.
	pending map[string]int
}

func newClaims(subs *table.Table) *claims {
	return &claims{subs: subs, ids: map[string]chan struct{}{}, pending: map[string]int{}}
}

// claim is one create's hold on its id, and on a place in its tenant's
// quota once room granted it.
type claim struct {
	c      *claims
	id     string
	done   chan struct{}
	tenant string
	// counted: the create holds a place in pending (room granted, shown
	// not yet called).
	counted bool
}

// claim waits until no other create of id is in progress on this replica,
// then claims it; release ends the claim.
func (c *claims) claim(ctx context.Context, id string) (*claim, error) {
	for {
		c.mu.Lock()
		busy, ok := c.ids[id]
		if !ok {
			cl := &claim{c: c, id: id, done: make(chan struct{})}
			c.ids[id] = cl.done
			c.mu.Unlock()
			return cl, nil
		}
		c.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// room runs check, a quota check of tenant, with the creates of the tenant
// in progress on this replica that the table does not show yet; when it
// passes, this create is one of them until shown or released.
func (cl *claim) room(tenant string, check func(pending int) error) error {
	c := cl.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := check(c.pending[tenant]); err != nil {
		return err
	}
	c.pending[tenant]++
	cl.tenant, cl.counted = tenant, true
	return nil
}

// shown hands the acknowledged record of the create to the table, and
// stops counting it as pending in the same step: a quota check sees it
// once, in the table or in pending.
func (cl *claim) shown(r *kgo.Record) {
	c := cl.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subs.Written(r)
	cl.uncount()
}

// release ends the claim: the next create of the id may go on.
func (cl *claim) release() {
	c := cl.c
	c.mu.Lock()
	defer c.mu.Unlock()
	cl.uncount()
	delete(c.ids, cl.id)
	close(cl.done)
}

// uncount stops counting the create as pending; c.mu is held.
func (cl *claim) uncount() {
	if !cl.counted {
		return
	}
	cl.counted = false
	c := cl.c
	if c.pending[cl.tenant]--; c.pending[cl.tenant] == 0 {
		delete(c.pending, cl.tenant)
	}
}
