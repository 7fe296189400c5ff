package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kzap"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Logger is the franz-go logger of every component: the client's warnings
// and errors on log, named "kafka", each message at most 5 times a second
// and then one in 100. A broker that is down makes the client repeat one
// warning hundreds of times a second (a dial refused, a request retried at
// once), which would otherwise drown the log for the whole outage.
func Logger(log *zap.Logger) kgo.Opt { return kgo.WithLogger(newLogger(log)) }

func newLogger(log *zap.Logger) kgo.Logger {
	sampled := log.Named("kafka").WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 5, 100)
	}))
	return kzap.New(sampled, kzap.Level(kgo.LogLevelWarn))
}
