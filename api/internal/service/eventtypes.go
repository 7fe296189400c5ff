package service

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/catalog"
	"github.com/hookpipe/hookpipe/topics"
)

// EventTypes are the event catalog's operations: every caller reads it,
// admins write it.
type EventTypes struct {
	topic   string
	client  *kgo.Client
	catalog *catalog.Catalog
}

// NewEventTypes makes the catalog's operations over its topic, written
// with client.
func NewEventTypes(topic string, client *kgo.Client, c *catalog.Catalog) *EventTypes {
	return &EventTypes{topic: topic, client: client, catalog: c}
}

// List is every event type, by name.
func (s *EventTypes) List() []EventType {
	out := []EventType{}
	for _, t := range s.catalog.All() {
		out = append(out, eventTypeOf(t))
	}
	return out
}

// Get is the event type name.
func (s *EventTypes) Get(name string) (EventType, error) {
	t, ok := s.catalog.Get(name)
	if !ok {
		return EventType{}, notFound("no event type " + name)
	}
	return eventTypeOf(t), nil
}

// Create adds a type as version 1; a conflict when it exists.
func (s *EventTypes) Create(ctx context.Context, c Caller, name string, b EventTypeBody) (EventType, error) {
	if err := adminOnly(c); err != nil {
		return EventType{}, err
	}
	if _, ok := s.catalog.Get(name); ok {
		return EventType{}, &Error{Kind: Conflict, Msg: "event type " + name + " exists: update it with PUT /v1/event-types/" + name}
	}
	t, err := compileEventType(name, b, 1)
	if err != nil {
		return EventType{}, err
	}
	return s.put(ctx, t)
}

// Update writes the next version of a type. A change that would refuse
// data the current version accepts is a conflict with one reason per
// change (catalog.Breaking) unless force is set.
func (s *EventTypes) Update(ctx context.Context, c Caller, name string, b EventTypeBody, force bool) (EventType, error) {
	if err := adminOnly(c); err != nil {
		return EventType{}, err
	}
	prev, ok := s.catalog.Get(name)
	if !ok {
		return EventType{}, notFound("no event type " + name + ": create it with POST /v1/event-types")
	}
	next, err := compileEventType(name, b, prev.Version+1)
	if err != nil {
		return EventType{}, err
	}
	if why := catalog.Breaking(prev, next); len(why) > 0 && !force {
		e := &Error{Kind: Conflict, Msg: "this change would refuse data that version " + strconv.Itoa(prev.Version) +
			" accepts: set force=true to write it anyway, or publish under a new type name"}
		for _, w := range why {
			e.Fields = append(e.Fields, FieldError{Field: "schema", Why: w})
		}
		return EventType{}, e
	}
	return s.put(ctx, next)
}

// Delete removes the type name: its events become unknown.
func (s *EventTypes) Delete(ctx context.Context, c Caller, name string) error {
	if err := adminOnly(c); err != nil {
		return err
	}
	if _, ok := s.catalog.Get(name); !ok {
		return notFound("no event type " + name)
	}
	return s.write(ctx, &kgo.Record{Topic: s.topic, Key: []byte(name)})
}

// compileEventType builds and compiles a version of a type, refusing it
// with the field at fault.
func compileEventType(name string, b EventTypeBody, version int) (*catalog.Type, error) {
	t, err := catalog.Compile(topics.EventType{Name: name, Description: b.Description, Schema: b.Schema, Examples: b.Examples,
		Deprecated: b.Deprecated, Validation: b.Validation, Version: version, UpdatedAt: time.Now().UTC()})
	var ie *topics.InvalidError
	if errors.As(err, &ie) && ie.Field == "name" {
		return nil, invalid("event type", "name", ie.Reason, name)
	}
	return t, refusedRecord(err)
}

func (s *EventTypes) put(ctx context.Context, t *catalog.Type) (EventType, error) {
	if err := s.write(ctx, &kgo.Record{Topic: s.topic, Key: []byte(t.Name), Value: t.Encode()}); err != nil {
		return EventType{}, err
	}
	return eventTypeOf(t), nil
}

// write produces a record of the event-types topic and waits until this
// replica's catalog applied it (read your writes).
func (s *EventTypes) write(ctx context.Context, r *kgo.Record) error {
	if err := produce(ctx, s.client, r); err != nil {
		return err
	}
	return readBack(s.catalog.WaitApplied(ctx, r))
}

func eventTypeOf(t *catalog.Type) EventType {
	et := t.EventType
	return EventType{Name: et.Name, Version: et.Version, UpdatedAt: et.UpdatedAt, EventTypeBody: EventTypeBody{
		Description: et.Description, Schema: et.Schema, Examples: et.Examples, Deprecated: et.Deprecated, Validation: et.Mode()}}
}
