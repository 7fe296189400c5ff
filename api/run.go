package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/api/alert"
	"github.com/hookpipe/hookpipe/runtime/catalog"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/topics"
)

// Run serves the API until ctx is done, then lets the requests in progress
// finish (within cfg.ShutdownTimeout) and returns nil. It returns an error
// when Kafka is not ready within the startup timeout or the address cannot
// be served.
func Run(ctx context.Context, cfg Config, log *zap.Logger) error {
	log = log.Named("api")
	reg := ops.NewRegistry()
	srv, err := ops.Start(ctx, cfg.HTTPAddr, reg, log, ops.WithPprof(cfg.Pprof))
	if err != nil {
		return err
	}
	defer srv.Close()
	n := cfg.Kafka.Names
	base := append(cfg.Kafka.ClientOpts(), kgo.ClientID("webhooks-api"),
		kafka.Logger(log))
	cl, err := kgo.NewClient(append(append(base, ops.KafkaMetrics(reg)), producerOpts(n)...)...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	if err := kafka.WaitReady(ctx, cl, cfg.Kafka, []string{n.Events(), n.Subscriptions(), n.APIKeys(), n.Operations(), n.Tenants(), n.EventTypes(), n.Cancellations(), n.AlertChannels(), n.Notices()}, log); err != nil || ctx.Err() != nil {
		return err
	}
	subs, err := table.NewTable(base, n.Subscriptions(), cfg.Secrets, log)
	if err != nil {
		return err
	}
	defer subs.Close()
	subs.Register(reg)
	keys, err := table.NewKeyTable(base, n.APIKeys(), log)
	if err != nil {
		return err
	}
	defer keys.Close()
	ops, err := table.NewOpTable(base, n.Operations(), log)
	if err != nil {
		return err
	}
	defer ops.Close()
	tenants, err := table.NewTenantTable(base, n.Tenants(), log)
	if err != nil {
		return err
	}
	defer tenants.Close()
	holds, err := table.NewHoldTable(base, n.Holds(), log)
	if err != nil {
		return err
	}
	defer holds.Close()
	cat, err := catalog.New(base, n.EventTypes(), cfg.UnknownEventTypes, log)
	if err != nil {
		return err
	}
	defer cat.Close()
	alerts, err := table.NewAlertTable(base, n.AlertChannels(), cfg.Secrets, log)
	if err != nil {
		return err
	}
	defer alerts.Close()
	tables, stopTables := context.WithCancel(context.Background())
	defer stopTables()
	go subs.Run(tables)
	go keys.Run(tables)
	go ops.Run(tables)
	go tenants.Run(tables)
	go holds.Run(tables)
	go cat.Run(tables)
	go alerts.Run(tables)
	for _, wait := range []func(context.Context) error{subs.WaitCaughtUp, keys.WaitCaughtUp, ops.WaitCaughtUp, tenants.WaitCaughtUp, cat.WaitCaughtUp, alerts.WaitCaughtUp} {
		if err := wait(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	srv.SetReady(func(context.Context) error { return nil })

	g, err := redisstate.Open(cfg.Redis, log)
	if err != nil {
		return err
	}
	if g != nil {
		defer g.Close()
		redisstate.Register(reg, g)
	}
	ch, err := cfg.Open(cfg.RequestTimeout)
	if err != nil {
		return err
	}
	defer ch.Close()
	s := New(Options{Config: cfg, Client: cl, Subscriptions: subs, Keys: keys, Guard: g, Registerer: reg, Log: log,
		ClickHouse: ch, Operations: ops, Tenants: tenants, Holds: holds, Catalog: cat, Alerts: alerts})
	if s.alertSender != nil {
		alerter, err := alert.New(cfg.Alert, base, n, alerts, s.alertSender, reg, log)
		if err != nil {
			return fmt.Errorf("alerter: %w", err)
		}
		alerting := make(chan struct{})
		alertCtx, stopAlerts := context.WithCancel(ctx)
		go func() { defer close(alerting); alerter.Run(alertCtx) }()
		defer func() { stopAlerts(); <-alerting }()
	}
	opsCtx, stopOps := context.WithCancel(ctx)
	running := make(chan struct{})
	go func() {
		defer close(running)
		if err := s.RunOperations(opsCtx); err != nil {
			log.Error("the bulk operations do not run on this replica", zap.Error(err))
		}
	}()
	defer func() { stopOps(); <-running }()
	// Each request's context ends after RequestTimeout: writes waiting for
	// the broker answer 503 then (http.TimeoutHandler would buffer every
	// answer and run every request on a goroutine of its own).
	timeout := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), cfg.RequestTimeout)
		defer cancel()
		s.Handler().ServeHTTP(w, r.WithContext(ctx))
	})
	hs := &http.Server{Handler: timeout, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: cfg.RequestTimeout,
		IdleTimeout: 2 * time.Minute, ErrorLog: zap.NewStdLog(log)}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("API address (WEBHOOKS_API_ADDR=%s): %w", cfg.Addr, err)
	}
	served := make(chan error, 1)
	go func() {
		if cfg.TLSCert != "" {
			served <- hs.ServeTLS(ln, cfg.TLSCert, cfg.TLSKey)
		} else {
			served <- hs.Serve(ln)
		}
	}()
	log.Info("serving the API", zap.String("addr", ln.Addr().String()), zap.Bool("tls", cfg.TLSCert != ""),
		zap.Bool("bootstrap_admin_key", cfg.AdminKey != ""))
	select {
	case err := <-served:
		return fmt.Errorf("API server: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("shutdown budget exceeded; closing the requests in progress", zap.Error(err))
	}
	log.Info("stopped")
	return nil
}

// producerOpts are the options of the API's producer beside the
// connection's. Every write answers a request that waits for the broker's
// acknowledgement: franz-go's default linger of 10 ms was added to each. A
// millisecond still lets writes that arrive together share a produce
// request (a broker answers one connection's requests in order, so one
// request per record queues them behind each other).
func producerOpts(n topics.Names) []kgo.Opt {
	return []kgo.Opt{kgo.RecordPartitioner(Partitioner(n)), kgo.ProducerLinger(time.Millisecond)}
}
