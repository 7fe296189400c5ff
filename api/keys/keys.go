// Package keys creates and revokes API keys on the apikeys topic, for the
// API's key routes and for webhookctl apikeys alike; listing is the key
// table's All (package runtime/table).
package keys

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// ErrNotFound is returned by Revoke when no key has the id.
var ErrNotFound = errors.New("no such API key")

// Producer writes records and waits for the broker's acknowledgement, as
// *kgo.Client does.
type Producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// Table finds a key by its id, as *table.KeyTable does once caught up.
type Table interface {
	Get(id string) (topics.APIKey, bool)
}

// Create makes a key, admin when tenant is empty, and writes its record
// (the hash only). The key is returned once: it cannot be read back. A
// tenant that is not a valid id is a *topics.InvalidError and nothing is
// written.
func Create(ctx context.Context, p Producer, names topics.Names, name, tenant string) (string, topics.APIKey, error) {
	if tenant != "" {
		if err := topics.ValidateID("api key", "tenant", tenant); err != nil {
			return "", topics.APIKey{}, err
		}
	}
	key, rec := topics.NewAPIKey(name, tenant)
	if err := write(ctx, p, names, rec); err != nil {
		return "", topics.APIKey{}, err
	}
	return key, rec, nil
}

// Revoke writes the key of id again with the time it was revoked, so that
// every reader of the topic refuses it; a key already revoked is returned
// as it is, nothing written.
func Revoke(ctx context.Context, p Producer, names topics.Names, t Table, id string) (topics.APIKey, error) {
	k, ok := t.Get(id)
	if !ok {
		return topics.APIKey{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if k.Revoked() {
		return k, nil
	}
	now := time.Now().UTC()
	k.RevokedAt = &now
	if err := write(ctx, p, names, k); err != nil {
		return topics.APIKey{}, err
	}
	return k, nil
}

func write(ctx context.Context, p Producer, names topics.Names, k topics.APIKey) error {
	r := &kgo.Record{Topic: names.APIKeys(), Key: []byte(k.ID), Value: k.Encode()}
	if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("writing API key %s: %w", k.ID, err)
	}
	return nil
}
