package main

import (
	"context"
	"fmt"
	"math"

	flag "github.com/spf13/pflag"

	kafkaconfig "github.com/hookpipe/hookpipe/runtime/kafka"
)

func ensureCmd(fs *flag.FlagSet) runFunc {
	partitions := fs.Int("partitions", 12, "partitions of every topic but subscriptions (which gets 1)")
	rf := fs.Int("replication-factor", -1, "replication factor; -1 uses the broker default")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *partitions < 1 || *partitions > math.MaxInt32 {
			return usagef("--partitions %d: must be positive", *partitions)
		}
		if *rf != -1 && (*rf < 1 || *rf > math.MaxInt16) {
			return usagef("--replication-factor %d: must be -1 or positive", *rf)
		}
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		res, err := kafkaconfig.Ensure(ctx, k.adm, k.names, kafkaconfig.Layout{
			Partitions:        int32(*partitions),
			ReplicationFactor: int16(*rf),
		})
		if err != nil {
			return err
		}
		if c.output == outputJSON {
			return c.printJSON(struct {
				Created  []string `json:"created"`
				Existing []string `json:"existing"`
			}{append([]string{}, res.Created...), append([]string{}, res.Existing...)})
		}
		for _, t := range res.Created {
			fmt.Fprintf(c.stdout, "created  %s\n", t)
		}
		for _, t := range res.Existing {
			fmt.Fprintf(c.stdout, "exists   %s\n", t)
		}
		return nil
	}
}
