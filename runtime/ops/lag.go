package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// PartitionLag is a consumer group's position in one partition.
type PartitionLag struct {
	Topic     string
	Partition int32
	// Committed is the group's committed offset (the next record it
	// reads), or -1 when the group committed nothing here.
	Committed int64
	// Start and End are the partition's log start and end offsets.
	Start, End int64
	// Lag is End minus the committed offset (or Start, when nothing is
	// committed or the commit fell behind the log start). Transaction
	// markers count as records: on a topic written in transactions (the
	// dispatcher's deliveries), a group that is fully caught up can show
	// a lag of one per partition.
	Lag int64
}

// GroupLag reads the group's committed offsets and the topics' start and
// end offsets, and returns the lag of every partition of the topics, sorted
// by topic and partition. A group that does not exist has committed
// nothing: its lag is every record. A topic that does not exist is an
// error.
func GroupLag(ctx context.Context, adm *kadm.Client, group string, topics ...string) ([]PartitionLag, error) {
	committed, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		committed, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("committed offsets of group %s: %w", group, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("end offsets: %w", err)
	}
	var out []PartitionLag
	for _, t := range topics {
		ps := ends[t]
		if _, missing := ps[-1]; missing || len(ps) == 0 {
			return nil, &UnknownTopicError{Topic: t}
		}
		for p, end := range ps {
			start, ok := starts.Lookup(t, p)
			if end.Err != nil || !ok || start.Err != nil {
				return nil, fmt.Errorf("offsets of %s/%d: %w", t, p, errors.Join(end.Err, start.Err))
			}
			pl := PartitionLag{Topic: t, Partition: p, Committed: -1, Start: start.Offset, End: end.Offset}
			from := start.Offset
			if c, ok := committed.Lookup(t, p); ok && c.Err == nil && c.At >= 0 {
				pl.Committed = c.At
				from = max(from, c.At)
			}
			pl.Lag = max(0, end.Offset-from)
			out = append(out, pl)
		}
	}
	slices.SortFunc(out, func(a, b PartitionLag) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, nil
}

// UnknownTopicError is GroupLag's error for a topic that does not exist.
type UnknownTopicError struct{ Topic string }

func (e *UnknownTopicError) Error() string { return "topic " + e.Topic + " does not exist" }

// Unwrap makes errors.Is(err, kerr.UnknownTopicOrPartition) hold.
func (e *UnknownTopicError) Unwrap() error { return kerr.UnknownTopicOrPartition }

// TopicTotals sums lags per topic.
func TopicTotals(lags []PartitionLag) map[string]int64 {
	out := map[string]int64{}
	for _, l := range lags {
		out[l.Topic] += l.Lag
	}
	return out
}

// watchLag refreshes the lag gauge of group until the server's watch
// context is done. A failure is logged once, until a refresh succeeds.
func (s *Server) watchLag(cl *kgo.Client, group string, topics []string) {
	adm := kadm.NewClient(cl)
	every := s.lagEvery
	if every <= 0 {
		every = LagInterval
	}
	t := time.NewTimer(0)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-s.watch.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.watch, every)
		lags, err := GroupLag(ctx, adm, group, topics...)
		cancel()
		switch {
		case err != nil && s.watch.Err() == nil && !failing:
			failing = true
			s.log.Warn("consumer lag not available", zap.String("group", group), zap.Error(err))
		case err == nil:
			failing = false
			for topic, lag := range TopicTotals(lags) {
				s.lag.WithLabelValues(group, topic).Set(float64(lag))
			}
		}
		t.Reset(every)
	}
}
