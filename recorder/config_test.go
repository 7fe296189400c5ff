package recorder

import (
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/recorder/schema"
)

// TestValidateNamesEveryVariable: a configuration wrong in every field is
// refused with one error naming each variable.
func TestValidateNamesEveryVariable(t *testing.T) {
	c := Config{Conn: schema.Conn{Database: "no good"}, BatchRows: 0, RetryMax: 0, RetentionDays: -1}
	err := c.validate()
	if err == nil {
		t.Fatal("validate accepted it")
	}
	for _, v := range []string{"WEBHOOKS_RECORDER_GROUP", "WEBHOOKS_CLICKHOUSE_ADDR", "WEBHOOKS_CLICKHOUSE_DATABASE",
		"WEBHOOKS_RECORDER_BATCH_ROWS", "WEBHOOKS_RECORDER_BATCH_WAIT", "WEBHOOKS_RECORDER_INSERT_TIMEOUT",
		"WEBHOOKS_RECORDER_RETRY_MAX", "WEBHOOKS_RECORDER_SHUTDOWN_TIMEOUT", "WEBHOOKS_CLICKHOUSE_RETENTION_DAYS"} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error %q does not name %s", err, v)
		}
	}
}
