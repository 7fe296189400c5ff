package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/filter"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/runtime/transform"
	"github.com/hookpipe/hookpipe/topics"
)

func subscriptionOf(s *topics.Subscription, withSecret bool) service.Subscription {
	out := service.Subscription{ID: s.ID, Tenant: s.Tenant, URL: s.URL, EventTypes: s.EventTypes, Enabled: s.Enabled,
		Ordering: s.Ordering, Headers: s.Headers, TimeoutMS: int(s.Timeout().Milliseconds()), RateLimitPerS: s.RateLimitPerS,
		RetrySchedule: s.RetrySchedule, RetryStatuses: s.RetryStatuses, Filter: s.Filter, Transformation: s.Transformation, Partitions: s.Width(), DisabledReason: s.DisabledReason,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	if a := s.Auth; a != nil {
		out.Auth = &service.AuthView{Type: a.Type, Username: a.Username, TokenURL: a.TokenURL, ClientID: a.ClientID, Scopes: a.Scopes}
		if cert, err := a.ClientCertificate(); a.Type == topics.AuthMTLS && err == nil && cert.Leaf != nil {
			out.Auth.CertificateSubject = cert.Leaf.Subject.String()
			out.Auth.CertificateExpiresAt = &cert.Leaf.NotAfter
		}
	}
	if d := s.Destination; !d.IsHTTP() {
		out.Destination = destinationOf(d)
	}
	if b := s.Batch; b != nil {
		out.Batch = &service.Batch{MaxEvents: b.MaxEvents, MaxWaitMS: b.MaxWaitMS}
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
func destinationOf(d *topics.Destination) *service.Destination {
	return &service.Destination{Type: d.Type, URL: d.URL, Brokers: d.Brokers, Topic: d.Topic, Subject: d.Subject, Exchange: d.Exchange,
		RoutingKey: d.RoutingKey, Region: d.Region, TLS: d.TLS, CA: d.CA, SASL: d.SASL, Username: d.Username, AccessKeyID: d.AccessKeyID}
}

// subscriptionFields are the settable fields of a subscription; nil leaves
// a field as it is (PATCH) or at its default (create).
type subscriptionFields struct {
	ID             *string              `json:"id,omitempty" doc:"On create: the subscription's id, default sub_ and 20 random letters and digits. Not changeable."`
	Tenant         *string              `json:"tenant,omitempty" doc:"Only this tenant's events match. A tenant key's subscriptions are its tenant's."`
	URL            *string              `json:"url,omitempty" doc:"The endpoint: absolute http or https, at most 2048 characters."`
	EventTypes     []string             `json:"event_types,omitempty" doc:"Event type patterns: a type, prefix.* or *."`
	Enabled        *bool                `json:"enabled,omitempty"`
	Ordering       *string              `json:"ordering,omitempty" enum:"none,key"`
	Headers        *map[string]string   `json:"headers,omitempty" doc:"Headers sent with every request (replaces them all)."`
	TimeoutMS      *int                 `json:"timeout_ms,omitempty" doc:"HTTP timeout of one attempt, in milliseconds."`
	RateLimitPerS  *float64             `json:"rate_limit_per_s,omitempty" doc:"Most requests per second; 0: no limit."`
	RetrySchedule  *[]string            `json:"retry_schedule,omitempty" doc:"Delays of the retries after the first attempt; empty: the default."`
	RetryStatuses  *[]int               `json:"retry_statuses,omitempty" doc:"Permanent statuses to retry instead of dead-lettering."`
	Auth           *AuthFields          `json:"auth,omitempty" doc:"How the deliverer authenticates to the endpoint, besides signing: an Authorization header (basic, bearer, oauth2) or a client certificate (mtls)."`
	Destination    *service.Destination `json:"destination,omitempty" doc:"Deliver to a Kafka topic, a NATS subject, a RabbitMQ exchange or an SQS queue instead of POSTing to url (then leave url out: it becomes the destination's address); type http goes back to url."`
	Filter         *string              `json:"filter,omitempty" doc:"A CEL expression over the event (type, tenant, key, data) that must be true for the subscription to take it, e.g. data.total > 100 && \"vip\" in data.tags; compiled and type-checked here (422 with the compiler's message); empty: none."`
	Transformation *string              `json:"transformation,omitempty" doc:"A JavaScript function handler(webhook), at most 64 KiB, run on each delivery in a sandbox (no I/O, 50 ms, 16 MiB, no state kept between calls): it gets {id, type, timestamp, tenant, key, data, method, url, path, headers} and returns it changed (data or payload: the body; headers; method POST, PUT or PATCH; path) or with cancel: true to send nothing. A script that throws, runs over a limit or returns something else dead-letters the delivery (category transformation). Compiled here (422 naming the error); test it with POST /v1/transformations/test; empty: none."`
	Batch          *service.Batch       `json:"batch,omitempty" doc:"Send the deliveries in batches: one request, signed as a whole, whose body is a JSON array of up to max_events events, its webhook-id the batch's id and its webhook-batch header the events' ids; a failed batch is retried as a batch. For HTTP endpoints without a transformation; an ordered subscription's batches keep each key's order, a failed one holding every key it carries; max_events 0: one request per event again."`
	Partitions     *int                 `json:"partitions,omitempty" minimum:"1" maximum:"64" doc:"Spread the deliveries over this many partitions of the deliveries topics, by key (a key keeps its order), so that as many deliverers carry a hot subscription; each gets that share of the per-subscription in-flight cap. More than the topics' partitions gains nothing. A change moves keys to other partitions: an ordered key's deliveries already queued, retried or held may be overtaken by its next ones. Default 1."`
	Secret         *string              `json:"secret,omitempty" doc:"The signing secret, whsec_ + base64 of 24-64 bytes; default: generated."`
	// Verify is for create only.
	Verify bool `json:"verify,omitempty" doc:"On create: first send the endpoint a signed webhook.verify event whose data holds a challenge; the endpoint must answer 2xx with the challenge in its body, or the subscription is not created (422 naming what it answered)."`
}

// apply sets the given fields on sub.
func (f *subscriptionFields) apply(sub *topics.Subscription) {
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

type createSubscriptionInput struct {
	Body subscriptionFields
}

type subscriptionOutput struct{ Body service.Subscription }

type subscriptionIDInput struct {
	ID string `path:"id" doc:"The subscription's id."`
}

type patchSubscriptionInput struct {
	ID   string `path:"id"`
	Body subscriptionFields
}

type disableInput struct {
	ID   string `path:"id"`
	Body *struct {
		Reason string `json:"reason,omitempty" maxLength:"500" doc:"Why, kept in disabled_reason."`
	}
}

type listSubscriptionsInput struct {
	Tenant    string `query:"tenant" doc:"Only this tenant's subscriptions."`
	EventType string `query:"event_type" doc:"Only subscriptions an event of this type matches."`
	Enabled   string `query:"enabled" enum:"true,false" doc:"Only enabled (true) or disabled (false) ones."`
	Cursor    string `query:"cursor" doc:"The next_cursor of the previous page."`
	Limit     int    `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"Most subscriptions in the page."`
}

func (s *Server) registerSubscriptions() {
	tags := []string{"Subscriptions"}
	huma.Register(s.api, huma.Operation{OperationID: "create-subscription", Method: http.MethodPost, Path: "/v1/subscriptions",
		Summary: "Create a subscription", Description: "Validated as webhookctl validates; the signing secret is in the answer, once.",
		Tags: tags, Security: secured, DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *createSubscriptionInput) (*subscriptionOutput, error) {
			p := principalOf(ctx)
			now := time.Now().UTC()
			sub := topics.Subscription{ID: topics.NewID("sub_"), Enabled: true, Ordering: topics.OrderingNone, CreatedAt: now, UpdatedAt: now}
			if in.Body.ID != nil {
				sub.ID = *in.Body.ID
			}
			in.Body.apply(&sub)
			if !p.Admin() {
				if in.Body.Tenant != nil && *in.Body.Tenant != p.Tenant {
					return nil, huma.Error422UnprocessableEntity("invalid subscription",
						&huma.ErrorDetail{Location: "body.tenant", Message: "a tenant key creates subscriptions of its own tenant only", Value: *in.Body.Tenant})
				}
				sub.Tenant = p.Tenant
			}
			if sub.Secret == "" {
				secret, err := topics.NewSecret()
				if err != nil {
					return nil, s.internal(err)
				}
				sub.Secret = secret
			}
			if err := filter.Validate(&sub); err != nil {
				return nil, s.invalid(err, "")
			}
			if err := transform.Validate(&sub); err != nil {
				return nil, s.invalid(err, "")
			}
			// Another create of the id on this replica finishes first.
			cl, err := s.creating.claim(ctx, sub.ID)
			if err != nil {
				return nil, huma.Error503ServiceUnavailable("another create of " + sub.ID + " did not finish in time")
			}
			defer cl.release()
			if err := s.readBeforeCreate(ctx); err != nil {
				return nil, s.internal(err)
			}
			if _, taken := s.subs.Get(sub.ID); taken {
				return nil, huma.Error409Conflict("subscription " + sub.ID + " already exists")
			}
			if err := cl.room(sub.Tenant, func(pending int) error { return s.roomBeside(&sub, pending) }); err != nil {
				return nil, err
			}
			if in.Body.Verify {
				if err := s.verify(ctx, &sub); err != nil {
					return nil, err
				}
			}
			if err := s.writeShown(ctx, s.subscriptionRecord(&sub), cl.shown); err != nil {
				return nil, err
			}
			return &subscriptionOutput{Body: subscriptionOf(&sub, true)}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "list-subscriptions", Method: http.MethodGet, Path: "/v1/subscriptions",
		Summary: "List subscriptions", Description: "By id, in pages. Secrets are never listed.", Tags: tags, Security: secured},
		func(ctx context.Context, in *listSubscriptionsInput) (*service.SubscriptionsOutput, error) {
			p := principalOf(ctx)
			if err := s.subs.WaitCaughtUp(ctx); err != nil {
				return nil, s.internal(err)
			}
			// A tenant key pages through its tenant's subscriptions only.
			tenant, one := in.Tenant, in.Tenant != ""
			if !p.Admin() {
				if one && in.Tenant != p.Tenant {
					out := &service.SubscriptionsOutput{}
					out.Body.Data = []service.Subscription{}
					return out, nil
				}
				tenant, one = p.Tenant, true
			}
			page, more := s.subs.Page(tenant, one, in.Cursor, in.Limit, func(sub *topics.Subscription) bool {
				return (in.Enabled == "" || (in.Enabled == "true") == sub.Enabled) &&
					(in.EventType == "" || slices.ContainsFunc(sub.EventTypes, func(pt string) bool { return topics.MatchType(pt, in.EventType) }))
			})
			out := &service.SubscriptionsOutput{}
			out.Body.Data = make([]service.Subscription, 0, len(page))
			for _, sub := range page {
				out.Body.Data = append(out.Body.Data, subscriptionOf(sub, false))
			}
			if more {
				out.Body.NextCursor = page[len(page)-1].ID
			}
			return out, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "get-subscription", Method: http.MethodGet, Path: "/v1/subscriptions/{id}",
		Summary: "Get a subscription", Tags: tags, Security: secured},
		func(ctx context.Context, in *subscriptionIDInput) (*subscriptionOutput, error) {
			sub, err := s.visible(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return &subscriptionOutput{Body: subscriptionOf(sub, false)}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "update-subscription", Method: http.MethodPatch, Path: "/v1/subscriptions/{id}",
		Summary: "Change the given fields of a subscription", Tags: tags, Security: secured},
		func(ctx context.Context, in *patchSubscriptionInput) (*subscriptionOutput, error) {
			p := principalOf(ctx)
			if in.Body.Verify {
				return nil, huma.Error422UnprocessableEntity("invalid subscription",
					&huma.ErrorDetail{Location: "body.verify", Message: "verify is for create only: use POST .../test"})
			}
			if in.Body.ID != nil && *in.Body.ID != in.ID {
				return nil, huma.Error422UnprocessableEntity("invalid subscription",
					&huma.ErrorDetail{Location: "body.id", Message: "a subscription's id cannot change", Value: *in.Body.ID})
			}
			if !p.Admin() && in.Body.Tenant != nil && *in.Body.Tenant != p.Tenant {
				return nil, huma.Error422UnprocessableEntity("invalid subscription",
					&huma.ErrorDetail{Location: "body.tenant", Message: "a tenant key cannot move a subscription to another tenant", Value: *in.Body.Tenant})
			}
			sub, err := s.change(ctx, in.ID, func(sub *topics.Subscription) { in.Body.apply(sub) })
			if err != nil {
				return nil, err
			}
			return &subscriptionOutput{Body: subscriptionOf(sub, in.Body.Secret != nil)}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "delete-subscription", Method: http.MethodDelete, Path: "/v1/subscriptions/{id}",
		Summary: "Delete a subscription", Description: "Its pending deliveries are skipped.", Tags: tags, Security: secured,
		DefaultStatus: http.StatusNoContent},
		func(ctx context.Context, in *subscriptionIDInput) (*struct{}, error) {
			if _, err := s.visible(ctx, in.ID); err != nil {
				return nil, err
			}
			return nil, s.write(ctx, &kgo.Record{Topic: s.names.Subscriptions(), Key: []byte(in.ID)})
		})
	huma.Register(s.api, huma.Operation{OperationID: "enable-subscription", Method: http.MethodPost, Path: "/v1/subscriptions/{id}/enable",
		Summary: "Enable a subscription", Tags: tags, Security: secured},
		func(ctx context.Context, in *subscriptionIDInput) (*subscriptionOutput, error) {
			sub, err := s.change(ctx, in.ID, func(sub *topics.Subscription) { sub.Enabled, sub.DisabledReason = true, "" })
			if err != nil {
				return nil, err
			}
			return &subscriptionOutput{Body: subscriptionOf(sub, false)}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "disable-subscription", Method: http.MethodPost, Path: "/v1/subscriptions/{id}/disable",
		Summary: "Disable a subscription", Description: "Its deliveries are skipped until it is enabled again.", Tags: tags, Security: secured},
		func(ctx context.Context, in *disableInput) (*subscriptionOutput, error) {
			sub, err := s.change(ctx, in.ID, func(sub *topics.Subscription) {
				if in.Body != nil {
					sub.DisabledReason = in.Body.Reason
				}
				sub.Enabled = false
			})
			if err != nil {
				return nil, err
			}
			return &subscriptionOutput{Body: subscriptionOf(sub, false)}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "rotate-subscription-secret", Method: http.MethodPost, Path: "/v1/subscriptions/{id}/rotate-secret",
		Summary: "Rotate a subscription's secret", Description: "A new secret, in the answer once; the old one signs too for 24 hours.",
		Tags: tags, Security: secured},
		func(ctx context.Context, in *subscriptionIDInput) (*subscriptionOutput, error) {
			secret, err := topics.NewSecret()
			if err != nil {
				return nil, s.internal(err)
			}
			sub, err := s.change(ctx, in.ID, func(sub *topics.Subscription) {
				sub.PreviousSecret, sub.PreviousSecretUntil, sub.Secret = sub.Secret, time.Now().UTC().Add(topics.RotationGrace), secret
			})
			if err != nil {
				return nil, err
			}
			return &subscriptionOutput{Body: subscriptionOf(sub, true)}, nil
		})
}

// visible returns the subscription id as the request's principal may see
// it: another tenant's is as missing as one that does not exist.
func (s *Server) visible(ctx context.Context, id string) (*topics.Subscription, error) {
	if err := s.subs.WaitCaughtUp(ctx); err != nil {
		return nil, s.internal(err)
	}
	sub, ok := s.subs.Get(id)
	if !ok || !principalOf(ctx).Sees(sub.Tenant) {
		return nil, huma.Error404NotFound("no subscription " + id)
	}
	return sub, nil
}

// change applies fn to a copy of the visible subscription id, validates and
// writes it.
func (s *Server) change(ctx context.Context, id string, fn func(*topics.Subscription)) (*topics.Subscription, error) {
	cur, err := s.visible(ctx, id)
	if err != nil {
		return nil, err
	}
	sub := *cur
	fn(&sub)
	sub.UpdatedAt = time.Now().UTC()
	if err := filter.Validate(&sub); err != nil {
		return nil, s.invalid(err, "")
	}
	if err := transform.Validate(&sub); err != nil {
		return nil, s.invalid(err, "")
	}
	if sub.Tenant != cur.Tenant {
		if err := s.tenant.WaitCaughtUp(ctx); err != nil {
			return nil, s.internal(err)
		}
		if err := s.room(&sub); err != nil {
			return nil, err
		}
	}
	if err := s.writeSubscription(ctx, &sub); err != nil {
		return nil, err
	}
	return &sub, nil
}

// readBeforeCreate waits until the subscriptions and the tenants' quotas
// include every write made before the call, both at once.
func (s *Server) readBeforeCreate(ctx context.Context) error {
	tenants := make(chan error, 1)
	go func() { tenants <- s.tenant.WaitCaughtUp(ctx) }()
	return errors.Join(s.subs.WaitCaughtUp(ctx), <-tenants)
}

// room refuses sub when its tenant has its most subscriptions already
// (422 on body.tenant). The caller has waited for the tables.
func (s *Server) room(sub *topics.Subscription) error { return s.roomBeside(sub, 0) }

// roomBeside is room with pending more subscriptions of sub's tenant being
// created on this replica.
func (s *Server) roomBeside(sub *topics.Subscription, pending int) error {
	err := s.tenant.RoomBeside(s.subs, s.cfg.TenantMaxSubscriptions, sub, pending)
	if errors.Is(err, table.ErrSubscriptionLimit) {
		return huma.Error422UnprocessableEntity("invalid subscription",
			&huma.ErrorDetail{Location: "body.tenant", Message: err.Error() + " (max_subscriptions)", Value: sub.Tenant})
	}
	return err
}

// writeSubscription writes sub, sealed, and waits until the table shows it.
func (s *Server) writeSubscription(ctx context.Context, sub *topics.Subscription) error {
	return s.write(ctx, s.subscriptionRecord(sub))
}

// subscriptionRecord is sub's record, its secrets sealed.
func (s *Server) subscriptionRecord(sub *topics.Subscription) *kgo.Record {
	return &kgo.Record{Topic: s.names.Subscriptions(), Key: []byte(sub.ID), Value: sub.EncodeWith(s.cfg.Secrets)}
}

// write produces r to the subscriptions topic and waits until the table
// shows it.
func (s *Server) write(ctx context.Context, r *kgo.Record) error {
	return s.writeShown(ctx, r, s.subs.Written)
}

// writeShown produces r to the subscriptions topic and, once the broker
// acknowledged it, hands it to the table through show (table.Keyed.Written
// at its heart), which shows it at once: the answer does not wait for the
// table's consumer to fetch the record back (it waits only when the
// consumer was there first and has not finished the batch).
func (s *Server) writeShown(ctx context.Context, r *kgo.Record, show func(*kgo.Record)) error {
	if err := s.produce(ctx, r); err != nil {
		return err
	}
	show(r)
	if err := s.subs.WaitApplied(ctx, r); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return huma.Error503ServiceUnavailable("written, but not yet read back in time")
		}
		return s.internal(err)
	}
	return nil
}
