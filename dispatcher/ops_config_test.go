package dispatcher

import (
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/config"
)

// TestLoadConfigOps: the metrics and health address and the shutdown
// budget, which the Helm chart sets for every component.
func TestLoadConfigOps(t *testing.T) {
	env := map[string]string{config.EnvDev: "1", config.EnvHTTPAddr: ":9100", EnvShutdownTimeout: "25s"}
	c, err := LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":9100" || c.ShutdownTimeout != 25*time.Second {
		t.Errorf("HTTPAddr %q, ShutdownTimeout %v; want :9100 and 25s", c.HTTPAddr, c.ShutdownTimeout)
	}
	for _, bad := range []string{"soon", "0s", "-1s"} {
		env[EnvShutdownTimeout] = bad
		if _, err := LoadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), EnvShutdownTimeout) {
			t.Errorf("%s=%s: err %v, want one naming the variable", EnvShutdownTimeout, bad, err)
		}
	}
}
