package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTransformationsTest: transformations test prints the request a
// script makes of a sample event, and fails, saying why, for a script that
// throws or does not compile; --transformation @file stores the script.
func TestTransformationsTest(t *testing.T) {
	h := newHarness(t, true)
	dir := t.TempDir()
	shape := filepath.Join(dir, "shape.js")
	if err := os.WriteFile(shape, []byte(`function handler(w) { w.payload = {cents: w.data.amount * 100}; w.method = "PUT"; return w; }`), 0o600); err != nil {
		t.Fatal(err)
	}
	out := h.ok("transformations", "test", shape, "--data", `{"amount": 3}`, "--url", "https://a.example/in")
	if !strings.HasPrefix(out, "PUT https://a.example/in\n") || !strings.Contains(out, `{"cents":300}`) {
		t.Errorf("transformations test printed\n%s", out)
	}
	throws := filepath.Join(dir, "throws.js")
	if err := os.WriteFile(throws, []byte(`function handler(w) { throw new Error("nope") }`), 0o600); err != nil {
		t.Fatal(err)
	}
	if msg := h.fails(1, "transformations", "test", throws); !strings.Contains(msg, "nope") {
		t.Errorf("a throwing script: %q", msg)
	}
	h.fails(2, "transformations", "test", shape, "--data", "{")

	h.create("--id", "sub_tr", "--url", "https://a.example/", "--events", "a", "--transformation", "@"+shape)
	if got := h.stored("sub_tr").Transformation; !strings.Contains(got, "cents") {
		t.Errorf("stored transformation %q", got)
	}
	h.fails(2, "subscriptions", "update", "sub_tr", "--transformation", "function handler( {")
}
