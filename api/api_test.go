package api

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/catalog"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/send"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

var update = flag.Bool("update", false, "rewrite openapi.json")

// adminKey is the bootstrap admin key of the tests.
const adminKey = "hpk_test-admin-key-0123456789abcdefghijklmnopq"

// cluster is one in-process Kafka with the pipeline's topics.
type cluster struct {
	t     *testing.T
	c     *kfake.Cluster
	env   map[string]string
	names topics.Names
	cl    *kgo.Client
	// ch is the ClickHouse of the replicas made after it is set (before
	// they run: the operation runner reads it).
	ch clickhouseConn
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	env := map[string]string{kafka.EnvBrokers: strings.Join(c.ListenAddrs(), ","), config.EnvDev: "1",
		"WEBHOOKS_API_ADMIN_KEY": adminKey, redisstate.EnvURL: redisstate.Disabled}
	k, err := kafka.Load(func(key string) string { return env[key] })
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if _, err := kafka.Ensure(testkit.Ctx(t, 10*time.Second), kadm.NewClient(cl), k.Names, kafka.Layout{Partitions: 3, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, c: c, env: env, names: k.Names, cl: cl}
}

// replica is one API process on the cluster, served by httptest.
type replica struct {
	t   *testing.T
	c   *cluster
	env map[string]string // its configuration
	srv *httptest.Server
	s   *Server
	// stop stops the replica as SIGTERM would (the test's cleanup does).
	stop func()
}

func (c *cluster) replica() *replica {
	c.t.Helper()
	return c.replicaWith(c.env)
}

// replicaWith is a replica configured by env (Redis when it names one).
// loopbackReplica is a replica whose test sends, verification requests
// and alert channels may reach 127.0.0.1, where the tests' endpoints are.
func (c *cluster) loopbackReplica() *replica {
	c.t.Helper()
	env := maps.Clone(c.env)
	env[send.EnvAllowCIDRs] = "127.0.0.0/8"
	return c.replicaWith(env)
}

func (c *cluster) replicaWith(env map[string]string) *replica {
	c.t.Helper()
	cfg, err := LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		c.t.Fatal(err)
	}
	log := testkit.Logger(c.t)
	base := cfg.Kafka.ClientOpts()
	cl, err := kgo.NewClient(append(base, kgo.RecordPartitioner(Partitioner(c.names)))...)
	if err != nil {
		c.t.Fatal(err)
	}
	subs, err := table.NewTable(base, c.names.Subscriptions(), cfg.Secrets, log)
	if err != nil {
		c.t.Fatal(err)
	}
	keys, err := table.NewKeyTable(base, c.names.APIKeys(), log)
	if err != nil {
		c.t.Fatal(err)
	}
	opTable, err := table.NewOpTable(base, c.names.Operations(), log)
	if err != nil {
		c.t.Fatal(err)
	}
	tenants, err := table.NewTenantTable(base, c.names.Tenants(), log)
	if err != nil {
		c.t.Fatal(err)
	}
	holds, err := table.NewHoldTable(base, c.names.Holds(), log)
	if err != nil {
		c.t.Fatal(err)
	}
	cat, err := catalog.New(base, c.names.EventTypes(), cfg.UnknownEventTypes, log)
	if err != nil {
		c.t.Fatal(err)
	}
	alerts, err := table.NewAlertTable(base, c.names.AlertChannels(), cfg.Secrets, log)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go alerts.Run(ctx)
	go subs.Run(ctx)
	go keys.Run(ctx)
	go opTable.Run(ctx)
	go tenants.Run(ctx)
	go holds.Run(ctx)
	go cat.Run(ctx)
	g, err := redisstate.Open(cfg.Redis, log)
	if err != nil {
		c.t.Fatal(err)
	}
	s := New(Options{Config: cfg, Client: cl, Subscriptions: subs, Keys: keys, Guard: g, Registerer: ops.NewRegistry(), Log: log,
		ClickHouse: c.ch, Operations: opTable, Tenants: tenants, Holds: holds, Catalog: cat, Alerts: alerts})
	running := make(chan struct{})
	go func() {
		defer close(running)
		if err := s.RunOperations(ctx); err != nil {
			log.Error("operations not run", zap.Error(err))
		}
	}()
	srv := httptest.NewServer(s.Handler())
	stop := sync.OnceFunc(func() {
		srv.Close()
		cancel()
		<-running
		subs.Close()
		keys.Close()
		opTable.Close()
		tenants.Close()
		holds.Close()
		cat.Close()
		alerts.Close()
		cl.Close()
		if g != nil {
			_ = g.Close()
		}
	})
	c.t.Cleanup(stop)
	return &replica{t: c.t, c: c, env: env, srv: srv, s: s, stop: stop}
}

// answer is one HTTP answer.
type answer struct {
	status int
	body   []byte
	ctype  string
	header http.Header
}

func (a answer) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decoding %s: %v", a.body, err)
	}
}

// problem is an RFC 9457 problem document as huma writes it.
type problem struct {
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Location string `json:"location"`
		Message  string `json:"message"`
	} `json:"errors"`
}

func (r *replica) do(method, path, key string, body any) answer {
	r.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			r.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, r.srv.URL+path, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	return answer{status: resp.StatusCode, body: b, ctype: resp.Header.Get("Content-Type"), header: resp.Header}
}

// must does a request that must answer want, and decodes its body into out.
func (r *replica) must(want int, method, path, key string, body, out any) {
	r.t.Helper()
	a := r.do(method, path, key, body)
	if a.status != want {
		r.t.Fatalf("%s %s: %d %s, want %d", method, path, a.status, a.body, want)
	}
	if out != nil {
		a.decode(r.t, out)
	}
}

// tenantKey creates a key of tenant with the admin key.
func (r *replica) tenantKey(tenant string) string {
	r.t.Helper()
	var k APIKey
	r.must(http.StatusCreated, "POST", "/v1/api-keys", adminKey, map[string]string{"name": "test", "tenant": tenant}, &k)
	if k.Key == "" || k.Tenant != tenant {
		r.t.Fatalf("created key %+v", k)
	}
	return k.Key
}

// records reads a topic from its start to its end.
func (c *cluster) records(topic string) []*kgo.Record {
	c.t.Helper()
	ctx := testkit.Ctx(c.t, 10*time.Second)
	// A client of its own: one made before the topics existed may still
	// have them unknown in its metadata.
	// Read committed, with the transaction markers (which take offsets too)
	// returned to reach the end, and not kept.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		c.t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return nil
	}
	var out []*kgo.Record
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			c.t.Fatalf("reading %s: %v", topic, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	return out
}

// TestOpenAPIIsCurrent: the committed openapi.json is what the code
// generates (go test ./api -run TestOpenAPIIsCurrent -update rewrites it).
func TestOpenAPIIsCurrent(t *testing.T) {
	s := New(Options{Registerer: ops.NewRegistry(), Log: testkit.Logger(t)})
	got, err := json.MarshalIndent(s.OpenAPI(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile("openapi.json", got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("openapi.json is stale: go test ./api -run TestOpenAPIIsCurrent -update")
	}
	var doc map[string]any
	if err := json.Unmarshal(got, &doc); err != nil || doc["openapi"] != "3.1.0" {
		t.Fatalf("not an OpenAPI 3.1 document: %v", err)
	}
}

// TestDocsPage: /docs/list lists every operation of the OpenAPI document, with
// no key and no script.
func TestDocsPage(t *testing.T) {
	s := New(Options{Registerer: ops.NewRegistry(), Log: testkit.Logger(t)})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/docs/list")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /docs/list: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	page := string(body)
	n := 0
	for path, item := range s.OpenAPI().Paths {
		for _, o := range []*huma.Operation{item.Get, item.Post, item.Put, item.Patch, item.Delete} {
			if o == nil {
				continue
			}
			n++
			if !strings.Contains(page, "<code>"+o.Method+" "+path+"</code>") {
				t.Errorf("the docs page misses %s %s", o.Method, path)
			}
		}
	}
	if n < 13 {
		t.Fatalf("%d operations in the OpenAPI document", n)
	}
	if strings.Contains(page, "<script") {
		t.Fatal("the docs page loads a script")
	}
}
