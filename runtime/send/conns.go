package send

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

// maxConns bounds the destinations a publisher keeps a connection to;
// past it, the one used longest ago is closed.
const maxConns = 256

// conns are a publisher's connections (clients), one per destination:
// destinations that differ in any field, credentials included, never
// share one, so a subscription's change of password takes effect at once.
type conns[C any] struct {
	close1 func(C)
	// alive, when set, tells a connection that still works from one the
	// server or the network closed for good, which get replaces.
	alive func(C) bool
	mu    sync.Mutex
	m     map[[32]byte]*conn[C]
	keys  map[*topics.Destination][32]byte // see key
}

type conn[C any] struct {
	c    C
	used time.Time
}

func newConns[C any](close1 func(C), alive func(C) bool) *conns[C] {
	return &conns[C]{close1: close1, alive: alive, m: map[[32]byte]*conn[C]{}, keys: map[*topics.Destination][32]byte{}}
}

// get is d's connection, made by open the first time (outside the lock:
// opening may dial, and other destinations need not wait for it).
func (cs *conns[C]) get(d *topics.Destination, open func() (C, error)) (C, error) {
	cs.mu.Lock()
	key := cs.key(d)
	if c := cs.m[key]; c != nil {
		if cs.alive == nil || cs.alive(c.c) {
			c.used = time.Now()
			cs.mu.Unlock()
			return c.c, nil
		}
		cs.close1(c.c)
		delete(cs.m, key)
	}
	cs.mu.Unlock()
	c, err := open()
	if err != nil {
		return c, err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if won := cs.m[key]; won != nil { // opened meanwhile by another attempt
		cs.close1(c)
		won.used = time.Now()
		return won.c, nil
	}
	if len(cs.m) >= maxConns {
		cs.evict()
	}
	cs.m[key] = &conn[C]{c: c, used: time.Now()}
	return c, nil
}

// maxDestinationKeys bounds the destinations whose key is remembered; past it, the
// memo starts over.
const maxDestinationKeys = 4 * maxConns

// key is d's key, the hash of every field, remembered by d's address
// (with cs.mu held): hashing each message's destination anew took a sixth
// of a Kafka publish's CPU. A Destination is not changed once its
// subscription is decoded; a change of subscription is a new one.
func (cs *conns[C]) key(d *topics.Destination) [32]byte {
	if k, ok := cs.keys[d]; ok {
		return k
	}
	if len(cs.keys) >= maxDestinationKeys {
		clear(cs.keys)
	}
	b, _ := json.Marshal(d) // a Destination always marshals
	k := sha256.Sum256(b)
	cs.keys[d] = k
	return k
}

// evict closes the connection used longest ago.
func (cs *conns[C]) evict() {
	var oldest [32]byte
	var at time.Time
	for k, c := range cs.m {
		if at.IsZero() || c.used.Before(at) {
			oldest, at = k, c.used
		}
	}
	cs.close1(cs.m[oldest].c)
	delete(cs.m, oldest)
}

// close closes every connection.
func (cs *conns[C]) close() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for k, c := range cs.m {
		cs.close1(c.c)
		delete(cs.m, k)
	}
	clear(cs.keys)
}
