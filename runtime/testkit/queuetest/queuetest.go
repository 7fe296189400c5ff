// Package queuetest gives tests the customers' own brokers that issue 27's
// destinations deliver to, as real servers: NATS JetStream, RabbitMQ
// (AMQP 0-9-1) and an SQS endpoint (ElasticMQ). Each kind comes two ways:
//
//   - the shared server `make test` starts (pipeline/scripts/services.sh),
//     named by an environment variable (NATS, AMQP, SQS); each test gets a
//     stream, exchange and queue, or queue of its own, deleted when it ends.
//     Without the variable the test is skipped, or fails when services are
//     required (testkit.NeedService);
//   - a server of the test's own (Start), on free ports and a directory of
//     the test's, that it may stop, kill and start again on its data: for
//     "the destination is down" tests, which the other tests sharing a
//     server must not see.
//
// The Publish functions are the bare clients' way to send: one message
// per call of the server's publish, sequentially (each acknowledged before
// the next) or with a number in flight. They are the yardstick of the
// senders' benchmarks (the Benchmark functions here).
package queuetest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// The shared test servers; `make test` sets these.
const (
	// EnvNATSURL is the shared nats-server's URL, credentials included
	// (nats://hookpipe:hookpipe-secret@127.0.0.1:14222).
	EnvNATSURL = "WEBHOOKS_TEST_NATS_URL"
	// EnvAMQPURL is the shared RabbitMQ's URL, credentials and vhost
	// included (amqp://hookpipe:hookpipe-secret@127.0.0.1:15673/).
	EnvAMQPURL = "WEBHOOKS_TEST_AMQP_URL"
	// EnvSQSEndpoint is the shared SQS endpoint (http://127.0.0.1:19324);
	// it takes any credentials, region us-east-1.
	EnvSQSEndpoint = "WEBHOOKS_TEST_SQS_ENDPOINT"
)

// shared returns the shared test server named by the variable env. It
// skips tb when env is unset (fails it when services are required), saying
// how to start a server of kind k, needs, on port as `make test` does.
func shared(tb testing.TB, env string, k Kind, port int, needs string) string {
	tb.Helper()
	v := os.Getenv(env)
	if v == "" {
		start := fmt.Sprintf("bash pipeline/scripts/services.sh start %s %d .build/test-services/%s", k, port, k)
		if k == ElasticMQ {
			start = "bash pipeline/scripts/services.sh install-elasticmq && " + start
		}
		testkit.NeedService(tb, fmt.Sprintf("%s is not set: this test needs %s (`make test` starts one; or run `%s` and export %s=%s)",
			env, needs, start, env, serverURL(k, port)))
	}
	return v
}

// The credentials services.sh gives the NATS and RabbitMQ servers it
// starts.
const (
	User     = "hookpipe"
	Password = "hookpipe-secret"
)

// RecordSize is the size of Record's messages.
const RecordSize = 1024

// Record is message i of a test or benchmark: a JSON object of
// RecordSize bytes that says i ({"seq":i,"pad":"xxx..."}).
func Record(i int) []byte {
	b := fmt.Appendf(make([]byte, 0, RecordSize), `{"seq":%d,"pad":"`, i)
	pad := RecordSize - len(b) - len(`"}`)
	b = append(b, strings.Repeat("x", max(pad, 0))...)
	return append(b, `"}`...)
}

// uniqueName is prefix and 12 random hex digits: names no other test
// (nor a previous run against the same server) has.
func uniqueName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}
