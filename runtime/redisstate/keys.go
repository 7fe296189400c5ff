package redisstate

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Keys is the key layout, under a prefix (WEBHOOKS_REDIS_KEY_PREFIX,
// default "webhooks:"). Subscription ids and tenants never contain ':' or
// '/' (topics.Subscription.Validate), so no two keys collide.
//
// The keys one script touches together share a Redis Cluster slot: the
// breaker keys of a subscription carry it as their hash tag ({<sub>}), so
// a subscription's keys live on one shard and different subscriptions
// spread over all of them (docs/adr/0030-redis-keys-hash-tagged-by-subscription.md). The
// other keys are used one at a time and hash whole.
//
//	<p>breaker:{<sub>}        hash: state (closed|open|half_open), until (unix ms:
//	                          open until, or the half-open probe deadline), since,
//	                          gen, tokens, ok. Absent means closed.
//	<p>breaker:{<sub>}:calls  hash: t:<bucket> calls and f:<bucket> failures per
//	                          bucket of the window, window_ms, bucket_ms
//	rate:<p>ratelimit:<sub>   GCRA state of the subscription's rate limit
//	                          (go-redis/redis_rate adds "rate:")
//	<p>failing:{<sub>}        unix ms of the first dead letter by exhausted retries
//	                          since the last success (auto-disable)
//	<p>recovering             sorted set: subscription -> unix ms its breaker closed
//	<p>breakers:open          sorted set: subscription -> unix ms its breaker opened
//	                          (kept across reopenings; removed when it closes);
//	                          both sets are global, one key each, written on
//	                          breaker transitions only, never by a script
//	                          with the keys of a subscription
//	<p>dedup:<tenant>:<key>   the event record (partition/offset/id) that first
//	                          used an idempotency key, expiring after the window
type Keys struct{ Prefix string }

// tag is a subscription as a hash tag: the keys that hold it share a slot.
func tag(sub string) string { return "{" + sub + "}" }

// Breaker is the state hash of a subscription's circuit breaker.
func (k Keys) Breaker(sub string) string { return k.Prefix + "breaker:" + tag(sub) }

// BreakerCalls is the bucketed call counts of a subscription's breaker.
func (k Keys) BreakerCalls(sub string) string { return k.Prefix + "breaker:" + tag(sub) + ":calls" }

// RateLimit is the redis_rate key of a subscription's rate limit (the
// library prefixes it with "rate:").
func (k Keys) RateLimit(sub string) string { return k.Prefix + "ratelimit:" + sub }

// TenantRate is the GCRA state of a tenant's delivery quota.
func (k Keys) TenantRate(tenant string) string { return k.Prefix + "tenantrate:" + tenant }

// APIRate is the rate limit of an API key (redis_rate prefixes it "rate:").
func (k Keys) APIRate(keyID string) string { return k.Prefix + "apirate:" + keyID }

// FailingSince is when a subscription's deliveries started dying by
// exhausted retries; it shares the breaker's slot, as the breaker's script
// clears it.
func (k Keys) FailingSince(sub string) string { return k.Prefix + "failing:" + tag(sub) }

// Recovering is the sorted set of recovery marks: subscriptions whose
// breaker closed, scored by when (unix ms).
func (k Keys) Recovering() string { return k.Prefix + "recovering" }

// OpenBreakers is the sorted set of the breakers not closed, scored by
// when they opened (unix ms): for the metrics.
func (k Keys) OpenBreakers() string { return k.Prefix + "breakers:open" }

// SchemaCounts is the hash of one hour's events the event catalog found
// fault with: "<outcome> <type>" -> count.
func (k Keys) SchemaCounts(hour time.Time) string {
	return k.Prefix + "schema:" + hour.UTC().Format("2006010215")
}

// maxDedupKey bounds the idempotency key kept verbatim in a key name;
// longer ones are hashed.
const maxDedupKey = 200

// Dedup is the key of an idempotency key within a tenant.
func (k Keys) Dedup(tenant, idempotencyKey string) string {
	if len(idempotencyKey) > maxDedupKey {
		sum := sha256.Sum256([]byte(idempotencyKey))
		idempotencyKey = "sha256:" + hex.EncodeToString(sum[:])
	}
	return k.Prefix + "dedup:" + tenant + ":" + idempotencyKey
}
