package catalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/topics"
)

// What happens to an event whose type is not in the catalog
// (WEBHOOKS_UNKNOWN_EVENT_TYPES).
const (
	// UnknownAccept delivers it and counts nothing: an empty catalog
	// changes nothing.
	UnknownAccept = "accept"
	// UnknownWarn delivers it and counts it as unknown.
	UnknownWarn = "warn"
	// UnknownReject refuses it as the schema of an enforced type would.
	UnknownReject = "reject"
)

// Outcomes of judging an event, the label of the validation metrics.
const (
	OutcomeValid     = "valid"
	OutcomeInvalid   = "invalid"
	OutcomeUnknown   = "unknown"
	OutcomeUnchecked = "unchecked" // validation off, or an unknown type accepted
)

// Catalog is the event-types topic as a table of compiled types, and the
// policy for types it does not hold.
type Catalog struct {
	*table.Keyed[*Type]
	unknown string
}

// New starts consuming the event-types topic (Run applies records);
// unknown is UnknownAccept, UnknownWarn or UnknownReject. Each version of
// a type is compiled once, when its record is applied; a record that does
// not compile is logged and removes the type (the API and webhookctl
// compile before they write, so only a foreign writer gets there).
func New(base []kgo.Opt, topic, unknown string, log *zap.Logger) (*Catalog, error) {
	if err := ValidateUnknown(unknown); err != nil {
		return nil, err
	}
	k, err := table.NewKeyed(base, topic, log.Named("event-types"), func(name string, b []byte) (*Type, error) {
		et, err := topics.DecodeEventType(b)
		if err != nil {
			return nil, err
		}
		if et.Name != name {
			return nil, fmt.Errorf("event type %q under key %q", et.Name, name)
		}
		return Compile(et)
	})
	if err != nil {
		return nil, err
	}
	return &Catalog{Keyed: k, unknown: unknown}, nil
}

// Get returns a type by name; a nil catalog has none.
func (c *Catalog) Get(name string) (*Type, bool) {
	if c == nil {
		return nil, false
	}
	return c.Keyed.Get(name)
}

// All returns every type, by name; a nil catalog has none.
func (c *Catalog) All() []*Type {
	if c == nil {
		return nil
	}
	return c.Keyed.All()
}

// WaitCaughtUp returns once every record written before the call has been
// applied, or ctx is done; a nil catalog has nothing to wait for.
func (c *Catalog) WaitCaughtUp(ctx context.Context) error {
	if c == nil {
		return nil
	}
	return c.Keyed.WaitCaughtUp(ctx)
}

// ErrNoCatalog is what writing through a nil catalog waits for in vain.
var ErrNoCatalog = errors.New("no event catalog")

// WaitApplied returns once the record r (as produced) has been applied.
func (c *Catalog) WaitApplied(ctx context.Context, r *kgo.Record) error {
	if c == nil {
		return ErrNoCatalog
	}
	return c.Keyed.WaitApplied(ctx, r)
}

// ValidateUnknown checks an unknown-type policy.
func ValidateUnknown(s string) error {
	switch s {
	case UnknownAccept, UnknownWarn, UnknownReject:
		return nil
	}
	return fmt.Errorf("%q is not accept, warn or reject", s)
}

// Verdict is what the catalog says of one event.
type Verdict struct {
	Outcome string
	// Refuse says the event must not be delivered: invalid under an
	// enforced type, or unknown under UnknownReject.
	Refuse bool
	// Violation is set when Outcome is OutcomeInvalid.
	Violation *Violation
	// Known says whether the type is in the catalog (metrics label known
	// types by name and unknown ones as one).
	Known bool
}

// Reason is the verdict in one line, for a dead letter or a log.
func (v Verdict) Reason(eventType string) string {
	if v.Violation != nil {
		return fmt.Sprintf("event type %s: data does not match the schema %s", eventType, v.Violation)
	}
	return fmt.Sprintf("event type %s is not in the catalog, and unknown types are rejected", eventType)
}

// Judge checks an event's data against its type. A nil catalog checks
// nothing.
func (c *Catalog) Judge(eventType string, data []byte) Verdict {
	if c == nil {
		return Verdict{Outcome: OutcomeUnchecked}
	}
	t, ok := c.Get(eventType)
	return judge(t, ok, c.unknown, data)
}

// judge is Judge given the type looked up (ok: found).
func judge(t *Type, ok bool, unknown string, data []byte) Verdict {
	if !ok {
		switch unknown {
		case UnknownReject:
			return Verdict{Outcome: OutcomeUnknown, Refuse: true}
		case UnknownWarn:
			return Verdict{Outcome: OutcomeUnknown}
		}
		return Verdict{Outcome: OutcomeUnchecked}
	}
	mode := t.Mode()
	if mode == topics.ValidationOff {
		return Verdict{Outcome: OutcomeUnchecked, Known: true}
	}
	if v := t.Check(data); v != nil {
		return Verdict{Outcome: OutcomeInvalid, Refuse: mode == topics.ValidationEnforce, Violation: v, Known: true}
	}
	return Verdict{Outcome: OutcomeValid, Known: true}
}
