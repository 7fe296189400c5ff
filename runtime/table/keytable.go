package table

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/topics"
)

// KeyTable is a materialised view of the compacted apikeys topic, by id
// and by a key's hash.
type KeyTable struct {
	*Keyed[topics.APIKey]
	byHash hashes
}

// NewKeyTable starts consuming the apikeys topic; Run applies records.
func NewKeyTable(base []kgo.Opt, topic string, log *zap.Logger) (*KeyTable, error) {
	t := &KeyTable{byHash: hashes{}}
	k, err := newKeyed(base, topic, log.Named("apikeys"), rules[topics.APIKey]{decode: decodeAPIKey, index: t.byHash})
	if err != nil {
		return nil, err
	}
	t.Keyed = k
	return t, nil
}

func decodeAPIKey(r *kgo.Record) (topics.APIKey, error) {
	k, err := topics.DecodeAPIKey(r.Value)
	if err == nil && k.ID != string(r.Key) {
		err = fmt.Errorf("api key %q under key %q", k.ID, r.Key)
	}
	return k, err
}

// ByHash returns the key whose hash is h (revoked ones too: the caller
// refuses them).
func (t *KeyTable) ByHash(h string) (topics.APIKey, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	k, ok := t.byKey[t.byHash[h]]
	return k, ok
}

// hashes is the index of the keys' ids by their hash.
type hashes map[string]string

func (h hashes) insert(id string, k topics.APIKey) { h[k.Hash] = id }

func (h hashes) remove(_ string, k topics.APIKey) { delete(h, k.Hash) }
