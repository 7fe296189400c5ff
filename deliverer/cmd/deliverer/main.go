// Command deliverer POSTs delivery records to subscribers' endpoints.
// Configuration comes from the WEBHOOKS_* environment (DESIGN.md section 3).
package main

import (
	"github.com/hookpipe/hookpipe/deliverer"
	"github.com/hookpipe/hookpipe/topics/cmd"
)

func main() { cmd.Main("deliverer", deliverer.LoadConfig, deliverer.Run) }
