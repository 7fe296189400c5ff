// Package table keeps compacted topics as in-memory tables that every
// replica reads to the end before it starts and follows after. Each is a
// Keyed view of its topic with its own decoding, indexes and rules: the
// subscriptions (Table, with their sealed secrets opened), API keys
// (KeyTable), operations (OpTable), the fenced holds of ordered keys
// (HoldTable), tenants and alert channels.
package table
