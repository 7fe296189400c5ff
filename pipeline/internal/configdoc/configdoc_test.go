package configdoc

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/deliverer"
	"github.com/hookpipe/hookpipe/dispatcher"
	"github.com/hookpipe/hookpipe/recorder"
	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/process"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/send"
)

// TestPageIsCurrent: docs/configuration.md is what Render makes of the
// code; after changing a variable, run `make docs`.
func TestPageIsCurrent(t *testing.T) {
	got, err := os.ReadFile(filepath.Join("..", "..", "..", Path))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != Render() {
		t.Fatalf("%s is stale: run `make docs`", Path)
	}
}

// TestEveryVariableDescribed: each variable has a description and appears
// in one section only, so the page has one meaning per name.
func TestEveryVariableDescribed(t *testing.T) {
	seen := map[string]string{}
	for _, s := range sections {
		for _, v := range config.Vars(s.cfg) {
			if v.Desc == "" {
				t.Errorf("%s (%s) has no desc tag", v.Name, s.title)
			}
			if !strings.HasPrefix(v.Name, "WEBHOOKS_") {
				t.Errorf("%s (%s) does not start with WEBHOOKS_", v.Name, s.title)
			}
			if other, ok := seen[v.Name]; ok && !shared[v.Name] {
				t.Errorf("%s is in %s and %s", v.Name, other, s.title)
			}
			seen[v.Name] = s.title
		}
	}
}

// TestDefaultsValid: each section's defaults keep its validate tags, and
// every tag is a rule config.Check knows (one it does not is an error).
func TestDefaultsValid(t *testing.T) {
	parsers := append(send.Parsers, schema.Parsers...)
	for _, s := range sections {
		cfg := reflect.New(reflect.TypeOf(s.cfg)).Interface()
		if err := config.Parse(func(string) string { return "" }, cfg, parsers...); err != nil {
			t.Errorf("%s: %v", s.title, err)
		}
	}
}

// shared are the variables several components have: each its own ops
// address, profiles switch and shutdown budget; the deliverer's HTTP client settings, which
// the API's test-send shares; the recorder's ClickHouse, where the API's
// message log reads; the policy for event types not in the catalog, which
// the dispatcher and the API's POST /v1/events both apply.
var shared = map[string]bool{"WEBHOOKS_HTTP_ADDR": true, "WEBHOOKS_PPROF": true, "WEBHOOKS_SHUTDOWN_TIMEOUT": true,
	"WEBHOOKS_ALLOW_CIDRS": true, "WEBHOOKS_REQUIRE_HTTPS": true, "WEBHOOKS_CONNECT_TIMEOUT": true, "WEBHOOKS_EGRESS_PROXY": true,
	"WEBHOOKS_CLICKHOUSE_ADDR": true, "WEBHOOKS_CLICKHOUSE_DATABASE": true, "WEBHOOKS_CLICKHOUSE_USER": true,
	"WEBHOOKS_CLICKHOUSE_PASSWORD": true, "WEBHOOKS_UNKNOWN_EVENT_TYPES": true}

// TestConstantsNameVariables: each exported Env constant names a variable
// its package's configuration reads, so a constant cannot drift from the
// tag it stands for.
func TestConstantsNameVariables(t *testing.T) {
	for _, c := range []struct {
		cfg   any
		names []string
	}{
		{process.Settings{}, []string{config.EnvLogLevel}},
		{kafka.Settings{}, []string{kafka.EnvBrokers, kafka.EnvPrefix, kafka.EnvRetryTiers, kafka.EnvSessionTimeout,
			kafka.EnvStartupTimeout, kafka.EnvKafkaTLS, kafka.EnvKafkaTLSDir, kafka.EnvKafkaSASLMechanism,
			kafka.EnvKafkaSASLUsername, kafka.EnvKafkaSASLPassword}},
		{config.Secrets{}, []string{config.EnvSecretsKey, config.EnvDev}},
		{redisstate.Config{}, []string{redisstate.EnvURL, redisstate.EnvKeyPrefix, redisstate.EnvTimeout,
			redisstate.EnvRetryInterval}},
		{dispatcher.Config{}, []string{dispatcher.EnvTxnID, dispatcher.EnvMaxEventBytes, dispatcher.EnvDedupWindow,
			dispatcher.EnvShutdownTimeout, config.EnvHTTPAddr}},
		{deliverer.Config{}, []string{deliverer.EnvAllowCIDRs}},
		{recorder.Config{}, []string{schema.EnvClickHouseAddr, schema.EnvClickHouseDatabase,
			schema.EnvClickHouseUser, schema.EnvClickHousePassword}},
	} {
		read := map[string]bool{}
		for _, v := range config.Vars(c.cfg) {
			read[v.Name] = true
		}
		for _, name := range c.names {
			if !read[name] {
				t.Errorf("%s names no variable of %T", name, c.cfg)
			}
		}
	}
}
