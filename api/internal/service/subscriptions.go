package service

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/filter"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/runtime/transform"
	"github.com/hookpipe/hookpipe/topics"
)

// Subscriptions are the subscription operations, each as a caller: the
// routes of /v1/subscriptions and the pages call them.
type Subscriptions struct {
	o        SubscriptionsOptions
	creating *claims
}

// SubscriptionsOptions are what the subscription operations read and write.
type SubscriptionsOptions struct {
	Topic   string // the subscriptions topic
	Client  *kgo.Client
	Table   *table.Table
	Tenants *table.TenantTable
	Secrets *topics.Keyring
	// MaxPerTenant is the most subscriptions of a tenant without a quota
	// of its own; 0: unlimited.
	MaxPerTenant int
	// Verify sends a new endpoint its challenge (SubscriptionFields.Verify);
	// its error is the answer.
	Verify func(context.Context, *topics.Subscription) error
}

// NewSubscriptions makes the subscription operations.
func NewSubscriptions(o SubscriptionsOptions) *Subscriptions {
	return &Subscriptions{o: o, creating: newClaims(o.Table)}
}

// SubscriptionQuery picks a page of subscriptions.
type SubscriptionQuery struct {
	Tenant    string // only this tenant's; "": every one the caller sees
	EventType string // only those an event of this type matches
	Enabled   string // "true" or "false": only enabled or disabled ones
	Cursor    string // the last id of the previous page
	Limit     int
}

// Create writes a new subscription of f, its signing secret shown.
func (s *Subscriptions) Create(ctx context.Context, c Caller, f *SubscriptionFields) (Subscription, error) {
	now := time.Now().UTC()
	sub := topics.Subscription{ID: topics.NewID("sub_"), Enabled: true, Ordering: topics.OrderingNone, CreatedAt: now, UpdatedAt: now}
	if f.ID != nil {
		sub.ID = *f.ID
	}
	f.apply(&sub)
	if !c.Admin() {
		if f.Tenant != nil && *f.Tenant != c.Tenant {
			return Subscription{}, invalid("subscription", "tenant", "a tenant key creates subscriptions of its own tenant only", *f.Tenant)
		}
		sub.Tenant = c.Tenant
	}
	if sub.Secret == "" {
		secret, err := topics.NewSecret()
		if err != nil {
			return Subscription{}, err
		}
		sub.Secret = secret
	}
	if err := validate(&sub); err != nil {
		return Subscription{}, err
	}
	// Another create of the id on this replica finishes first.
	cl, err := s.creating.claim(ctx, sub.ID)
	if err != nil {
		return Subscription{}, unavailable("another create of " + sub.ID + " did not finish in time")
	}
	defer cl.release()
	if err := s.readBeforeCreate(ctx); err != nil {
		return Subscription{}, err
	}
	if _, taken := s.o.Table.Get(sub.ID); taken {
		return Subscription{}, &Error{Kind: Conflict, Msg: "subscription " + sub.ID + " already exists"}
	}
	if err := cl.room(sub.Tenant, func(pending int) error { return s.roomBeside(&sub, pending) }); err != nil {
		return Subscription{}, err
	}
	if f.Verify {
		if err := s.o.Verify(ctx, &sub); err != nil {
			return Subscription{}, err
		}
	}
	if err := s.writeShown(ctx, s.record(&sub), cl.shown); err != nil {
		return Subscription{}, err
	}
	return subscriptionOf(&sub, true), nil
}

// List is a page of the subscriptions c sees that q picks, by id, and the
// cursor of the next page ("" on the last).
func (s *Subscriptions) List(ctx context.Context, c Caller, q SubscriptionQuery) ([]Subscription, string, error) {
	if err := s.o.Table.WaitCaughtUp(ctx); err != nil {
		return nil, "", err
	}
	// A tenant key pages through its tenant's subscriptions only.
	tenant, one := q.Tenant, q.Tenant != ""
	if !c.Admin() {
		if one && q.Tenant != c.Tenant {
			return []Subscription{}, "", nil
		}
		tenant, one = c.Tenant, true
	}
	page, more := s.o.Table.Page(tenant, one, q.Cursor, q.Limit, func(sub *topics.Subscription) bool {
		return (q.Enabled == "" || (q.Enabled == "true") == sub.Enabled) &&
			(q.EventType == "" || slices.ContainsFunc(sub.EventTypes, func(pt string) bool { return topics.MatchType(pt, q.EventType) }))
	})
	out := make([]Subscription, 0, len(page))
	for _, sub := range page {
		out = append(out, subscriptionOf(sub, false))
	}
	if more {
		return out, page[len(page)-1].ID, nil
	}
	return out, "", nil
}

// Get is the subscription id as c sees it, without its secret.
func (s *Subscriptions) Get(ctx context.Context, c Caller, id string) (Subscription, error) {
	sub, err := s.Visible(ctx, c, id)
	if err != nil {
		return Subscription{}, err
	}
	return subscriptionOf(sub, false), nil
}

// Update sets the fields f gives on the subscription id; the secret is
// shown when f sets it.
func (s *Subscriptions) Update(ctx context.Context, c Caller, id string, f *SubscriptionFields) (Subscription, error) {
	if f.Verify {
		return Subscription{}, invalid("subscription", "verify", "verify is for create only: use POST .../test", nil)
	}
	if f.ID != nil && *f.ID != id {
		return Subscription{}, invalid("subscription", "id", "a subscription's id cannot change", *f.ID)
	}
	if !c.Admin() && f.Tenant != nil && *f.Tenant != c.Tenant {
		return Subscription{}, invalid("subscription", "tenant", "a tenant key cannot move a subscription to another tenant", *f.Tenant)
	}
	sub, err := s.change(ctx, c, id, f.apply)
	if err != nil {
		return Subscription{}, err
	}
	return subscriptionOf(sub, f.Secret != nil), nil
}

// Delete removes the subscription id.
func (s *Subscriptions) Delete(ctx context.Context, c Caller, id string) error {
	if _, err := s.Visible(ctx, c, id); err != nil {
		return err
	}
	return s.write(ctx, &kgo.Record{Topic: s.o.Topic, Key: []byte(id)})
}

// Enable enables the subscription id.
func (s *Subscriptions) Enable(ctx context.Context, c Caller, id string) (Subscription, error) {
	return s.shown(s.change(ctx, c, id, func(sub *topics.Subscription) { sub.Enabled, sub.DisabledReason = true, "" }))
}

// Disable disables the subscription id, for reason when one is given.
func (s *Subscriptions) Disable(ctx context.Context, c Caller, id string, reason *string) (Subscription, error) {
	return s.shown(s.change(ctx, c, id, func(sub *topics.Subscription) {
		if reason != nil {
			sub.DisabledReason = *reason
		}
		sub.Enabled = false
	}))
}

// RotateSecret gives the subscription id a new secret, shown; the old one
// signs too for topics.RotationGrace.
func (s *Subscriptions) RotateSecret(ctx context.Context, c Caller, id string) (Subscription, error) {
	secret, err := topics.NewSecret()
	if err != nil {
		return Subscription{}, err
	}
	sub, err := s.change(ctx, c, id, func(sub *topics.Subscription) {
		sub.PreviousSecret, sub.PreviousSecretUntil, sub.Secret = sub.Secret, time.Now().UTC().Add(topics.RotationGrace), secret
	})
	if err != nil {
		return Subscription{}, err
	}
	return subscriptionOf(sub, true), nil
}

// shown is sub as the API shows it, without its secret.
func (s *Subscriptions) shown(sub *topics.Subscription, err error) (Subscription, error) {
	if err != nil {
		return Subscription{}, err
	}
	return subscriptionOf(sub, false), nil
}

// Visible returns the subscription id as c may see it: another tenant's is
// as missing as one that does not exist.
func (s *Subscriptions) Visible(ctx context.Context, c Caller, id string) (*topics.Subscription, error) {
	if err := s.o.Table.WaitCaughtUp(ctx); err != nil {
		return nil, err
	}
	sub, ok := s.o.Table.Get(id)
	if !ok || !c.Sees(sub.Tenant) {
		return nil, notFound("no subscription " + id)
	}
	return sub, nil
}

// change applies fn to a copy of the subscription id c sees, validates and
// writes it.
func (s *Subscriptions) change(ctx context.Context, c Caller, id string, fn func(*topics.Subscription)) (*topics.Subscription, error) {
	cur, err := s.Visible(ctx, c, id)
	if err != nil {
		return nil, err
	}
	sub := *cur
	fn(&sub)
	sub.UpdatedAt = time.Now().UTC()
	if err := validate(&sub); err != nil {
		return nil, err
	}
	if sub.Tenant != cur.Tenant {
		if err := s.o.Tenants.WaitCaughtUp(ctx); err != nil {
			return nil, err
		}
		if err := s.roomBeside(&sub, 0); err != nil {
			return nil, err
		}
	}
	if err := s.write(ctx, s.record(&sub)); err != nil {
		return nil, err
	}
	return &sub, nil
}

// validate checks what the record's own validation does not: the filter
// compiles, and the transformation.
func validate(sub *topics.Subscription) error {
	if err := filter.Validate(sub); err != nil {
		return err
	}
	return transform.Validate(sub)
}

// readBeforeCreate waits until the subscriptions and the tenants' quotas
// include every write made before the call, both at once.
func (s *Subscriptions) readBeforeCreate(ctx context.Context) error {
	tenants := make(chan error, 1)
	go func() { tenants <- s.o.Tenants.WaitCaughtUp(ctx) }()
	return errors.Join(s.o.Table.WaitCaughtUp(ctx), <-tenants)
}

// roomBeside refuses sub when its tenant has its most subscriptions
// already, with pending more of them being created on this replica. The
// caller has waited for the tables.
func (s *Subscriptions) roomBeside(sub *topics.Subscription, pending int) error {
	err := s.o.Tenants.RoomBeside(s.o.Table, s.o.MaxPerTenant, sub, pending)
	if errors.Is(err, table.ErrSubscriptionLimit) {
		return invalid("subscription", "tenant", err.Error()+" (max_subscriptions)", sub.Tenant)
	}
	return err
}

// record is sub's record, its secrets sealed.
func (s *Subscriptions) record(sub *topics.Subscription) *kgo.Record {
	return &kgo.Record{Topic: s.o.Topic, Key: []byte(sub.ID), Value: sub.EncodeWith(s.o.Secrets)}
}

// write produces r to the subscriptions topic and waits until the table
// shows it.
func (s *Subscriptions) write(ctx context.Context, r *kgo.Record) error {
	return s.writeShown(ctx, r, s.o.Table.Written)
}

// writeShown produces r to the subscriptions topic and, once the broker
// acknowledged it, hands it to the table through show (table.Keyed.Written
// at its heart), which shows it at once: the answer does not wait for the
// table's consumer to fetch the record back (it waits only when the
// consumer was there first and has not finished the batch).
func (s *Subscriptions) writeShown(ctx context.Context, r *kgo.Record, show func(*kgo.Record)) error {
	if err := produce(ctx, s.o.Client, r); err != nil {
		return err
	}
	show(r)
	return readBack(s.o.Table.WaitApplied(ctx, r))
}

func subscriptionOf(s *topics.Subscription, withSecret bool) Subscription {
	out := Subscription{ID: s.ID, Tenant: s.Tenant, URL: s.URL, EventTypes: s.EventTypes, Enabled: s.Enabled,
		Ordering: s.Ordering, Headers: s.Headers, TimeoutMS: int(s.Timeout().Milliseconds()), RateLimitPerS: s.RateLimitPerS,
		RetrySchedule: s.RetrySchedule, RetryStatuses: s.RetryStatuses, Filter: s.Filter, Transformation: s.Transformation, Partitions: s.Width(), DisabledReason: s.DisabledReason,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	if a := s.Auth; a != nil {
		out.Auth = &AuthView{Type: a.Type, Username: a.Username, TokenURL: a.TokenURL, ClientID: a.ClientID, Scopes: a.Scopes}
		if cert, err := a.ClientCertificate(); a.Type == topics.AuthMTLS && err == nil && cert.Leaf != nil {
			out.Auth.CertificateSubject = cert.Leaf.Subject.String()
			out.Auth.CertificateExpiresAt = &cert.Leaf.NotAfter
		}
	}
	if d := s.Destination; !d.IsHTTP() {
		out.Destination = destinationOf(d)
	}
	if b := s.Batch; b != nil {
		out.Batch = &Batch{MaxEvents: b.MaxEvents, MaxWaitMS: b.MaxWaitMS}
	}
	if out.Ordering == "" {
		out.Ordering = topics.OrderingNone
	}
	if withSecret {
		out.Secret = s.Secret
	}
	return out
}

// AuthFields set a subscription's endpoint auth.
type AuthFields struct {
	Type         string   `json:"type" enum:"basic,bearer,oauth2,mtls,none" doc:"basic (username and password), bearer (a static token), oauth2 (client credentials: token_url, client_id, client_secret, scopes), mtls (certificate, key, optional ca), or none to remove it."`
	Username     string   `json:"username,omitempty"`
	Password     string   `json:"password,omitempty" doc:"Sealed at rest, never shown again."`
	Token        string   `json:"token,omitempty" doc:"Sealed at rest, never shown again."`
	TokenURL     string   `json:"token_url,omitempty" doc:"oauth2: the token endpoint; it passes the same address checks as endpoints."`
	ClientID     string   `json:"client_id,omitempty" doc:"oauth2: the client id."`
	ClientSecret string   `json:"client_secret,omitempty" doc:"oauth2: the client secret. Sealed at rest, never shown again."`
	Scopes       []string `json:"scopes,omitempty" doc:"oauth2: the scopes to ask for."`
	Certificate  string   `json:"certificate,omitempty" doc:"mtls: the client certificate (chain), PEM."`
	Key          string   `json:"key,omitempty" doc:"mtls: the certificate's private key, PEM. Sealed at rest, never shown again."`
	CA           string   `json:"ca,omitempty" doc:"mtls: CA certificates, PEM, that sign the endpoint's certificate (default: the system's)."`
}

// endpointAuth is the record's auth the fields describe.
func (a *AuthFields) endpointAuth() *topics.EndpointAuth {
	return &topics.EndpointAuth{Type: a.Type, Username: a.Username, Password: a.Password, Token: a.Token,
		TokenURL: a.TokenURL, ClientID: a.ClientID, ClientSecret: a.ClientSecret, Scopes: a.Scopes,
		Certificate: a.Certificate, Key: a.Key, CA: a.CA}
}

// destinationOf shows d without its secrets.
func destinationOf(d *topics.Destination) *Destination {
	return &Destination{Type: d.Type, URL: d.URL, Brokers: d.Brokers, Topic: d.Topic, Subject: d.Subject, Exchange: d.Exchange,
		RoutingKey: d.RoutingKey, Region: d.Region, TLS: d.TLS, CA: d.CA, SASL: d.SASL, Username: d.Username, AccessKeyID: d.AccessKeyID}
}

// SubscriptionFields are the settable fields of a subscription; nil leaves
// a field as it is (PATCH) or at its default (create).
type SubscriptionFields struct {
	ID             *string            `json:"id,omitempty" doc:"On create: the subscription's id, default sub_ and 20 random letters and digits. Not changeable."`
	Tenant         *string            `json:"tenant,omitempty" doc:"Only this tenant's events match. A tenant key's subscriptions are its tenant's."`
	URL            *string            `json:"url,omitempty" doc:"The endpoint: absolute http or https, at most 2048 characters."`
	EventTypes     []string           `json:"event_types,omitempty" doc:"Event type patterns: a type, prefix.* or *."`
	Enabled        *bool              `json:"enabled,omitempty"`
	Ordering       *string            `json:"ordering,omitempty" enum:"none,key"`
	Headers        *map[string]string `json:"headers,omitempty" doc:"Headers sent with every request (replaces them all)."`
	TimeoutMS      *int               `json:"timeout_ms,omitempty" doc:"HTTP timeout of one attempt, in milliseconds."`
	RateLimitPerS  *float64           `json:"rate_limit_per_s,omitempty" doc:"Most requests per second; 0: no limit."`
	RetrySchedule  *[]string          `json:"retry_schedule,omitempty" doc:"Delays of the retries after the first attempt; empty: the default."`
	RetryStatuses  *[]int             `json:"retry_statuses,omitempty" doc:"Permanent statuses to retry instead of dead-lettering."`
	Auth           *AuthFields        `json:"auth,omitempty" doc:"How the deliverer authenticates to the endpoint, besides signing: an Authorization header (basic, bearer, oauth2) or a client certificate (mtls)."`
	Destination    *Destination       `json:"destination,omitempty" doc:"Deliver to a Kafka topic, a NATS subject, a RabbitMQ exchange or an SQS queue instead of POSTing to url (then leave url out: it becomes the destination's address); type http goes back to url."`
	Filter         *string            `json:"filter,omitempty" doc:"A CEL expression over the event (type, tenant, key, data) that must be true for the subscription to take it, e.g. data.total > 100 && \"vip\" in data.tags; compiled and type-checked here (422 with the compiler's message); empty: none."`
	Transformation *string            `json:"transformation,omitempty" doc:"A JavaScript function handler(webhook), at most 64 KiB, run on each delivery in a sandbox (no I/O, 50 ms, 16 MiB, no state kept between calls): it gets {id, type, timestamp, tenant, key, data, method, url, path, headers} and returns it changed (data or payload: the body; headers; method POST, PUT or PATCH; path) or with cancel: true to send nothing. A script that throws, runs over a limit or returns something else dead-letters the delivery (category transformation). Compiled here (422 naming the error); test it with POST /v1/transformations/test; empty: none."`
	Batch          *Batch             `json:"batch,omitempty" doc:"Send the deliveries in batches: one request, signed as a whole, whose body is a JSON array of up to max_events events, its webhook-id the batch's id and its webhook-batch header the events' ids; a failed batch is retried as a batch. For HTTP endpoints without a transformation; an ordered subscription's batches keep each key's order, a failed one holding every key it carries; max_events 0: one request per event again."`
	Partitions     *int               `json:"partitions,omitempty" minimum:"1" maximum:"64" doc:"Spread the deliveries over this many partitions of the deliveries topics, by key (a key keeps its order), so that as many deliverers carry a hot subscription; each gets that share of the per-subscription in-flight cap. More than the topics' partitions gains nothing. A change moves keys to other partitions: an ordered key's deliveries already queued, retried or held may be overtaken by its next ones. Default 1."`
	Secret         *string            `json:"secret,omitempty" doc:"The signing secret, whsec_ + base64 of 24-64 bytes; default: generated."`
	// Verify is for create only.
	Verify bool `json:"verify,omitempty" doc:"On create: first send the endpoint a signed webhook.verify event whose data holds a challenge; the endpoint must answer 2xx with the challenge in its body, or the subscription is not created (422 naming what it answered)."`
}

// apply sets the given fields on sub.
func (f *SubscriptionFields) apply(sub *topics.Subscription) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&sub.Tenant, f.Tenant)
	set(&sub.URL, f.URL)
	set(&sub.Ordering, f.Ordering)
	set(&sub.Secret, f.Secret)
	set(&sub.Filter, f.Filter)
	set(&sub.Transformation, f.Transformation)
	if a := f.Auth; a != nil {
		sub.Auth = nil
		if a.Type != "none" {
			sub.Auth = a.endpointAuth()
		}
	}
	if d := f.Destination; d != nil {
		sub.Destination = d.Record(sub.Destination)
	}
	sub.Target(sub.Destination, sub.URL)
	if f.EventTypes != nil {
		sub.EventTypes = f.EventTypes
	}
	if f.Enabled != nil {
		sub.Enabled = *f.Enabled
		if sub.Enabled {
			sub.DisabledReason = ""
		}
	}
	if f.Headers != nil {
		sub.Headers = *f.Headers
	}
	if f.TimeoutMS != nil {
		sub.TimeoutMS = *f.TimeoutMS
	}
	if f.RateLimitPerS != nil {
		sub.RateLimitPerS = *f.RateLimitPerS
	}
	if f.RetrySchedule != nil {
		sub.RetrySchedule = *f.RetrySchedule
	}
	if f.RetryStatuses != nil {
		sub.RetryStatuses = *f.RetryStatuses
	}
	if b := f.Batch; b != nil {
		sub.Batch = nil
		if b.MaxEvents != 0 {
			sub.Batch = &topics.Batch{MaxEvents: b.MaxEvents, MaxWaitMS: b.MaxWaitMS}
		}
	}
	if f.Partitions != nil {
		sub.Partitions = *f.Partitions
		if sub.Partitions == 1 {
			sub.Partitions = 0 // the default, stored as absent
		}
	}
}
