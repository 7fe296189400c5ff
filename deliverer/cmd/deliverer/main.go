// Command deliverer POSTs delivery records to subscribers' endpoints.
// Configuration comes from the WEBHOOKS_* environment (docs/configuration.md).
package main

import (
	"github.com/hookpipe/hookpipe/deliverer"
	"github.com/hookpipe/hookpipe/runtime/process"
)

func main() { process.Main("deliverer", deliverer.LoadConfig, deliverer.Run) }
