# hookpipe: a Kafka-native webhook delivery pipeline.
#
#   make run     the whole pipeline on this machine, with a live demo (DEMO=0: stack only;
#                KAFKA=apache: on Apache Kafka instead of the embedded broker)
#   make test    every test, unit to end-to-end (installs what a fresh Debian machine lacks)
#   make bench   the benchmark table
#   make build   binaries into bin/
#   make assets  the API's front-end assets, from the npm registry (api/assets/npm.lock)
#   make docs    regenerate docs/configuration.md from the code
#   make lint    golangci-lint over every module (make test runs it)

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)

GO       ?= go
BIN      := $(CURDIR)/bin
RUNDIR   := $(CURDIR)/.run
TESTDIR  := $(CURDIR)/.build/test-services
SERVICES := bash $(CURDIR)/pipeline/scripts/services.sh
# Test services listen on their own ports so they can run beside `make run`.
TEST_REDIS_PORT := 16379
# A Redis Cluster of three masters on this port and the next two (their
# cluster bus ports 10000 above).
TEST_REDIS_CLUSTER_PORT := 17100
STOP_TEST_REDIS_CLUSTER := $(SERVICES) stop redis-cluster $(TESTDIR)/redis-cluster >/dev/null 2>&1 || true
TEST_CLICKHOUSE_PORT := 19000
TEST_CLICKHOUSE_HTTP_PORT := 18123
TEST_CLICKHOUSE := $(SERVICES) start clickhouse $(TEST_CLICKHOUSE_PORT) $(TEST_CLICKHOUSE_HTTP_PORT) $(TESTDIR)/clickhouse
STOP_TEST_CLICKHOUSE := $(SERVICES) stop clickhouse $(TESTDIR)/clickhouse >/dev/null 2>&1 || true
# The Apache Kafka broker of the tests (PLAINTEXT; SASL_SSL on the next
# port, its controller on the one after).
TEST_KAFKA_PORT := 19092
TEST_KAFKA := $(SERVICES) install-kafka && $(SERVICES) start kafka $(TEST_KAFKA_PORT) $(TESTDIR)/kafka
STOP_TEST_KAFKA := $(SERVICES) stop kafka $(TESTDIR)/kafka >/dev/null 2>&1 || true
# The customers' own brokers of issue 27's destinations: nats-server with
# JetStream, RabbitMQ (AMQP on this port, its Erlang distribution and epmd
# on the next two) and ElasticMQ for SQS (in memory: nothing restarts it).
# make test starts them in the background while it starts the others:
# ElasticMQ's fetch from Maven Central and RabbitMQ's boot take a minute.
TEST_NATS_PORT := 14222
TEST_RABBITMQ_PORT := 15673
TEST_ELASTICMQ_PORT := 19324
TEST_QUEUES := $(SERVICES) start nats $(TEST_NATS_PORT) $(TESTDIR)/nats && \
  $(SERVICES) start rabbitmq $(TEST_RABBITMQ_PORT) $(TESTDIR)/rabbitmq && \
  $(SERVICES) install-elasticmq && \
  ELASTICMQ_STORAGE=memory $(SERVICES) start elasticmq $(TEST_ELASTICMQ_PORT) $(TESTDIR)/elasticmq
STOP_TEST_QUEUES := for s in nats rabbitmq elasticmq; do $(SERVICES) stop $$s $(TESTDIR)/$$s >/dev/null 2>&1 || true; done
# The tests that run on Apache Kafka too (make test's third pass): the
# end-to-end and crash tiers, the dispatcher's transactions, fencing and
# fan-out, topic creation with our configs, and the broker settings.
APACHE_TESTS := ./pipeline/e2e/ ./dispatcher/ ./runtime/kafka/
# The tests that stop a broker of their own: they run after the others,
# alone, so that no other package's processes take the ports the broker
# gives up while it is down, nor its CPU.
BROKER_FAULTS := TestBrokerKilledMidStream|TestDispatcherThroughBrokerKills

BINARIES := ./dispatcher/cmd/dispatcher ./deliverer/cmd/deliverer ./retrier/cmd/retrier \
            ./recorder/cmd/recorder ./pipeline/cmd/webhookctl ./pipeline/cmd/stack ./api/cmd/api

.PHONY: build run test bench lint deps fuzz helm docs assets asyncapi-validator

# Every binary says its version (--version): git describe, or dev.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/hookpipe/hookpipe/runtime/version.Version=$(VERSION)

build: assets
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ $(BINARIES)

# The front-end assets bin/api embeds, at the versions api/assets/npm.lock
# pins, checked against the registry's integrity; fetched once.
assets:
	@bash $(CURDIR)/pipeline/scripts/npm-assets.sh api/assets/npm.lock api/assets/dist

# Pages generated from the code (a test fails when one is stale).
docs:
	$(GO) run ./pipeline/cmd/configdoc

# Installs redis-server, clickhouse-server, kcat, nats-server, rabbitmq-server (and the
# tools the tests use) from Debian when missing.
deps:
	@$(SERVICES) install

# KAFKA=apache runs the stack on Apache Kafka (services.sh, 127.0.0.1:9092,
# its data in .run/apache-kafka, stopped with the stack) instead of the
# embedded broker.
run:
	@$(SERVICES) install || echo "make run: continuing without the missing services (see the line above)"
	@$(MAKE) --no-print-directory build
ifeq ($(KAFKA),apache)
	@set -euo pipefail; $(SERVICES) install-kafka; $(SERVICES) start kafka 9092 $(RUNDIR)/apache-kafka; \
	  trap '$(SERVICES) stop kafka $(RUNDIR)/apache-kafka' EXIT; \
	  $(BIN)/stack -data $(RUNDIR) -bin $(BIN) -brokers 127.0.0.1:9092 $(if $(filter 0,$(DEMO)),-demo=false,)
else
	@$(BIN)/stack -data $(RUNDIR) -bin $(BIN) $(if $(filter 0,$(DEMO)),-demo=false,)
endif

# golangci-lint (errcheck, govet, staticcheck, revive, unused, ineffassign,
# gofmt and goimports with the module prefix; .golangci.yml), pinned and
# built through the Go module proxy like helm below, run in each module of
# go.work, nested ones too (runtime/testkit: ./... in runtime stops at its
# go.mod).
GOLANGCI_VERSION := v2.15.0
GOLANGCI         := $(CURDIR)/.build/golangci-lint-$(GOLANGCI_VERSION)/golangci-lint
MODULES          := $(shell sed -n 's|^[[:space:]]*\./\([a-z/]*\)$$|\1|p' go.work)
lint: $(GOLANGCI)
	@set -e; for m in $(MODULES); do echo "lint $$m"; (cd $$m && $(GOLANGCI) run ./...); done
$(GOLANGCI):
	GOBIN=$(dir $(GOLANGCI)) GOWORK=off CGO_ENABLED=0 $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)

# A short run of every fuzz target (-fuzz takes one target per command);
# the seed corpora are in each package's testdata/fuzz/<target>. The budget
# is a count of executions, not a duration: Go 1.26's fuzz coordinator can
# fail a duration-bounded run with "context deadline exceeded" on a loaded
# machine (go.dev/issue/75804). Longer: make fuzz FUZZTIME=10m.
FUZZTIME ?= 50000x
FUZZ     := $(GO) test -run '^$$' -fuzztime $(FUZZTIME)
fuzz:
	$(FUZZ) -fuzz '^FuzzDecodeEvent$$' ./topics
	$(FUZZ) -fuzz '^FuzzDecodeSubscription$$' ./topics
	$(FUZZ) -fuzz '^FuzzDecodeSealedSubscription$$' ./topics
	$(FUZZ) -fuzz '^FuzzParseKeyring$$' ./topics
	$(FUZZ) -fuzz '^FuzzDecodeDelivery$$' ./topics
	$(FUZZ) -fuzz '^FuzzAttemptEncode$$' ./topics
	$(FUZZ) -fuzz '^FuzzDeliveryEncode$$' ./topics
	$(FUZZ) -fuzz '^FuzzValidJSON$$' ./topics
	$(FUZZ) -fuzz '^FuzzRetryAfter$$' ./deliverer/internal/backoff
	$(FUZZ) -fuzz '^FuzzFastPathAgrees$$' ./runtime/catalog

# helm for the chart checks (pipeline/charttest), pinned and built from
# source through the Go module proxy; the versioned path rebuilds it when the
# pin changes.
HELM_VERSION := v3.21.4
HELM         := $(CURDIR)/.build/helm-$(HELM_VERSION)/helm
helm: $(HELM)
$(HELM):
	GOBIN=$(dir $(HELM)) GOWORK=off CGO_ENABLED=0 $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

# The official AsyncAPI parser that TestAsyncAPIValidates (runtime/catalog)
# runs the event catalog's document through: the package.json and
# package-lock.json of runtime/catalog/testdata/asyncapi pin it and every
# dependency with its integrity; npm ci installs exactly those, without
# their install scripts, next to validate.mjs, once (again when one of the
# three changes). make test passes the directory to the tests as
# WEBHOOKS_TEST_ASYNCAPI_VALIDATOR. npm comes with node (make deps).
ASYNCAPI_SRC       := runtime/catalog/testdata/asyncapi
ASYNCAPI_VALIDATOR := $(CURDIR)/.build/asyncapi-validator
asyncapi-validator: $(ASYNCAPI_VALIDATOR)/.installed
$(ASYNCAPI_VALIDATOR)/.installed: $(ASYNCAPI_SRC)/package.json $(ASYNCAPI_SRC)/package-lock.json $(ASYNCAPI_SRC)/validate.mjs
	@command -v npm >/dev/null 2>&1 || { echo "asyncapi-validator: npm is missing (make deps installs it)" >&2; exit 1; }
	@mkdir -p $(ASYNCAPI_VALIDATOR)
	cp $^ $(ASYNCAPI_VALIDATOR)/
	cd $(ASYNCAPI_VALIDATOR) && npm ci --ignore-scripts --no-audit --no-fund
	@touch $@

# Starts a throwaway redis-server, Redis Cluster, clickhouse-server, Apache
# Kafka, nats-server, RabbitMQ and ElasticMQ for the tests and stops them
# whatever the outcome. WEBHOOKS_TEST_REQUIRE_SERVICES makes a test that
# would skip for want of a service fail instead.
#
# Two passes. Every test but the virtual-time ones runs with -race, on the
# mutexes production builds. The virtual-time tests (TestVirtual..., each
# runs a testing/synctest bubble) run without -race: the race detector
# crashed the runtime in a bubble's timer once (go1.26.8, a segfault in
# __tsan::SlotLock under (*timer).maybeRunChan), and with the synctests tag,
# which builds franz-go's mutexes on channels, so a client goroutine waiting
# on one inside a bubble lets virtual time advance (with sync.Mutex such a
# bubble hung once on a loaded machine). pipeline/docstest checks the names.
#
# A third pass runs the tiers of APACHE_TESTS again on Apache Kafka
# (services.sh fetches it from Maven Central once, into .build/), each test
# in topics and groups of its own (runtime/testkit.ApacheKafka).
test: deps assets lint fuzz helm asyncapi-validator
	@set -euo pipefail; mkdir -p $(TESTDIR); \
	  { $(TEST_QUEUES); } >$(TESTDIR)/queues.log 2>&1 & queues=$$!; \
	  trap 'wait $$queues 2>/dev/null || true; $(SERVICES) stop redis $(TESTDIR)/redis >/dev/null 2>&1 || true; $(STOP_TEST_REDIS_CLUSTER); $(STOP_TEST_CLICKHOUSE); $(STOP_TEST_KAFKA); $(STOP_TEST_QUEUES)' EXIT; \
	  $(SERVICES) start redis $(TEST_REDIS_PORT) $(TESTDIR)/redis; \
	  $(SERVICES) start redis-cluster $(TEST_REDIS_CLUSTER_PORT) $(TESTDIR)/redis-cluster; \
	  $(TEST_CLICKHOUSE); \
	  $(TEST_KAFKA); \
	  wait $$queues || { cat $(TESTDIR)/queues.log >&2; exit 1; }; cat $(TESTDIR)/queues.log >&2; \
	  export WEBHOOKS_TEST_REDIS_URL=redis://127.0.0.1:$(TEST_REDIS_PORT)/0 \
	    WEBHOOKS_TEST_REDIS_CLUSTER_ADDRS=127.0.0.1:$(TEST_REDIS_CLUSTER_PORT),127.0.0.1:$$(($(TEST_REDIS_CLUSTER_PORT)+1)),127.0.0.1:$$(($(TEST_REDIS_CLUSTER_PORT)+2)) \
	    WEBHOOKS_TEST_CLICKHOUSE_ADDR=127.0.0.1:$(TEST_CLICKHOUSE_PORT) \
	    WEBHOOKS_TEST_NATS_URL=nats://hookpipe:hookpipe-secret@127.0.0.1:$(TEST_NATS_PORT) \
	    WEBHOOKS_TEST_AMQP_URL=amqp://hookpipe:hookpipe-secret@127.0.0.1:$(TEST_RABBITMQ_PORT)/ \
	    WEBHOOKS_TEST_SQS_ENDPOINT=http://127.0.0.1:$(TEST_ELASTICMQ_PORT) \
	    WEBHOOKS_TEST_REQUIRE_SERVICES=1 \
	    WEBHOOKS_TEST_ASYNCAPI_VALIDATOR=$(ASYNCAPI_VALIDATOR) \
	    HELM=$(HELM); \
	  $(GO) test -race -count=1 -timeout 20m -skip '^TestVirtual' work; \
	  $(GO) test -tags synctests -count=1 -timeout 20m -run '^TestVirtual' work; \
	  echo "== the end-to-end and crash tiers on Apache Kafka"; \
	  export WEBHOOKS_TEST_KAFKA=apache WEBHOOKS_TEST_KAFKA_BROKERS=127.0.0.1:$(TEST_KAFKA_PORT) WEBHOOKS_TEST_KAFKA_DIR=$(TESTDIR)/kafka; \
	  $(GO) test -race -count=1 -timeout 20m -skip '^TestVirtual|^($(BROKER_FAULTS))$$' $(APACHE_TESTS); \
	  echo "== faults of the broker itself, alone"; \
	  $(GO) test -race -count=1 -timeout 20m -run '^($(BROKER_FAULTS))$$' ./pipeline/e2e/

# BenchmarkDeployed runs on kfake and on Apache Kafka, side by side. The
# destination rows (issue 27) run after the others, on the customers'
# brokers make test starts (on its ports), started only then so that
# their boot does not load the machine under the others.
bench: deps build
	@set -euo pipefail; mkdir -p $(TESTDIR); \
	  trap '$(STOP_TEST_CLICKHOUSE); $(STOP_TEST_QUEUES)' EXIT; \
	  $(TEST_CLICKHOUSE); \
	  $(SERVICES) install-kafka; \
	  WEBHOOKS_TEST_CLICKHOUSE_ADDR=127.0.0.1:$(TEST_CLICKHOUSE_PORT) WEBHOOKS_BENCH_APACHE=1 \
	  WEBHOOKS_BENCH_CLICKHOUSE_PID=$$(tr -dc 0-9 <$(TESTDIR)/clickhouse/clickhouse-server.pid) \
	  $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./pipeline/e2e/ ./dispatcher/; \
	  $(GO) test -run '^$$' -bench BenchmarkTransformations -benchtime 1x -timeout 20m ./deliverer/; \
	  echo "== destinations: each kind against its bare client"; \
	  $(TEST_QUEUES); \
	  export WEBHOOKS_TEST_NATS_URL=nats://hookpipe:hookpipe-secret@127.0.0.1:$(TEST_NATS_PORT) \
	    WEBHOOKS_TEST_AMQP_URL=amqp://hookpipe:hookpipe-secret@127.0.0.1:$(TEST_RABBITMQ_PORT)/ \
	    WEBHOOKS_TEST_SQS_ENDPOINT=http://127.0.0.1:$(TEST_ELASTICMQ_PORT) \
	    WEBHOOKS_TEST_REQUIRE_SERVICES=1; \
	  $(GO) test -run '^$$' -bench '^BenchmarkPublish$$' -benchtime 5000x -timeout 40m ./runtime/send/; \
	  $(GO) test -run '^$$' -bench '^BenchmarkDestinations$$' -benchtime 1x -timeout 40m ./deliverer/
