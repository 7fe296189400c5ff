package keys

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// producer keeps what it is given; err fails every write.
type producer struct {
	recs []*kgo.Record
	err  error
}

func (p *producer) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	var out kgo.ProduceResults
	for _, r := range rs {
		if p.err == nil {
			p.recs = append(p.recs, r)
		}
		out = append(out, kgo.ProduceResult{Record: r, Err: p.err})
	}
	return out
}

// table is the keys written so far, by id.
type table map[string]topics.APIKey

func (t table) Get(id string) (topics.APIKey, bool) {
	k, ok := t[id]
	return k, ok
}

// apply reads records into keys as the key table does.
func apply(t *testing.T, keys table, recs []*kgo.Record) {
	t.Helper()
	for _, r := range recs {
		k, err := topics.DecodeAPIKey(r.Value)
		if err != nil || string(r.Key) != k.ID {
			t.Fatalf("record %s keyed %q: %v", r.Value, r.Key, err)
		}
		keys[k.ID] = k
	}
}

var names = topics.Names{Prefix: "test."}

func TestCreate(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, tenant string }{{"ci", ""}, {"acme's", "acme"}} {
		p := &producer{}
		key, rec, err := Create(ctx, p, names, tc.name, tc.tenant)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.recs) != 1 || p.recs[0].Topic != "test.apikeys" {
			t.Fatalf("%d records written, want 1 on test.apikeys", len(p.recs))
		}
		got := table{}
		apply(t, got, p.recs)
		k := got[rec.ID]
		if k.Hash != topics.HashAPIKey(key) || k.Tenant != tc.tenant || k.Name != tc.name || k.Revoked() || len(key) != 47 {
			t.Fatalf("key %q written as %+v", key, k)
		}
	}
}

func TestCreateRefuses(t *testing.T) {
	p := &producer{}
	var ie *topics.InvalidError
	if _, _, err := Create(context.Background(), p, names, "", "a b"); !errors.As(err, &ie) || ie.Field != "tenant" {
		t.Fatalf("tenant %q: %v, want an invalid tenant", "a b", err)
	}
	if len(p.recs) != 0 {
		t.Fatalf("%d records written for an invalid tenant", len(p.recs))
	}
	broker := errors.New("broker down")
	if _, _, err := Create(context.Background(), &producer{err: broker}, names, "", ""); !errors.Is(err, broker) {
		t.Fatalf("a failed write: %v", err)
	}
}

func TestRevoke(t *testing.T) {
	ctx := context.Background()
	p := &producer{}
	_, rec, err := Create(ctx, p, names, "", "acme")
	if err != nil {
		t.Fatal(err)
	}
	keys := table{}
	apply(t, keys, p.recs)
	if _, err := Revoke(ctx, p, names, keys, "key_nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoking an unknown key: %v, want ErrNotFound", err)
	}
	k, err := Revoke(ctx, p, names, keys, rec.ID)
	if err != nil || !k.Revoked() || len(p.recs) != 2 {
		t.Fatalf("revoked %+v (%v), %d records, want it revoked and written", k, err, len(p.recs))
	}
	apply(t, keys, p.recs[1:])
	if now := keys[rec.ID]; !now.Revoked() || now.Hash != rec.Hash {
		t.Fatalf("the topic holds %+v after the revocation", now)
	}
	again, err := Revoke(ctx, p, names, keys, rec.ID)
	if err != nil || !again.RevokedAt.Equal(*k.RevokedAt) || len(p.recs) != 2 {
		t.Fatalf("revoking again: %+v (%v), %d records, want it unchanged, nothing written", again, err, len(p.recs))
	}
}
