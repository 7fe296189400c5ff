package deliverer

import (
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/deliverer/internal/breaker"
	"github.com/hookpipe/hookpipe/runtime/send"
)

// TestValidateNamesEveryVariable: a configuration wrong in every field is
// refused with one error naming each variable.
func TestValidateNamesEveryVariable(t *testing.T) {
	c := Config{MaxInFlight: -1, MaxBuffered: -2, MaxPerSubscription: -1, MaxQueuedPerSubscription: -2, RetryFloor: -1,
		CommitInterval: -1, ShutdownTimeout: -1, HTTP: send.HTTP{ConnectTimeout: -1},
		Protection: Protection{RateLimitMaxWait: -1, AutoDisableAfter: -1, Breaker: breaker.Config{}}}
	err := c.validate()
	if err == nil {
		t.Fatal("validate accepted it")
	}
	for _, v := range []string{"WEBHOOKS_DELIVERER_MAX_IN_FLIGHT", "WEBHOOKS_DELIVERER_MAX_BUFFERED", "WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION",
		"WEBHOOKS_DELIVERER_MAX_QUEUED_PER_SUBSCRIPTION", "WEBHOOKS_RETRY_FLOOR", "WEBHOOKS_DELIVERER_COMMIT_INTERVAL",
		"WEBHOOKS_SHUTDOWN_TIMEOUT", "WEBHOOKS_CONNECT_TIMEOUT", "WEBHOOKS_DELIVERER_GROUP", "WEBHOOKS_RATE_LIMIT_MAX_WAIT",
		"WEBHOOKS_AUTO_DISABLE_AFTER", "WEBHOOKS_BREAKER_THRESHOLD", "WEBHOOKS_BREAKER_MIN_CALLS", "WEBHOOKS_BREAKER_WINDOW",
		"WEBHOOKS_BREAKER_SLEEP", "WEBHOOKS_BREAKER_PROBES"} {
		if !strings.Contains(err.Error(), v+" must") {
			t.Errorf("error %q does not name %s", err, v)
		}
	}
}
