// Package ops serves a component's operational endpoints on
// WEBHOOKS_HTTP_ADDR (docs/operations.md):
//
//   - /metrics: Prometheus text format for the component's registry; every
//     metric name starts with webhooks_.
//   - /healthz: 200 while the process runs (the liveness probe).
//   - /readyz: 200 once the component has joined its consumer group and a
//     broker answers, 503 with the reason otherwise and from the moment
//     shutdown begins (the readiness probe).
//   - /debug/pprof/: Go's profiles of the running process, only with
//     WithPprof(true) (WEBHOOKS_PPROF=true; off by default).
//
// A component's Run uses it like this, so the server stops after
// everything else (deferred first, it runs last):
//
//	reg := ops.NewRegistry()
//	m := newMetrics(reg)
//	srv, err := ops.Start(ctx, cfg.HTTPAddr, reg, log)
//	if err != nil {
//		return err
//	}
//	defer srv.Close()
//	... kgo.NewClient(append(opts, ops.KafkaMetrics(reg))...)
//	srv.Watch(cl, cfg.Group, topicsItConsumes...)
//
// An empty address serves nothing: Start returns a Server whose methods do
// nothing, and the metrics are still counted (into a registry nobody reads).
package ops

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
	"go.uber.org/zap"
)

// Namespace starts every metric name.
const Namespace = "webhooks"

// Timing of the endpoints and the lag watcher.
const (
	// ReadyTimeout bounds one readiness check (a broker round trip).
	ReadyTimeout = 2 * time.Second
	// LagInterval is how often the consumer lag gauge is refreshed. A
	// Prometheus scrape interval of 15-30s sees every refresh.
	LagInterval = 15 * time.Second
	// closeGrace is how long Close lets a scrape in progress finish.
	closeGrace = 2 * time.Second
)

// Errors /readyz reports.
var (
	// ErrStarting: the component has not connected to Kafka yet.
	ErrStarting = errors.New("starting: not connected to Kafka yet")
	// ErrShuttingDown: the component's context is done; it is finishing
	// its work and will exit.
	ErrShuttingDown = errors.New("shutting down")
)

// NewRegistry returns a registry with the Go runtime and process collectors
// (go_*, process_*: the only metrics whose names do not start with
// webhooks_, as every Prometheus client names them).
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// KafkaMetrics is the client option that meters one franz-go client into
// reg through plugin/kprom, as webhooks_kafka_* (connects, bytes and
// records read and written per broker and topic, buffered records). Give it
// to one client per registry: kprom registers its metrics when the client
// is created and a second client would register them twice.
func KafkaMetrics(reg *prometheus.Registry) kgo.Opt {
	return kgo.WithHooks(kprom.NewMetrics(Namespace, kprom.Registry(reg), kprom.Subsystem("kafka")))
}

// Server is a running ops endpoint; see the package documentation.
type Server struct {
	run  context.Context // the component's context: done means shutting down
	log  *zap.Logger
	http *http.Server
	ln   net.Listener
	lag  *prometheus.GaugeVec
	// lagEvery overrides LagInterval (tests).
	lagEvery time.Duration
	done     chan struct{} // closed when the HTTP server stopped serving

	mu    sync.Mutex
	ready func(context.Context) error

	watch     context.Context // done when ctx is or on Close
	stopWatch context.CancelFunc
	watchers  sync.WaitGroup
	closeOnce sync.Once
}

// Option changes what Start serves.
type Option func(*options)

type options struct{ pprof bool }

// WithPprof serves Go's profiles under /debug/pprof/ when on (a component's
// WEBHOOKS_PPROF).
func WithPprof(on bool) Option { return func(o *options) { o.pprof = on } }

// Start listens on addr (host:port; port 0 picks a free one, see Addr) and
// serves reg, /healthz and /readyz until Close. ctx is the component's run
// context: once it is done /readyz answers 503 and the lag watcher stops,
// while /metrics and /healthz go on until Close. An empty addr serves
// nothing and returns a Server whose methods do nothing.
func Start(ctx context.Context, addr string, reg *prometheus.Registry, log *zap.Logger, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	s := &Server{run: ctx, log: log.Named("ops"), watch: watchCtx, stopWatch: stopWatch, done: make(chan struct{}),
		ready: func(context.Context) error { return ErrStarting }}
	if addr == "" {
		close(s.done)
		return s, nil
	}
	s.lag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "consumer_lag",
		Help: "Records after the consumer group's committed offsets, per topic (from the log start where nothing is committed); refreshed every 15s.",
	}, []string{"group", "topic"})
	if err := reg.Register(s.lag); err != nil {
		stopWatch()
		return nil, fmt.Errorf("ops metrics: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		stopWatch()
		return nil, fmt.Errorf("metrics and health endpoint (WEBHOOKS_HTTP_ADDR=%s): %w", addr, err)
	}
	s.ln = ln
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: zap.NewStdLog(s.log), Timeout: 10 * time.Second,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	if o.pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		s.log.Warn("serving /debug/pprof/ (WEBHOOKS_PPROF): profiles show the process's memory and code paths; keep the port private")
	}
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics and health endpoint stopped", zap.Error(err))
		}
	}()
	s.log.Info("serving /metrics, /healthz and /readyz", zap.String("addr", ln.Addr().String()))
	return s, nil
}

// Addr is the address the server listens on, or "" when it serves nothing.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// SetReady sets the readiness check /readyz runs (ErrStarting until then).
func (s *Server) SetReady(ready func(context.Context) error) {
	s.mu.Lock()
	s.ready = ready
	s.mu.Unlock()
}

// Ready runs the readiness check: nil means ready.
func (s *Server) Ready(ctx context.Context) error {
	if s.run.Err() != nil {
		return ErrShuttingDown
	}
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	return ready(ctx)
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := s.Ready(r.Context()); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintln(w, "not ready:", err)
		return
	}
	_, _ = fmt.Fprintln(w, "ok")
}

// Watch makes cl, a consumer group client of group, the one /readyz checks
// (member of the group, a broker answers) and, when the server serves,
// refreshes webhooks_consumer_lag{group,topic} for the given topics every
// LagInterval until the component's context is done.
func (s *Server) Watch(cl *kgo.Client, group string, topics ...string) {
	s.SetReady(GroupReady(cl, group))
	if s.http == nil {
		return
	}
	s.watchers.Go(func() { s.watchLag(cl, group, topics) })
}

// GroupReady is the readiness check of a consumer group client: it is a
// member of its group (joined, whether or not it was assigned partitions)
// and a broker answers.
func GroupReady(cl *kgo.Client, group string) func(context.Context) error {
	return func(ctx context.Context) error {
		if _, gen := cl.GroupMetadata(); gen < 0 {
			return fmt.Errorf("not a member of consumer group %s yet", group)
		}
		if err := cl.Ping(ctx); err != nil {
			return fmt.Errorf("no broker answers: %w", err)
		}
		return nil
	}
}

// Close stops the lag watcher and then the HTTP server, letting a request
// in progress finish for a moment. Call it after everything else.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.stopWatch()
		s.watchers.Wait()
		if s.http != nil {
			ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
			defer cancel()
			if err := s.http.Shutdown(ctx); err != nil {
				_ = s.http.Close()
			}
		}
		<-s.done
	})
}
