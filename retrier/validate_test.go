package retrier

import (
	"math"
	"strings"
	"testing"
)

// TestValidateNamesEveryVariable: a configuration wrong in every field is
// refused with one error naming each variable.
func TestValidateNamesEveryVariable(t *testing.T) {
	c := Config{MaxHeldPerPartition: 0, MaxHeld: -1, MaxHeldMB: 0, CommitInterval: 0, ShutdownTimeout: 0, RecoveryRate: math.NaN()}
	err := c.validate()
	if err == nil {
		t.Fatal("validate accepted it")
	}
	for _, v := range []string{"WEBHOOKS_RETRIER_GROUP", "WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION", "WEBHOOKS_RETRIER_MAX_HELD must",
		"WEBHOOKS_RETRIER_MAX_HELD_MB", "WEBHOOKS_RETRIER_COMMIT_INTERVAL", "WEBHOOKS_SHUTDOWN_TIMEOUT", "WEBHOOKS_RECOVERY_RATE"} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error %q does not name %s", err, v)
		}
	}
}
