package api

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// createClients is how many clients BenchmarkCreateSubscriptions creates
// with at once, as BenchmarkSubscriptions in pipeline/e2e does.
const createClients = 16

// BenchmarkCreateSubscriptions: subscriptions created through one API
// replica by 16 clients at once, each keeping its connection; the
// replica's producer as Run builds it. On kfake in process, or on the
// Apache Kafka broker of WEBHOOKS_TEST_KAFKA=apache. The metric is
// created/s; -cpuprofile shows where a create's CPU goes.
func BenchmarkCreateSubscriptions(b *testing.B) {
	brokers, apache := testkit.ApacheKafka(b)
	env := map[string]string{config.EnvDev: "1", "WEBHOOKS_API_ADMIN_KEY": adminKey, redisstate.EnvURL: redisstate.Disabled}
	if apache {
		env[kafka.EnvPrefix] = testkit.Namespace(b)
	} else {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		brokers = c.ListenAddrs()
	}
	env[kafka.EnvBrokers] = strings.Join(brokers, ",")
	cfg, err := LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		b.Fatal(err)
	}
	log := zap.NewNop()
	base := cfg.Kafka.ClientOpts()
	cl, err := kgo.NewClient(append(base, producerOpts(cfg.Kafka.Names)...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	if _, err := kafka.Ensure(testkit.Ctx(b, 30*time.Second), kadm.NewClient(cl), cfg.Kafka.Names, kafka.Layout{Partitions: 3, ReplicationFactor: -1}); err != nil {
		b.Fatal(err)
	}
	subs, err := table.NewTable(base, cfg.Kafka.Names.Subscriptions(), cfg.Secrets, log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(subs.Close)
	tenants, err := table.NewTenantTable(base, cfg.Kafka.Names.Tenants(), log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(tenants.Close)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go subs.Run(ctx)
	go tenants.Run(ctx)
	s := New(Options{Config: cfg, Client: cl, Subscriptions: subs, Tenants: tenants, Registerer: ops.NewRegistry(), Log: log})
	srv := httptest.NewServer(s.Handler())
	b.Cleanup(srv.Close)
	b.ResetTimer()
	took := testkit.CreateSubscriptions(b, srv.URL, adminKey, createClients, b.N, func(i int) string {
		return `{"id":"new_` + strconv.Itoa(i) + `","url":"https://hooks.new-` + strconv.Itoa(i) +
			`.example.com/in","event_types":["customer.created"],"tenant":"tenant-` + strconv.Itoa(i%5000) + `"}`
	})
	b.ReportMetric(float64(b.N)/took.Seconds(), "created/s")
}
