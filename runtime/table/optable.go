package table

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/topics"
)

// OpTable is a materialised view of the compacted operations topic. A
// record that does not decode leaves the operation as it was.
type OpTable struct {
	*Keyed[topics.Operation]
}

// NewOpTable starts consuming the operations topic; Run applies records.
func NewOpTable(base []kgo.Opt, topic string, log *zap.Logger) (*OpTable, error) {
	k, err := newKeyed(base, topic, log.Named("operations"), rules[topics.Operation]{decode: decodeOperation, keepInvalid: true})
	if err != nil {
		return nil, err
	}
	return &OpTable{k}, nil
}

func decodeOperation(r *kgo.Record) (topics.Operation, error) {
	o, err := topics.DecodeOperation(r.Value)
	if err == nil && o.ID != string(r.Key) {
		err = fmt.Errorf("operation %q under key %q", o.ID, r.Key)
	}
	return o, err
}

// All returns every operation, oldest first, and a channel closed when the
// table next changes.
func (t *OpTable) All() ([]topics.Operation, <-chan struct{}) {
	ops, changed := t.Watch()
	slices.SortFunc(ops, func(a, b topics.Operation) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return ops, changed
}
