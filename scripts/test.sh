#!/usr/bin/env bash
# Every test of the project, as `make test` and CI run it.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
# Tools test-deps.sh installed with go install (h2spec).
export PATH="$PWD/bin/tools:$PATH"

step() { printf '\n=== %s\n' "$*"; }

step "gofmt"
bad=$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)
if [ -n "$bad" ]; then echo "gofmt needed on: $bad" >&2; exit 1; fi

step "go vet"
$GO vet ./...

step "go.mod and go.sum are tidy"
# Prints the diff `go mod tidy` would make: a direct import marked
# // indirect, a requirement nothing uses, a missing checksum.
if ! $GO mod tidy -diff; then
	echo "go.mod or go.sum is not tidy: run go mod tidy and commit the result" >&2
	exit 1
fi

step "staticcheck"
# The go.mod tool line pins the version; its default checks, no exceptions.
$GO tool staticcheck ./...

step "govulncheck"
./scripts/vulncheck.sh

step "OpenAPI document is up to date"
./scripts/openapi.sh check

step "the admin API does not import the data plane"
# api talks to the data plane only through package core's Control interface
# (cmd/spliced wires core/engine); an import of the engine or of a package
# under it would tie the API to one implementation and make it untestable
# without sockets.
bad=$($GO list -deps ./api | grep -E '/core/(engine|proxy|listen|loop)$' || true)
if [ -n "$bad" ]; then
	echo "api imports the data plane (talk to it through core.Control instead): $bad" >&2
	exit 1
fi

step "unit and integration tests (-race)"
# One package at a time (-p 1): the end-to-end packages (cmd/spliced and
# its fault suite) each start dozens of spliced processes with their own
# parallel tests; run side by side on a 2-core CI machine under -race they
# starve each other's loops for seconds, which turns deadlines into noise.
# Within a package, tests still run in parallel.
$GO test -race -count=1 -p 1 -timeout 15m ./...

# The committed fuzz corpora (testdata/fuzz/) ran above as ordinary tests.
# Exploring new inputs is `make fuzz`: a fresh finding is a bug to fix and
# commit with its input, but it must not make a CI run fail at random, so it
# runs here only when asked (FUZZTIME=5s make test).
if [ -n "${FUZZTIME:-}" ]; then
	step "fuzzing every target for $FUZZTIME"
	./scripts/fuzz.sh "$FUZZTIME"
fi

if [ -x packaging/test.sh ]; then
	step "deb and rpm packages: build, inspect, install, upgrade, purge"
	./packaging/test.sh
fi
step "all tests passed"
