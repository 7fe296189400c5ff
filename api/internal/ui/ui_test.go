package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/api/internal/service"
)

func TestSparkline(t *testing.T) {
	at := time.Unix(0, 0)
	svg, rate := sparkline([]service.Point{{At: at, Success: 1, Retry: 1}, {At: at}, {At: at, Success: 3}, {At: at, Success: 1, Dead: 3}})
	if rate == nil || *rate != 5.0/9 {
		t.Fatalf("rate %v, want 5/9", rate)
	}
	lines := strings.Count(string(svg), "<polyline")
	if lines != 2 || !strings.Contains(string(svg), `points="0,10.0 0.5,10.0"`) || !strings.Contains(string(svg), `points="2,1.0 3,14.5"`) {
		t.Fatalf("sparkline %s: want a gap where no request was made", svg)
	}
	if svg, rate := sparkline([]service.Point{{At: at}}); rate != nil || strings.Contains(string(svg), "<polyline") {
		t.Fatalf("no requests: %s %v", svg, rate)
	}
}
