package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

func publishCmd(fs *flag.FlagSet) runFunc {
	var e topics.Event
	fs.StringVar(&e.Type, "type", "", "event type, e.g. order.created (required)")
	data := fs.String("data", "", "event data, JSON (required)")
	fs.StringVar(&e.ID, "id", "", "event id (default: evt_ + 20 random lowercase letters and digits)")
	fs.StringVar(&e.Tenant, "tenant", "", "tenant of the event")
	fs.StringVar(&e.Key, "key", "", "ordering key: the event's key field and its record key (empty: no key)")
	fs.StringVar(&e.IdempotencyKey, "idempotency-key", "", "events with a key seen in the last 24h are not fanned out again")
	fs.StringVar(&e.CreatedAt, "created-at", "", "RFC 3339 time (default: now)")
	fs.StringVar(&e.Priority, "priority", "", "high, normal or low (default: normal); ordered subscriptions keep their order whatever the priority")
	fs.StringVar(&e.DeliverAt, "deliver-at", "", "RFC 3339 time, at most 7 days ahead: no delivery is attempted before it (default: at once)")
	return func(ctx context.Context, c *cli, _ []string) error {
		if e.Type == "" {
			return usagef("--type is required")
		}
		if *data == "" {
			return usagef("--data is required")
		}
		if !json.Valid([]byte(*data)) {
			return usagef("--data is not valid JSON")
		}
		e.Data = json.RawMessage(*data)
		if e.ID == "" {
			e.ID = topics.NewID("evt_")
		}
		if e.CreatedAt == "" {
			e.CreatedAt = time.Now().UTC().Format(time.RFC3339Nano)
		}
		value, err := encodeEvent(&e)
		if err != nil {
			return err
		}
		// Check the value exactly as the dispatcher will, and deliver_at
		// as the API does.
		if _, err := topics.DecodeEvent(value, 0); err != nil {
			return err
		}
		if err := e.CheckSchedule(time.Now(), topics.ScheduleSkew); err != nil {
			return err
		}
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		r := &kgo.Record{Topic: k.names.Events(), Value: value}
		if e.Key != "" {
			r.Key = []byte(e.Key)
		}
		rec, err := k.produce(ctx, r)
		if err != nil {
			return err
		}
		if c.output == outputJSON {
			return c.printJSON(struct {
				ID        string `json:"id"`
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
				Offset    int64  `json:"offset"`
			}{e.ID, rec.Topic, rec.Partition, rec.Offset})
		}
		fmt.Fprintf(c.stdout, "published event %s to %s (partition %d, offset %d)\n", e.ID, rec.Topic, rec.Partition, rec.Offset)
		return nil
	}
}

// cancelEventCmd writes the cancellation the API's POST
// /v1/events/{id}/cancel writes: the retrier skips the event's deliveries
// still waiting for their deliver_at, each recorded as skipped, category
// cancelled, when its wait ends.
func cancelEventCmd(fs *flag.FlagSet) runFunc {
	tenant := fs.String("tenant", "", "cancel the event only if it is this tenant's (default: whatever its tenant, as an administrator)")
	return func(ctx context.Context, c *cli, args []string) error {
		cn := topics.Cancellation{EventID: args[0], Tenant: *tenant, CancelledAt: time.Now().UTC()}
		if err := topics.ValidateID("event", "EVENT_ID", cn.EventID); err != nil {
			return usagef("%v", err)
		}
		if cn.Tenant != "" {
			if err := topics.ValidateID("event", "tenant", cn.Tenant); err != nil {
				return usagef("%v", err)
			}
		}
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		if _, err := k.produce(ctx, &kgo.Record{Topic: k.names.Cancellations(), Key: []byte(cn.Key()), Value: cn.Encode()}); err != nil {
			return err
		}
		if c.output == outputJSON {
			return c.printJSON(cn)
		}
		fmt.Fprintf(c.stdout, "cancelled event %s: its deliveries waiting for deliver_at are skipped\n", cn.EventID)
		return nil
	}
}

// encodeEvent renders e compactly, leaving its data's characters as given
// (no HTML escaping).
func encodeEvent(e *topics.Event) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
