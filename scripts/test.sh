#!/usr/bin/env bash
# Every test of the project, as `make test` and CI run it.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

step() { printf '\n=== %s\n' "$*"; }

step "gofmt"
bad=$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)
if [ -n "$bad" ]; then echo "gofmt needed on: $bad" >&2; exit 1; fi

step "go vet"
$GO vet ./...

step "OpenAPI document is up to date"
./scripts/openapi.sh check

step "unit and integration tests (-race)"
$GO test -race -count=1 -timeout 15m ./...

step "fuzz smoke (committed corpus runs above; a few seconds of new inputs here)"
./scripts/fuzz.sh "${FUZZTIME:-5s}"

if [ -x packaging/test.sh ]; then
	step "deb and rpm packages: build, inspect, install, upgrade, purge"
	./packaging/test.sh
fi
step "all tests passed"
