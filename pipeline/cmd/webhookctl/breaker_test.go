package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
)

// TestGetShowsBreaker: `subscriptions get` shows the subscription's
// circuit breaker as the deliverers keep it in Redis, and leaves it out
// quietly when Redis does not answer.
func TestGetShowsBreaker(t *testing.T) {
	url, prefix := redistest.Shared(t)
	h := newHarness(t, true)
	s := h.create("--id", "sub_br", "--url", "https://hooks.example/in", "--events", "*")
	h.env[redisstate.EnvURL] = url
	h.env[redisstate.EnvKeyPrefix] = prefix
	h.env[redisstate.EnvTimeout] = "2s" // the default 100 ms fails open under -race on a loaded machine

	if out := h.ok("subscriptions", "get", s.ID); !strings.Contains(out, "breaker:") || !strings.Contains(out, "closed") {
		t.Fatalf("get with no breaker state:\n%s\nwant a closed breaker row", out)
	}

	// An open breaker, written in the layout of redisstate.Keys.
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx := context.Background()
	keys := redisstate.Keys{Prefix: prefix}
	now := time.Now()
	bucket := now.UnixMilli() / 5000
	if err := rdb.HSet(ctx, keys.Breaker(s.ID), "state", "open", "until", now.Add(30*time.Second).UnixMilli(),
		"since", now.UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, keys.BreakerCalls(s.ID), "window_ms", 60000, "bucket_ms", 5000,
		"t:"+strconv.FormatInt(bucket, 10), 12, "f:"+strconv.FormatInt(bucket, 10), 9).Err(); err != nil {
		t.Fatal(err)
	}
	out := h.ok("subscriptions", "get", s.ID)
	if !strings.Contains(out, "open since") || !strings.Contains(out, "9 of 12 attempts failed in the last 1m0s") {
		t.Fatalf("get with an open breaker:\n%s", out)
	}
	var got struct {
		ID      string                  `json:"id"`
		Breaker redisstate.BreakerState `json:"breaker"`
	}
	h.json(&got, "subscriptions", "get", s.ID)
	if got.ID != s.ID || got.Breaker.State != "open" || got.Breaker.Calls != 12 || got.Breaker.Failures != 9 {
		t.Fatalf("get -o json: %+v", got)
	}

	// Redis unreachable: no breaker row, no error.
	h.env[redisstate.EnvURL] = "redis://127.0.0.1:1/0"
	if out := h.ok("subscriptions", "get", s.ID); strings.Contains(out, "breaker") {
		t.Fatalf("get with Redis unreachable:\n%s\nwant no breaker row", out)
	}
}
