CREATE DATABASE IF NOT EXISTS webhooks;

CREATE TABLE IF NOT EXISTS webhooks.schema_migrations (
    version UInt32,
    name String,
    applied_at DateTime('UTC'),
    server_version String,
    features String
)
ENGINE = ReplacingMergeTree()
ORDER BY version;

-- migration attempts table
CREATE TABLE IF NOT EXISTS webhooks.attempts (
    attempt_id String,
    event_id String,
    event_type LowCardinality(String),
    subscription_id String,
    tenant String,
    attempt UInt32,
    outcome LowCardinality(String),
    failure_category LowCardinality(String),
    http_status UInt16,
    duration_ms Float64,
    ts DateTime64(3, 'UTC'),
    error String,
    next_attempt_at DateTime64(3, 'UTC'),
    published_at DateTime64(3, 'UTC'),
    recorded_at DateTime('UTC') DEFAULT now()
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY (tenant, subscription_id, ts, attempt_id)
TTL toDateTime(ts) + INTERVAL 90 DAY;

-- migration per-minute outcome counts
CREATE TABLE IF NOT EXISTS webhooks.attempts_per_minute (
    minute DateTime('UTC'),
    tenant String,
    subscription_id String,
    outcome LowCardinality(String),
    failure_category LowCardinality(String),
    attempts UInt64,
    first_attempts UInt64
)
ENGINE = SummingMergeTree()
PARTITION BY toYYYYMM(minute)
ORDER BY (tenant, subscription_id, minute, outcome, failure_category)
TTL minute + INTERVAL 90 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS webhooks.attempts_per_minute_mv
TO webhooks.attempts_per_minute
AS SELECT
    toStartOfMinute(toDateTime(ts)) AS minute,
    tenant,
    subscription_id,
    outcome,
    failure_category,
    count() AS attempts,
    countIf(attempt = 1) AS first_attempts
FROM webhooks.attempts
GROUP BY minute, tenant, subscription_id, outcome, failure_category;

-- migration per-minute latency
CREATE TABLE IF NOT EXISTS webhooks.latency_per_minute (
    minute DateTime('UTC'),
    tenant String,
    subscription_id String,
    requests AggregateFunction(count),
    duration_ms_sum AggregateFunction(sum, Float64),
    duration_ms_max AggregateFunction(max, Float64),
    duration_ms_quantiles AggregateFunction(quantiles(0.5, 0.9, 0.99), Float64)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(minute)
ORDER BY (tenant, subscription_id, minute)
TTL minute + INTERVAL 90 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS webhooks.latency_per_minute_mv
TO webhooks.latency_per_minute
AS SELECT
    toStartOfMinute(toDateTime(ts)) AS minute,
    tenant,
    subscription_id,
    countState() AS requests,
    sumState(duration_ms) AS duration_ms_sum,
    maxState(duration_ms) AS duration_ms_max,
    quantilesState(0.5, 0.9, 0.99)(duration_ms) AS duration_ms_quantiles
FROM webhooks.attempts
WHERE outcome IN ('success', 'retry', 'dead')
GROUP BY minute, tenant, subscription_id;

-- migration response samples
ALTER TABLE webhooks.attempts ADD COLUMN response_sample String DEFAULT ''; -- where missing

-- migration expunged events
CREATE TABLE IF NOT EXISTS webhooks.expunged_events (
    event_id String,
    tenant String,
    expunged_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree()
ORDER BY event_id;

-- migration batch ids
ALTER TABLE webhooks.attempts ADD COLUMN batch_id String DEFAULT ''; -- where missing

-- retention, when a table's TTL differs
ALTER TABLE webhooks.attempts MODIFY TTL toDateTime(ts) + INTERVAL 90 DAY;
ALTER TABLE webhooks.latency_per_minute MODIFY TTL minute + INTERVAL 90 DAY;
ALTER TABLE webhooks.attempts_per_minute MODIFY TTL minute + INTERVAL 90 DAY;
-- insert
INSERT INTO webhooks.attempts (attempt_id, event_id, event_type, subscription_id, tenant, attempt, outcome, failure_category, http_status, duration_ms, ts, error, next_attempt_at, published_at, response_sample, batch_id)
