package service

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/api/alert"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/topics"
)

// AlertChannels are the alert channels' operations: a tenant's caller
// sees its tenant's channels, an admin every one and the operators'.
type AlertChannels struct {
	o AlertChannelsOptions
}

// AlertChannelsOptions are what the alert channels' operations read,
// write and send with.
type AlertChannelsOptions struct {
	Topic   string // the alert-channels topic
	Client  *kgo.Client
	Table   *table.AlertTable
	Secrets *topics.Keyring
	// Email tells whether an SMTP server is set, which email channels
	// need.
	Email bool
	// Sender sends the test messages; nil: it could not be made.
	Sender *alert.Sender
}

// NewAlertChannels makes the alert channels' operations.
func NewAlertChannels(o AlertChannelsOptions) *AlertChannels { return &AlertChannels{o: o} }

// List is the channels c sees, by id.
func (s *AlertChannels) List(ctx context.Context, c Caller) ([]AlertChannel, error) {
	if err := s.o.Table.WaitCaughtUp(ctx); err != nil {
		return nil, err
	}
	out := []AlertChannel{}
	for _, ch := range s.o.Table.All() {
		if c.Sees(ch.Tenant) {
			out = append(out, alertChannelOf(ch))
		}
	}
	return out, nil
}

// Get is the channel id as c sees it.
func (s *AlertChannels) Get(ctx context.Context, c Caller, id string) (AlertChannel, error) {
	ch, err := s.visible(ctx, c, id)
	if err != nil {
		return AlertChannel{}, err
	}
	return alertChannelOf(ch), nil
}

// Create adds a channel of b, of c's tenant when c is a tenant's.
func (s *AlertChannels) Create(ctx context.Context, c Caller, b *AlertChannelBody) (AlertChannel, error) {
	now := time.Now().UTC()
	ch := topics.AlertChannel{ID: topics.NewID("ach_"), Kind: b.Kind, To: b.To, URL: b.URL, Types: b.Types, DigestMS: b.DigestMS,
		CreatedAt: now, UpdatedAt: now}
	if b.Tenant != nil {
		ch.Tenant = *b.Tenant
	}
	if !c.Admin() {
		if b.Tenant != nil && *b.Tenant != c.Tenant {
			return AlertChannel{}, invalid("alert channel", "tenant", "a tenant key adds channels of its own tenant only", *b.Tenant)
		}
		ch.Tenant = c.Tenant
	}
	return s.put(ctx, &ch)
}

// Update replaces the settings of the channel id with b; its tenant stays.
func (s *AlertChannels) Update(ctx context.Context, c Caller, id string, b *AlertChannelBody) (AlertChannel, error) {
	cur, err := s.visible(ctx, c, id)
	if err != nil {
		return AlertChannel{}, err
	}
	if b.Tenant != nil && *b.Tenant != cur.Tenant {
		return AlertChannel{}, invalid("alert channel", "tenant", "a channel's tenant does not change: add another channel", *b.Tenant)
	}
	ch := topics.AlertChannel{ID: cur.ID, Tenant: cur.Tenant, Kind: b.Kind, To: b.To, URL: b.URL, Types: b.Types, DigestMS: b.DigestMS,
		CreatedAt: cur.CreatedAt, UpdatedAt: time.Now().UTC()}
	return s.put(ctx, &ch)
}

// Change sets the settings f gives on the channel id, the others kept
// (its URL too, which callers see masked only); its tenant stays.
func (s *AlertChannels) Change(ctx context.Context, c Caller, id string, f *AlertChannelFields) (AlertChannel, error) {
	cur, err := s.visible(ctx, c, id)
	if err != nil {
		return AlertChannel{}, err
	}
	ch := *cur
	if f.Kind != nil {
		ch.SetKind(*f.Kind)
	}
	if f.To != nil {
		ch.To = *f.To
	}
	if f.URL != nil {
		ch.URL = *f.URL
	}
	if f.Types != nil {
		ch.Types = *f.Types
	}
	if f.DigestMS != nil {
		ch.DigestMS = *f.DigestMS
	}
	ch.UpdatedAt = time.Now().UTC()
	return s.put(ctx, &ch)
}

// Delete removes the channel id; its digest in progress is not sent.
func (s *AlertChannels) Delete(ctx context.Context, c Caller, id string) error {
	if _, err := s.visible(ctx, c, id); err != nil {
		return err
	}
	return s.write(ctx, &kgo.Record{Topic: s.o.Topic, Key: []byte(id)})
}

// Test sends the channel id a test message now; why is why it did not
// go ("" when it went).
func (s *AlertChannels) Test(ctx context.Context, c Caller, id string) (why string, err error) {
	ch, err := s.visible(ctx, c, id)
	if err != nil {
		return "", err
	}
	if s.o.Sender == nil {
		return "alert channels cannot send: see the API's log", nil
	}
	if err := s.o.Sender.Send(ctx, ch, alert.TestDigest(ch, time.Now())); err != nil {
		return err.Error(), nil
	}
	return "", nil
}

// put validates ch and writes it, refusing it with the field at fault.
func (s *AlertChannels) put(ctx context.Context, ch *topics.AlertChannel) (AlertChannel, error) {
	if err := ch.Validate(); err != nil {
		return AlertChannel{}, refusedRecord(err)
	}
	if ch.Kind == topics.AlertEmail && !s.o.Email {
		return AlertChannel{}, invalid("alert channel", "kind", "email channels need an SMTP server: WEBHOOKS_SMTP_ADDR is not set", ch.Kind)
	}
	if err := s.write(ctx, &kgo.Record{Topic: s.o.Topic, Key: []byte(ch.ID), Value: ch.EncodeWith(s.o.Secrets)}); err != nil {
		return AlertChannel{}, err
	}
	return alertChannelOf(ch), nil
}

// visible returns the channel id as c may see it: another tenant's, or
// the operators' to a tenant's caller, is missing.
func (s *AlertChannels) visible(ctx context.Context, c Caller, id string) (*topics.AlertChannel, error) {
	if err := s.o.Table.WaitCaughtUp(ctx); err != nil {
		return nil, err
	}
	ch, ok := s.o.Table.Get(id)
	if !ok || !c.Sees(ch.Tenant) {
		return nil, notFound("no alert channel " + id)
	}
	return ch, nil
}

// write produces a record of the alert-channels topic and waits until
// this replica's table applied it (read your writes).
func (s *AlertChannels) write(ctx context.Context, r *kgo.Record) error {
	if err := produce(ctx, s.o.Client, r); err != nil {
		return err
	}
	return readBack(s.o.Table.WaitApplied(ctx, r))
}

func alertChannelOf(c *topics.AlertChannel) AlertChannel {
	out := AlertChannel{ID: c.ID, Tenant: c.Tenant, Kind: c.Kind, To: c.To, Types: c.Types, DigestMS: c.Digest().Milliseconds(),
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
	if out.Types == nil {
		out.Types = []string{}
	}
	out.URL = c.MaskedURL()
	return out
}
