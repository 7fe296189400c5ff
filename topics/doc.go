// Package topics is the shared contract of the webhook pipeline: topic names
// and retry tiers, the record types that travel on them (Event, Subscription,
// Delivery, DeadLetter, Attempt) with their strict codecs, the header keys,
// the partitioner that keeps a subscription's deliveries on one partition,
// topic administration, and the subscription table (a materialised view of the
// compacted subscriptions topic).
//
// It is the only package imported by more than one component.
package topics
