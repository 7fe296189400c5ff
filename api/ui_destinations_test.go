package api

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// endpointForm is a filled endpoint form: the CSRF token, every type, and the
// fields given as name, value pairs.
func endpointForm(token string, fields ...string) url.Values {
	form := url.Values{"_csrf": {token}, "event_types": {"*"}}
	for i := 0; i+1 < len(fields); i += 2 {
		form.Set(fields[i], fields[i+1])
	}
	return form
}

// fieldError is the message the page shows next to the field of id, and
// whether the field is marked invalid.
func fieldError(body, id string) (string, bool) {
	m := regexp.MustCompile(`<span class="field-error" id="` + regexp.QuoteMeta(id) + `-error">([^<]*)</span>`).FindStringSubmatch(body)
	if m == nil {
		return "", false
	}
	marked := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `"[^>]*aria-invalid="true"`).MatchString(body)
	return m[1], marked
}

// TestDestinationForms: the dashboard's endpoint form adds a subscription
// of each kind of destination from the fields of the kind chosen (those of
// the other kinds, filled or not, are not read), shows its address and
// non-secret settings but never a secret; a refused field comes back with
// the API's message next to it, the rest as typed and nothing written;
// the edit form shows the settings, keeps a secret left empty, moves to
// another kind and back to an HTTP endpoint.
func TestDestinationForms(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	u := r.uiClient()
	u.signIn(adminKey)
	token := u.csrf("/ui/subscriptions")
	if _, body := u.get("/ui/subscriptions"); !strings.Contains(body, `<option value="kafka" >Kafka topic</option>`) ||
		!strings.Contains(body, `name="sqs.secret_access_key"`) {
		t.Fatalf("the add form offers no destination choice: %.2000s", body)
	}

	for _, tc := range []struct {
		kind    string
		fields  []string
		address string
		shown   []string
		secret  string
	}{
		{"kafka", []string{"kafka.brokers", "kafka-1.acme.example:9093, kafka-2.acme.example:9093", "kafka.topic", "acme-hooks", "kafka.tls", "true",
			"kafka.sasl", "scram-sha-512", "kafka.username", "hooks", "kafka.password", "pw-kafka-7f3a"},
			"kafka+tls://kafka-1.acme.example:9093,kafka-2.acme.example:9093/acme-hooks", []string{"Kafka topic", "scram-sha-512", "hooks"}, "pw-kafka-7f3a"},
		{"nats", []string{"nats.url", "nats://nats.acme.example:4222", "nats.subject", "acme.hooks", "nats.token", "tok-nats-91c2"},
			"nats://nats.acme.example:4222/acme.hooks", []string{"NATS subject", "acme.hooks"}, "tok-nats-91c2"},
		{"rabbitmq", []string{"rabbitmq.url", "amqps://rabbit.acme.example:5671/prod", "rabbitmq.exchange", "hooks", "rabbitmq.username", "hookpipe",
			"rabbitmq.password", "pw-rabbit-b7e1"},
			"amqps://rabbit.acme.example:5671/prod/hooks", []string{"RabbitMQ exchange", "the event type"}, "pw-rabbit-b7e1"},
		{"sqs", []string{"sqs.url", "https://sqs.eu-west-1.amazonaws.com/123456789012/hooks", "sqs.region", "eu-west-1",
			"sqs.access_key_id", "AKIAEXAMPLE", "sqs.secret_access_key", "sk-sqs-44d0"},
			"https://sqs.eu-west-1.amazonaws.com/123456789012/hooks", []string{"SQS queue", "eu-west-1", "AKIAEXAMPLE"}, "sk-sqs-44d0"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			// The HTTP URL and another kind's field are filled too, as
			// a form without script posts them: only the chosen kind's
			// are read.
			form := endpointForm(token, append([]string{"destination", tc.kind, "tenant", "acme", "url", "https://ignored.example/",
				"kafka.region", "ignored"}, tc.fields...)...)
			status, body := u.post("/ui/subscriptions", form)
			body = html.UnescapeString(body)
			if status != http.StatusOK || !strings.Contains(body, "Added.") {
				t.Fatalf("adding a %s destination: %d %.1500s", tc.kind, status, body)
			}
			if !strings.Contains(body, `<code id="sub-address">`+tc.address+`</code>`) {
				t.Errorf("the endpoint page does not show the address %s: %.3000s", tc.address, body)
			}
			for _, s := range tc.shown {
				if !strings.Contains(body, s) {
					t.Errorf("the endpoint page does not show %q", s)
				}
			}
			if strings.Contains(body, tc.secret) {
				t.Errorf("the endpoint page shows the secret")
			}
			id := regexp.MustCompile(`<h1>Endpoint <code>([^<]+)</code>`).FindStringSubmatch(body)[1]
			stored, _ := r.s.subs.Get(id)
			if stored.Destination == nil || stored.Destination.Type != tc.kind || stored.URL != tc.address ||
				!strings.Contains(strings.Join(stored.Destination.Secrets(), " "), tc.secret) {
				t.Errorf("stored: %+v, destination %+v", stored, stored.Destination)
			}
			if _, list := u.get("/ui/subscriptions"); !strings.Contains(html.UnescapeString(list), tc.address) || strings.Contains(list, tc.secret) {
				t.Errorf("the endpoints list: want the address, not the secret")
			}
		})
	}

	before := len(c.records(c.names.Subscriptions()))
	for _, tc := range []struct {
		name   string
		fields []string
		id     string // of the field the message is next to
		want   string // in the message
		kept   string // a value typed, shown again
	}{
		{"kafka brokers", []string{"destination", "kafka", "kafka.brokers", "nope", "kafka.topic", "acme-topic-typed", "kafka.password", "pw-typed-0c1"},
			"kafka-brokers", "host:port", `value="acme-topic-typed"`},
		{"kafka topic", []string{"destination", "kafka", "kafka.brokers", "kafka.acme.example:9093"}, "kafka-topic", "required", `value="kafka.acme.example:9093"`},
		{"kafka sasl", []string{"destination", "kafka", "kafka.brokers", "k.acme.example:9093", "kafka.topic", "t", "kafka.username", "hooks"},
			"kafka-sasl", "mechanism", `value="hooks"`},
		{"nats subject", []string{"destination", "nats", "nats.url", "nats://n.acme.example:4222", "nats.subject", "acme.*"}, "nats-subject", "wildcards", `value="acme.*"`},
		{"rabbitmq url", []string{"destination", "rabbitmq", "rabbitmq.url", "http://r.acme.example:5672", "rabbitmq.exchange", "hooks"}, "rabbitmq-url", "amqp", `value="hooks"`},
		{"sqs region", []string{"destination", "sqs", "sqs.url", "https://sqs.eu-west-1.amazonaws.com/1/q", "sqs.region", "Europe"}, "sqs-region", "eu-west-1", `value="Europe"`},
		{"http url", []string{"url", "ftp://a.example/"}, "http-url", "http", `value="ftp://a.example/"`},
	} {
		t.Run("refused "+tc.name, func(t *testing.T) {
			status, body := u.post("/ui/subscriptions", endpointForm(token, tc.fields...))
			if status != http.StatusOK || !strings.Contains(body, "Not added:") {
				t.Fatalf("%d, want the page again with the error: %.1500s", status, body)
			}
			msg, marked := fieldError(body, tc.id)
			if !strings.Contains(msg, tc.want) || !marked {
				t.Errorf("next to %s: %q (marked invalid: %v), want a message with %q", tc.id, msg, marked, tc.want)
			}
			if !strings.Contains(body, tc.kept) {
				t.Errorf("the form lost what was typed: want %s", tc.kept)
			}
			if kind := regexp.MustCompile(`<option value="([a-z]+)" selected>`).FindStringSubmatch(body); kind == nil ||
				kind[1] != cutKind(tc.fields) {
				t.Errorf("the kind chosen is not chosen again: %v", kind)
			}
			if strings.Contains(body, "pw-typed-0c1") {
				t.Errorf("the page shows the password typed")
			}
		})
	}
	if n := len(c.records(c.names.Subscriptions())); n != before {
		t.Errorf("%d subscriptions written by refused forms", n-before)
	}

	// The edit form.
	form := endpointForm(token, "destination", "kafka", "kafka.brokers", "k1.acme.example:9093", "kafka.topic", "acme-hooks",
		"kafka.sasl", "plain", "kafka.username", "hooks", "kafka.password", "pw-edit-55aa")
	_, body := u.post("/ui/subscriptions", form)
	id := regexp.MustCompile(`<h1>Endpoint <code>([^<]+)</code>`).FindStringSubmatch(body)[1]
	_, body = u.get("/ui/subscriptions/" + id)
	for _, want := range []string{`<option value="kafka" selected>`, `value="k1.acme.example:9093"`, `<option value="plain" selected>`,
		`name="kafka.password" id="kafka-password" type="password" autocomplete="new-password" placeholder="unchanged"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the edit form has no %s", want)
		}
	}
	if strings.Contains(body, "pw-edit-55aa") {
		t.Errorf("the edit form shows the password")
	}
	edit := "/ui/subscriptions/" + id + "/edit"
	form.Set("kafka.topic", "acme-hooks-2")
	form.Del("kafka.password")
	if _, body = u.post(edit, form); !strings.Contains(body, "Saved.") || !strings.Contains(body, "kafka://k1.acme.example:9093/acme-hooks-2") {
		t.Fatalf("an edit leaving the password empty: %.1500s", body)
	}
	if stored, _ := r.s.subs.Get(id); stored.Destination.Password != "pw-edit-55aa" {
		t.Errorf("the password left empty was not kept: %q", stored.Destination.Password)
	}
	form.Set("kafka.username", "")
	_, body = u.post(edit, form)
	if msg, marked := fieldError(body, "kafka-username"); !strings.Contains(msg, "username") || !marked {
		t.Errorf("an edit without the username: %q next to it: %.1500s", msg, body)
	}
	_, body = u.post(edit, endpointForm(token, "destination", "nats", "nats.url", "tls://n.acme.example:4222", "nats.subject", "acme"))
	if !strings.Contains(body, "Saved.") || !strings.Contains(body, `<code id="sub-address">tls://n.acme.example:4222/acme</code>`) {
		t.Fatalf("moving to a NATS subject: %.1500s", body)
	}
	_, body = u.post(edit, endpointForm(token, "destination", "http", "url", "https://hooks.acme.example/in"))
	if stored, _ := r.s.subs.Get(id); !strings.Contains(body, "Saved.") || stored.Destination != nil || stored.URL != "https://hooks.acme.example/in" {
		t.Fatalf("back to an HTTP endpoint: %+v: %.1500s", stored, body)
	}
}

// cutKind is the destination a form's fields choose.
func cutKind(fields []string) string {
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] == "destination" {
			return fields[i+1]
		}
	}
	return "http"
}
