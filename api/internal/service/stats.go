package service

import (
	"time"

	"github.com/hookpipe/hookpipe/recorder/report"
)

// StatsOutput is the answer of GET /v1/stats.
type StatsOutput struct {
	Body struct {
		By    string       `json:"by"`
		Since time.Time    `json:"since"`
		Until time.Time    `json:"until"`
		Rows  []report.Row `json:"rows"`
	}
}
