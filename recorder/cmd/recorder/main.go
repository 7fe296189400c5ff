// Command recorder copies the attempts topic into ClickHouse in batches,
// committing offsets only after each insert was acknowledged.
// Configuration comes from the WEBHOOKS_* environment (docs/configuration.md).
package main

import (
	"github.com/hookpipe/hookpipe/recorder"
	"github.com/hookpipe/hookpipe/runtime/process"
)

func main() { process.Main("recorder", recorder.LoadConfig, recorder.Run) }
