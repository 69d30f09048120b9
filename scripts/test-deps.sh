#!/usr/bin/env bash
# Installs what `make test` needs when it is missing: Debian packages for the
# browser test (chromium), the package tests (rpm, lintian), the peers the
# integration tests may start (nginx; haproxy, in front of and behind the
# PROXY protocol tests), h2load (nghttp2-client: the HTTP/2 load test) and
# the TLS scanner of the TLS audit
# (testssl.sh, whose Debian command is testssl) and the installed etcd the
# README's cluster start block runs when there is one (etcd-server: under
# systemd its package starts a service on 127.0.0.1:2379; the test uses
# ports of its own). Runs apt-get update first, as root.
set -euo pipefail
cd "$(dirname "$0")/.."

# h2spec (the HTTP/2 conformance suite of TestH2Spec), from the Go module
# proxy into bin/tools, which scripts/test.sh puts first in PATH.
if [ ! -x bin/tools/h2spec ]; then
	echo "test-deps: installing h2spec into bin/tools"
	GOBIN="$PWD/bin/tools" ${GO:-go} install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible
fi

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v rpm      >/dev/null 2>&1 || need+=(rpm)
command -v lintian  >/dev/null 2>&1 || need+=(lintian)
command -v nginx    >/dev/null 2>&1 || need+=(nginx)
command -v haproxy  >/dev/null 2>&1 || need+=(haproxy)
command -v curl     >/dev/null 2>&1 || need+=(curl)
command -v h2load   >/dev/null 2>&1 || need+=(nghttp2-client)
[ -x /usr/bin/etcd ]                || need+=(etcd-server)
command -v testssl  >/dev/null 2>&1 || command -v testssl.sh >/dev/null 2>&1 || need+=(testssl.sh)

if [ ${#need[@]} -eq 0 ]; then
	echo "test-deps: all present"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "test-deps: missing ${need[*]} and not root: install them with apt-get, or run make test as root" >&2
	exit 1
fi
echo "test-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
