package testkit

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// The broker the tests run on. By default each test starts kfake, franz-go's
// in-process broker. With WEBHOOKS_TEST_KAFKA=apache, the tests written
// for both (the end-to-end and crash tiers) run on the Apache Kafka broker
// at WEBHOOKS_TEST_KAFKA_BROKERS instead (make test starts one with
// pipeline/scripts/services.sh), each in topics and consumer groups of its
// own (Namespace). WEBHOOKS_TEST_KAFKA_DIR is that broker's services.sh
// directory, for the tests that stop and restart it.
const (
	EnvTestKafka        = "WEBHOOKS_TEST_KAFKA"
	EnvTestKafkaBrokers = "WEBHOOKS_TEST_KAFKA_BROKERS"
	EnvTestKafkaDir     = "WEBHOOKS_TEST_KAFKA_DIR"
)

// ApacheKafka returns the Apache Kafka brokers the tests run on, or false
// when they run on kfake. Asked for Apache Kafka without brokers, it fails
// the test.
func ApacheKafka(tb testing.TB) ([]string, bool) {
	tb.Helper()
	switch k := os.Getenv(EnvTestKafka); k {
	case "", "kfake":
		return nil, false
	case "apache":
		b := os.Getenv(EnvTestKafkaBrokers)
		if b == "" {
			tb.Fatalf("%s=apache needs %s", EnvTestKafka, EnvTestKafkaBrokers)
		}
		return strings.Split(b, ","), true
	default:
		tb.Fatalf("%s=%q: want kfake or apache", EnvTestKafka, k)
		return nil, false
	}
}

// Namespace is a prefix of topic and consumer-group names unique to one
// test on a shared broker ("t3f9a0c1d."): Apache Kafka outlives the test,
// and tests run side by side.
func Namespace(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return "t" + hex.EncodeToString(b) + "."
}
