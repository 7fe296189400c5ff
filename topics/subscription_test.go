package topics

import (
	"encoding/base64"
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// designSubscription is the example subscription of docs/design.md (Contract) plus a secret.
func designSubscription(secret string) string {
	return `{"id": "sub_1", "tenant": "acme", "url": "https://example.com/hooks", "event_types": ["order.*"],
 "enabled": true, "ordering": "none", "headers": {"X-Team": "x"}, "timeout_ms": 15000,
 "rate_limit_per_s": 0, "retry_schedule": ["5s", "5m", "30m", "2h", "5h", "10h", "10h"],
 "secret": "` + secret + `"}`
}

// validSub returns a subscription that passes Validate.
func validSub(tb testing.TB) Subscription {
	tb.Helper()
	return Subscription{
		ID: "sub_1", URL: "https://example.com/hooks", EventTypes: []string{"order.*"},
		Enabled: true, Secret: mustSecret(tb),
	}
}

func TestDecodeSubscriptionDesignExample(t *testing.T) {
	secret := mustSecret(t)
	s, err := DecodeSubscription([]byte(designSubscription(secret)))
	if err != nil {
		t.Fatalf("DecodeSubscription(design example): %v", err)
	}
	want := Subscription{
		ID: "sub_1", Tenant: "acme", URL: "https://example.com/hooks", EventTypes: []string{"order.*"},
		Enabled: true, Ordering: OrderingNone, Headers: map[string]string{"X-Team": "x"}, TimeoutMS: 15000,
		RetrySchedule: []string{"5s", "5m", "30m", "2h", "5h", "10h", "10h"}, Secret: secret,
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("DecodeSubscription =\n%+v\nwant\n%+v", s, want)
	}
	if got := s.Timeout(); got != 15*time.Second {
		t.Errorf("Timeout() = %v, want 15s", got)
	}
	sched, err := ParseSchedule(s.RetrySchedule)
	if err != nil || !slices.Equal(sched, DefaultSchedule) {
		t.Errorf("ParseSchedule(%q) = %v, %v; want the default schedule", s.RetrySchedule, sched, err)
	}
}

func TestSubscriptionEncodeRoundTrip(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	full := Subscription{
		ID: "sub_1", Tenant: "acme", URL: "https://example.com/hooks?x=1", EventTypes: []string{"order.*", "invoice.paid"},
		Enabled: false, Ordering: OrderingKey, Headers: map[string]string{"X-Team": "x"}, TimeoutMS: 2500,
		RateLimitPerS: 12.5, RetrySchedule: []string{"1s", "1m"}, Secret: secretOf(32),
		PreviousSecret: secretOf(24), PreviousSecretUntil: now.Add(RotationGrace),
		DisabledReason: "410 Gone", CreatedAt: now, UpdatedAt: now.Add(time.Minute),
	}
	minimal := validSub(t)
	for _, tc := range []struct {
		name string
		s    Subscription
	}{{"every field", full}, {"minimal", minimal}} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.s.Encode()
			got, err := DecodeSubscription(b)
			if err != nil {
				t.Fatalf("DecodeSubscription(Encode()): %v\n%s", err, b)
			}
			if !reflect.DeepEqual(got, tc.s) {
				t.Fatalf("round trip =\n%+v\nwant\n%+v", got, tc.s)
			}
		})
	}
	// Disabled must be written out, or decoding (missing means enabled)
	// would re-enable it.
	if b := full.Encode(); !strings.Contains(string(b), `"enabled":false`) {
		t.Fatalf("Encode of a disabled subscription = %s, lacks \"enabled\":false", b)
	}
}

func TestDecodeSubscriptionEnabled(t *testing.T) {
	secret := mustSecret(t)
	base := `{"id":"sub_1","url":"https://example.com/","event_types":["*"],"secret":"` + secret + `"`
	for _, tc := range []struct {
		name string
		in   string
		want bool
	}{
		{"missing means enabled", base + `}`, true},
		{"true", base + `,"enabled":true}`, true},
		{"false", base + `,"enabled":false}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := DecodeSubscription([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if s.Enabled != tc.want {
				t.Fatalf("Enabled = %v, want %v", s.Enabled, tc.want)
			}
		})
	}
}

func TestDecodeSubscriptionRejects(t *testing.T) {
	secret := mustSecret(t)
	for _, tc := range []struct {
		name  string
		in    string
		field string
	}{
		{"not JSON", `{`, ""},
		{"unknown field", `{"id":"sub_1","url":"https://e.com/","event_types":["*"],"secret":"` + secret + `","color":"red"}`, ""},
		{"trailing data", `{"id":"sub_1","url":"https://e.com/","event_types":["*"],"secret":"` + secret + `"} 1`, ""},
		{"missing secret", `{"id":"sub_1","url":"https://e.com/","event_types":["*"]}`, "secret"},
		{"missing event types", `{"id":"sub_1","url":"https://e.com/","secret":"` + secret + `"}`, "event_types"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeSubscription([]byte(tc.in))
			wantInvalid(t, err, "subscription", tc.field)
		})
	}
}

func TestSubscriptionValidate(t *testing.T) {
	if err := func() error { s := validSub(t); return s.Validate() }(); err != nil {
		t.Fatalf("valid subscription: %v", err)
	}
	long := "https://example.com/" + strings.Repeat("a", MaxURLLength-len("https://example.com/"))
	schedule21 := make([]string, MaxScheduleSteps+1)
	schedule20 := make([]string, MaxScheduleSteps)
	for i := range schedule21 {
		schedule21[i] = "5s"
	}
	for i := range schedule20 {
		schedule20[i] = "5s"
	}
	for _, tc := range []struct {
		name  string
		mut   func(*Subscription)
		field string // "" means valid
	}{
		// id and tenant
		{"no id", func(s *Subscription) { s.ID = "" }, "id"},
		{"id with slash", func(s *Subscription) { s.ID = "a/b" }, "id"},
		{"id with space", func(s *Subscription) { s.ID = "a b" }, "id"},
		{"id 256 bytes", func(s *Subscription) { s.ID = strings.Repeat("a", 256) }, "id"},
		{"tenant with space", func(s *Subscription) { s.Tenant = "ac me" }, "tenant"},
		{"tenant ok", func(s *Subscription) { s.Tenant = "acme" }, ""},
		// url
		{"no url", func(s *Subscription) { s.URL = "" }, "url"},
		{"ftp scheme", func(s *Subscription) { s.URL = "ftp://example.com/x" }, "url"},
		{"no scheme", func(s *Subscription) { s.URL = "example.com/hooks" }, "url"},
		{"javascript scheme", func(s *Subscription) { s.URL = "javascript:alert(1)" }, "url"},
		{"no host", func(s *Subscription) { s.URL = "https:///hooks" }, "url"},
		{"opaque", func(s *Subscription) { s.URL = "https:example.com" }, "url"},
		{"port only", func(s *Subscription) { s.URL = "https://:443/x" }, "url"},
		{"userinfo", func(s *Subscription) { s.URL = "https://user:pw@example.com/" }, "url"},
		{"user only", func(s *Subscription) { s.URL = "https://user@example.com/" }, "url"},
		{"fragment", func(s *Subscription) { s.URL = "https://example.com/hooks#frag" }, "url"},
		{"ipv6 zone", func(s *Subscription) { s.URL = "http://[::1%25lo]:8080/x" }, "url"},
		{"ipv6 ok", func(s *Subscription) { s.URL = "https://[2606:4700::1111]/x" }, ""},
		{"unparseable", func(s *Subscription) { s.URL = "https://exa mple.com/%zz" }, "url"},
		{"too long", func(s *Subscription) { s.URL = long + "a" }, "url"},
		{"max length ok", func(s *Subscription) { s.URL = long }, ""},
		{"http ok", func(s *Subscription) { s.URL = "http://127.0.0.1:8080/x?y=1" }, ""},
		{"upper-case scheme ok", func(s *Subscription) { s.URL = "HTTPS://example.com/" }, ""},
		{"ipv6 ok", func(s *Subscription) { s.URL = "https://[::1]:8443/" }, ""},
		// patterns
		{"no patterns", func(s *Subscription) { s.EventTypes = nil }, "event_types"},
		{"empty pattern", func(s *Subscription) { s.EventTypes = []string{""} }, "event_types"},
		{"trailing dot", func(s *Subscription) { s.EventTypes = []string{"order."} }, "event_types"},
		{"space", func(s *Subscription) { s.EventTypes = []string{"a b"} }, "event_types"},
		{"star prefix", func(s *Subscription) { s.EventTypes = []string{"*.x"} }, "event_types"},
		{"star without dot", func(s *Subscription) { s.EventTypes = []string{"order*"} }, "event_types"},
		{"dot star only", func(s *Subscription) { s.EventTypes = []string{".*"} }, "event_types"},
		{"double star", func(s *Subscription) { s.EventTypes = []string{"order.*.*"} }, "event_types"},
		{"one bad among good", func(s *Subscription) { s.EventTypes = []string{"order.*", "bad type"} }, "event_types"},
		{"prefix ok", func(s *Subscription) { s.EventTypes = []string{"order.*"} }, ""},
		{"star ok", func(s *Subscription) { s.EventTypes = []string{"*"} }, ""},
		{"exact ok", func(s *Subscription) { s.EventTypes = []string{"order.created", "invoice.paid"} }, ""},
		// ordering
		{"bad ordering", func(s *Subscription) { s.Ordering = "fifo" }, "ordering"},
		{"ordering key ok", func(s *Subscription) { s.Ordering = OrderingKey }, ""},
		{"ordering none ok", func(s *Subscription) { s.Ordering = OrderingNone }, ""},
		// headers
		{"reserved webhook-signature", func(s *Subscription) { s.Headers = map[string]string{"webhook-signature": "v1,x"} }, "headers"},
		{"reserved webhook-id", func(s *Subscription) { s.Headers = map[string]string{"Webhook-Id": "x"} }, "headers"},
		{"reserved content-type lower", func(s *Subscription) { s.Headers = map[string]string{"content-type": "text/plain"} }, "headers"},
		{"reserved content-type mixed", func(s *Subscription) { s.Headers = map[string]string{"CoNtEnT-TyPe": "text/plain"} }, "headers"},
		{"reserved host", func(s *Subscription) { s.Headers = map[string]string{"HOST": "evil"} }, "headers"},
		{"reserved transfer-encoding", func(s *Subscription) { s.Headers = map[string]string{"transfer-encoding": "chunked"} }, "headers"},
		{"name with space", func(s *Subscription) { s.Headers = map[string]string{"X Team": "x"} }, "headers"},
		{"name with colon", func(s *Subscription) { s.Headers = map[string]string{"X-Team:": "x"} }, "headers"},
		{"empty name", func(s *Subscription) { s.Headers = map[string]string{"": "x"} }, "headers"},
		{"name non-ASCII", func(s *Subscription) { s.Headers = map[string]string{"X-Tëam": "x"} }, "headers"},
		{"CRLF in value", func(s *Subscription) { s.Headers = map[string]string{"X-Team": "x\r\nX-Evil: 1"} }, "headers"},
		{"LF in value", func(s *Subscription) { s.Headers = map[string]string{"X-Team": "x\ny"} }, "headers"},
		{"NUL in value", func(s *Subscription) { s.Headers = map[string]string{"X-Team": "x\x00"} }, "headers"},
		{"same header twice, different case", func(s *Subscription) { s.Headers = map[string]string{"X-Team": "a", "x-team": "b"} }, "headers"},
		{"custom headers ok", func(s *Subscription) {
			s.Headers = map[string]string{"X-Team": "x", "Authorization": "Bearer t", "x-lower": ""}
		}, ""},
		// timeout and rate
		{"negative timeout", func(s *Subscription) { s.TimeoutMS = -1 }, "timeout_ms"},
		{"timeout above 300s", func(s *Subscription) { s.TimeoutMS = 300_001 }, "timeout_ms"},
		{"timeout 300s ok", func(s *Subscription) { s.TimeoutMS = 300_000 }, ""},
		{"timeout 0 ok", func(s *Subscription) { s.TimeoutMS = 0 }, ""},
		{"negative rate", func(s *Subscription) { s.RateLimitPerS = -0.5 }, "rate_limit_per_s"},
		{"NaN rate", func(s *Subscription) { s.RateLimitPerS = math.NaN() }, "rate_limit_per_s"},
		{"infinite rate", func(s *Subscription) { s.RateLimitPerS = math.Inf(1) }, "rate_limit_per_s"},
		{"fractional rate ok", func(s *Subscription) { s.RateLimitPerS = 0.5 }, ""},
		// schedule
		{"schedule bad duration", func(s *Subscription) { s.RetrySchedule = []string{"5s", "soon"} }, "retry_schedule"},
		{"schedule below 1s", func(s *Subscription) { s.RetrySchedule = []string{"999ms"} }, "retry_schedule"},
		{"schedule above 48h", func(s *Subscription) { s.RetrySchedule = []string{"48h1s"} }, "retry_schedule"},
		{"schedule 21 steps", func(s *Subscription) { s.RetrySchedule = schedule21 }, "retry_schedule"},
		{"schedule 20 steps ok", func(s *Subscription) { s.RetrySchedule = schedule20 }, ""},
		{"schedule bounds ok", func(s *Subscription) { s.RetrySchedule = []string{"1s", "48h"} }, ""},
		// retry statuses
		{"retry statuses ok", func(s *Subscription) { s.RetryStatuses = []int{404, 422} }, ""},
		{"retry status not permanent", func(s *Subscription) { s.RetryStatuses = []int{500} }, "retry_statuses"},
		{"retry status 410", func(s *Subscription) { s.RetryStatuses = []int{410} }, "retry_statuses"},
		{"retry status twice", func(s *Subscription) { s.RetryStatuses = []int{404, 404} }, "retry_statuses"},
		// partitions
		{"partitions negative", func(s *Subscription) { s.Partitions = -1 }, "partitions"},
		{"partitions above 64", func(s *Subscription) { s.Partitions = 65 }, "partitions"},
		{"partitions 64 ok", func(s *Subscription) { s.Partitions = 64 }, ""},
		{"partitions 0 ok", func(s *Subscription) { s.Partitions = 0 }, ""},
		// batch
		{"batch ok", func(s *Subscription) { s.Batch = &Batch{MaxEvents: 100, MaxWaitMS: 500} }, ""},
		{"batch bounds ok", func(s *Subscription) { s.Batch = &Batch{MaxEvents: 1000, MaxWaitMS: 60_000} }, ""},
		{"batch of one", func(s *Subscription) { s.Batch = &Batch{MaxEvents: 1, MaxWaitMS: 500} }, "batch.max_events"},
		{"batch above 1000", func(s *Subscription) { s.Batch = &Batch{MaxEvents: 1001, MaxWaitMS: 500} }, "batch.max_events"},
		{"batch without wait", func(s *Subscription) { s.Batch = &Batch{MaxEvents: 10} }, "batch.max_wait_ms"},
		{"batch wait above 60s", func(s *Subscription) { s.Batch = &Batch{MaxEvents: 10, MaxWaitMS: 60_001} }, "batch.max_wait_ms"},
		{"batch of an ordered subscription ok", func(s *Subscription) {
			s.Batch, s.Ordering = &Batch{MaxEvents: 10, MaxWaitMS: 500}, OrderingKey
		}, ""},
		{"batch with a webhook-batch header", func(s *Subscription) {
			s.Batch, s.Headers = &Batch{MaxEvents: 10, MaxWaitMS: 500}, map[string]string{"webhook-batch": "x"}
		}, "headers"},
		{"batch with a transformation", func(s *Subscription) {
			s.Batch, s.Transformation = &Batch{MaxEvents: 10, MaxWaitMS: 500}, "function handler(w) { return w }"
		}, "batch"},
		{"batch to a queue destination", func(s *Subscription) {
			s.Batch = &Batch{MaxEvents: 10, MaxWaitMS: 500}
			s.Target(&Destination{Type: DestinationKafka, Brokers: []string{"b1.example.com:9092"}, Topic: "hooks"}, "")
		}, "batch"},
		// secret
		{"no secret", func(s *Subscription) { s.Secret = "" }, "secret"},
		{"secret without prefix", func(s *Subscription) { s.Secret = strings.TrimPrefix(secretOf(32), SecretPrefix) }, "secret"},
		{"secret wrong prefix", func(s *Subscription) { s.Secret = "whsek_" + strings.TrimPrefix(secretOf(32), SecretPrefix) }, "secret"},
		{"secret bad base64", func(s *Subscription) { s.Secret = SecretPrefix + "!!!not-base64!!!" }, "secret"},
		{"secret 16 bytes", func(s *Subscription) { s.Secret = secretOf(16) }, "secret"},
		{"secret 23 bytes", func(s *Subscription) { s.Secret = secretOf(23) }, "secret"},
		{"secret 65 bytes", func(s *Subscription) { s.Secret = secretOf(65) }, "secret"},
		{"secret 24 bytes ok", func(s *Subscription) { s.Secret = secretOf(24) }, ""},
		{"secret 64 bytes ok", func(s *Subscription) { s.Secret = secretOf(64) }, ""},
		{"bad previous secret", func(s *Subscription) { s.PreviousSecret = secretOf(16) }, "previous_secret"},
		{"previous secret ok", func(s *Subscription) {
			s.PreviousSecret = secretOf(32)
			s.PreviousSecretUntil = time.Now().Add(time.Hour)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := validSub(t)
			tc.mut(&s)
			err := s.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			wantInvalid(t, err, "subscription", tc.field)
		})
	}
}

func TestParseScheduleDefault(t *testing.T) {
	got, err := ParseSchedule(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}
	if !slices.Equal(got, want) {
		t.Fatalf("default schedule = %v, want %v", got, want)
	}
	var total time.Duration
	for _, d := range got {
		total += d
	}
	if total < 27*time.Hour || total > 28*time.Hour {
		t.Fatalf("default schedule totals %v, docs/design.md says about 27.6h", total)
	}
	got, err = ParseSchedule([]string{"1s", "90s", "48h"})
	if err != nil || !slices.Equal(got, []time.Duration{time.Second, 90 * time.Second, 48 * time.Hour}) {
		t.Fatalf("ParseSchedule = %v, %v", got, err)
	}
}

func TestMatchType(t *testing.T) {
	for _, tc := range []struct {
		pattern, typ string
		want         bool
	}{
		{"order.created", "order.created", true},
		{"order.created", "order.created2", false},
		{"order.created", "order.create", false},
		{"order.created", "Order.created", false},
		{"*", "order.created", true},
		{"*", "x", true},
		{"order.*", "order.created", true},
		{"order.*", "order.x.y", true},
		{"order.*", "order", false},
		{"order.*", "order.", false},
		{"order.*", "orders.created", false},
		{"order.*", "invoice.order.created", false},
		{"order.x.*", "order.x.y", true},
		{"order.x.*", "order.y.z", false},
	} {
		t.Run(tc.pattern+"~"+tc.typ, func(t *testing.T) {
			if got := MatchType(tc.pattern, tc.typ); got != tc.want {
				t.Fatalf("MatchType(%q, %q) = %v, want %v", tc.pattern, tc.typ, got, tc.want)
			}
		})
	}
}

func TestSubscriptionMatches(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sub     Subscription
		event   Event
		matches bool
	}{
		{"no tenant, event without tenant", Subscription{Enabled: true, EventTypes: []string{"*"}}, Event{Type: "a"}, true},
		{"no tenant, event with tenant", Subscription{Enabled: true, EventTypes: []string{"*"}}, Event{Type: "a", Tenant: "acme"}, true},
		{"tenant, same tenant", Subscription{Enabled: true, Tenant: "acme", EventTypes: []string{"*"}}, Event{Type: "a", Tenant: "acme"}, true},
		{"tenant, other tenant", Subscription{Enabled: true, Tenant: "acme", EventTypes: []string{"*"}}, Event{Type: "a", Tenant: "globex"}, false},
		{"tenant, event without tenant", Subscription{Enabled: true, Tenant: "acme", EventTypes: []string{"*"}}, Event{Type: "a"}, false},
		{"disabled", Subscription{Enabled: false, EventTypes: []string{"*"}}, Event{Type: "a"}, false},
		{"type mismatch", Subscription{Enabled: true, EventTypes: []string{"invoice.*", "order.created"}}, Event{Type: "order.paid"}, false},
		{"second pattern matches", Subscription{Enabled: true, EventTypes: []string{"invoice.*", "order.paid"}}, Event{Type: "order.paid"}, true},
		{"no patterns", Subscription{Enabled: true}, Event{Type: "a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.sub.Matches(&tc.event); got != tc.matches {
				t.Fatalf("Matches = %v, want %v", got, tc.matches)
			}
		})
	}
}

func TestSubscriptionTimeout(t *testing.T) {
	for _, tc := range []struct {
		ms   int
		want time.Duration
	}{
		{0, DefaultTimeout}, {-5, DefaultTimeout}, {1, time.Millisecond}, {2500, 2500 * time.Millisecond},
	} {
		s := Subscription{TimeoutMS: tc.ms}
		if got := s.Timeout(); got != tc.want {
			t.Errorf("Timeout(%d ms) = %v, want %v", tc.ms, got, tc.want)
		}
	}
	if DefaultTimeout != 15*time.Second {
		t.Errorf("DefaultTimeout = %v", DefaultTimeout)
	}
}

func TestSubscriptionSecrets(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	cur, prev := secretOf(32), secretOf(40)
	for _, tc := range []struct {
		name  string
		prev  string
		until time.Time
		want  []string
	}{
		{"no previous", "", time.Time{}, []string{cur}},
		{"within grace", prev, now.Add(time.Hour), []string{cur, prev}},
		{"one ns before the end", prev, now.Add(time.Nanosecond), []string{cur, prev}},
		{"at the end of grace", prev, now, []string{cur}},
		{"after grace", prev, now.Add(-time.Minute), []string{cur}},
		{"previous without until", prev, time.Time{}, []string{cur}},
		{"until without previous", "", now.Add(time.Hour), []string{cur}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Subscription{Secret: cur, PreviousSecret: tc.prev, PreviousSecretUntil: tc.until}
			if got := s.Secrets(now); !slices.Equal(got, tc.want) {
				t.Fatalf("Secrets = %q, want %q", got, tc.want)
			}
		})
	}
	if RotationGrace != 24*time.Hour {
		t.Errorf("RotationGrace = %v, docs/design.md says 24h", RotationGrace)
	}
}

func TestDeliveryKey(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ordering string
		key      string
		want     string
	}{
		{"unordered, no key", OrderingNone, "", "sub_1/evt_1"},
		{"unordered, key", OrderingNone, "order_42", "sub_1/evt_1"},
		{"ordering unset, key", "", "order_42", "sub_1/evt_1"},
		{"ordered, no key", OrderingKey, "", "sub_1/evt_1"},
		{"ordered, key", OrderingKey, "order_42", "sub_1/order_42"},
		{"ordered, key with slash", OrderingKey, "a/b", "sub_1/a/b"},
		// Spread over 4 partitions: the shard of the ordering key or the
		// event id (Kafka's murmur2 of it, modulo 4) follows the id.
		{"spread, unordered", OrderingNone, "order_42", "sub_1 " + strconv.Itoa(kafkaPartition("evt_1", 4)) + "/evt_1"},
		{"spread, ordered, key", OrderingKey, "order_42", "sub_1 " + strconv.Itoa(kafkaPartition("order_42", 4)) + "/order_42"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Subscription{ID: "sub_1", Ordering: tc.ordering}
			if strings.HasPrefix(tc.name, "spread") {
				s.Partitions = 4
			}
			e := Event{ID: "evt_1", Key: tc.key}
			got := s.DeliveryKey(&e)
			if got != tc.want {
				t.Fatalf("DeliveryKey = %q, want %q", got, tc.want)
			}
			if sub := string(SubscriptionOfKey([]byte(got))); sub != "sub_1" {
				t.Fatalf("SubscriptionOfKey(%q) = %q, want sub_1", got, sub)
			}
		})
	}
}

func TestNewSecret(t *testing.T) {
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{a, b} {
		if !strings.HasPrefix(s, "whsec_") {
			t.Fatalf("secret %q lacks whsec_", s)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if err != nil || len(raw) != 32 {
			t.Fatalf("secret %q: %d bytes, %v; want base64 of 32 bytes", s, len(raw), err)
		}
		if err := ValidateSecret(s); err != nil {
			t.Fatalf("ValidateSecret(NewSecret()): %v", err)
		}
		key, err := DecodeSecret(s)
		if err != nil || !slices.Equal(key, raw) {
			t.Fatalf("DecodeSecret = %x, %v; want %x", key, err, raw)
		}
	}
	if a == b {
		t.Fatal("two NewSecret calls returned the same secret")
	}
}

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://user:pass@example.com/hooks?token=abc", "https://example.com/hooks"},
		{"https://example.com:8443/a/b?x=1#frag", "https://example.com:8443/a/b"},
		{"http://example.com", "http://example.com"},
		{"https://u@example.com/", "https://example.com/"},
		{"https://example.com/a%20b", "https://example.com/a%20b"},
		{"https://exa mple.com/%zz", "<unparseable url>"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got := RedactURL(tc.in)
			if got != tc.want {
				t.Fatalf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
			}
			for _, secret := range []string{"pass", "token", "abc", "user"} {
				if strings.Contains(got, secret) {
					t.Fatalf("RedactURL(%q) = %q leaks %q", tc.in, got, secret)
				}
			}
		})
	}
}

func TestInvalidError(t *testing.T) {
	e := &InvalidError{Record: "subscription", Field: "url", Reason: "has no host"}
	if got, want := e.Error(), "invalid subscription: url: has no host"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e = &InvalidError{Record: "event", Reason: "not JSON"}
	if got, want := e.Error(), "invalid event: not JSON"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(e, ErrInvalid) {
		t.Error("InvalidError does not unwrap to ErrInvalid")
	}
	// Wrapped again by a caller, both still work.
	wrapped := errors.Join(errors.New("context"), ValidateURL("ftp://x"))
	var ie *InvalidError
	if !errors.Is(wrapped, ErrInvalid) || !errors.As(wrapped, &ie) || ie.Field != "url" {
		t.Errorf("wrapped validation error lost its type: %v", wrapped)
	}
}

// TestNoNoticesAboutItself: a subscription to operational events is never
// sent those about itself, and gets the others of its tenant; "*" is not a
// subscription to them.
func TestNoNoticesAboutItself(t *testing.T) {
	s := Subscription{ID: "ops", Tenant: "acme", EventTypes: []string{"webhook.*"}, Enabled: true}
	if s.Matches(&Event{Type: NoticeFailing, Tenant: "acme", Key: "ops"}) {
		t.Fatal("ops matched the news of its own failure")
	}
	if !s.Matches(&Event{Type: NoticeFailing, Tenant: "acme", Key: "shop"}) {
		t.Fatal("ops did not match another subscription's failure")
	}
	o := Subscription{ID: "order_1", EventTypes: []string{"order.*"}, Enabled: true}
	if !o.Matches(&Event{Type: "order.created", Key: "order_1"}) {
		t.Fatal("an ordinary event whose key is the subscription's id did not match")
	}
	all := Subscription{ID: "all", Tenant: "acme", EventTypes: []string{"*"}, Enabled: true}
	if all.Matches(&Event{Type: NoticeMessageDead, Tenant: "acme", Key: "shop"}) {
		t.Fatal(`"*" matched an operational event: only a pattern naming them does`)
	}
	one := Subscription{ID: "one", Tenant: "acme", EventTypes: []string{NoticeDisabled}, Enabled: true}
	if !one.Matches(&Event{Type: NoticeDisabled, Tenant: "acme", Key: "shop"}) || one.Matches(&Event{Type: NoticeFailing, Tenant: "acme", Key: "shop"}) {
		t.Fatal("a subscription naming one operational event type matched another, or not its own")
	}
	if s.Matches(&Event{Type: NoticeFailing, Tenant: "globex", Key: "shop"}) {
		t.Fatal("ops matched another tenant's operational event")
	}
}
