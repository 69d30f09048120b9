#!/usr/bin/env bash
# bench/tls-audit.sh: testssl.sh against spliced, HAProxy and nginx, each
# with its default TLS settings and the same self-signed ECDSA P-256
# certificate, the scan of make test's TLS audit (internal/testssl). A
# manual check, not part of make test or make bench: ~45 s per proxy.
# What it prints and why: bench/README.md, "TLS audit".
#
# Environment:
#   AUDIT_PROXIES  among "spliced haproxy nginx" (default all three)
#   SPLICED_BIN    spliced binary (default bin/spliced)
#   BENCH_OUT      where testssl.sh's JSON findings are copied (default bench/out)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
AUDIT_PROXIES=${AUDIT_PROXIES:-spliced haproxy nginx}
SPLICED_BIN=${SPLICED_BIN:-$ROOT/bin/spliced}
BENCH_OUT=${BENCH_OUT:-$ROOT/bench/out}

die() { printf 'tls-audit: %s\n' "$*" >&2; exit 1; }
for c in openssl curl jq go; do command -v "$c" >/dev/null || die "$c not found"; done
command -v testssl >/dev/null || command -v testssl.sh >/dev/null ||
	die "testssl.sh not found (Debian package testssl.sh; make test-deps installs it)"

# Every process started here is in PIDS; the EXIT trap stops exactly those.
PIDS=()
TMP=$(mktemp -d /tmp/spliced-tls-audit.XXXXXX)
chmod 755 "$TMP" # nginx workers may run as another user
cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start() {
	local name=$1
	shift
	"$@" >"$TMP/$name.log" 2>&1 &
	PIDS+=("$!")
}

mkdir -p "$TMP/bin" "$BENCH_OUT"
go build -o "$TMP/bin/benchtool" ./bench/benchtool
BT=$TMP/bin/benchtool
port() { "$BT" ports 1; }

# wait_https PORT: poll until the TLS port answers, for up to 10 s.
wait_https() {
	local i
	for ((i = 0; i < 100; i++)); do
		curl -sk -o /dev/null --max-time 1 "https://127.0.0.1:$1/" && return 0
		sleep 0.1
	done
	return 1
}

# The certificate make test's audit uses: what a test can get right (90
# days, the scanned address among its names, openssl's random serial).
C=$TMP/cert
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 90 -subj /CN=localhost \
	-addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$C.key" -out "$C.crt" 2>/dev/null
cat "$C.crt" "$C.key" >"$C.pem"
chmod 644 "$C".*

NGINX_USER=""
[[ $(id -u) == 0 ]] && NGINX_USER="user root;"
# nginx_conf DIR SERVER: an nginx configuration in DIR with the http
# server block SERVER, its temporary files inside DIR.
nginx_conf() {
	mkdir -p "$1/tmp"
	cat >"$1/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $1/nginx.pid;
error_log $1/error.log warn;
$NGINX_USER
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $1/tmp/body;
  proxy_temp_path $1/tmp/proxy;
  fastcgi_temp_path $1/tmp/fastcgi;
  uwsgi_temp_path $1/tmp/uwsgi;
  scgi_temp_path $1/tmp/scgi;
  $2
}
EOF
}

# An origin for spliced's backend: plain HTTP, 200 "ok".
ORIGIN=$(port)
mkdir -p "$TMP/origin"
nginx_conf "$TMP/origin" "server { listen 127.0.0.1:$ORIGIN; location / { return 200 \"ok\\n\"; } }"
start origin nginx -p "$TMP/origin/" -c "$TMP/origin/nginx.conf" -e "$TMP/origin/error.log"

audit() {
	local name=$1 p=$2 stamp
	if ! wait_https "$p"; then
		echo "$name: did not answer on https://127.0.0.1:$p/ ($(tail -c 300 "$TMP/$name.log" | tr '\n' ' '))"
		return 0
	fi
	stamp=$(date -u +%Y%m%dT%H%M%SZ)
	"$BT" tlsaudit -name "$name" -target "127.0.0.1:$p" -json "$BENCH_OUT/$stamp-tls-audit-$name.json" ||
		echo "$name: scan failed"
}

for proxy in $AUDIT_PROXIES; do
	p=$(port)
	case $proxy in
	spliced)
		# Only the certificate: every other TLS setting is spliced's default.
		[[ -x $SPLICED_BIN ]] || { echo "spliced: $SPLICED_BIN not built (make build)"; continue; }
		admin=$(port)
		mkdir -p "$TMP/spliced"
		start spliced "$SPLICED_BIN" --admin-addr "127.0.0.1:$admin" --state-dir "$TMP/spliced"
		for ((i = 0; i < 100; i++)); do
			curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$admin/api/v1/info" && break
			sleep 0.1
		done
		a="curl -fsS -o /dev/null --max-time 10 -H Content-Type:application/json"
		$a -X POST "http://127.0.0.1:$admin/api/v1/certificates" \
			--data "$(jq -n --rawfile c "$C.crt" --rawfile k "$C.key" '{name:"audit",cert_pem:$c,key_pem:$k}')"
		$a -X POST "http://127.0.0.1:$admin/api/v1/backends" \
			-d "{\"name\":\"origin\",\"mode\":\"http\",\"servers\":[{\"name\":\"o1\",\"address\":\"127.0.0.1\",\"port\":$ORIGIN}]}"
		$a -X POST "http://127.0.0.1:$admin/api/v1/frontends" \
			-d "{\"name\":\"audit\",\"mode\":\"http\",\"default_backend\":\"origin\",\"binds\":[{\"name\":\"b1\",\"address\":\"127.0.0.1\",\"port\":$p,\"tls\":{\"certificates\":[\"audit\"]}}]}"
		;;
	haproxy)
		# The ssl lines of Debian's /etc/haproxy/haproxy.cfg (Mozilla's
		# "intermediate" profile, tickets off).
		cat >"$TMP/haproxy.cfg" <<EOF
global
    ssl-default-bind-ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384
    ssl-default-bind-ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256
    ssl-default-bind-options ssl-min-ver TLSv1.2 no-tls-tickets
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend audit
    bind 127.0.0.1:$p ssl crt $C.pem
    http-request return status 200 content-type text/plain string ok
EOF
		start haproxy haproxy -db -f "$TMP/haproxy.cfg"
		;;
	nginx)
		# nginx 1.22's built-in defaults with the ssl lines of Debian's
		# /etc/nginx/nginx.conf (TLSv1 to TLSv1.3, server preference).
		mkdir -p "$TMP/nginx"
		nginx_conf "$TMP/nginx" "server {
    listen 127.0.0.1:$p ssl;
    ssl_certificate $C.crt;
    ssl_certificate_key $C.key;
    ssl_protocols TLSv1 TLSv1.1 TLSv1.2 TLSv1.3;
    ssl_prefer_server_ciphers on;
    location / { return 200 \"ok\\n\"; }
  }"
		start nginx nginx -p "$TMP/nginx/" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/error.log"
		;;
	*) die "unknown proxy $proxy" ;;
	esac
	audit "$proxy" "$p"
done
echo "testssl.sh's JSON findings: $BENCH_OUT/*-tls-audit-*.json"
