package topics

import (
	"crypto/x509"
	"errors"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Destination kinds (Subscription.Destination.Type). A subscription without
// a destination is an HTTP endpoint: its deliveries are POSTed to URL.
const (
	DestinationHTTP     = "http"     // POST to the subscription's URL
	DestinationKafka    = "kafka"    // a topic on the customer's own Kafka cluster
	DestinationNATS     = "nats"     // a NATS JetStream subject
	DestinationRabbitMQ = "rabbitmq" // an exchange of a RabbitMQ (AMQP 0-9-1) broker, with publisher confirms
	DestinationSQS      = "sqs"      // an Amazon SQS (or compatible) queue
)

// DestinationTypes are the kinds a subscription may name.
var DestinationTypes = []string{DestinationHTTP, DestinationKafka, DestinationNATS, DestinationRabbitMQ, DestinationSQS}

// SASL mechanisms of a Kafka destination.
const (
	SASLPlain       = "plain"
	SASLSCRAMSHA256 = "scram-sha-256"
	SASLSCRAMSHA512 = "scram-sha-512"
)

// Destination is where a subscription's deliveries go when they are not
// POSTed to an HTTP endpoint. Every kind gets the same message: the body an
// HTTP endpoint would get, with the Standard Webhooks headers (webhook-id,
// webhook-timestamp, webhook-signature), the subscription's headers and
// the trace context as the message's headers, so that a consumer verifies
// it exactly as a receiver would. Its credentials (password, token, secret
// access key) are sealed at rest like the signing secret.
//
// Each kind reads its own fields:
//   - kafka: Brokers, Topic, TLS (and CA), SASL with Username and Password. The record
//     key is the ordering key (the event id for an event without one).
//   - nats: URL (nats:// or tls://), Subject, Username and Password or Token.
//     Published to JetStream and acknowledged by the stream.
//   - rabbitmq: URL (amqp:// or amqps://, the vhost as its path), Exchange,
//     RoutingKey (default: the event type), Username and Password. Persistent
//     messages, acknowledged by publisher confirms.
//   - sqs: URL (the queue URL), Region, AccessKeyID and SecretAccessKey. A
//     FIFO queue (.fifo) gets the ordering key as its message group id and
//     the webhook-id as its deduplication id.
type Destination struct {
	Type       string   `json:"type"`
	URL        string   `json:"url,omitempty"`
	Brokers    []string `json:"brokers,omitempty"`
	Topic      string   `json:"topic,omitempty"`
	Subject    string   `json:"subject,omitempty"`
	Exchange   string   `json:"exchange,omitempty"`
	RoutingKey string   `json:"routing_key,omitempty"`
	Region     string   `json:"region,omitempty"`
	TLS        bool     `json:"tls,omitempty"`
	SASL       string   `json:"sasl,omitempty"`
	// CA, PEM, signs the server's certificate when the system's roots
	// do not (a private cluster): kafka with tls, nats over tls://,
	// rabbitmq over amqps://.
	CA string `json:"ca,omitempty"`

	Username        string `json:"username,omitempty"`
	Password        string `json:"password,omitempty"`
	Token           string `json:"token,omitempty"`
	AccessKeyID     string `json:"access_key_id,omitempty"`
	SecretAccessKey string `json:"secret_access_key,omitempty"`
}

// IsHTTP reports whether a subscription with destination d POSTs to its
// URL: no destination, or one of type http.
func (d *Destination) IsHTTP() bool { return d == nil || d.Type == DestinationHTTP }

// secrets are the sealed fields, by their sealing name.
func (d *Destination) secrets() secretFields {
	return secretFields{{"destination.password", &d.Password}, {"destination.token", &d.Token}, {"destination.secret_access_key", &d.SecretAccessKey}}
}

// Secrets are the values never shown: the password, the token and the
// secret access key.
func (d *Destination) Secrets() []string {
	if d == nil {
		return nil
	}
	return d.secrets().values()
}

// Masked is a copy of d with each secret that is set replaced by mask.
func (d Destination) Masked(mask string) *Destination {
	d.secrets().replace(func(string, string) string { return mask })
	return &d
}

// Address is where the destination is, as a URL without credentials:
// what a subscription of this destination holds as its URL, so that
// lists, logs and attempt records name it like an endpoint.
// kafka://b1:9092,b2:9092/topic, nats://host:4222/subject,
// amqp://host:5672/vhost/exchange, and the queue URL for sqs.
func (d *Destination) Address() string {
	switch d.Type {
	case DestinationKafka:
		scheme := "kafka"
		if d.TLS {
			scheme = "kafka+tls"
		}
		return scheme + "://" + strings.Join(d.Brokers, ",") + "/" + d.Topic
	case DestinationNATS:
		return strings.TrimSuffix(d.URL, "/") + "/" + d.Subject
	case DestinationRabbitMQ:
		return strings.TrimSuffix(d.URL, "/") + "/" + url.PathEscape(d.Exchange)
	}
	return d.URL
}

// IsFIFO reports whether an sqs destination is a FIFO queue.
func (d *Destination) IsFIFO() bool {
	return d.Type == DestinationSQS && strings.HasSuffix(d.URL, ".fifo")
}

// Limits of a destination's fields.
const (
	maxDestinationValue = 1024
	maxBrokers          = 32
)

var (
	kafkaTopicRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)
	natsSubjRE   = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
	regionRE     = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
)

// destinationInvalid is an error naming the field of the destination.
func destinationInvalid(field, format string, args ...any) error {
	return invalid("subscription", "destination."+field, format, args...)
}

// validate checks the fields d's type reads and refuses the others, so
// that a setting meant for another kind is not silently ignored.
func (d *Destination) validate() error {
	if !slices.Contains(DestinationTypes, d.Type) {
		return destinationInvalid("type", "%q is not one of %s", d.Type, strings.Join(DestinationTypes, ", "))
	}
	for _, v := range append([]string{d.URL, d.Topic, d.Subject, d.Exchange, d.RoutingKey, d.Region, d.SASL,
		d.Username, d.Password, d.Token, d.AccessKeyID, d.SecretAccessKey}, d.Brokers...) {
		if len(v) > maxDestinationValue || strings.ContainsAny(v, "\r\n\x00") {
			return destinationInvalid("", "values are at most %d characters, without control characters", maxDestinationValue)
		}
	}
	if err := d.onlyFields(); err != nil {
		return err
	}
	if d.CA != "" {
		if len(d.CA) > maxAuthPEM || !x509.NewCertPool().AppendCertsFromPEM([]byte(d.CA)) {
			return destinationInvalid("ca", "not PEM certificates (at most %d bytes)", maxAuthPEM)
		}
	}
	switch d.Type {
	case DestinationKafka:
		return d.validateKafka()
	case DestinationNATS:
		return d.validateNATS()
	case DestinationRabbitMQ:
		return d.validateRabbitMQ()
	case DestinationSQS:
		return d.validateSQS()
	}
	return nil
}

// onlyFields refuses a field d's type does not read.
func (d *Destination) onlyFields() error {
	reads := map[string][]string{
		DestinationHTTP:     {},
		DestinationKafka:    {"brokers", "topic", "tls", "ca", "sasl", "username", "password"},
		DestinationNATS:     {"url", "subject", "ca", "username", "password", "token"},
		DestinationRabbitMQ: {"url", "exchange", "routing_key", "ca", "username", "password"},
		DestinationSQS:      {"url", "region", "access_key_id", "secret_access_key"},
	}[d.Type]
	set := map[string]bool{
		"url": d.URL != "", "brokers": len(d.Brokers) > 0, "topic": d.Topic != "", "subject": d.Subject != "",
		"exchange": d.Exchange != "", "routing_key": d.RoutingKey != "", "region": d.Region != "", "tls": d.TLS,
		"sasl": d.SASL != "", "ca": d.CA != "", "username": d.Username != "", "password": d.Password != "", "token": d.Token != "",
		"access_key_id": d.AccessKeyID != "", "secret_access_key": d.SecretAccessKey != "",
	}
	for _, f := range []string{"url", "brokers", "topic", "subject", "exchange", "routing_key", "region", "tls", "ca", "sasl",
		"username", "password", "token", "access_key_id", "secret_access_key"} {
		if set[f] && !slices.Contains(reads, f) {
			return destinationInvalid(f, "a %s destination has no %s", d.Type, f)
		}
	}
	return nil
}

func (d *Destination) validateKafka() error {
	if len(d.Brokers) == 0 || len(d.Brokers) > maxBrokers {
		return destinationInvalid("brokers", "1 to %d host:port addresses are required", maxBrokers)
	}
	for _, b := range d.Brokers {
		if err := hostPort(b); err != nil {
			return destinationInvalid("brokers", "%q: %v", b, err)
		}
	}
	if !kafkaTopicRE.MatchString(d.Topic) || d.Topic == "." || d.Topic == ".." {
		return destinationInvalid("topic", "required: 1-249 letters, digits, '.', '_' or '-'")
	}
	switch d.SASL {
	case "":
		if d.Username != "" || d.Password != "" {
			return destinationInvalid("sasl", "username and password need a mechanism: %s, %s or %s", SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512)
		}
	case SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512:
		if d.Username == "" || d.Password == "" {
			return destinationInvalid("username", "SASL %s needs a username and a password", d.SASL)
		}
	default:
		return destinationInvalid("sasl", "%q is not %s, %s or %s", d.SASL, SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512)
	}
	return nil
}

func (d *Destination) validateNATS() error {
	if err := serverURL(d.URL, "nats", "tls"); err != nil {
		return err
	}
	if !natsSubjRE.MatchString(d.Subject) {
		return destinationInvalid("subject", "required: dot-separated tokens of letters, digits, '_' or '-' (no wildcards)")
	}
	if d.Token != "" && (d.Username != "" || d.Password != "") {
		return destinationInvalid("token", "a token or a username and password, not both")
	}
	if (d.Username == "") != (d.Password == "") {
		return destinationInvalid("username", "a username needs a password, and a password a username")
	}
	return nil
}

func (d *Destination) validateRabbitMQ() error {
	if err := serverURL(d.URL, "amqp", "amqps"); err != nil {
		return err
	}
	if d.Exchange == "" || strings.HasPrefix(d.Exchange, "amq.") && d.Exchange != "amq.direct" && d.Exchange != "amq.topic" && d.Exchange != "amq.fanout" && d.Exchange != "amq.headers" {
		return destinationInvalid("exchange", "required: the name of an exchange (the default exchange, \"\", routes by queue name: give amq.direct or your own)")
	}
	if len(d.Exchange) > 255 || len(d.RoutingKey) > 255 {
		return destinationInvalid("exchange", "exchange names and routing keys are at most 255 bytes")
	}
	if (d.Username == "") != (d.Password == "") {
		return destinationInvalid("username", "a username needs a password, and a password a username")
	}
	return nil
}

func (d *Destination) validateSQS() error {
	u, err := url.Parse(d.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return destinationInvalid("url", "the queue URL is required: https://sqs.<region>.amazonaws.com/<account>/<queue>")
	}
	if parts := strings.Split(strings.Trim(u.Path, "/"), "/"); len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return destinationInvalid("url", "a queue URL's path is /<account>/<queue>")
	}
	if !regionRE.MatchString(d.Region) {
		return destinationInvalid("region", "required: an AWS region such as eu-west-1")
	}
	if d.AccessKeyID == "" || d.SecretAccessKey == "" {
		return destinationInvalid("access_key_id", "an access key id and a secret access key are required")
	}
	return nil
}

// serverURL checks a server's URL: one of schemes, a host and a port, no
// credentials (they have fields of their own, sealed at rest).
func serverURL(raw string, schemes ...string) error {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return destinationInvalid("url", "required: %s://host:port", schemes[0])
	case err != nil:
		return destinationInvalid("url", "not a valid URL")
	case !slices.Contains(schemes, u.Scheme):
		return destinationInvalid("url", "scheme must be %s", strings.Join(schemes, " or "))
	case u.User != nil:
		return destinationInvalid("url", "must not carry credentials: give username and password")
	case u.RawQuery != "" || u.Fragment != "":
		return destinationInvalid("url", "must not have a query or a fragment")
	}
	if err := hostPort(u.Host); err != nil {
		return destinationInvalid("url", "%v", err)
	}
	return nil
}

// hostPort checks host:port.
func hostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || strings.Contains(host, "%") {
		return errHostPort
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return errHostPort
	}
	return nil
}

var errHostPort = errors.New("want host:port")
