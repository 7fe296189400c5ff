// Command dispatcher fans events out to deliveries; see package dispatcher.
// Configuration comes from the WEBHOOKS_* environment (docs/configuration.md).
package main

import (
	"github.com/hookpipe/hookpipe/dispatcher"
	"github.com/hookpipe/hookpipe/runtime/process"
)

func main() { process.Main("dispatcher", dispatcher.LoadConfig, dispatcher.Run) }
