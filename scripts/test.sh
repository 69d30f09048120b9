#!/usr/bin/env bash
# Every test of the project, as `make test` and CI run it.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
# Tools test-deps.sh installed with go install (h2spec).
export PATH="$PWD/bin/tools:$PATH"

step() { printf '\n=== %s\n' "$*"; }

# Four lanes run side by side, each one step after another, so that the
# waits of one (browsers, etcd elections and timeouts, dpkg) overlap the
# work of the others on a 2-core machine. One after another, the whole
# took 20 min under the load of other jobs (13 min idle); see the commit
# that made the lanes for the figures.
#   e2e:     the end-to-end packages (the spliced binary in children);
#   units:   every other package but core/cluster;
#   cluster: core/cluster and the embedded etcd (mostly waiting on etcd);
#   checks:  the static checks, then the deb and rpm packages, at a lower
#            CPU priority (nice): nothing in them measures time, while the
#            tests' deadlines are what a starved loop misses.
# Each lane's lines are prefixed with its name and it says when it is
# done; the script fails when a lane failed, after all have ended.
declare -A lane_pid lane_start
lanes=()
lane() {
	local name=$1
	shift
	lanes+=("$name")
	lane_start[$name]=$SECONDS
	(
		set +e # the lane's function sets -e itself (not under || or if, where bash ignores it)
		"$@" 2>&1 | sed -u "s/^/[$name] /"
		rc=${PIPESTATUS[0]}
		echo "[$name] lane done in $((SECONDS - lane_start[$name])) s, exit status $rc"
		exit $rc
	) &
	lane_pid[$name]=$!
}

mod=github.com/spliced-proxy/spliced
# The end-to-end packages start spliced processes (and browsers, etcd,
# testssl) and mostly wait on them: one package at a time, never two side
# by side (two under -race starved each other's loops on 2 cores), and
# E2E_PARALLEL of a package's parallel tests at once (go test's default,
# GOMAXPROCS, is 2 here, which left the CPUs idle most of the run).
e2e_pkgs=($mod/cmd/spliced $mod/cmd/spliced/faults)
cluster_pkgs=($mod/core/cluster $mod/internal/etcdtest)
e2e() {
	set -euo pipefail
	step "end-to-end tests (-race)"
	# The binary under test, built once for both packages (each test
	# process linked its own; the packages it compiles serve the tests).
	bin=$(mktemp -d "${TMPDIR:-/tmp}/spliced-e2e-bin.XXXXXX")
	trap 'rm -rf "$bin"' EXIT
	$GO build -race -o "$bin/spliced" ./cmd/spliced
	SPLICED_E2E_BINARY=$bin/spliced $GO test -race -count=1 -p 1 -parallel "${E2E_PARALLEL:-4}" -timeout 15m "${e2e_pkgs[@]}"
}

units() {
	set -euo pipefail
	step "unit and integration tests (-race)"
	# One package at a time (-p 1); within a package, the parallel tests
	# run GOMAXPROCS at a time.
	$GO test -race -count=1 -p 1 -timeout 15m $($GO list ./... | grep -v -x -F $(printf -- '-e %s ' "${e2e_pkgs[@]}" "${cluster_pkgs[@]}"))
}

cluster() {
	set -euo pipefail
	step "cluster tests against embedded etcd (-race)"
	$GO test -race -count=1 -p 1 -timeout 15m "${cluster_pkgs[@]}"
}

checks() {
	set -euo pipefail
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

	if [ -x packaging/test.sh ]; then
		step "deb and rpm packages: build, inspect, install, upgrade, purge"
		./packaging/test.sh
	fi
}

lane e2e e2e
lane units units
lane cluster cluster
lane checks nice -n 10 bash -c "$(declare -f step checks); GO='$GO'; checks"

failed=()
for name in "${lanes[@]}"; do
	wait "${lane_pid[$name]}" || failed+=("$name")
done

# The committed fuzz corpora (testdata/fuzz/) ran above as ordinary tests.
# Exploring new inputs is `make fuzz`: a fresh finding is a bug to fix and
# commit with its input, but it must not make a CI run fail at random, so it
# runs here only when asked (FUZZTIME=5s make test).
if [ -n "${FUZZTIME:-}" ]; then
	step "fuzzing every target for $FUZZTIME"
	./scripts/fuzz.sh "$FUZZTIME"
fi

if [ ${#failed[@]} -ne 0 ]; then
	echo "FAILED: ${failed[*]}" >&2
	exit 1
fi
step "all tests passed"
