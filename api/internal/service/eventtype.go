package service

import (
	"encoding/json"
	"time"
)

// EventTypeBody is what an admin writes of an event type.
type EventTypeBody struct {
	Description string            `json:"description,omitempty" maxLength:"4096" doc:"What the event means, shown to tenants."`
	Schema      json.RawMessage   `json:"schema,omitempty" doc:"A JSON Schema (draft 2020-12 unless its $schema says otherwise) for the events' data; absent: any data. No $ref outside itself; patterns in RE2 syntax."`
	Examples    []json.RawMessage `json:"examples,omitempty" maxItems:"10" doc:"Data values the schema accepts, shown to tenants and sent by test-send."`
	Deprecated  bool              `json:"deprecated,omitempty" doc:"Still delivered; shown as deprecated to tenants."`
	Validation  string            `json:"validation,omitempty" enum:"off,warn,enforce" doc:"What an event whose data the schema refuses gets: off (not checked), warn (delivered and counted; the default), enforce (refused: 422 here, the dlq with category schema from Kafka)."`
}

// EventType is an entry of the event catalog.
type EventType struct {
	Name string `json:"name" doc:"The events' type, dotted: invoice.paid."`
	EventTypeBody
	Version   int       `json:"version" doc:"1 when created, one more at each update."`
	UpdatedAt time.Time `json:"updated_at"`
}

// EventTypeListOutput is the answer of GET /v1/event-types.
type EventTypeListOutput struct {
	Body struct {
		Data []EventType `json:"data" doc:"Every event type, by name."`
	}
}

// EventTypeFaults are a type's events the catalog found fault with in the
// last 24 hours, at the API and at the dispatcher.
type EventTypeFaults struct {
	Type    string `json:"type" doc:"The type; empty for the unknown types together."`
	Invalid int64  `json:"invalid" doc:"Events whose data the type's schema refused (warned or refused)."`
	Unknown int64  `json:"unknown" doc:"Events of types not in the catalog (counted under warn and reject only)."`
}

// EventTypeFaultsOutput is the answer of GET /v1/stats/event-types.
type EventTypeFaultsOutput struct {
	Body struct {
		Available bool              `json:"available" doc:"False without Redis, where the counts are kept (the Prometheus metrics events_validated_total have them too)."`
		Types     []EventTypeFaults `json:"types" doc:"The types with faults, most first."`
	}
}
