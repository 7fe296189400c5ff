package kafka

import (
	"github.com/hookpipe/hookpipe/runtime/testkit"
)

var testCtx = testkit.Ctx

// newCluster is testkit.Kafka.
var newCluster = testkit.Kafka
