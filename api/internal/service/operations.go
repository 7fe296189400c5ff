package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/topics"
)

// Operations are the bulk operations as callers start and follow them
// (package internal/oprunner carries them out).
type Operations struct {
	topic  string
	client *kgo.Client
	table  *table.OpTable // nil: this replica runs no operations
}

// NewOperations makes the operations over their topic and its table (nil:
// none), written with client.
func NewOperations(topic string, client *kgo.Client, t *table.OpTable) *Operations {
	return &Operations{topic: topic, client: client, table: t}
}

var errNoOperations = unavailable("this API replica runs no operations")

// Get is the operation id, if c sees it.
func (s *Operations) Get(ctx context.Context, c Caller, id string) (Operation, error) {
	if err := s.caughtUp(ctx); err != nil {
		return Operation{}, err
	}
	o, ok := s.table.Get(id)
	if !ok || !c.Sees(o.Tenant) {
		return Operation{}, notFound("no operation " + id)
	}
	return operationOf(&o), nil
}

// List is the newest limit operations c sees, newest first.
func (s *Operations) List(ctx context.Context, c Caller, limit int) ([]Operation, error) {
	if err := s.caughtUp(ctx); err != nil {
		return nil, err
	}
	all, _ := s.table.All()
	out := []Operation{}
	for i := len(all) - 1; i >= 0 && len(out) < limit; i-- {
		if c.Sees(all[i].Tenant) {
			out = append(out, operationOf(&all[i]))
		}
	}
	return out, nil
}

// Start writes o as a pending operation of c's tenant, its time range
// closed at the latest now.
func (s *Operations) Start(ctx context.Context, c Caller, o *topics.Operation) (Operation, error) {
	if s.table == nil {
		return Operation{}, errNoOperations
	}
	now := time.Now().UTC()
	o.ID, o.Tenant, o.State, o.CreatedAt, o.UpdatedAt = topics.NewID("op_"), c.Tenant, topics.OperationPending, now, now
	if o.Until.IsZero() || o.Until.After(now) {
		o.Until = now
	}
	if !o.Since.IsZero() && !o.Since.Before(o.Until) {
		return Operation{}, invalid("operation", "since", "since must come before until and before now", o.Since)
	}
	if err := produce(ctx, s.client, &kgo.Record{Topic: s.topic, Key: []byte(o.ID), Value: o.Encode()}); err != nil {
		return Operation{}, err
	}
	return operationOf(o), nil
}

// caughtUp waits until the table holds every operation written before.
func (s *Operations) caughtUp(ctx context.Context) error {
	if s.table == nil {
		return errNoOperations
	}
	if err := s.table.WaitCaughtUp(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return unavailable("the operations could not be read in time")
		}
		return fmt.Errorf("operations: %w", err)
	}
	return nil
}

func operationOf(o *topics.Operation) Operation {
	out := Operation{ID: o.ID, Kind: o.Kind, State: o.State, Error: o.Error, Tenant: o.Tenant, SubscriptionID: o.Subscription,
		EventType: o.EventType, Category: o.Category, DeadLetters: len(o.DeadLetters), Since: o.Since, Until: o.Until, Rate: o.Rate, Matched: o.Matched, Done: o.Done,
		Sent: o.Sent, Skipped: o.Skipped, Failed: o.Failed, CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt}
	switch {
	case o.State == topics.OperationDone:
		out.Progress = 1
	case o.Matched > 0:
		out.Progress = min(1, float64(o.Done)/float64(o.Matched))
	}
	return out
}
