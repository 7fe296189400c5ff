package topics

import (
	"regexp"
	"testing"
)

var idRE = regexp.MustCompile(`^sub_[a-z0-9]{20}$`)

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewID("sub_")
		if !idRE.MatchString(id) || seen[id] {
			t.Fatalf("NewID: %q is malformed or repeated", id)
		}
		seen[id] = true
	}
}
