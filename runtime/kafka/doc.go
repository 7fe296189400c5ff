// Package kafka is how every component meets Kafka: the settings of the
// brokers and topics (Load, with TLS and SASL), the start that waits for
// brokers and topics (WaitReady), topic creation (Ensure), the committer of
// consumed watermarks (Watermarks), transactions (NewTx, and
// TransactionsV1 for every transactional client) and the client's logger
// (Logger).
package kafka
