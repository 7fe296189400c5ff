package ui

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"unicode"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/topics"
)

// The endpoint forms' destination: a choice of kind (an HTTP endpoint, a
// Kafka topic, a NATS subject, a RabbitMQ exchange, an SQS queue) and the
// fields of each kind, one fieldset per kind named <kind>.<field> (the
// HTTP endpoint's URL is plain url), so that the form works without
// script: only the chosen kind's fields are read. app.js shows the chosen
// fieldset only. Secrets (passwords, the token, the secret access key) are
// never filled in: left empty on an edit, the API keeps the current one.

// destKinds are the kinds of the forms' choice, in its order.
var destKinds = []struct{ Type, Label string }{
	{topics.DestinationHTTP, "HTTP endpoint"},
	{topics.DestinationKafka, "Kafka topic"},
	{topics.DestinationNATS, "NATS subject"},
	{topics.DestinationRabbitMQ, "RabbitMQ exchange"},
	{topics.DestinationSQS, "SQS queue"},
}

// destSpec is one field of a kind: Key is the API's field (destination.Key;
// the subscription's url for an HTTP endpoint).
type destSpec struct {
	Key, Label, Hint, Input, Placeholder string
	Options                              []string
}

// Inputs of a field.
const (
	inText     = "text"
	inURL      = "url"
	inPassword = "password" // a secret: never filled in
	inCheckbox = "checkbox"
	inSelect   = "select"
	inTextarea = "textarea"
)

var (
	destUsername = destSpec{Key: "username", Label: "Username", Input: inText}
	destPassword = destSpec{Key: "password", Label: "Password", Input: inPassword}
	destCA       = destSpec{Key: "ca", Label: "CA certificates", Hint: "PEM, when the system's roots do not sign the server's certificate", Input: inTextarea}
)

// destSpecs are the fields of each kind, as topics.Destination reads them.
var destSpecs = map[string][]destSpec{
	topics.DestinationHTTP: {{Key: "url", Label: "URL", Input: inURL, Placeholder: "https://example.com/hooks"}},
	topics.DestinationKafka: {
		{Key: "brokers", Label: "Brokers", Hint: "host:port, comma-separated", Input: inText, Placeholder: "kafka-1.example.com:9093, kafka-2.example.com:9093"},
		{Key: "topic", Label: "Topic", Input: inText},
		{Key: "tls", Label: "TLS", Input: inCheckbox},
		{Key: "sasl", Label: "SASL", Input: inSelect, Options: []string{"", topics.SASLPlain, topics.SASLSCRAMSHA256, topics.SASLSCRAMSHA512}},
		destUsername, destPassword, destCA,
	},
	topics.DestinationNATS: {
		{Key: "url", Label: "Server URL", Hint: "nats:// or tls://", Input: inText, Placeholder: "nats://nats.example.com:4222"},
		{Key: "subject", Label: "Subject", Hint: "a JetStream stream must capture it", Input: inText, Placeholder: "acme.webhooks"},
		{Key: "token", Label: "Token", Hint: "or a username and password", Input: inPassword},
		destUsername, destPassword, destCA,
	},
	topics.DestinationRabbitMQ: {
		{Key: "url", Label: "Server URL", Hint: "amqp:// or amqps://, the vhost as its path", Input: inText, Placeholder: "amqps://rabbit.example.com:5671/vhost"},
		{Key: "exchange", Label: "Exchange", Input: inText},
		{Key: "routing_key", Label: "Routing key", Hint: "empty: the event type", Input: inText},
		destUsername, destPassword, destCA,
	},
	topics.DestinationSQS: {
		{Key: "url", Label: "Queue URL", Input: inURL, Placeholder: "https://sqs.eu-west-1.amazonaws.com/123456789012/webhooks"},
		{Key: "region", Label: "Region", Input: inText, Placeholder: "eu-west-1"},
		{Key: "access_key_id", Label: "Access key id", Input: inText},
		{Key: "secret_access_key", Label: "Secret access key", Input: inPassword},
	},
}

// destForm is the destination part of an endpoint form: the kind chosen
// and every kind's fields, with the values typed (or the subscription's)
// and the API's messages next to the fields they name.
type destForm struct {
	Type  string
	Kinds []destKind
	// Error is a message about the destination that names none of the
	// chosen kind's fields.
	Error string
}

type destKind struct {
	Type, Label string
	Fields      []destField
}

type destField struct {
	destSpec
	Name, ID, Value, Error string
	Checked                bool
	// Kept: a secret the subscription has, kept when left empty.
	Kept bool
}

// destFormOf is the form showing d (nil: an HTTP endpoint at url), never
// its secrets; edit marks the secrets of d's kind as kept when left empty.
func destFormOf(d *service.Destination, url string, edit bool) destForm {
	f := destForm{Type: topics.DestinationHTTP}
	if d != nil && d.Type != "" {
		f.Type = d.Type
	}
	for _, k := range destKinds {
		kind := destKind{Type: k.Type, Label: k.Label}
		for _, spec := range destSpecs[k.Type] {
			fd := destField{destSpec: spec, Name: k.Type + "." + spec.Key, ID: k.Type + "-" + strings.ReplaceAll(spec.Key, "_", "-")}
			if k.Type == topics.DestinationHTTP {
				fd.Name = spec.Key
			}
			if k.Type == f.Type {
				switch {
				case k.Type == topics.DestinationHTTP:
					fd.Value = url
				case spec.Input == inPassword:
					fd.Kept = edit && hasSecret(d, spec.Key)
				case spec.Input == inCheckbox:
					fd.Checked = d.TLS
				default:
					fd.Value = destValue(d, spec.Key)
				}
			}
			kind.Fields = append(kind.Fields, fd)
		}
		f.Kinds = append(f.Kinds, kind)
	}
	return f
}

// hasSecret reports whether d, as shown without its secrets, has the
// secret key: what its other fields imply (a Kafka password with SASL, a
// password with a username, always an SQS secret key), and maybe a NATS
// token when it has no username.
func hasSecret(d *service.Destination, key string) bool {
	switch key {
	case "password":
		return d.SASL != "" || d.Type != topics.DestinationKafka && d.Username != ""
	case "token":
		return d.Username == ""
	}
	return true
}

// destValue is the value of d's non-secret field key as a form shows it.
func destValue(d *service.Destination, key string) string {
	switch key {
	case "url":
		return d.URL
	case "brokers":
		return strings.Join(d.Brokers, ", ")
	case "topic":
		return d.Topic
	case "subject":
		return d.Subject
	case "exchange":
		return d.Exchange
	case "routing_key":
		return d.RoutingKey
	case "region":
		return d.Region
	case "sasl":
		return d.SASL
	case "username":
		return d.Username
	case "access_key_id":
		return d.AccessKeyID
	case "ca":
		return d.CA
	}
	return ""
}

// readDestination reads the posted form's destination: the kind chosen
// (an HTTP endpoint when the form has no choice) with its fields, and the
// HTTP endpoint's URL.
func readDestination(r *http.Request) (d *service.Destination, url string) {
	kind := r.PostFormValue("destination")
	if kind == "" {
		kind = topics.DestinationHTTP
	}
	d = &service.Destination{Type: kind}
	if kind == topics.DestinationHTTP {
		return d, strings.TrimSpace(r.PostFormValue("url"))
	}
	specs, ok := destSpecs[kind]
	if !ok {
		return d, "" // the API names the type
	}
	// The fields of the kind only.
	raw := func(key string) string {
		if !slices.ContainsFunc(specs, func(s destSpec) bool { return s.Key == key }) {
			return ""
		}
		return r.PostFormValue(kind + "." + key)
	}
	v := func(key string) string { return strings.TrimSpace(raw(key)) }
	d.URL, d.Topic, d.Subject, d.Exchange, d.RoutingKey = v("url"), v("topic"), v("subject"), v("exchange"), v("routing_key")
	d.Region, d.SASL, d.Username, d.AccessKeyID = v("region"), v("sasl"), v("username"), v("access_key_id")
	d.Brokers = strings.FieldsFunc(v("brokers"), func(c rune) bool { return c == ',' || unicode.IsSpace(c) })
	d.TLS = v("tls") != ""
	// Secrets as typed: a password may begin or end with a space.
	d.Password, d.Token, d.SecretAccessKey = raw("password"), raw("token"), raw("secret_access_key")
	if ca := strings.TrimSpace(strings.ReplaceAll(v("ca"), "\r\n", "\n")); ca != "" {
		d.CA = ca + "\n"
	}
	return d, ""
}

// destinationBody sets the subscription fields of an endpoint form's
// destination on body: the URL of an HTTP endpoint (and, on an edit, the
// choice of one, which turns a destination back into an endpoint), else
// the destination, whose address becomes the URL.
func destinationBody(body map[string]any, d *service.Destination, url string, edit bool) {
	if d.Type != topics.DestinationHTTP {
		body["destination"] = d
		return
	}
	body["url"] = url
	if edit {
		body["destination"] = map[string]string{"type": topics.DestinationHTTP}
	}
}

// refused puts the API's messages naming a field of the chosen kind next to
// it (url for an HTTP endpoint, destination.<field> for the others).
func (f *destForm) refused(err error) {
	var e *apiError
	if !errors.As(err, &e) {
		return
	}
	for _, d := range e.Errors {
		field, ok := strings.CutPrefix(d.Location, "body.destination.")
		if f.Type == topics.DestinationHTTP {
			field, ok = strings.CutPrefix(d.Location, "body.")
			ok = ok && field == "url"
		}
		if !ok {
			continue
		}
		placed := false
		for i := range f.Kinds {
			for j := range f.Kinds[i].Fields {
				if fd := &f.Kinds[i].Fields[j]; f.Kinds[i].Type == f.Type && fd.Key == field {
					fd.Error, placed = d.Message, true
				}
			}
		}
		if !placed {
			f.Error = strings.TrimPrefix(d.Location, "body.") + ": " + d.Message
		}
	}
}

// destLabel is the name of a kind of destination on the pages.
func destLabel(kind string) string {
	for _, k := range destKinds {
		if k.Type == kind {
			return k.Label
		}
	}
	return kind
}

// destDetail is one non-secret setting of a destination on its endpoint's
// page.
type destDetail struct{ Label, Value string }

// destDetails are d's non-secret settings, in its kind's order.
func destDetails(d *service.Destination) []destDetail {
	if d == nil {
		return nil
	}
	var out []destDetail
	for _, spec := range destSpecs[d.Type] {
		var v string
		switch spec.Input {
		case inPassword:
			continue
		case inCheckbox:
			if d.TLS {
				v = "yes"
			}
		default:
			v = destValue(d, spec.Key)
		}
		switch {
		case spec.Key == "ca" && v != "":
			v = "its own (PEM)"
		case spec.Key == "routing_key" && v == "":
			v = "the event type"
		}
		if v != "" {
			out = append(out, destDetail{Label: spec.Label, Value: v})
		}
	}
	return out
}

// sameKind reports whether d and o are destinations of one kind, so that
// the secrets left out of o are d's.
func sameKind(d, o *service.Destination) bool {
	return d != nil && o != nil && d.Type == o.Type
}
