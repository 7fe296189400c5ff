// Package api is the control plane's HTTP API: API keys (admin and tenant),
// subscriptions and event ingestion, over the same topics the pipeline and
// webhookctl use (Kafka stays the source of truth). Operations are declared
// with huma, which generates the OpenAPI 3.1 document (openapi.json) and
// answers errors as RFC 9457 problem documents.
package api

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/api/alert"
	"github.com/hookpipe/hookpipe/api/internal/oprunner"
	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/api/internal/session"
	"github.com/hookpipe/hookpipe/recorder/retention"
	"github.com/hookpipe/hookpipe/runtime/catalog"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/send"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/runtime/version"
	"github.com/hookpipe/hookpipe/topics"
)

// Server is the API over one Kafka client and the tables it reads.
type Server struct {
	cfg    Config
	names  topics.Names
	cl     *kgo.Client
	subs   *table.Table
	keys   *table.KeyTable
	log    *zap.Logger
	api    huma.API
	mux    *http.ServeMux
	m      *metrics
	limit  *limiter // nil: no rate limit
	prober *send.Prober
	ch     clickhouseConn     // nil: no message log
	guard  *redisstate.Guard  // nil: no Redis
	tenant *table.TenantTable // the tenants' quota overrides; nil: the defaults
	holds  *table.HoldTable   // the ordered keys held; nil: not shown
	// catalog is the event catalog; nil: empty, every type unknown and
	// accepted.
	catalog *catalog.Catalog
	signer  session.Signer // of dashboard sessions and portal links
	// alertSender sends the alert channels' test messages.
	alertSender   *alert.Sender
	runner        *oprunner.Runner
	subscriptions *service.Subscriptions
	eventTypes    *service.EventTypes
	operations    *service.Operations
	alertChannels *service.AlertChannels
	reports       *service.Reports
	lag           *service.Lag
	callers       service.Callers
}

// RunOperations carries out the bulk operations until ctx is done, on the
// one replica the consumer group (Config.Group) elects (package
// internal/oprunner).
func (s *Server) RunOperations(ctx context.Context) error { return s.runner.Run(ctx) }

// Options are what the API serves: the configuration, the Kafka client it
// produces with, and the tables it reads (each running: Run). A nil
// optional part turns its routes off, as documented on its field.
type Options struct {
	Config        Config
	Client        *kgo.Client // produces to the pipeline's topics
	Subscriptions *table.Table
	Keys          *table.KeyTable
	Registerer    prometheus.Registerer
	Log           *zap.Logger
	// Guard holds the per-key rate limits and the breakers; nil: no Redis.
	Guard *redisstate.Guard
	// ClickHouse is the recorder's, where the message log reads; nil: no
	// message log.
	ClickHouse retention.Conn
	// Operations is the operations table, which the routes of
	// /v1/operations read and RunOperations carries out; nil: no bulk
	// operations.
	Operations *table.OpTable
	// Tenants are the tenants' quota overrides; nil: the defaults.
	Tenants *table.TenantTable
	// Holds is the holds topic's table, for the held ordered keys in the
	// lag (and the dashboard's overview); nil: not shown.
	Holds *table.HoldTable
	// Catalog is the event catalog, which the API serves and judges
	// published events by; nil: empty, every type unknown and accepted.
	Catalog *catalog.Catalog
	// Alerts are the alert channels; nil: none.
	Alerts *table.AlertTable
}

// New builds the API.
func New(o Options) *Server {
	cfg, log := o.Config, o.Log
	s := &Server{cfg: cfg, names: cfg.Kafka.Names, cl: o.Client, subs: o.Subscriptions, keys: o.Keys, log: log, mux: http.NewServeMux(),
		m: newMetrics(o.Registerer), limit: newLimiter(o.Guard, cfg.RateLimit, log), prober: send.NewProber(cfg.HTTP), guard: o.Guard,
		ch: o.ClickHouse, tenant: o.Tenants, holds: o.Holds, catalog: o.Catalog}
	s.subscriptions = service.NewSubscriptions(service.SubscriptionsOptions{Topic: cfg.Kafka.Names.Subscriptions(), Client: o.Client,
		Table: o.Subscriptions, Tenants: o.Tenants, Secrets: cfg.Secrets, MaxPerTenant: cfg.TenantMaxSubscriptions, Verify: s.verify})
	s.eventTypes = service.NewEventTypes(cfg.Kafka.Names.EventTypes(), o.Client, o.Catalog)
	s.operations = service.NewOperations(cfg.Kafka.Names.Operations(), o.Client, o.Operations)
	s.reports = service.NewReports(o.ClickHouse, cfg.Database)
	s.lag = service.NewLag(kadm.NewClient(o.Client), cfg.Kafka.Names, o.Holds)
	s.callers = service.Callers{AdminKey: cfg.AdminKey, Keys: o.Keys}
	s.runner = oprunner.New(oprunner.Options{Kafka: cfg.Kafka, Group: cfg.Group, Client: o.Client, Operations: o.Operations,
		Subscriptions: o.Subscriptions, ClickHouse: o.ClickHouse, Database: cfg.Database, Log: log})
	key, err := session.DecodeKey(cfg.SessionKey)
	if err != nil {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
		if cfg.SessionKey == "" && log != nil {
			log.Warn("no WEBHOOKS_API_SESSION_KEY: dashboard sessions and portal links work on this replica only, until it restarts")
		}
	}
	s.signer = session.NewSigner(key)
	// The config was validated (LoadConfig): the SMTP CA file was read.
	if s.alertSender, err = alert.NewSender(cfg.Alert, s.prober.Client()); err != nil && log != nil {
		log.Error("alert channels cannot send", zap.Error(err))
	}
	s.alertChannels = service.NewAlertChannels(service.AlertChannelsOptions{Topic: cfg.Kafka.Names.AlertChannels(), Client: o.Client,
		Table: o.Alerts, Secrets: cfg.Secrets, Email: cfg.Alert.Email(), Sender: s.alertSender})
	s.api = humago.New(s.mux, apiConfig())
	s.api.UseMiddleware(s.measure, s.authenticate, s.rateLimit)
	s.registerDocs()
	s.registerKeys()
	s.registerSubscriptions()
	s.registerEvents()
	s.registerEventTypes()
	s.registerTestSend()
	s.registerTransformations()
	s.registerMessages()
	s.registerMessageList()
	s.registerHealth()
	s.registerBreaker()
	s.registerStats()
	s.registerSeries()
	s.registerLag()
	s.registerDeadLetters()
	s.registerOperations()
	s.registerRecover()
	s.registerAlertChannels()
	s.registerRetry()
	s.registerExpunge()
	s.registerPortalSessions()
	s.registerPages()
	return s
}

// apiConfig is the OpenAPI description and the API's conventions: JSON
// only, unknown fields refused, no docs page loaded from a CDN (docs.go
// serves its own).
func apiConfig() huma.Config {
	c := huma.DefaultConfig("hookpipe API", version.Version)
	c.Info.Description = "The control plane of hookpipe: API keys, subscriptions, event ingestion, the message log, " +
		"dead letters and bulk operations (redrives, replays). " +
		"Authenticate with `Authorization: Bearer <key>`; a tenant key sees only its tenant, and another tenant's " +
		"resources answer 404."
	c.OpenAPIPath = "/openapi"
	c.DocsPath = ""
	c.SchemasPath = ""
	c.CreateHooks = nil // no $schema links in bodies
	c.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "An API key: hpk_ and 43 base64url characters."},
	}
	return c
}

// Handler serves the API.
func (s *Server) Handler() http.Handler { return s.mux }

// OpenAPI is the API's OpenAPI 3.1 document.
func (s *Server) OpenAPI() *huma.OpenAPI { return s.api.OpenAPI() }

type principalKey struct{}

func principalOf(ctx context.Context) service.Caller {
	p, _ := ctx.Value(principalKey{}).(service.Caller)
	return p
}

// secured is the security requirement of every operation.
var secured = []map[string][]string{{"bearer": {}}}

// adminOnly marks operations a tenant key may not call.
const adminOnly = "admin-only"

// authenticate checks the bearer key of secured operations (or the
// principal of an in-process request): unknown or revoked keys answer 401,
// tenant keys on admin operations 403.
func (s *Server) authenticate(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	if len(op.Security) == 0 {
		next(ctx)
		return
	}
	p, known := service.InProcessCaller(ctx.Context())
	if !known {
		key, ok := strings.CutPrefix(ctx.Header("Authorization"), "Bearer ")
		p, known = s.callers.Of(strings.TrimSpace(key))
		known = ok && known
	}
	if !known {
		ctx.SetHeader("WWW-Authenticate", `Bearer realm="hookpipe"`)
		_ = huma.WriteErr(s.api, ctx, http.StatusUnauthorized, "a valid API key is required: Authorization: Bearer hpk_...")
		return
	}
	if op.Metadata[adminOnly] == true && !p.Admin() {
		_ = huma.WriteErr(s.api, ctx, http.StatusForbidden, "this operation takes an admin key")
		return
	}
	next(huma.WithValue(ctx, principalKey{}, p))
}

// metrics are the API's Prometheus metrics.
type metrics struct {
	requests  *prometheus.CounterVec   // operation, status
	duration  *prometheus.HistogramVec // operation
	validated *prometheus.CounterVec   // type, outcome
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "api", Name: "requests_total",
			Help: "API requests by operation and status."}, []string{"operation", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ops.Namespace, Subsystem: "api", Name: "request_duration_seconds",
			Help:    "Time to answer an API request, by operation.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 15}}, []string{"operation"}),
		validated: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "api", Name: "events_validated_total",
			Help: "Published events checked against the event catalog, by type and outcome (valid, invalid, unknown: counted under type \"\"); " +
				"refused ones included."}, []string{"type", "outcome"}),
	}
	reg.MustRegister(m.requests, m.duration, m.validated)
	return m
}

// measure counts every request by operation and status.
func (s *Server) measure(ctx huma.Context, next func(huma.Context)) {
	start := time.Now()
	next(ctx)
	op := ctx.Operation().OperationID
	s.m.requests.WithLabelValues(op, strconv.Itoa(ctx.Status())).Inc()
	s.m.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// invalid turns a record validation error into a 422 naming the field of
// the request body; other errors are a 500 that says no more.
func (s *Server) invalid(err error, fieldPrefix string) error {
	var ie *topics.InvalidError
	if errors.As(err, &ie) {
		loc := "body"
		if ie.Field != "" {
			loc = "body." + fieldPrefix + ie.Field
		}
		return huma.Error422UnprocessableEntity("invalid "+ie.Record, &huma.ErrorDetail{Location: loc, Message: ie.Reason})
	}
	return s.internal(err)
}

// problem answers an error of the service layer: a refusal with its
// status and its reasons located in the body, a huma error as it is, any
// other as invalid does.
func (s *Server) problem(err error) error {
	var e *service.Error
	var se huma.StatusError
	switch {
	case errors.As(err, &e):
		details := make([]error, len(e.Fields))
		for i, f := range e.Fields {
			loc := cmp.Or(f.In, "body")
			if f.Field != "" {
				loc += "." + f.Field
			}
			details[i] = &huma.ErrorDetail{Location: loc, Message: f.Why, Value: f.Value}
		}
		return huma.NewError(refusalStatus[e.Kind], e.Msg, details...)
	case errors.As(err, &se):
		return err
	}
	return s.invalid(err, "")
}

// refusalStatus is the HTTP status of each kind of refusal.
var refusalStatus = map[service.Kind]int{service.NotFound: http.StatusNotFound, service.Forbidden: http.StatusForbidden,
	service.Invalid: http.StatusUnprocessableEntity, service.Conflict: http.StatusConflict, service.Unavailable: http.StatusServiceUnavailable}

// internal logs err and answers a 500 without its text.
func (s *Server) internal(err error) error {
	s.log.Error("request failed", zap.Error(err))
	return huma.Error500InternalServerError("internal error: see the API's log")
}

// produce writes records and waits for the broker's acknowledgement; then
// the tables have applied them (read your writes).
func (s *Server) produce(ctx context.Context, recs ...*kgo.Record) error {
	if err := s.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return s.writeFailed(ctx, fmt.Errorf("producing: %w", err))
	}
	return nil
}

// writeFailed answers a write that was refused (a 422 naming the field) or
// that the broker did not acknowledge (503 when the request ran out of
// time, else 500).
func (s *Server) writeFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return huma.Error503ServiceUnavailable("Kafka did not acknowledge in time; the write may or may not have happened")
	}
	return s.invalid(err, "")
}

// Partitioner is the partitioner of the API's producer: the deliveries
// topics as the pipeline partitions them (by subscription), every other
// one as Kafka's default partitioner does (events by their key, like a
// Java producer).
func Partitioner(n topics.Names) kgo.Partitioner {
	return byTopic{deliveries: n.DeliveryTopics(), pipeline: topics.Partitioner(), other: kgo.UniformBytesPartitioner(64<<10, true, true, nil)}
}

type byTopic struct {
	deliveries      []string
	pipeline, other kgo.Partitioner
}

func (p byTopic) ForTopic(t string) kgo.TopicPartitioner {
	if slices.Contains(p.deliveries, t) {
		return p.pipeline.ForTopic(t)
	}
	return p.other.ForTopic(t)
}
