package topics

import (
	"errors"
	"strings"
	"testing"
)

func destinationSub(t *testing.T, d *Destination) Subscription {
	t.Helper()
	secret, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	s := Subscription{ID: "sub_d", EventTypes: []string{"*"}, Enabled: true, Secret: secret}
	s.Target(d, "https://example.com/hooks")
	return s
}

// TestDestinationValidation: each kind reads its own fields; a bad or
// missing one, or one meant for another kind, is an error naming it.
func TestDestinationValidation(t *testing.T) {
	kafka := func() *Destination {
		return &Destination{Type: DestinationKafka, Brokers: []string{"b1.example.com:9092"}, Topic: "hooks"}
	}
	for _, tc := range []struct {
		name  string
		d     *Destination
		field string // "" when valid
	}{
		{"kafka", kafka(), ""},
		{"kafka with scram", &Destination{Type: DestinationKafka, Brokers: []string{"b:9093"}, Topic: "t", TLS: true, SASL: SASLSCRAMSHA512, Username: "u", Password: "p"}, ""},
		{"nats", &Destination{Type: DestinationNATS, URL: "nats://n.example.com:4222", Subject: "hooks.orders", Token: "tok"}, ""},
		{"rabbitmq", &Destination{Type: DestinationRabbitMQ, URL: "amqps://mq.example.com:5671/prod", Exchange: "hooks", Username: "u", Password: "p"}, ""},
		{"sqs fifo", &Destination{Type: DestinationSQS, URL: "https://sqs.eu-west-1.amazonaws.com/123456789012/hooks.fifo", Region: "eu-west-1", AccessKeyID: "AKIA", SecretAccessKey: "s"}, ""},
		{"http", &Destination{Type: DestinationHTTP}, ""},
		{"unknown type", &Destination{Type: "smtp"}, "destination.type"},
		{"kafka without brokers", &Destination{Type: DestinationKafka, Topic: "t"}, "destination.brokers"},
		{"kafka broker without port", &Destination{Type: DestinationKafka, Brokers: []string{"b1"}, Topic: "t"}, "destination.brokers"},
		{"kafka bad topic", &Destination{Type: DestinationKafka, Brokers: []string{"b:9092"}, Topic: "a b"}, "destination.topic"},
		{"kafka sasl without password", &Destination{Type: DestinationKafka, Brokers: []string{"b:9092"}, Topic: "t", SASL: SASLPlain, Username: "u"}, "destination.username"},
		{"kafka with a subject", &Destination{Type: DestinationKafka, Brokers: []string{"b:9092"}, Topic: "t", Subject: "s"}, "destination.subject"},
		{"nats wildcard", &Destination{Type: DestinationNATS, URL: "nats://n:4222", Subject: "hooks.>"}, "destination.subject"},
		{"nats credentials in url", &Destination{Type: DestinationNATS, URL: "nats://u:p@n:4222", Subject: "s"}, "destination.url"},
		{"rabbitmq http url", &Destination{Type: DestinationRabbitMQ, URL: "http://mq:5672", Exchange: "x"}, "destination.url"},
		{"rabbitmq no exchange", &Destination{Type: DestinationRabbitMQ, URL: "amqp://mq:5672"}, "destination.exchange"},
		{"sqs no region", &Destination{Type: DestinationSQS, URL: "https://sqs.eu-west-1.amazonaws.com/1/q", AccessKeyID: "a", SecretAccessKey: "s"}, "destination.region"},
		{"sqs not a queue url", &Destination{Type: DestinationSQS, URL: "https://sqs.eu-west-1.amazonaws.com/q", Region: "eu-west-1", AccessKeyID: "a", SecretAccessKey: "s"}, "destination.url"},
		{"bad ca", &Destination{Type: DestinationKafka, Brokers: []string{"b:9092"}, Topic: "t", CA: "not pem"}, "destination.ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := destinationSub(t, tc.d)
			err := s.Validate()
			var ie *InvalidError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("valid destination refused: %v", err)
			case tc.field != "" && (!errors.As(err, &ie) || ie.Field != tc.field):
				t.Fatalf("got %v, want an error naming %s", err, tc.field)
			}
		})
	}

	s := destinationSub(t, kafka())
	s.URL = "https://example.com/hooks"
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), s.Destination.Address()) {
		t.Errorf("a destination whose URL is not its address: %v", err)
	}
	s = destinationSub(t, kafka())
	s.Auth = &EndpointAuth{Type: AuthBearer, Token: "t"}
	if err := s.Validate(); err == nil {
		t.Error("endpoint auth on a Kafka destination accepted")
	}
}

// TestDestinationSecretsSealed: a destination's password, token and secret
// access key are sealed at rest and open again; its other fields are not.
func TestDestinationSecretsSealed(t *testing.T) {
	k, err := ParseKeyring("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	if err != nil {
		t.Fatal(err)
	}
	s := destinationSub(t, &Destination{Type: DestinationNATS, URL: "nats://n.example.com:4222", Subject: "hooks", Username: "hooks-user", Password: "pw-never-plain"})
	b := s.EncodeWith(k)
	if strings.Contains(string(b), "pw-never-plain") || !strings.Contains(string(b), "hooks-user") {
		t.Fatalf("sealed record: %s", b)
	}
	got, err := DecodeSubscriptionWith(b, k)
	if err != nil {
		t.Fatal(err)
	}
	if got.Destination.Password != "pw-never-plain" || got.URL != "nats://n.example.com:4222/hooks" {
		t.Fatalf("opened: %+v", got.Destination)
	}
	if m := s.Destination.Masked("***"); m.Password != "***" || s.Destination.Password != "pw-never-plain" {
		t.Fatalf("Masked: %+v", m)
	}
}
