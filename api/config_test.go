package api

import (
	"testing"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// TestLoadConfigNamesEveryVariable: a configuration wrong in every
// variable is refused with one error naming each, those the validate tags
// check (the alerter's and the sender's among them) and those code checks
// alike.
func TestLoadConfigNamesEveryVariable(t *testing.T) {
	testkit.RefusesEach(t, LoadConfig, map[string]string{"WEBHOOKS_API_RATE_LIMIT": "-1",
		"WEBHOOKS_TENANT_MAX_SUBSCRIPTIONS": "-1", "WEBHOOKS_SHUTDOWN_TIMEOUT": "0s", "WEBHOOKS_API_REQUEST_TIMEOUT": "-1s",
		"WEBHOOKS_UNKNOWN_EVENT_TYPES": "drop", "WEBHOOKS_CONNECT_TIMEOUT": "0s", "WEBHOOKS_SMTP_TLS": "ssl",
		"WEBHOOKS_ALERT_SEND_TIMEOUT": "0s", "WEBHOOKS_API_ADMIN_KEY": "short", "WEBHOOKS_API_TLS_CERT": "cert.pem",
		"WEBHOOKS_API_SESSION_KEY": "c2hvcnQ=", "WEBHOOKS_EGRESS_PROXY": "ftp://proxy.example:21"})
}
