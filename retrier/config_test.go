package retrier

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

func TestLoadConfig(t *testing.T) {
	defaultTiers := []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour}
	for _, tc := range []struct {
		name string
		env  map[string]string
		// want is checked when wantErr is empty.
		want    func(tb testing.TB, c Config)
		wantErr []string // substrings the error must contain
	}{
		{
			name: "defaults",
			env:  nil,
			want: func(tb testing.TB, c Config) {
				if !slices.Equal(c.Kafka.Brokers, []string{"127.0.0.1:9092"}) {
					tb.Errorf("Brokers = %q", c.Kafka.Brokers)
				}
				if c.Kafka.Names.Prefix != "webhooks." || !slices.Equal(c.Kafka.Names.Tiers, defaultTiers) {
					tb.Errorf("Names = %+v", c.Kafka.Names)
				}
				if c.Kafka.SessionTimeout != 10*time.Second {
					tb.Errorf("SessionTimeout = %v", c.Kafka.SessionTimeout)
				}
				if c.Group != "webhooks-retrier" {
					tb.Errorf("Group = %q", c.Group)
				}
				if c.MaxHeldPerPartition != 20000 {
					tb.Errorf("MaxHeldPerPartition = %d", c.MaxHeldPerPartition)
				}
				if c.CommitInterval != time.Second {
					tb.Errorf("CommitInterval = %v", c.CommitInterval)
				}
			},
		},
		{
			name: "overrides",
			env: map[string]string{
				"WEBHOOKS_KAFKA_BROKERS":                  "a:1, b:2",
				"WEBHOOKS_TOPIC_PREFIX":                   "x.",
				"WEBHOOKS_RETRY_TIERS":                    "1m,1s,1m",
				"WEBHOOKS_KAFKA_SESSION_TIMEOUT":          "2s",
				"WEBHOOKS_RETRIER_GROUP":                  "g",
				"WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION": "7",
				"WEBHOOKS_RETRIER_COMMIT_INTERVAL":        "250ms",
			},
			want: func(tb testing.TB, c Config) {
				if !slices.Equal(c.Kafka.Brokers, []string{"a:1", "b:2"}) {
					tb.Errorf("Brokers = %q", c.Kafka.Brokers)
				}
				if got := c.Kafka.Names.RetryTopics(); !slices.Equal(got, []string{"x.retry.1s", "x.retry.1m"}) {
					tb.Errorf("RetryTopics = %q", got)
				}
				if c.Kafka.Names.Deliveries() != "x.deliveries" {
					tb.Errorf("Deliveries = %q", c.Kafka.Names.Deliveries())
				}
				if c.Kafka.SessionTimeout != 2*time.Second || c.Group != "g" || c.MaxHeldPerPartition != 7 || c.CommitInterval != 250*time.Millisecond {
					tb.Errorf("config = %+v", c)
				}
			},
		},
		{
			name: "max held of 1 is enough",
			env:  map[string]string{"WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION": "1"},
			want: func(tb testing.TB, c Config) {
				if c.MaxHeldPerPartition != 1 {
					tb.Errorf("MaxHeldPerPartition = %d", c.MaxHeldPerPartition)
				}
			},
		},
		{name: "max held not an integer", env: map[string]string{"WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION": "many"}, wantErr: []string{"WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION", `"many"`}},
		{name: "max held zero", env: map[string]string{"WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION": "0"}, wantErr: []string{"WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION", "at least 1"}},
		{name: "process bound below the partition one", env: map[string]string{"WEBHOOKS_RETRIER_MAX_HELD": "100"}, wantErr: []string{"WEBHOOKS_RETRIER_MAX_HELD must be at least WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION"}},
		{name: "max held negative", env: map[string]string{"WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION": "-3"}, wantErr: []string{"WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION"}},
		{name: "commit interval not a duration", env: map[string]string{"WEBHOOKS_RETRIER_COMMIT_INTERVAL": "5"}, wantErr: []string{"WEBHOOKS_RETRIER_COMMIT_INTERVAL", `"5"`}},
		{name: "commit interval zero", env: map[string]string{"WEBHOOKS_RETRIER_COMMIT_INTERVAL": "0s"}, wantErr: []string{"WEBHOOKS_RETRIER_COMMIT_INTERVAL", "positive"}},
		{name: "commit interval negative", env: map[string]string{"WEBHOOKS_RETRIER_COMMIT_INTERVAL": "-1s"}, wantErr: []string{"WEBHOOKS_RETRIER_COMMIT_INTERVAL", "positive"}},
		{
			name:    "every bad retrier setting reported at once",
			env:     map[string]string{"WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION": "x", "WEBHOOKS_RETRIER_COMMIT_INTERVAL": "y"},
			wantErr: []string{"WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION", "WEBHOOKS_RETRIER_COMMIT_INTERVAL"},
		},
		{name: "bad tiers", env: map[string]string{"WEBHOOKS_RETRY_TIERS": "soon"}, wantErr: []string{"WEBHOOKS_RETRY_TIERS"}},
		{name: "sub-second tier", env: map[string]string{"WEBHOOKS_RETRY_TIERS": "500ms"}, wantErr: []string{"WEBHOOKS_RETRY_TIERS"}},
		{name: "bad session timeout", env: map[string]string{"WEBHOOKS_KAFKA_SESSION_TIMEOUT": "100ms"}, wantErr: []string{"WEBHOOKS_KAFKA_SESSION_TIMEOUT"}},
		{name: "no brokers", env: map[string]string{"WEBHOOKS_KAFKA_BROKERS": " , "}, wantErr: []string{"WEBHOOKS_KAFKA_BROKERS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadConfig(func(k string) string { return tc.env[k] })
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("LoadConfig = %+v, nil; want an error mentioning %q", c, tc.wantErr)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			tc.want(t, c)
		})
	}
}

// TestLoadConfigNamesEveryVariable: a configuration wrong in every
// variable is refused with one error naming each.
func TestLoadConfigNamesEveryVariable(t *testing.T) {
	testkit.RefusesEach(t, LoadConfig, map[string]string{"WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION": "0",
		"WEBHOOKS_RETRIER_MAX_HELD": "-1", "WEBHOOKS_RETRIER_MAX_HELD_MB": "0", "WEBHOOKS_RETRIER_COMMIT_INTERVAL": "0s",
		"WEBHOOKS_SHUTDOWN_TIMEOUT": "0s", "WEBHOOKS_RECOVERY_RATE": "NaN", "WEBHOOKS_RECOVERY_RAMP": "-1s"})
}
