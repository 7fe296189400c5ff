package kafka

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// readyPoll is how often WaitReady asks again.
const readyPoll = 250 * time.Millisecond

// WaitReady waits until the brokers answer and every topic of need exists,
// for at most c.StartupTimeout: every component starts this way, so one
// started before Kafka (or before `webhookctl topics ensure`) waits rather
// than crash-looping. It logs once while it waits, and returns nil early
// when ctx is done (the caller is shutting down).
func WaitReady(ctx context.Context, cl *kgo.Client, c Config, need []string, log *zap.Logger) error {
	adm := kadm.NewClient(cl)
	startup, cancel := context.WithTimeout(ctx, c.StartupTimeout)
	defer cancel()
	for logged := false; ; logged = true {
		err := missingTopics(startup, adm, need)
		if err == nil {
			return nil
		}
		if !logged {
			log.Warn("waiting for kafka", zap.Strings("brokers", c.Brokers), zap.Error(err))
		}
		select {
		case <-time.After(readyPoll):
			continue
		case <-startup.Done():
		}
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("kafka not ready after %v (%s=%s): %w",
			c.StartupTimeout, EnvBrokers, strings.Join(c.Brokers, ","), err)
	}
}

func missingTopics(ctx context.Context, adm *kadm.Client, need []string) error {
	details, err := adm.ListTopics(ctx, need...)
	if err != nil {
		return fmt.Errorf("brokers unreachable: %w", err)
	}
	var missing []string
	for _, t := range need {
		if d, ok := details[t]; !ok || d.Err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing topics %s (create them with webhookctl topics ensure)", strings.Join(missing, ", "))
	}
	return nil
}
