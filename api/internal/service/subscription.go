package service

import (
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

// Subscription is a subscription as the API shows it. The signing secret is
// in the answers to create and rotate-secret only.
type Subscription struct {
	ID             string            `json:"id" doc:"The subscription's id."`
	Tenant         string            `json:"tenant,omitempty" doc:"Only this tenant's events match; absent: every tenant's."`
	URL            string            `json:"url" doc:"The endpoint: absolute http or https."`
	EventTypes     []string          `json:"event_types" doc:"Event type patterns: a type, prefix.* or *."`
	Enabled        bool              `json:"enabled"`
	Ordering       string            `json:"ordering" enum:"none,key" doc:"key: events with the same key are delivered in publish order."`
	Headers        map[string]string `json:"headers,omitempty" doc:"Headers sent with every request."`
	TimeoutMS      int               `json:"timeout_ms" doc:"HTTP timeout of one attempt, in milliseconds."`
	RateLimitPerS  float64           `json:"rate_limit_per_s,omitempty" doc:"Most requests per second to the endpoint; absent: no limit."`
	RetrySchedule  []string          `json:"retry_schedule,omitempty" doc:"Delays of the retries after the first attempt; absent: the default."`
	RetryStatuses  []int             `json:"retry_statuses,omitempty" doc:"Permanent statuses retried instead of dead-lettered."`
	Filter         string            `json:"filter,omitempty" doc:"A CEL expression over the event's type, tenant, key and data that must be true for the subscription to take it."`
	Transformation string            `json:"transformation,omitempty" doc:"A JavaScript function handler(webhook) run on each delivery: it returns the body, headers, method and URL path to send, or cancels the delivery."`
	Partitions     int               `json:"partitions" doc:"How many partitions of the deliveries topics its deliveries spread over, by key; 1: one, the default."`
	Auth           *AuthView         `json:"auth,omitempty" doc:"How the deliverer authenticates to the endpoint (its secrets never shown)."`
	Destination    *Destination      `json:"destination,omitempty" doc:"Where deliveries go when not POSTed to url (its password, token and secret access key never shown); url is then its address."`
	Batch          *Batch            `json:"batch,omitempty" doc:"Deliveries are sent in batches: one request whose body is a JSON array of events; absent: one request per event."`
	DisabledReason string            `json:"disabled_reason,omitempty"`
	Secret         string            `json:"secret,omitempty" doc:"The signing secret (whsec_...): in the answers to create and rotate-secret only."`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
}

// AuthView is a subscription's endpoint auth as the API shows it: never
// its password, token, client secret or private key.
type AuthView struct {
	Type                 string     `json:"type" enum:"basic,bearer,oauth2,mtls"`
	Username             string     `json:"username,omitempty"`
	TokenURL             string     `json:"token_url,omitempty"`
	ClientID             string     `json:"client_id,omitempty"`
	Scopes               []string   `json:"scopes,omitempty"`
	CertificateSubject   string     `json:"certificate_subject,omitempty" doc:"mtls: the client certificate's subject."`
	CertificateExpiresAt *time.Time `json:"certificate_expires_at,omitempty" doc:"mtls: when the client certificate expires."`
}

// Destination is where a subscription's deliveries go when they are not
// POSTed to its URL: a topic of the customer's Kafka cluster, a NATS
// JetStream subject, a RabbitMQ exchange or an SQS queue. Each message
// carries the body an endpoint gets and the Standard Webhooks headers.
type Destination struct {
	Type            string   `json:"type" enum:"http,kafka,nats,rabbitmq,sqs" doc:"http (POST to url; the default) or the kind of destination."`
	URL             string   `json:"url,omitempty" doc:"nats: nats:// or tls://host:port; rabbitmq: amqp:// or amqps://host:port/vhost; sqs: the queue URL. Without credentials."`
	Brokers         []string `json:"brokers,omitempty" doc:"kafka: the bootstrap brokers, host:port."`
	Topic           string   `json:"topic,omitempty" doc:"kafka: the topic; the record key is the event's ordering key (its id without one)."`
	Subject         string   `json:"subject,omitempty" doc:"nats: the subject, which a JetStream stream must capture."`
	Exchange        string   `json:"exchange,omitempty" doc:"rabbitmq: the exchange; messages are persistent, published with confirms, and an unroutable one is refused."`
	RoutingKey      string   `json:"routing_key,omitempty" doc:"rabbitmq: the routing key; default: the event type."`
	Region          string   `json:"region,omitempty" doc:"sqs: the queue's AWS region."`
	TLS             bool     `json:"tls,omitempty" doc:"kafka: connect over TLS."`
	CA              string   `json:"ca,omitempty" doc:"kafka, nats, rabbitmq over TLS: CA certificates, PEM, signing the server's certificate (default: the system's)."`
	SASL            string   `json:"sasl,omitempty" enum:"plain,scram-sha-256,scram-sha-512" doc:"kafka: the SASL mechanism for username and password."`
	Username        string   `json:"username,omitempty" doc:"kafka (SASL), nats, rabbitmq."`
	Password        string   `json:"password,omitempty" doc:"Sealed at rest, never shown again; on a change of the same type, absent keeps the current one."`
	Token           string   `json:"token,omitempty" doc:"nats: a token instead of username and password. Sealed at rest, never shown again."`
	AccessKeyID     string   `json:"access_key_id,omitempty" doc:"sqs: the access key id."`
	SecretAccessKey string   `json:"secret_access_key,omitempty" doc:"sqs: the secret access key. Sealed at rest, never shown again."`
}

// Record is the record's destination the fields describe (nil for
// http), keeping old's secrets where the fields leave them out and old is
// of the same type.
func (d *Destination) Record(old *topics.Destination) *topics.Destination {
	if d.Type == topics.DestinationHTTP {
		return nil
	}
	out := &topics.Destination{Type: d.Type, URL: d.URL, Brokers: d.Brokers, Topic: d.Topic, Subject: d.Subject,
		Exchange: d.Exchange, RoutingKey: d.RoutingKey, Region: d.Region, TLS: d.TLS, CA: d.CA, SASL: d.SASL,
		Username: d.Username, Password: d.Password, Token: d.Token, AccessKeyID: d.AccessKeyID, SecretAccessKey: d.SecretAccessKey}
	if old != nil && old.Type == out.Type {
		for _, kept := range [][2]*string{{&out.Password, &old.Password}, {&out.Token, &old.Token}, {&out.SecretAccessKey, &old.SecretAccessKey}} {
			if *kept[0] == "" {
				*kept[0] = *kept[1]
			}
		}
	}
	return out
}

// Batch is how a subscription batches its deliveries (ADR 0040).
type Batch struct {
	MaxEvents int `json:"max_events" minimum:"0" maximum:"1000" doc:"The events of a batch at most, 2 to 1000; 0 (in a change): no more batches."`
	MaxWaitMS int `json:"max_wait_ms,omitempty" minimum:"0" maximum:"60000" doc:"How long, in milliseconds, the first event of a batch waits for more before the batch goes with what it has, 1 to 60000."`
}

// SubscriptionsOutput is the answer of GET /v1/subscriptions.
type SubscriptionsOutput struct {
	Body struct {
		Data       []Subscription `json:"data"`
		NextCursor string         `json:"next_cursor,omitempty" doc:"Pass as cursor for the next page; absent on the last."`
	}
}
