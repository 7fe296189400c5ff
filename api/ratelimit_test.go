package api

import (
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
)

// TestRateLimitPerKey: a key over its rate answers 429 with Retry-After on
// every replica (the limit is shared through Redis), while another key is
// not slowed; with Redis unreachable nothing is limited (fail open).
func TestRateLimitPerKey(t *testing.T) {
	t.Parallel()
	url, prefix := redistest.Shared(t)
	c := newCluster(t)
	env := maps.Clone(c.env)
	// One request per 20 s: the second comes well within it. Calls may take
	// up to 2 s (at most the retry interval): a loaded machine (CI) once
	// held a call past the default 100 ms, and the replica then failed
	// open, as it should, but this test is about the shared limit.
	env[redisstate.EnvURL], env[redisstate.EnvKeyPrefix], env["WEBHOOKS_API_RATE_LIMIT"] = url, prefix, "0.05"
	env[redisstate.EnvTimeout] = "2s"
	admin := c.replica() // no limit
	key, other := admin.tenantKey("acme"), admin.tenantKey("globex")
	one, two := c.replicaWith(env), c.replicaWith(env)
	var a answer
	// A replica knows a new key once it has read it (401 until then, before
	// any rate is counted).
	testkit.WaitFor(t, 10*time.Second, "the first replica to accept the key", func() bool {
		a = one.do("GET", "/v1/subscriptions", key, nil)
		return a.status != http.StatusUnauthorized
	})
	if a.status != http.StatusOK {
		t.Fatalf("the first request: %d %s", a.status, a.body)
	}
	testkit.WaitFor(t, 10*time.Second, "the second replica to know the key", func() bool {
		a = two.do("GET", "/v1/subscriptions", key, nil)
		return a.status != http.StatusUnauthorized
	})
	if a.status != http.StatusTooManyRequests || !strings.HasPrefix(a.ctype, "application/problem+json") {
		t.Fatalf("the second request within the rate, on another replica: %d %s, want a 429 problem", a.status, a.body)
	}
	if wait, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || wait < 1 || wait > 20 {
		t.Fatalf("Retry-After %q, want 1 to 20 seconds", a.header.Get("Retry-After"))
	}
	testkit.WaitFor(t, 10*time.Second, "another key to be served", func() bool {
		return two.do("GET", "/v1/subscriptions", other, nil).status == http.StatusOK
	})

	down := maps.Clone(env)
	down[redisstate.EnvURL] = "redis://" + testkit.FreeAddr(t) + "/0" // nothing listens there
	r := c.replicaWith(down)
	testkit.WaitFor(t, 10*time.Second, "a replica without Redis to accept the key", func() bool {
		return r.do("GET", "/v1/subscriptions", key, nil).status == http.StatusOK
	})
	for range 5 {
		r.must(http.StatusOK, "GET", "/v1/subscriptions", key, nil, nil)
	}
}

// TestBreakerControl: an operator opens, closes and resets a subscription's
// breaker in Redis, where every deliverer reads it; bad controls are
// refused; another tenant's subscription answers 404.
func TestBreakerControl(t *testing.T) {
	t.Parallel()
	url, prefix := redistest.Shared(t)
	c := newCluster(t)
	env := maps.Clone(c.env)
	env[redisstate.EnvURL], env[redisstate.EnvKeyPrefix], env["WEBHOOKS_API_RATE_LIMIT"] = url, prefix, "0"
	env[redisstate.EnvTimeout] = "2s" // the default 100 ms fails open under -race on a loaded machine
	r := c.replicaWith(env)
	var sub service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"url": "https://a.example/", "event_types": []string{"*"}, "tenant": "acme"}, &sub)
	path := "/v1/subscriptions/" + sub.ID + "/breaker"
	var b service.Breaker
	r.must(http.StatusOK, "POST", path, adminKey, map[string]string{"action": "force_open", "duration": "1h"}, &b)
	if b.State != "open" || b.Until == nil || time.Until(*b.Until) < 50*time.Minute {
		t.Fatalf("forced open: %+v", b)
	}
	r.must(http.StatusOK, "POST", path, adminKey, map[string]string{"action": "reset"}, &b)
	if b.State != "closed" || b.Calls != 0 {
		t.Fatalf("reset: %+v", b)
	}
	r.must(http.StatusOK, "POST", path, adminKey, map[string]string{"action": "force_close", "duration": "10m"}, &b)
	if b.State != "closed" {
		t.Fatalf("forced closed: %+v", b)
	}
	for _, body := range []map[string]string{{"action": "force_open"}, {"action": "force_open", "duration": "0s"},
		{"action": "force_close", "duration": "9000h"}, {"action": "explode"}} {
		if a := r.do("POST", path, adminKey, body); a.status != http.StatusUnprocessableEntity {
			t.Errorf("%v: %d %s, want 422", body, a.status, a.body)
		}
	}
	if a := r.do("POST", path, r.tenantKey("globex"), map[string]string{"action": "reset"}); a.status != http.StatusNotFound {
		t.Errorf("another tenant's breaker: %d, want 404", a.status)
	}
	noRedis := c.replica()
	testkit.WaitFor(t, 10*time.Second, "a replica without Redis to see the subscription", func() bool {
		return noRedis.do("POST", path, adminKey, map[string]string{"action": "reset"}).status == http.StatusServiceUnavailable
	})
}
