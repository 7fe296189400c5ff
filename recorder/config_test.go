package recorder

import (
	"testing"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// TestLoadConfigNamesEveryVariable: a configuration wrong in every
// variable is refused with one error naming each, those the validate tags
// check and the ClickHouse ones code checks alike.
func TestLoadConfigNamesEveryVariable(t *testing.T) {
	testkit.RefusesEach(t, LoadConfig, map[string]string{"WEBHOOKS_CLICKHOUSE_ADDR": " , ",
		"WEBHOOKS_CLICKHOUSE_DATABASE": "no good", "WEBHOOKS_RECORDER_BATCH_ROWS": "1000001",
		"WEBHOOKS_RECORDER_BATCH_WAIT": "0s", "WEBHOOKS_RECORDER_INSERT_TIMEOUT": "-1s", "WEBHOOKS_RECORDER_RETRY_MAX": "99ms",
		"WEBHOOKS_RECORDER_SHUTDOWN_TIMEOUT": "0s", "WEBHOOKS_CLICKHOUSE_RETENTION_DAYS": "-1"})
}
