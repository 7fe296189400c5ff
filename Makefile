# hookpipe: a Kafka-native webhook delivery pipeline.
#
#   make run     the whole pipeline on this machine, with a live demo (DEMO=0: stack only)
#   make test    every test, unit to end-to-end (installs what a fresh Debian machine lacks)
#   make bench   the benchmark table
#   make build   binaries into bin/
#   make lint    gofmt + go vet

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)

GO       ?= go
BIN      := $(CURDIR)/bin
RUNDIR   := $(CURDIR)/.run
TESTDIR  := $(CURDIR)/.build/test-services
SERVICES := bash $(CURDIR)/pipeline/scripts/services.sh
# Test services listen on their own ports so they can run beside `make run`.
TEST_REDIS_PORT := 16379

BINARIES := ./dispatcher/cmd/dispatcher ./deliverer/cmd/deliverer ./retrier/cmd/retrier \
            ./pipeline/cmd/webhookctl ./pipeline/cmd/stack

.PHONY: build run test bench lint deps

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(BINARIES)

# Installs redis-server, clickhouse-server and kcat from Debian when missing.
deps:
	@$(SERVICES) install

run: build
	@$(SERVICES) install || echo "make run: continuing without the missing services (see the line above)"
	@$(BIN)/stack -data $(RUNDIR) -bin $(BIN) $(if $(filter 0,$(DEMO)),-demo=false,)

lint:
	@out=$$(gofmt -l $$($(GO) list -f '{{.Dir}}' work)); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet work

# Starts a throwaway redis-server for the tests and stops it whatever the
# outcome.
test: deps lint
	@set -euo pipefail; \
	  trap '$(SERVICES) stop redis $(TESTDIR)/redis >/dev/null 2>&1 || true' EXIT; \
	  $(SERVICES) start redis $(TEST_REDIS_PORT) $(TESTDIR)/redis; \
	  WEBHOOKS_TEST_REDIS_URL=redis://127.0.0.1:$(TEST_REDIS_PORT)/0 \
	  $(GO) test -race -count=1 -timeout 20m work

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 20m ./pipeline/e2e/
