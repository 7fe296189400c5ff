package service

import "time"

// SeriesWindows are the windows a series covers, each with its step.
var SeriesWindows = map[string]struct{ Span, Step time.Duration }{
	"1h":  {time.Hour, time.Minute},
	"24h": {24 * time.Hour, 15 * time.Minute},
	"7d":  {7 * 24 * time.Hour, time.Hour},
}

// Point is one step of a series.
type Point struct {
	At       time.Time `json:"at" doc:"The step's start."`
	Success  uint64    `json:"success" doc:"Attempts answered 2xx."`
	Retry    uint64    `json:"retry" doc:"Failed attempts sent to a retry tier."`
	Dead     uint64    `json:"dead" doc:"Failed attempts dead-lettered."`
	HeldBack uint64    `json:"held_back" doc:"Attempts not made: blocked, throttled or skipped."`
	P50MS    *float64  `json:"p50_ms"`
	P99MS    *float64  `json:"p99_ms"`
}

// Series is the delivery outcomes of a window, step by step.
type Series struct {
	Key    string  `json:"key,omitempty" doc:"The subscription, when by subscription."`
	Points []Point `json:"points" doc:"Every step of the window, oldest first; steps without attempts are zero."`
	// P50MS and P99MS are over the whole window.
	P50MS *float64 `json:"p50_ms" doc:"Median request duration over the whole window."`
	P99MS *float64 `json:"p99_ms"`
}

// SeriesOutput is the answer of GET /v1/stats/series.
type SeriesOutput struct {
	Body struct {
		Window      string   `json:"window"`
		StepSeconds int      `json:"step_seconds"`
		Series      []Series `json:"series"`
	}
}
