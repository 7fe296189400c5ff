// Package table keeps compacted topics as in-memory tables that every
// replica reads to the end before it starts and follows after: the
// subscriptions (Table, with their sealed secrets opened) and the holds of
// ordered keys (HoldTable).
package table
