// Command retrier releases due retries from the retry tiers to the redeliveries topic.
// Configuration comes from the WEBHOOKS_* environment (docs/configuration.md).
package main

import (
	"github.com/hookpipe/hookpipe/retrier"
	"github.com/hookpipe/hookpipe/runtime/process"
)

func main() { process.Main("retrier", retrier.LoadConfig, retrier.Run) }
