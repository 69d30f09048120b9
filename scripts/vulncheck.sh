#!/usr/bin/env bash
# Reports the known vulnerabilities that spliced's code actually reaches, in
# its dependencies and in the Go standard library it is built with
# (govulncheck, golang.org/x/vuln).
#
# govulncheck reads a vulnerability database: https://vuln.go.dev unless
# GOVULNDB names another one (https://mirror or file:///abs/dir, a copy in
# the layout of https://go.dev/security/vuln/database#api). When the
# database cannot be reached this prints why and exits 0: CI and the build
# machines have no internet, and a check that cannot run must not fail the
# build. A local database that is given but broken is an error.
#
# Not a go.mod `tool` line like staticcheck: x/vuln requires newer
# golang.org/x/tools and x/mod than the other tools, and a tool line would
# raise them for every build of nfpm, swag and staticcheck, for a check that
# cannot run without the database. `go run pkg@version` keeps it pinned and
# out of our module graph.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
VERSION=v1.9.0
db=${GOVULNDB:-https://vuln.go.dev}

case $db in
file://*) ;; # local: govulncheck itself reports a missing or malformed copy
http://* | https://*)
	# The endpoint govulncheck reads first; 5 s is plenty for a HEAD when
	# the host is reachable, and bounds the wait when DNS or routing hang.
	if ! out=$(curl -fsSI --max-time 5 -o /dev/null "$db/index/modules.json.gz" 2>&1); then
		echo "govulncheck skipped: vulnerability database $db not reachable (${out#curl: })."
		echo "Run it where $db is reachable, or set GOVULNDB=file:///path to a local copy."
		exit 0
	fi
	;;
*)
	echo "GOVULNDB=$db: want an http(s):// or file:// URL" >&2
	exit 1
	;;
esac
exec "$GO" run "golang.org/x/vuln/cmd/govulncheck@$VERSION" -db "$db" ./...
