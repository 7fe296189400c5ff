package service

import "time"

// GroupLag is how far one consumer group of the pipeline is behind on one
// topic.
type GroupLag struct {
	Group string `json:"group"`
	Topic string `json:"topic"`
	Lag   int64  `json:"lag" doc:"Records after the group's committed offsets, summed over partitions; for the retrier, the retries held until due."`
}

// HeldKeys sums up the ordered keys held behind a failed delivery (the
// holds topic): how many, and the one held longest.
type HeldKeys struct {
	Keys    int        `json:"keys" doc:"Ordered keys held now."`
	Longest string     `json:"longest,omitempty" doc:"The delivery key held longest: subscription id, '/', ordering key."`
	Head    string     `json:"head,omitempty" doc:"The event whose outcome releases that key."`
	Since   *time.Time `json:"since,omitempty" doc:"Since when that key has been held."`
}

// LagOutput is the answer of GET /v1/lag.
type LagOutput struct {
	Body struct {
		Data  []GroupLag `json:"data"`
		Holds *HeldKeys  `json:"holds,omitempty" doc:"The ordered keys held; absent when this replica does not read the holds topic."`
	}
}
