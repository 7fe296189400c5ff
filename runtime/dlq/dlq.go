// Package dlq reads the dead-letter topic: the dead letters that pass a
// filter, each flagged when a redrive marker points at it. webhookctl dlq
// and the API's /v1/dlq read it the same way.
package dlq

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/topics"
)

// Filter selects dead letters; zero fields select all.
type Filter struct {
	Subscription string
	// Type is a type, prefix.* or *.
	Type string
	// Category matches the failure category, or for an exhausted dead
	// letter its last failure's.
	Category string
	// Tenant, when set, keeps that tenant's dead letters only.
	Tenant       string
	Since, Until time.Time
}

// Matches reports whether a dead letter passes the filter. A dead event
// (one the dispatcher refused) has a type and a tenant when it decodes,
// but no subscription; an undecodable record has none of them, so those
// filters exclude it.
func (f *Filter) Matches(dl *topics.DeadLetter) bool {
	var typ, tenant string
	switch ev, ok := dl.Event(); {
	case dl.Delivery != nil:
		typ, tenant = dl.Delivery.EventType, dl.Delivery.Tenant
	case f.Subscription != "" || ((f.Type != "" || f.Tenant != "") && !ok):
		return false
	default:
		typ, tenant = ev.Type, ev.Tenant
	}
	switch {
	case f.Subscription != "" && dl.Delivery.SubscriptionID != f.Subscription,
		f.Type != "" && !topics.MatchType(f.Type, typ),
		f.Tenant != "" && tenant != f.Tenant,
		f.Category != "" && dl.FailureCategory != f.Category && dl.LastFailureCategory != f.Category,
		!f.Since.IsZero() && dl.DeadAt.Before(f.Since),
		!f.Until.IsZero() && !dl.DeadAt.Before(f.Until):
		return false
	}
	return true
}

// Entry is one dead letter found on the dlq topic.
type Entry struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       string `json:"key"`
	// Redriven says that a redrive marker points at this dead letter.
	Redriven   bool              `json:"redriven"`
	DeadLetter topics.DeadLetter `json:"dead_letter"`
}

// Read reads the dlq topic as it is now (from f.Since on, when set), with
// clients of base's options, and returns the dead letters that pass f,
// oldest first, each flagged when a redrive marker points at it. A record
// that is not a dead letter at all is returned as one without delivery,
// its reason saying why.
func Read(ctx context.Context, base []kgo.Opt, adm *kadm.Client, names topics.Names, f *Filter) ([]*Entry, error) {
	topic := names.DLQ()
	// A marker is written after the dead letter it points at, so reading
	// from Since on still sees every marker of the dead letters read.
	// Until cannot bound the read: later markers may point back.
	w, err := kafka.ReadWindow(ctx, adm, topic, f.Since, time.Time{})
	if err != nil {
		return nil, err
	}
	redriven := map[topics.Source]bool{}
	var out []*Entry
	err = kafka.Scan(ctx, base, w, func(r *kgo.Record) error {
		dl, err := topics.DecodeDeadLetter(r.Value)
		switch {
		case err != nil:
			dl = topics.DeadLetter{Reason: "unreadable dlq record: " + err.Error(), DeadAt: r.Timestamp.UTC()}
		case dl.Redriven != nil:
			redriven[*dl.Redriven] = true
			return nil
		}
		if f.Matches(&dl) {
			out = append(out, &Entry{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), DeadLetter: dl})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, e := range out {
		e.Redriven = redriven[topics.Source{Topic: topic, Partition: e.Partition, Offset: e.Offset}]
	}
	slices.SortFunc(out, func(a, b *Entry) int {
		return cmp.Or(a.DeadLetter.DeadAt.Compare(b.DeadLetter.DeadAt), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	return out, nil
}
