package jsondepth

import (
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want int
	}{
		{`1`, 0},
		{`"[{["`, 0},
		{`{}`, 1},
		{`[1, [2, {"a": [3]}]]`, 4},
		{`{"a": "\"[[", "b": [{}]}`, 3},
		{`{"a": "\\", "b": [[]]}`, 3},
		{`[[]] [[[]]]`, 3},
		{strings.Repeat("[", 1001) + strings.Repeat("]", 1001), 1001},
	} {
		if got := Of(tc.doc); got != tc.want {
			t.Errorf("Of(%.30q) = %d, want %d", tc.doc, got, tc.want)
		}
		if got := Of([]byte(tc.doc)); got != tc.want {
			t.Errorf("Of([]byte(%.30q)) = %d, want %d", tc.doc, got, tc.want)
		}
	}
}
