package configdoc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/runtime/config"
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

// shared are the variables several components have: each its own ops
// address and shutdown budget; the deliverer's HTTP client settings, which
// the API's test-send shares.
var shared = map[string]bool{"WEBHOOKS_HTTP_ADDR": true, "WEBHOOKS_SHUTDOWN_TIMEOUT": true,
	"WEBHOOKS_ALLOW_CIDRS": true, "WEBHOOKS_REQUIRE_HTTPS": true, "WEBHOOKS_CONNECT_TIMEOUT": true}
