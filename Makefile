# spliced — the two commands a user needs are `make run` and `make test`.
SHELL      := /bin/bash
GO         ?= go
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)
LDFLAGS    := -s -w -X github.com/spliced-proxy/spliced/cmd/spliced/internal/version.Version=$(VERSION)
BIN        := bin/spliced
STATE_DIR  ?= $(CURDIR)/state
ADMIN_ADDR ?= 127.0.0.1:9900

.PHONY: all build run test test-deps unit openapi openapi-check bench package fuzz vet clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/spliced

# Start spliced with its embedded defaults: admin API and web UI on
# 127.0.0.1:9900, state in ./state (ignored by git).
run: build
	mkdir -p $(STATE_DIR)
	./$(BIN) --admin-addr $(ADMIN_ADDR) --state-dir $(STATE_DIR)

# Everything: dependencies, vet, stale OpenAPI check, unit and integration
# tests with -race, fuzz smoke, browser test, package build and install test.
test: test-deps
	./scripts/test.sh

test-deps:
	./scripts/test-deps.sh

unit:
	$(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...

# Regenerate the OpenAPI document from the swag annotations in api/.
openapi:
	./scripts/openapi.sh generate

openapi-check:
	./scripts/openapi.sh check

bench: build
	./bench/run.sh

package:
	VERSION=$(VERSION) ./packaging/build.sh

# Short fuzzing sessions of every fuzz target (the committed corpus always
# runs as part of `go test`).
fuzz:
	./scripts/fuzz.sh

clean:
	rm -rf bin dist
