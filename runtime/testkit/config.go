package testkit

import (
	"maps"
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/runtime/config"
)

// RefusesEach loads a configuration from bad, variables each set to a value
// load must refuse (in dev mode, so that no secrets key is needed), and
// checks that load reports every one at once: one error line per variable,
// naming it.
func RefusesEach[C any](tb testing.TB, load func(getenv func(string) string) (C, error), bad map[string]string) {
	tb.Helper()
	env := map[string]string{config.EnvDev: "1"}
	maps.Copy(env, bad)
	_, err := load(func(k string) string { return env[k] })
	if err == nil {
		tb.Fatalf("load accepted %v", bad)
	}
	for v := range bad {
		if !strings.Contains(err.Error(), v) {
			tb.Errorf("error %q does not name %s", err, v)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != len(bad) {
		tb.Errorf("%d errors for %d bad variables: %v", n, len(bad), err)
	}
}
