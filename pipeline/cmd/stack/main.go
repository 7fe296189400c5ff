// Command stack runs the whole pipeline on one machine for `make run`: the
// embedded Kafka-protocol broker on 127.0.0.1:9092 (state kept under the
// data dir) or the brokers -brokers names (make run KAFKA=apache starts
// Apache Kafka for it), Redis, ClickHouse, every component built into the bin dir as its own
// process, and unless -demo=false a demo receiver and producer with a live
// progress line. Ctrl-C stops everything in order.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hookpipe/hookpipe/runtime/send"
	"github.com/hookpipe/hookpipe/runtime/version"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/pipeline/internal/demo"
	"github.com/hookpipe/hookpipe/pipeline/internal/stack"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/topics"
)

type options struct {
	dataDir    string
	binDir     string
	kafkaPort  int
	brokers    string
	redisPort  int
	partitions int
	demo       bool
	apiAddr    string
	rate       int

	clickhousePort, clickhouseHTTPPort int
}

func main() {
	var o options
	exe, _ := os.Executable()
	flag.StringVar(&o.dataDir, "data", ".run", "directory for broker data, Redis files and component logs")
	flag.StringVar(&o.binDir, "bin", filepath.Dir(exe), "directory holding the component binaries")
	flag.IntVar(&o.kafkaPort, "kafka-port", 9092, "port of the embedded broker on 127.0.0.1")
	flag.StringVar(&o.brokers, "brokers", "", "Kafka brokers to use instead of the embedded one (host:port,...; plaintext)")
	flag.IntVar(&o.redisPort, "redis-port", 6379, "port of redis-server on 127.0.0.1")
	flag.IntVar(&o.clickhousePort, "clickhouse-port", 9000, "native-protocol port of clickhouse-server on 127.0.0.1")
	flag.IntVar(&o.clickhouseHTTPPort, "clickhouse-http-port", 8123, "HTTP port of clickhouse-server on 127.0.0.1")
	flag.IntVar(&o.partitions, "partitions", 6, "partitions of each topic created")
	flag.StringVar(&o.apiAddr, "api-addr", "127.0.0.1:8080", "address of the HTTP API")
	flag.BoolVar(&o.demo, "demo", os.Getenv("DEMO") != "0", "run the demo receiver and producer (DEMO=0 disables)")
	flag.IntVar(&o.rate, "rate", 200, "demo events per second")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println("stack", version.Version)
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	// make killed (SIGKILL) cannot stop the stack: its death does, with
	// SIGTERM, so the children are stopped in order too.
	if err := stopWithParent(); err != nil {
		fmt.Fprintln(os.Stderr, "stack: asking for SIGTERM when the parent dies:", err)
	}
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills the runner at once
	}()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

// components are started in this order and stopped in reverse; a missing
// binary is skipped with a note.
var components = []struct {
	name string
	port int // metrics and health on 127.0.0.1
}{{"dispatcher", 9101}, {"deliverer", 9102}, {"retrier", 9103}, {"recorder", 9104}, {"api", 9105}}

func run(ctx context.Context, o options, out io.Writer) error {
	logDir := filepath.Join(o.dataDir, "logs")
	var brokers []string
	if o.brokers != "" {
		brokers = strings.Split(o.brokers, ",")
		fmt.Fprintf(out, "kafka     %s\n", o.brokers)
	} else {
		broker, err := stack.StartBroker(o.kafkaPort, filepath.Join(o.dataDir, "kafka"))
		if err != nil {
			return fmt.Errorf("%w (is another `make run` or Kafka using the port?)", err)
		}
		defer broker.Close()
		brokers = []string{broker.Addr()}
		fmt.Fprintf(out, "kafka     embedded broker on %s (data in %s)\n", broker.Addr(), filepath.Join(o.dataDir, "kafka"))
	}
	k, err := kafka.Load(withoutKafkaAuth(os.Getenv))
	if err != nil {
		return err
	}
	if err := stack.EnsureTopics(ctx, brokers, k.Names, int32(o.partitions)); err != nil {
		return fmt.Errorf("ensure topics: %w", err)
	}
	secretsKeyValue, keys, keyFrom, err := secretsKey(os.Getenv, o.dataDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "secrets   subscription secrets sealed with key %s (from %s)\n", keys.KeyID(), keyFrom)
	adminKey, adminKeyFrom, err := apiKey(os.Getenv, o.dataDir)
	if err != nil {
		return err
	}
	uiKey, err := sessionKey(os.Getenv, o.dataDir)
	if err != nil {
		return err
	}

	redis, err := stack.StartRedis(ctx, o.redisPort, filepath.Join(o.dataDir, "redis"), logDir)
	switch {
	case err != nil:
		fmt.Fprintf(out, "redis     NOT RUNNING: %v\n          components fail open without it: no breakers, rate limits or dedup\n", err)
	case redis == nil:
		fmt.Fprintf(out, "redis     using the server already on 127.0.0.1:%d\n", o.redisPort)
	default:
		defer func() { _ = redis.Stop(10 * time.Second) }()
		fmt.Fprintf(out, "redis     redis-server on 127.0.0.1:%d\n", o.redisPort)
	}
	recorded, stopClickHouse := startClickHouse(ctx, o, logDir, out)
	defer stopClickHouse() // after the components: the recorder flushes on SIGTERM

	var procs []*stack.Process
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			if err := procs[i].Stop(45 * time.Second); err != nil {
				fmt.Fprintf(out, "%-9s %v\n", procs[i].Name, err)
			}
		}
	}()
	exited := make(chan *stack.Process, len(components))
	for _, c := range components {
		bin := filepath.Join(o.binDir, c.name)
		if _, err := os.Stat(bin); err != nil {
			fmt.Fprintf(out, "%-9s not built (%s missing), skipped\n", c.name, bin)
			continue
		}
		env := childEnv(brokers, o.redisPort, c.port, secretsKeyValue)
		if c.name == "api" {
			env = append(env, "WEBHOOKS_API_ADMIN_KEY="+adminKey, "WEBHOOKS_API_SESSION_KEY="+uiKey, "WEBHOOKS_API_ADDR="+o.apiAddr)
		}
		p, err := stack.Start(c.name, bin, nil, env, logDir)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		go func() { <-p.Done(); exited <- p }()
		fmt.Fprintf(out, "%-9s pid %d, metrics and health on 127.0.0.1:%d, log %s\n", c.name, p.Pid(), c.port, p.LogPath)
		if c.name == "api" {
			fmt.Fprintf(out, "%-9s http://%s (admin key in %s; docs/api.md), dashboard http://%s/ui/\n", "", o.apiAddr, adminKeyFrom, o.apiAddr)
		}
	}

	var rep func() string
	if o.demo {
		rep, err = startDemo(ctx, brokers, k.Names, keys, o.rate, out)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		demoLine := rep
		rep = func() string { return demoLine() + recorded.String() }
	} else {
		fmt.Fprintf(out, "\nstack is up (DEMO=0). Brokers: %s. Ctrl-C stops everything.\n", strings.Join(brokers, ","))
	}

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(out, "\nstopping...")
			return nil
		case p := <-exited:
			return fmt.Errorf("%s exited unexpectedly (%v); see %s", p.Name, p.Err(), p.LogPath)
		case <-tick.C:
			if rep != nil {
				fmt.Fprintf(out, "\r%s\x1b[K", rep())
			}
		}
	}
}

// kafkaAuthEnv are the TLS and SASL settings, which the embedded broker
// (plaintext, no SASL) must not get from the runner's environment.
var kafkaAuthEnv = []string{kafka.EnvKafkaTLS, kafka.EnvKafkaTLSDir,
	kafka.EnvKafkaSASLMechanism, kafka.EnvKafkaSASLUsername, kafka.EnvKafkaSASLPassword}

// withoutKafkaAuth is getenv without the TLS and SASL settings.
func withoutKafkaAuth(getenv func(string) string) func(string) string {
	return func(k string) string {
		if slices.Contains(kafkaAuthEnv, k) {
			return ""
		}
		return getenv(k)
	}
}

// childEnv passes the runner's WEBHOOKS_* settings on, pointing every
// component at the embedded broker (in plaintext, without SASL) and local
// Redis, allowing loopback endpoints (development only), giving each its
// metrics port, and the one secrets key they all seal and open
// subscription secrets with.
func childEnv(brokers []string, redisPort, httpPort int, secretsKey string) []string {
	env := os.Environ()
	for _, k := range kafkaAuthEnv {
		env = append(env, k+"=") // empty is unset; the last value of a key wins
	}
	env = append(env,
		kafka.EnvBrokers+"="+strings.Join(brokers, ","),
		config.EnvHTTPAddr+"=127.0.0.1:"+strconv.Itoa(httpPort),
		config.EnvSecretsKey+"="+secretsKey,
	)
	defaults := map[string]string{
		send.EnvAllowCIDRs:      "127.0.0.0/8,::1/128",
		redisstate.EnvURL:       fmt.Sprintf("redis://127.0.0.1:%d/0", redisPort),
		kafka.EnvSessionTimeout: "6s",
	}
	for k, v := range defaults {
		if os.Getenv(k) == "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// startDemo subscribes two demo endpoints, starts publishing and returns
// the progress line renderer.
func startDemo(ctx context.Context, brokers []string, names topics.Names, keys *topics.Keyring, rate int, out io.Writer) (func() string, error) {
	recv, err := demo.NewReceiver("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { _ = recv.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, cl.Close)
	subs := []topics.Subscription{
		{ID: "demo-orders", Tenant: "acme", EventTypes: []string{"order.*"}, Ordering: topics.OrderingKey},
		{ID: "demo-everything", EventTypes: []string{"*"}, Ordering: topics.OrderingNone, Headers: map[string]string{"X-Demo": "1"}},
	}
	for i := range subs {
		s := &subs[i]
		s.URL, s.Enabled, s.CreatedAt, s.UpdatedAt = recv.URL(s.ID), true, time.Now().UTC(), time.Now().UTC()
		if s.Secret, err = topics.NewSecret(); err != nil {
			return nil, err
		}
		if err := recv.Trust(s.ID, s.Secret); err != nil {
			return nil, err
		}
		rec := &kgo.Record{Topic: names.Subscriptions(), Key: []byte(s.ID), Value: s.EncodeWith(keys)}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			return nil, fmt.Errorf("create demo subscription: %w", err)
		}
		fmt.Fprintf(out, "demo      subscription %s (%s, ordering %s) -> %s\n", s.ID, strings.Join(s.EventTypes, ","), s.Ordering, s.URL)
	}
	recv.FailOneIn = 50 // one request in 50 answers 503: watch the retries
	var prod demo.Producer
	go prod.Run(ctx, cl, names.Events(), rate)
	var outcomes demo.Outcomes
	go func() {
		if err := outcomes.Run(ctx, brokers, names.Attempts()); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(out, "demo: reading attempts:", err)
		}
	}()
	fmt.Fprintf(out, "demo      publishing %d events/s; one request in 50 answers 503. Ctrl-C stops everything.\n\n", rate)
	start := time.Now()
	return func() string {
		s := recv.Stats()
		secs := max(time.Since(start).Seconds(), 1)
		return fmt.Sprintf("published %d | delivered %d (%.0f/s) | first attempts p50 %v p99 %v | retried %d, delivered after a retry %d (p50 %v) | dead %d | bad signatures %d",
			prod.Published.Load(), s.Received, float64(s.Received)/secs, s.P50.Round(time.Millisecond), s.P99.Round(time.Millisecond),
			outcomes.Retry.Load(), s.Retried, s.RetriedP50.Round(10*time.Millisecond), outcomes.Dead.Load(), s.Invalid)
	}, nil
}
