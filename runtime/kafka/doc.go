// Package kafka is how every component meets Kafka: the settings of the
// brokers and topics (Load, with TLS and SASL), the start that waits for
// brokers and topics (WaitReady), topic creation (Ensure), and the
// committer of consumed watermarks (Watermarks).
package kafka
