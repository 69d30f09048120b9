#!/usr/bin/env bash
# Generates the OpenAPI (Swagger 2.0) document of the admin API from the swag
# annotations in api/ (general info in api/openapi.go, one block per handler).
#
#   scripts/openapi.sh generate   write openapi/openapi.json and openapi.yaml
#   scripts/openapi.sh check      fail if the committed files are stale
#
# swag is a Go tool dependency (go.mod `tool` line): no network needed.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}

gen() { # gen OUTDIR
	local out=$1 tmp
	tmp=$(mktemp -d)
	# -d: api holds the operations, core/config, core/stats, core (ThreadState) and
	# core/pin (IRQ), core/accesslog (Record) the models they refer to.
	if ! "$GO" tool swag init --quiet -g openapi.go -d ./api,./core/config,./core/stats,./core,./core/pin,./core/accesslog \
		-o "$tmp" --outputTypes json,yaml >"$tmp/log" 2>&1; then
		cat "$tmp/log" >&2
		rm -rf "$tmp"
		return 1
	fi
	mkdir -p "$out"
	cp "$tmp/swagger.json" "$out/openapi.json"
	cp "$tmp/swagger.yaml" "$out/openapi.yaml"
	rm -rf "$tmp"
}

case "${1:-}" in
generate)
	gen openapi
	echo "openapi: wrote openapi/openapi.json and openapi/openapi.yaml"
	;;
check)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	gen "$tmp"
	stale=0
	for f in openapi.json openapi.yaml; do
		if ! diff -u "openapi/$f" "$tmp/$f" >"$tmp/$f.diff" 2>&1; then
			echo "openapi: openapi/$f is stale; run 'make openapi' and commit it" >&2
			head -40 "$tmp/$f.diff" >&2
			stale=1
		fi
	done
	exit $stale
	;;
*)
	echo "usage: $0 generate|check" >&2
	exit 2
	;;
esac
