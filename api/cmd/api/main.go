// Command api serves the control plane's HTTP API; see package api.
// Configuration comes from the WEBHOOKS_* environment (docs/configuration.md).
package main

import (
	"github.com/hookpipe/hookpipe/api"
	"github.com/hookpipe/hookpipe/runtime/process"
)

func main() { process.Main("api", api.LoadConfig, api.Run) }
