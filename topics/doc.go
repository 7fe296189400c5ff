// Package topics is the wire contract of the webhook pipeline: what another
// program needs to speak it. Topic names and retry tiers (Names), the
// configs topics are created with, the record types that travel on them
// (Event, Subscription, Delivery, DeadLetter, Attempt, Hold) with their
// strict codecs, the header keys, the partitioner that keeps a
// subscription's deliveries on one partition, retry schedules, and the
// keyring format that seals subscription secrets.
//
// Runtime code the components share (Kafka client setup, tables, the ops
// server, Redis state, the process main) lives in the runtime module.
package topics
