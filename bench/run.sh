#!/usr/bin/env bash
# bench/run.sh: spliced side by side with HAProxy, nginx, Caddy and a Go
# baseline proxy, same CPU pinning, same origin, same load. `make bench` runs
# it after building bin/spliced. What each row means and how to read the
# ratios: bench/README.md.
#
# Environment:
#   BENCH_SECONDS     seconds per load run (default 10)
#   BENCH_REPEAT      repetitions of every run; medians printed when > 1 (default 1)
#   BENCH_MODES       among "tcp http tls cluster" (default all four; tls:
#                     http proxying behind TLS termination, spliced,
#                     HAProxy and nginx with the same certificate and
#                     ciphers; cluster: how fast a write reaches three
#                     spliced nodes sharing etcd, against a three-node
#                     HAProxy push + reload, bench/clusterbench)
#   BENCH_CLUSTER_SERVERS  backend sizes of the cluster row (default 1000,10000)
#   BENCH_CLUSTER_WRITES   writes per size (default 200)
#   BENCH_CLUSTER_RELOADS  HAProxy push + reloads per size (default 20)
#   BENCH_ROWS        workloads among "ka pp2 rules20 rules-set close 1m idle h2
#                     h2-10k h2-idle grpc apply hs-ecdsa hs-rsa resume first
#                     flood cluster"
#                     (default all; a row runs in the
#                     modes it applies to: ka and 1m in all three, close
#                     and idle in tcp and http, h2, h2-10k and h2-idle in
#                     http (h2load, HTTP/2 clients by prior knowledge,
#                     HTTP/1.1 to the origin), grpc in http (h2load's
#                     unary gRPC calls, h2c, to a grpc-go origin spoken
#                     to in HTTP/2), hs-ecdsa, hs-rsa, resume,
#                     first and flood in tls; rules20 and rules-set in http,
#                     spliced and HAProxy only: ka with 20 request rules
#                     none of which matches, and with one that sets a
#                     header (the same rules in both); apply: server changes with 1 000
#                     and 10 000 servers, spliced only, bench/applybench;
#                     s003: seed 003's scenario (http: 1 MiB objects, one
#                     request per connection, BENCH_S003_CONNS at once,
#                     splice on and off; softirq time per CPU printed);
#                     cluster: the row of the cluster mode; pp2: ka in tcp
#                     and http with a PROXY v2 header in front of each
#                     connection, sent by an HAProxy relay on the load CPU,
#                     spliced, HAProxy and nginx accepting it)
#                     seed001: seed 001's accept distributions with h2load,
#                     spliced only, 2 and 4 loops (benchtool seed001);
#                     sched: seed 000's scheduler table, spliced only
#                     (benchtool sched)
#   BENCH_SCHED_SCENARIOS  sched scenarios among tcp-conn http-conn tcp-bytes
#                     splice-bytes h2-10k mixed tls-hs (default all)
#   BENCH_SEED001_REPEAT  runs per seed001 cell, medians (default 3)
#   BENCH_SEED001_REQS    requests per h2load client in seed001 (default 5000)
#   BENCH_PROXIES     among "spliced haproxy nginx baseline caddy gotls" (default
#                     all; baseline is tcp only, caddy http only, gotls tls
#                     only: the Go TLS floor, benchtool tlsfloor)
#   BENCH_IDLE_CONNS  idle connections of the idle row (default 5000)
#   BENCH_1M_CONNS    wrk connections of the 1m row (default 64)
#   BENCH_S003_CONNS  concurrent connections of the s003 row (default 4000)
#   BENCH_HS_CONNS    concurrent connections of the hs-*, resume rows and of
#                     the flood (default 50)
#   BENCH_H2_CLIENTS  h2load clients of the h2 and h2-10k rows (default 100)
#   BENCH_H2_STREAMS  h2load streams per client of those rows (default 10)
#   BENCH_PROXY_CPU   CPU the proxy is pinned to (default 0)
#   BENCH_LOAD_CPU    CPU of wrk and the origin (default 1)
#   BENCH_OUT         directory of the JSON results (default bench/out)
#   SPLICED_BIN       spliced binary (default bin/spliced)
#   BENCH_SPLICED_TUNING  JSON merged into spliced's tuning PATCH (after
#                     nbthread 1), e.g. '{"busy_poll_us":50}' to compare
#                     busy polling, '{"poll_nap_us":-1}' without the naps
#                     (bench/README.md, where spliced waits)
#   HAPROXY_SPLICE    HAProxy's splice for the 1m row: force (default:
#                     option splice-request + splice-response, the match of
#                     spliced's splice "on") or auto (option splice-auto)
#
# The http 1m row runs spliced three times, with splice on ("spliced"),
# auto ("spliced-auto") and off ("spliced-off"), interleaved with the
# other proxies in every repetition, so that one run compares the three.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

log() { printf '%s\n' "$*" >&2; }
die() { log "bench: $*"; exit 1; }

BENCH_SECONDS=${BENCH_SECONDS:-10}
BENCH_REPEAT=${BENCH_REPEAT:-1}
BENCH_SPLICED_TUNING=${BENCH_SPLICED_TUNING:-'{}'}
BENCH_MODES=${BENCH_MODES:-tcp http tls cluster}
BENCH_CLUSTER_SERVERS=${BENCH_CLUSTER_SERVERS:-1000,10000}
BENCH_CLUSTER_WRITES=${BENCH_CLUSTER_WRITES:-200}
BENCH_CLUSTER_RELOADS=${BENCH_CLUSTER_RELOADS:-20}
BENCH_ROWS=${BENCH_ROWS:-ka pp2 rules20 rules-set close 1m s003 idle h2 h2-10k h2-idle grpc apply hs-ecdsa hs-rsa resume first flood seed001 sched cluster}
BENCH_PROXIES=${BENCH_PROXIES:-spliced haproxy nginx baseline caddy gotls}
BENCH_IDLE_CONNS=${BENCH_IDLE_CONNS:-5000}
BENCH_1M_CONNS=${BENCH_1M_CONNS:-64}
BENCH_S003_CONNS=${BENCH_S003_CONNS:-4000}
BENCH_HS_CONNS=${BENCH_HS_CONNS:-50}
BENCH_H2_CLIENTS=${BENCH_H2_CLIENTS:-100}
BENCH_H2_STREAMS=${BENCH_H2_STREAMS:-10}
BENCH_PROXY_CPU=${BENCH_PROXY_CPU:-0}
BENCH_LOAD_CPU=${BENCH_LOAD_CPU:-1}
BENCH_OUT=${BENCH_OUT:-$ROOT/bench/out}
SPLICED_BIN=${SPLICED_BIN:-$ROOT/bin/spliced}
HAPROXY_SPLICE=${HAPROXY_SPLICE:-force}

[[ $HAPROXY_SPLICE == force || $HAPROXY_SPLICE == auto ]] || die "HAPROXY_SPLICE must be force or auto"
[[ $BENCH_SECONDS =~ ^[1-9][0-9]*$ ]] || die "BENCH_SECONDS must be a positive integer"
[[ $BENCH_REPEAT =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT must be a positive integer"
[[ $BENCH_IDLE_CONNS =~ ^[1-9][0-9]*$ ]] || die "BENCH_IDLE_CONNS must be a positive integer"
[[ $BENCH_1M_CONNS =~ ^[1-9][0-9]*$ ]] || die "BENCH_1M_CONNS must be a positive integer"
[[ $BENCH_HS_CONNS =~ ^[1-9][0-9]*$ ]] || die "BENCH_HS_CONNS must be a positive integer"
[[ $BENCH_H2_CLIENTS =~ ^[1-9][0-9]*$ ]] || die "BENCH_H2_CLIENTS must be a positive integer"
[[ $BENCH_H2_STREAMS =~ ^[1-9][0-9]*$ ]] || die "BENCH_H2_STREAMS must be a positive integer"
for mode in $BENCH_MODES; do [[ $mode == tcp || $mode == http || $mode == tls || $mode == cluster ]] || die "unknown mode $mode"; done
[[ $BENCH_CLUSTER_SERVERS =~ ^[0-9]+(,[0-9]+)*$ ]] || die "BENCH_CLUSTER_SERVERS must be comma-separated sizes"
[[ $BENCH_CLUSTER_WRITES =~ ^[1-9][0-9]*$ ]] || die "BENCH_CLUSTER_WRITES must be a positive integer"
[[ $BENCH_CLUSTER_RELOADS =~ ^[1-9][0-9]*$ ]] || die "BENCH_CLUSTER_RELOADS must be a positive integer"

# Proxies that can run in each mode, in table order.
TCP_PROXIES="spliced haproxy nginx baseline"
HTTP_PROXIES="spliced haproxy nginx caddy"
TLS_PROXIES="spliced haproxy nginx gotls"
# HTTP/2 rows: h2c by prior knowledge on a clear bind (Caddy is configured
# HTTP/1.1 only here).
H2_PROXIES="spliced haproxy nginx"
# candidates MODE ROW: the proxies of a table; spliced-auto and spliced-off
# are spliced with splice auto and off (the http 1m row compares them with
# splice on).
candidates() {
	case $1 in
	tcp) [[ $2 == pp2 ]] && echo "spliced haproxy nginx" || echo "$TCP_PROXIES" ;;
	http)
		case $2 in
		1m) echo "spliced spliced-auto spliced-off haproxy nginx caddy" ;;
		s003) echo "spliced spliced-off haproxy haproxy-off nginx" ;;
		rules*) echo "spliced haproxy" ;;
		pp2) echo "spliced haproxy nginx" ;;
		h2* | grpc) echo "$H2_PROXIES" ;;
		*) echo "$HTTP_PROXIES" ;;
		esac
		;;
	tls) echo "$TLS_PROXIES" ;;
	*) die "unknown mode $1" ;;
	esac
}

# row_applies MODE ROW: whether ROW runs in MODE (unknown rows die).
row_applies() {
	case $2 in
	ka | 1m) return 0 ;;
	s003) [[ $1 == http ]] ;;
	pp2) [[ $1 != tls ]] ;;
	close) [[ $1 != tls ]] ;;
	idle) return 0 ;;
	rules20 | rules-set) [[ $1 == http ]] ;;
	h2 | h2-10k | h2-idle | grpc) [[ $1 == http ]] ;;
	hs-ecdsa | hs-rsa | resume | first | flood) [[ $1 == tls ]] ;;
	apply | cluster | seed001 | sched) return 1 ;; # their own tools, after the tables
	*) die "unknown row $2" ;;
	esac
}

# ---------------------------------------------------------------- processes
# Every process this script starts is recorded in PIDS; the EXIT trap stops
# exactly those (and the children they forked, e.g. nginx workers) and
# removes the temporary directory. Nothing is killed by name.
PIDS=()
TMP=""
cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		stop_pid "$p"
	done
	if [[ -n $TMP && -d $TMP ]]; then
		rm -rf "$TMP"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME CMD...: run CMD in the background, output to $TMP/NAME.log;
# sets STARTED_PID.
start() {
	local name=$1
	shift
	"$@" >"$TMP/$name.log" 2>&1 &
	STARTED_PID=$!
	PIDS+=("$STARTED_PID")
}

# wait_fg CMD...: run CMD in the background and wait for it, so that a
# TERM or INT to this script runs the cleanup at once instead of after CMD.
wait_fg() {
	local pid rc=0
	"$@" &
	pid=$!
	PIDS+=("$pid")
	wait "$pid" || rc=$?
	forget_pid "$pid"
	return "$rc"
}

# stop_pid PID: TERM, wait up to 5 s, then KILL; children that outlive their
# parent (nginx workers if the master was killed) are stopped too.
stop_pid() {
	local pid=$1 kids i
	kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; forget_pid "$pid"; return 0; }
	# Children as "PID:start-time", so that a PID reused later is never hit.
	kids=""
	for i in $(pgrep -P "$pid" || true); do kids+=" $i:$(proc_start "$i")"; done
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		# A zombie child of ours still answers kill -0; wait reaps it.
		if [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]]; then break; fi
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	for i in $kids; do
		if [[ $(proc_start "${i%%:*}") == "${i#*:}" ]]; then
			kill -KILL "${i%%:*}" 2>/dev/null || true
		fi
	done
	forget_pid "$pid"
}

# proc_start PID: the process's start time in ticks since boot (stat field
# 22; the command name in field 2 may hold spaces, so count from its end).
proc_start() {
	local st
	st=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	st=${st##*) }
	set -- $st
	echo "${20}"
}

forget_pid() {
	local keep=() p
	for p in "${PIDS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
	PIDS=("${keep[@]+"${keep[@]}"}")
}

# ------------------------------------------------------------ prerequisites
need_pkgs=()
command -v haproxy >/dev/null || need_pkgs+=(haproxy)
command -v nginx >/dev/null || need_pkgs+=(nginx)
command -v wrk >/dev/null || need_pkgs+=(wrk)
command -v h2load >/dev/null || need_pkgs+=(nghttp2-client)
command -v curl >/dev/null || need_pkgs+=(curl)
command -v taskset >/dev/null || need_pkgs+=(util-linux)
command -v jq >/dev/null || need_pkgs+=(jq)
command -v openssl >/dev/null || need_pkgs+=(openssl)
# The stream module: a dynamic module (Debian) or built in.
nginx_static_stream() { [[ $(nginx -V 2>&1) == *"--with-stream "* ]]; }
[[ -e /usr/lib/nginx/modules/ngx_stream_module.so ]] || nginx_static_stream || need_pkgs+=(libnginx-mod-stream)
if ((${#need_pkgs[@]})); then
	log "bench: installing ${need_pkgs[*]}"
	SUDO=""
	[[ $(id -u) == 0 ]] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}"
fi
command -v go >/dev/null || [[ -x /usr/local/go/bin/go ]] || die "go not found"
GO=$(command -v go || echo /usr/local/go/bin/go)

[[ $(getconf CLK_TCK) == 100 ]] || die "CLK_TCK is $(getconf CLK_TCK), benchtool assumes 100"
ncpu=$(nproc)
if ((ncpu < 2)); then
	log "bench: WARNING: $ncpu CPU: proxy and load share it; figures are not comparable"
	BENCH_PROXY_CPU=0 BENCH_LOAD_CPU=0
fi

# Idle connections cost the proxy two fds each (client and server side).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
nofile=$(ulimit -n)
if ((2 * BENCH_IDLE_CONNS + 200 > nofile)); then
	BENCH_IDLE_CONNS=$(((nofile - 200) / 2))
	log "bench: fd limit $nofile: idle row lowered to $BENCH_IDLE_CONNS connections"
fi
MAXCONN=$((BENCH_IDLE_CONNS + 1000))
((2 * MAXCONN + 200 <= nofile)) || MAXCONN=$(((nofile - 200) / 2))

TMP=$(mktemp -d /tmp/spliced-bench.XXXXXX)
chmod 755 "$TMP" # nginx workers may run as another user
mkdir -p "$TMP/bin" "$BENCH_OUT"

log "bench: building benchtool and baseline"
"$GO" build -o "$TMP/bin/benchtool" ./bench/benchtool
"$GO" build -o "$TMP/bin/baseline" ./bench/baseline
BT=$TMP/bin/benchtool

RESULTS=$TMP/results.jsonl
: >"$RESULTS"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)

# next_port: a free loopback port in PORT, picked just before use; each
# proxy start gets a new one, so no run meets the TIME_WAIT sockets of the
# previous one.
next_port() {
	PORT=$("$BT" ports 1)
}

NGINX_USER=""
[[ $(id -u) == 0 ]] && NGINX_USER="user root;"
NGINX_STREAM_MODULE=""
[[ -e /usr/lib/nginx/modules/ngx_stream_module.so ]] &&
	NGINX_STREAM_MODULE="load_module /usr/lib/nginx/modules/ngx_stream_module.so;"

# nginx_temp DIR: http-module temp paths inside DIR, never the system ones.
nginx_temp() {
	local d=$1
	mkdir -p "$d/tmp"
	printf '  client_body_temp_path %s/tmp/body;\n  proxy_temp_path %s/tmp/proxy;\n  fastcgi_temp_path %s/tmp/fastcgi;\n  uwsgi_temp_path %s/tmp/uwsgi;\n  scgi_temp_path %s/tmp/scgi;\n' "$d" "$d" "$d" "$d" "$d"
}

# cpu_mask N: nginx worker_cpu_affinity bit mask for CPU N.
cpu_mask() {
	local m=1 i
	for ((i = 0; i < $1; i++)); do m+=0; done
	echo "$m"
}

# ------------------------------------------------------------------ origin
# nginx, one worker pinned with the load generator, serving a 64-byte and a
# 1 MiB object with keep-alive and sendfile.
ORIGIN_DIR=$TMP/origin
mkdir -p "$ORIGIN_DIR/www"
head -c 64 /dev/zero | tr '\0' 'a' >"$ORIGIN_DIR/www/64"
head -c $((1 << 20)) /dev/urandom >"$ORIGIN_DIR/www/1m"
head -c 10240 /dev/urandom >"$ORIGIN_DIR/www/10k"
# The sched rows: an empty object and seed 000's 2 MB objects.
: >"$ORIGIN_DIR/www/0"
head -c $((2 << 20)) /dev/urandom >"$ORIGIN_DIR/www/2m"
next_port
ORIGIN_PORT=$PORT
cat >"$ORIGIN_DIR/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile $nofile;
pid $ORIGIN_DIR/nginx.pid;
error_log $ORIGIN_DIR/error.log warn;
$NGINX_USER
events { worker_connections $((nofile - 100)); }
http {
  access_log off;
$(nginx_temp "$ORIGIN_DIR")
  default_type application/octet-stream;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  server {
    listen 127.0.0.1:$ORIGIN_PORT backlog=4096;
    root $ORIGIN_DIR/www;
    # Tells the bench that an http-mode proxy parsed and rewrote the request.
    add_header X-Bench-XFF \$http_x_forwarded_for;
    location / { }
  }
}
EOF

# check PORT PATH SIZE: one GET through the proxy returns 200 and SIZE bytes
# (over https when SCHEME is https: the tls mode).
# With H2=1 (the h2 rows) the request is HTTP/2 with prior knowledge and
# must be answered in HTTP/2.
SCHEME=http
H2=0
curl_opts() { ((H2)) && echo "--http2-prior-knowledge" || true; }
check() {
	local got want="200 $3"
	((H2)) && want+=" 2"
	got=$(curl -sk $(curl_opts) -o /dev/null --max-time 3 -w "%{http_code} %{size_download}$( ((H2)) && echo ' %{http_version}')" "$SCHEME://127.0.0.1:$1$2" || true)
	[[ $got == "$want" ]]
}

# wait_check PORT PATH SIZE: poll check for up to 10 s (the proxy starting).
wait_check() {
	local i
	for ((i = 0; i < 100; i++)); do
		check "$@" && return 0
		sleep 0.1
	done
	return 1
}

# ------------------------------------------------------------ certificates
# tls mode: a self-signed ECDSA P-256 and an RSA-2048 certificate for
# 127.0.0.1, made for this run; every proxy serves the same files. Rows
# hs-rsa and flood use the RSA one, the others ECDSA.
CERTS=$TMP/certs
if [[ " $BENCH_MODES " == *" tls "* ]]; then
	command -v openssl >/dev/null || die "openssl not found (tls mode makes its certificates with it)"
	mkdir -p "$CERTS"
	for kind in ecdsa rsa; do
		case $kind in
		ecdsa) keyopt=(-newkey ec -pkeyopt ec_paramgen_curve:P-256) ;;
		rsa) keyopt=(-newkey rsa:2048) ;;
		esac
		openssl req -x509 "${keyopt[@]}" -nodes -days 30 -subj /CN=bench.localhost \
			-addext "subjectAltName=DNS:bench.localhost,IP:127.0.0.1" \
			-keyout "$CERTS/$kind.key" -out "$CERTS/$kind.crt" 2>/dev/null || die "openssl could not make the $kind certificate"
		cat "$CERTS/$kind.crt" "$CERTS/$kind.key" >"$CERTS/$kind.pem" # HAProxy's crt: certificate and key
	done
	chmod 644 "$CERTS"/*
fi
# cert_for ROW: the certificate of a tls row.
cert_for() { [[ $1 == hs-rsa || $1 == flood ]] && echo rsa || echo ecdsa; }

# The TLS settings every proxy gets in tls mode, spliced's defaults: TLS
# 1.2 and 1.3, ECDHE with AEAD ciphers only, TLS 1.3 suites in Go's order
# (AES-128-GCM first on a CPU with AES instructions), X25519 then P-256.
# The clients (wrk, benchtool) negotiate TLS 1.3 with X25519.
TLS12_CIPHERS=ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305
TLS13_SUITES=TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384

log "bench: origin nginx on 127.0.0.1:$ORIGIN_PORT, CPU $BENCH_LOAD_CPU"
start origin taskset -c "$BENCH_LOAD_CPU" nginx -p "$ORIGIN_DIR/" -c "$ORIGIN_DIR/nginx.conf" -e "$ORIGIN_DIR/error.log"
ORIGIN_PID=$STARTED_PID
wait_check "$ORIGIN_PORT" /64 64 || { cat "$TMP/origin.log" "$ORIGIN_DIR/error.log" >&2 || true; die "origin did not start"; }
check "$ORIGIN_PORT" /1m $((1 << 20)) || die "origin does not serve /1m"

# The grpc row's origin: a grpc-go server (internal/grpcdemo: the standard
# health service) on h2c, one OS thread's worth of Go (GOMAXPROCS=1), pinned
# with the load. The calls are grpc.health.v1.Health/Check with an empty
# request: a 5-byte gRPC message (no compression flag, length 0), answered
# SERVING (7 bytes) with grpc-status 0 in the trailers.
GRPC_PORT=""
if [[ " $BENCH_MODES " == *" http "* && " $BENCH_ROWS " == *" grpc "* ]]; then
	"$GO" build -o "$TMP/bin/grpc-demo" ./internal/grpcdemo
	printf '\0\0\0\0\0' >"$TMP/grpc-call.bin"
	next_port
	GRPC_PORT=$PORT
	log "bench: gRPC origin (grpc-go) on 127.0.0.1:$GRPC_PORT, CPU $BENCH_LOAD_CPU"
	start grpc-origin taskset -c "$BENCH_LOAD_CPU" env GOMAXPROCS=1 "$TMP/bin/grpc-demo" serve "127.0.0.1:$GRPC_PORT"
	GRPC_PID=$STARTED_PID
	[[ $("$TMP/bin/grpc-demo" check "127.0.0.1:$GRPC_PORT" 2>&1) == SERVING ]] ||
		{ cat "$TMP/grpc-origin.log" >&2 || true; die "gRPC origin did not start"; }
fi
# grpc_check PORT: one Health/Check call through the proxy answers SERVING
# (grpc-demo's client: h2c, bounded by 10 s).
grpc_check() { [[ $("$TMP/bin/grpc-demo" check "127.0.0.1:$1" 2>&1) == SERVING ]]; }

# ------------------------------------------------------------------ rules
# The rows rules20 and rules-set (bench/README.md): the same request rules
# for spliced (JSON, through the API) and HAProxy (http-request lines).
# rules20: 20 rules of five kinds none of which matches the bench's GET
# (path prefix, host, a header present, a source prefix, method and query
# parameter); rules-set: one rule that sets a header on every request.
rules_json() {
	local i out="" r
	if [[ $1 == rules-set ]]; then
		echo '{"request":[{"do":{"set_header":{"name":"X-Bench-Rule","value":"1"}}}]}'
		return
	fi
	for ((i = 0; i < 20; i++)); do
		case $((i % 5)) in
		0) r="{\"when\":{\"path_prefix\":\"/admin$i/\"},\"do\":{\"deny\":{}}}" ;;
		1) r="{\"when\":{\"host\":\"h$i.example.net\"},\"do\":{\"redirect\":{\"scheme\":\"https\"}}}" ;;
		2) r="{\"when\":{\"header\":{\"name\":\"X-Block-$i\",\"present\":true}},\"do\":{\"deny\":{}}}" ;;
		3) r="{\"when\":{\"src\":[\"10.$i.0.0/16\"]},\"do\":{\"deny\":{}}}" ;;
		4) r="{\"when\":{\"method\":\"PUT\",\"query\":{\"name\":\"q$i\"}},\"do\":{\"set_header\":{\"name\":\"X-R\",\"value\":\"$i\"}}}" ;;
		esac
		out+="${out:+,}$r"
	done
	echo "{\"request\":[$out]}"
}
rules_haproxy() {
	local i
	if [[ $1 == rules-set ]]; then
		echo "    http-request set-header X-Bench-Rule 1"
		return
	fi
	for ((i = 0; i < 20; i++)); do
		case $((i % 5)) in
		0) echo "    http-request deny if { path_beg /admin$i/ }" ;;
		1) echo "    http-request redirect scheme https if { req.hdr(host),field(1,:) -i h$i.example.net }" ;;
		2) echo "    http-request deny if { req.hdr(X-Block-$i) -m found }" ;;
		3) echo "    http-request deny if { src 10.$i.0.0/16 }" ;;
		4) echo "    http-request set-header X-R $i if METH_PUT { url_param(q$i) -m found }" ;;
		esac
	done
}

# ------------------------------------------------------------------ proxies
# start_PROXY MODE ROW PORT: start the proxy pinned to BENCH_PROXY_CPU with
# one thread, listening on PORT, forwarding to the origin, its files in
# $TMP/$RUN_NAME; set PROXY_PID.
# Return non-zero with FAIL_REASON set when it cannot.
# splice_for ROW: the 1m row runs with splice, the others without.
splice_for() { [[ $1 == 1m || $1 == s003 ]] && echo on || echo off; }

start_haproxy() {
	local mode=$1 row=$2 port=$3 d=$TMP/$RUN_NAME opts="" global="" ssl=""
	mkdir -p "$d"
	if [[ $mode == tls ]]; then
		# TLS terminated, then HTTP proxying as in http mode; no splice
		# (the bytes are deciphered in user space).
		mode=http
		global="ssl-default-bind-ciphers $TLS12_CIPHERS
    ssl-default-bind-ciphersuites $TLS13_SUITES
    ssl-default-bind-options ssl-min-ver TLSv1.2
    ssl-default-bind-curves X25519:P-256
    tune.ssl.default-dh-param 2048"
		ssl=" ssl crt $CERTS/$(cert_for "$row").pem"
	elif [[ ${4:-$(splice_for "$row")} == on ]]; then
		case $HAPROXY_SPLICE in
		force) opts="option splice-request
    option splice-response" ;;
		*) opts="option splice-auto" ;;
		esac
	fi
	if [[ $mode == http ]]; then
		opts+="
    option http-keep-alive
    option forwardfor
    http-reuse safe
    timeout http-request 10s
    timeout http-keep-alive 60s"
	fi
	# h2 rows: HTTP/2 clients by prior knowledge on the clear bind; the
	# grpc row too, and HTTP/2 to its gRPC origin.
	local server="127.0.0.1:$ORIGIN_PORT"
	[[ $row == h2* || $row == grpc ]] && ssl+=" proto h2"
	[[ $row == grpc ]] && server="127.0.0.1:$GRPC_PORT proto h2"
	[[ $row == pp2 ]] && ssl+=" accept-proxy"
	cat >"$d/haproxy.cfg" <<EOF
global
    nbthread 1
    cpu-map 1/1 $BENCH_PROXY_CPU
    maxconn $MAXCONN
    pidfile $d/haproxy.pid
    $global

defaults
    mode $mode
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    $opts

frontend fe
    bind 127.0.0.1:$port$ssl
$([[ $row == rules* ]] && rules_haproxy "$row")
    default_backend be

backend be
    server o1 $server
EOF
	start "$RUN_NAME" taskset -c "$BENCH_PROXY_CPU" haproxy -db -f "$d/haproxy.cfg"
	PROXY_PID=$STARTED_PID
}

start_nginx() {
	local mode=$1 row=$2 port=$3 d=$TMP/$RUN_NAME body listen="" tls=""
	mkdir -p "$d"
	if [[ $mode == tls ]]; then
		local c=$CERTS/$(cert_for "$row")
		listen=" ssl"
		tls="ssl_certificate $c.crt;
    ssl_certificate_key $c.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_ciphers $TLS12_CIPHERS;
    ssl_conf_command Ciphersuites $TLS13_SUITES;
    ssl_ecdh_curve X25519:prime256v1;
    ssl_prefer_server_ciphers on;
    ssl_session_tickets on;"
	fi
	# h2 rows: nginx 1.22 speaks h2c by prior knowledge on a clear
	# listener with http2; its upstream cache holds as many idle server
	# connections as h2load has streams in flight (with 64, each response
	# beyond 64 at once would close its server connection: connection
	# churn the others, which pool every server connection, do not have).
	local upka=64
	[[ $row == pp2 ]] && listen+=" proxy_protocol"
	if [[ $row == h2* || $row == grpc ]]; then
		listen+=" http2"
		upka=$((BENCH_H2_CLIENTS * BENCH_H2_STREAMS > 64 ? BENCH_H2_CLIENTS * BENCH_H2_STREAMS : 64))
	fi
	# The grpc row: gRPC to its origin over HTTP/2 (ngx_http_grpc_module,
	# one stream per upstream connection, kept alive as for the h2 rows).
	local loc="proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      proxy_set_header X-Forwarded-For \$remote_addr;
      proxy_buffer_size 16k;
      proxy_buffers 8 16k;
      proxy_max_temp_file_size 0;"
	[[ $row == grpc ]] && loc="grpc_pass grpc://grpc_origin;"
	if [[ $mode == tcp ]]; then
		[[ -n $NGINX_STREAM_MODULE ]] || nginx_static_stream ||
			{ FAIL_REASON="nginx stream module not installed"; return 1; }
		body="stream {
  upstream origin { server 127.0.0.1:$ORIGIN_PORT; }
  server {
    listen 127.0.0.1:$port$listen backlog=4096;
    proxy_pass origin;
    proxy_timeout 60s;
  }
}"
	else
		body="http {
  access_log off;
$(nginx_temp "$d")
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  upstream origin {
    server 127.0.0.1:$ORIGIN_PORT;
    keepalive $upka;
    keepalive_requests 100000000;
  }
  upstream grpc_origin {
    server 127.0.0.1:${GRPC_PORT:-1};
    keepalive $upka;
    keepalive_requests 100000000;
  }
  server {
    listen 127.0.0.1:$port$listen backlog=4096;
    $tls
    location / {
      $loc
    }
  }
}"
	fi
	cat >"$d/nginx.conf" <<EOF
$([[ $mode == tcp ]] && echo "$NGINX_STREAM_MODULE")
daemon off;
master_process on;
worker_processes 1;
worker_cpu_affinity $(cpu_mask "$BENCH_PROXY_CPU");
worker_rlimit_nofile $nofile;
pid $d/nginx.pid;
error_log $d/error.log warn;
$NGINX_USER
events { worker_connections $((nofile - 100)); }
$body
EOF
	start "$RUN_NAME" taskset -c "$BENCH_PROXY_CPU" nginx -p "$d/" -c "$d/nginx.conf" -e "$d/error.log"
	PROXY_PID=$STARTED_PID
}

# gotls: the Go TLS floor (benchtool tlsfloor), tls mode only: crypto/tls
# answering from memory, no proxying; not a peer, a floor.
start_gotls() {
	local mode=$1 row=$2 port=$3 c
	c=$CERTS/$(cert_for "$row")
	start "$RUN_NAME" env GOMAXPROCS=1 taskset -c "$BENCH_PROXY_CPU" \
		"$BT" tlsfloor -listen "127.0.0.1:$port" -cert "$c.crt" -key "$c.key"
	PROXY_PID=$STARTED_PID
}

start_baseline() {
	local mode=$1 row=$2 port=$3
	start "$RUN_NAME" env GOMAXPROCS=1 taskset -c "$BENCH_PROXY_CPU" \
		"$TMP/bin/baseline" -listen "127.0.0.1:$port" -server "127.0.0.1:$ORIGIN_PORT"
	PROXY_PID=$STARTED_PID
}

CADDY=""
CADDY_REASON=""
find_caddy() {
	[[ -n $CADDY || -n $CADDY_REASON ]] && return 0
	if command -v caddy >/dev/null; then
		CADDY=$(command -v caddy)
		return 0
	fi
	# The Debian package's binary, extracted into bench/out/cache: installing
	# the package would also enable a caddy service on port 80.
	local cache=$BENCH_OUT/cache/caddy
	if [[ ! -x $cache/usr/bin/caddy ]]; then
		local policy
		policy=$(apt-cache policy caddy 2>/dev/null || true)
		if [[ $policy != *"Candidate: "[0-9]* ]]; then
			CADDY_REASON="no Debian package 'caddy' in the apt sources (apt-cache policy caddy)"
			return 0
		fi
		mkdir -p "$cache"
		log "bench: fetching the Debian caddy package into $cache"
		if ! (cd "$cache" && apt-get download caddy >/dev/null 2>&1 && dpkg-deb -x caddy_*.deb .); then
			CADDY_REASON="apt-get download caddy failed"
			return 0
		fi
	fi
	CADDY=$cache/usr/bin/caddy
}

start_caddy() {
	local mode=$1 row=$2 port=$3 d=$TMP/$RUN_NAME
	find_caddy
	[[ -n $CADDY ]] || { FAIL_REASON="skipped: $CADDY_REASON"; return 1; }
	mkdir -p "$d"
	cat >"$d/Caddyfile" <<EOF
{
	admin off
	auto_https off
	servers {
		protocols h1
	}
}
http://127.0.0.1:$port {
	reverse_proxy 127.0.0.1:$ORIGIN_PORT
}
EOF
	start "$RUN_NAME" env GOMAXPROCS=1 HOME="$d" XDG_DATA_HOME="$d/data" XDG_CONFIG_HOME="$d/config" \
		taskset -c "$BENCH_PROXY_CPU" "$CADDY" run --adapter caddyfile --config "$d/Caddyfile"
	PROXY_PID=$STARTED_PID
}

# api ADMIN_PORT METHOD PATH JSON: one admin API call; fails with the answer.
api() {
	local out code
	out=$(curl -sS --max-time 10 -X "$2" -H 'Content-Type: application/json' \
		-d "$4" -w '\n%{http_code}' "http://127.0.0.1:$1$3" 2>&1) || { FAIL_REASON="curl $2 $3: $out"; return 1; }
	code=${out##*$'\n'}
	if [[ $code != 2?? ]]; then
		FAIL_REASON="$2 $3 answered $code: $(printf '%s' "${out%$'\n'*}" | tr '\n' ' ' | cut -c1-300)"
		return 1
	fi
}

# start_spliced MODE ROW PORT [SPLICE]: SPLICE overrides splice_for ROW.
start_spliced() {
	local mode=$1 row=$2 port=$3 splice=${4:-$(splice_for "$2")} d=$TMP/$RUN_NAME i
	[[ -x $SPLICED_BIN ]] || { FAIL_REASON="$SPLICED_BIN not built (make build)"; return 1; }
	mkdir -p "$d/state"
	next_port
	local admin=$PORT
	ADMIN_PORT=$admin
	start "$RUN_NAME" taskset -c "$BENCH_PROXY_CPU" "$SPLICED_BIN" \
		--admin-addr "127.0.0.1:$admin" --state-dir "$d/state"
	PROXY_PID=$STARTED_PID
	for ((i = 0; i < 100; i++)); do
		curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$admin/api/v1/info" && break
		kill -0 "$PROXY_PID" 2>/dev/null || { FAIL_REASON="spliced exited: $(tail -c 300 "$TMP/$RUN_NAME.log" | tr '\n' ' ')"; return 1; }
		sleep 0.1
	done
	((i < 100)) || { FAIL_REASON="admin API did not answer on 127.0.0.1:$admin"; return 1; }
	# Configured only through the REST API, as a user would. In http mode
	# it adds X-Forwarded-For like the other proxies here.
	local http_opts="" tls=""
	[[ $mode == http || $mode == tls ]] && http_opts='"http":{"x_forwarded_for":true},'
	[[ $row == pp2 ]] && tls=',"accept_proxy":{"trusted":["127.0.0.1"]}'
	api "$admin" PATCH /api/v1/tuning "$(jq -cn --argjson x "$BENCH_SPLICED_TUNING" '{nbthread:1} + $x')" || return 1
	if [[ $mode == tls ]]; then
		# The certificate through the API, the bind with spliced's
		# default TLS settings (they are the ones given to the others).
		local c=$CERTS/$(cert_for "$row")
		api "$admin" POST /api/v1/certificates "$(jq -n --rawfile cert "$c.crt" --rawfile key "$c.key" \
			'{name:"bench",cert_pem:$cert,key_pem:$key}')" || return 1
		tls=',"tls":{"certificates":["bench"]}'
		mode=http splice=off
	fi
	# The grpc row: its origin is the gRPC server, spoken to in HTTP/2.
	local server="\"port\":$ORIGIN_PORT"
	[[ $row == grpc ]] && server="\"port\":$GRPC_PORT,\"proto\":\"h2\""
	api "$admin" POST /api/v1/backends "{\"name\":\"origin\",\"mode\":\"$mode\",\"balance\":\"roundrobin\",
		\"servers\":[{\"name\":\"o1\",\"address\":\"127.0.0.1\",$server}]}" || return 1
	api "$admin" POST /api/v1/frontends "{\"name\":\"bench\",\"mode\":\"$mode\",\"default_backend\":\"origin\",
		\"splice\":\"$splice\",\"maxconn\":$MAXCONN,$http_opts
		\"binds\":[{\"name\":\"b1\",\"address\":\"127.0.0.1\",\"port\":$port$tls}]}" || return 1
	if [[ $row == rules* ]]; then
		api "$admin" PATCH /api/v1/frontends/bench "{\"rules\":$(rules_json "$row")}" || return 1
	fi
}

# softirq_ticks: per CPU, "cpuN softirq total" from /proc/stat (seed 003's
# question is where the interrupt work runs; on loopback there is no NIC,
# the softirq is the network stack's receive processing).
softirq_ticks() { awk '/^cpu[0-9]/ { t = 0; for (i = 2; i <= 9; i++) t += $i; printf "%s %s %s;", $1, $8, t }' /proc/stat; }

# softirq_report BEFORE AFTER: softirq share of each CPU's time between two
# softirq_ticks.
softirq_report() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		n = split(a, x, ";"); split(b, y, ";")
		for (i = 1; i < n; i++) {
			split(x[i], p, " "); split(y[i], q, " ")
			d = q[3] - p[3]; printf "%s %.0f%%  ", p[1], (d > 0 ? 100 * (q[2] - p[2]) / d : 0)
		}
	}'
}

# start_pp2_relay PORT: an HAProxy on the load CPU that relays each
# connection to the proxy under test on PORT with a PROXY v2 header (the
# pp2 row); set RELAY_PORT and RELAY_PID.
start_pp2_relay() {
	local d=$TMP/$RUN_NAME-relay
	mkdir -p "$d"
	next_port
	RELAY_PORT=$PORT
	cat >"$d/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn $MAXCONN

defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s

frontend relay
    bind 127.0.0.1:$RELAY_PORT
    default_backend proxy

backend proxy
    server p 127.0.0.1:$1 send-proxy-v2
EOF
	start "$RUN_NAME-relay" taskset -c "$BENCH_LOAD_CPU" haproxy -db -f "$d/haproxy.cfg"
	RELAY_PID=$STARTED_PID
}

# ------------------------------------------------------------------ runs
# wrk arguments per row: connections, extra arguments, object.
row_conns() { case $1 in ka | pp2 | close | rules*) echo 50 ;; 1m) echo "$BENCH_1M_CONNS" ;; s003) echo "$BENCH_S003_CONNS" ;; esac; }
row_path() { case $1 in 1m | s003) echo /1m ;; h2-10k) echo /10k ;; *) echo /64 ;; esac; }
row_size() { case $1 in 1m | s003) echo $((1 << 20)) ;; h2-10k) echo 10240 ;; *) echo 64 ;; esac; }

# run_one MODE ROW PROXY REP: fresh proxy, check, measure, stop.
run_one() {
	local mode=$1 row=$2 proxy=$3 rep=$4 port
	local id=(-out "$RESULTS" -mode "$mode" -row "$row" -proxy "$proxy" -rep "$rep")
	SCHEME=http
	[[ $mode == tls ]] && SCHEME=https
	H2=0
	[[ $row == h2* ]] && H2=1
	# Every start gets its own directory (configuration, state, logs).
	RUN_NAME=$proxy-$mode-$row-$rep
	next_port
	port=$PORT
	FAIL_REASON=""
	PROXY_PID=""
	# spliced-auto, spliced-off: start_spliced with that splice mode.
	local starter=(start_${proxy%%-*} "$mode" "$row" "$port")
	[[ $proxy == *-* ]] && starter+=("${proxy#*-}")
	if ! "${starter[@]}"; then
		"$BT" fail "${id[@]}" -reason "${FAIL_REASON:-start failed}"
		log "    $proxy $mode/$row #$rep: n/a: ${FAIL_REASON:-start failed}"
		[[ -n $PROXY_PID ]] && stop_pid "$PROXY_PID"
		return 0
	fi
	RELAY_PID=""
	if [[ $row == pp2 ]]; then
		# The load goes through the relay, which adds the PROXY header.
		start_pp2_relay "$port"
		port=$RELAY_PORT
	fi
	if [[ $row == grpc ]]; then
		# One gRPC call through the proxy before the load (the others'
		# checks are GETs of the nginx origin, which this row does not use).
		if ! grpc_check "$port"; then
			local why="no gRPC call passed (Health/Check through 127.0.0.1:$port did not answer SERVING)"
			kill -0 "$PROXY_PID" 2>/dev/null || why="proxy exited at start: $(tail -c 400 "$TMP/$RUN_NAME.log" | tr '\n' ' ')"
			"$BT" fail "${id[@]}" -reason "$why"
			log "    $proxy $mode/$row #$rep: n/a: $why"
			stop_pid "$PROXY_PID"
			return 0
		fi
		# Unary calls: h2load POSTs the 5-byte message with gRPC's
		# headers, BENCH_H2_CLIENTS connections with BENCH_H2_STREAMS
		# calls in flight on each.
		wait_fg "$BT" measure "${id[@]}" -pid "$PROXY_PID" -cpu "$BENCH_PROXY_CPU" -conns "$BENCH_H2_CLIENTS" -- \
			taskset -c "$BENCH_LOAD_CPU" h2load -t1 -c "$BENCH_H2_CLIENTS" -m "$BENCH_H2_STREAMS" \
			-D "$BENCH_SECONDS" -d "$TMP/grpc-call.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
			"http://127.0.0.1:$port/grpc.health.v1.Health/Check" ||
			"$BT" fail "${id[@]}" -reason "benchtool measure failed"
		stop_pid "$PROXY_PID"
		return 0
	fi
	if ! wait_check "$port" "$(row_path "$row")" "$(row_size "$row")"; then
		local why="no traffic passed (GET $(row_path "$row") through 127.0.0.1:$port did not return 200 with $(row_size "$row") bytes)"
		kill -0 "$PROXY_PID" 2>/dev/null || why="proxy exited at start: $(tail -c 400 "$TMP/$RUN_NAME.log" | tr '\n' ' ')"
		"$BT" fail "${id[@]}" -reason "$why"
		log "    $proxy $mode/$row #$rep: n/a: $why"
		stop_pid "$PROXY_PID"
		if [[ -n $RELAY_PID ]]; then stop_pid "$RELAY_PID"; fi
		return 0
	fi
	if [[ $mode != tcp ]] && ! curl -sk $(curl_opts) -D - -o /dev/null --max-time 3 "$SCHEME://127.0.0.1:$port/64" |
		tr -d '\r' | grep -qi '^X-Bench-XFF: 127\.0\.0\.1'; then
		local why="http mode: no X-Forwarded-For reached the origin (tunnelling instead of proxying HTTP?)"
		"$BT" fail "${id[@]}" -reason "$why"
		log "    $proxy $mode/$row #$rep: n/a: $why"
		stop_pid "$PROXY_PID"
		if [[ -n $RELAY_PID ]]; then stop_pid "$RELAY_PID"; fi
		return 0
	fi
	if [[ $row == h2-idle ]]; then
		wait_fg "$BT" idle "${id[@]}" -h2 -pid "$PROXY_PID" -addr "127.0.0.1:$port" -n "$BENCH_IDLE_CONNS" -timeout 90s ||
			"$BT" fail "${id[@]}" -reason "benchtool idle failed"
	elif [[ $row == h2 || $row == h2-10k ]]; then
		# h2load: BENCH_H2_CLIENTS connections, BENCH_H2_STREAMS streams
		# in flight on each, one thread on the load CPU, for BENCH_SECONDS.
		wait_fg "$BT" measure "${id[@]}" -pid "$PROXY_PID" -cpu "$BENCH_PROXY_CPU" -conns "$BENCH_H2_CLIENTS" -- \
			taskset -c "$BENCH_LOAD_CPU" h2load -t1 -c "$BENCH_H2_CLIENTS" -m "$BENCH_H2_STREAMS" \
			-D "$BENCH_SECONDS" "http://127.0.0.1:$port$(row_path "$row")" ||
			"$BT" fail "${id[@]}" -reason "benchtool measure failed"
	elif [[ $row == idle ]]; then
		# fds the proxy needs per idle connection: client and server
		# sockets; the baseline's io.Copy also holds a splice pipe (two
		# fds) per direction for as long as the connection lives.
		local per=2 n=$BENCH_IDLE_CONNS
		[[ $proxy == baseline ]] && per=6
		if ((per * n + 200 > nofile)); then
			n=$(((nofile - 200) / per))
			log "    $proxy: $per fds per connection, fd limit $nofile: $n idle connections"
		fi
		local tlsflag=()
		[[ $mode == tls ]] && tlsflag=(-tls)
		# spliced's own count of what an idle http connection holds,
		# printed under the table (GET /api/v1/memory).
		[[ $mode == http && $proxy == spliced ]] && tlsflag=(-admin "127.0.0.1:$ADMIN_PORT")
		wait_fg "$BT" idle "${id[@]}" "${tlsflag[@]}" -pid "$PROXY_PID" -addr "127.0.0.1:$port" -n "$n" -timeout 90s ||
			"$BT" fail "${id[@]}" -reason "benchtool idle failed"
	elif [[ $row == hs-* || $row == resume ]]; then
		local resume=()
		[[ $row == resume ]] && resume=(-resume)
		wait_fg "$BT" measure "${id[@]}" -pid "$PROXY_PID" -cpu "$BENCH_PROXY_CPU" -conns "$BENCH_HS_CONNS" -- \
			taskset -c "$BENCH_LOAD_CPU" "$BT" handshake -addr "127.0.0.1:$port" -conns "$BENCH_HS_CONNS" \
			-duration "${BENCH_SECONDS}s" "${resume[@]}" ||
			"$BT" fail "${id[@]}" -reason "benchtool measure failed"
	elif [[ $row == first ]]; then
		# One client at a time, Nagle on: the latency of its first
		# request after the handshake, not a rate.
		wait_fg "$BT" measure "${id[@]}" -pid "$PROXY_PID" -cpu "$BENCH_PROXY_CPU" -conns 1 -- \
			taskset -c "$BENCH_LOAD_CPU" "$BT" handshake -addr "127.0.0.1:$port" -conns 1 -nagle \
			-duration "${BENCH_SECONDS}s" ||
			"$BT" fail "${id[@]}" -reason "benchtool measure failed"
	elif [[ $row == flood ]]; then
		wait_fg taskset -c "$BENCH_LOAD_CPU" "$BT" flood "${id[@]}" -pid "$PROXY_PID" -cpu "$BENCH_PROXY_CPU" \
			-addr "127.0.0.1:$port" -probes 4 -flood "$BENCH_HS_CONNS" -duration "${BENCH_SECONDS}s" ||
			"$BT" fail "${id[@]}" -reason "benchtool flood failed"
	else
		local extra=()
		[[ $row == close || $row == s003 ]] && extra=(-H "Connection: close")
		# s003: each of thousands of connections moves 1 MiB at a share
		# of the throughput: a short run completes too few of them.
		local si0 secs=$BENCH_SECONDS
		if [[ $row == s003 ]] && ((secs < 15)); then secs=15; fi
		si0=$(softirq_ticks)
		wait_fg "$BT" measure "${id[@]}" -pid "$PROXY_PID" -cpu "$BENCH_PROXY_CPU" -conns "$(row_conns "$row")" -- \
			taskset -c "$BENCH_LOAD_CPU" wrk -t1 -c "$(row_conns "$row")" -d "${secs}s" \
			--timeout "$( [[ $row == s003 ]] && echo 60s || echo 5s)" -s "$ROOT/bench/wrk-report.lua" "${extra[@]}" \
			"$SCHEME://127.0.0.1:$port$(row_path "$row")" ||
			"$BT" fail "${id[@]}" -reason "benchtool measure failed"
		if [[ $row == s003 ]]; then
			log "    $proxy $mode/$row #$rep: softirq time per CPU during the run: $(softirq_report "$si0" "$(softirq_ticks)")"
		fi
	fi
	stop_pid "$PROXY_PID"
	if [[ -n $RELAY_PID ]]; then stop_pid "$RELAY_PID"; fi
}

# ------------------------------------------------------------------ main
{
	echo "started=$STAMP"
	echo "host=$(uname -srm)"
	echo "cpus=$ncpu"
	echo "cpu_model=$(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)"
	echo "proxy_cpu=$BENCH_PROXY_CPU"
	echo "load_cpu=$BENCH_LOAD_CPU"
	echo "seconds=$BENCH_SECONDS"
	echo "repeat=$BENCH_REPEAT"
	echo "modes=$BENCH_MODES"
	echo "rows=$BENCH_ROWS"
	echo "idle_conns=$BENCH_IDLE_CONNS"
	echo "haproxy_splice=$HAPROXY_SPLICE"
	echo "haproxy=$(haproxy -v | head -1)"
	echo "nginx=$(nginx -v 2>&1)"
	echo "wrk=$(wrk -v 2>&1 | head -1)"
	echo "h2load=$(h2load --version 2>&1 | head -1)"
	echo "openssl=$(openssl version 2>/dev/null || echo missing)"
	echo "go=$("$GO" version)"
	echo "spliced_commit=$(git describe --always --dirty 2>/dev/null || echo unknown)"
	echo "spliced=$("$SPLICED_BIN" version 2>/dev/null | head -1 || echo missing)"
} >"$TMP/meta.txt"

read -r load1 _ </proc/loadavg
echo "loadavg_at_start=$load1" >>"$TMP/meta.txt"
if awk -v l="$load1" 'BEGIN { exit !(l > 1.0) }'; then
	log "bench: WARNING: load average $load1 before starting: other work is running;"
	log "bench: figures are only good for checking the script (see 'others' on the proxy's CPU)"
fi

# dual_cert_check: issue 27 asks that a bind holding an ECDSA and an RSA
# certificate serve ECDSA to every client that offers it (the cheaper
# handshake: see hs-ecdsa and hs-rsa) and RSA only to a client that offers
# nothing else. spliced with both certificates on one bind, three
# handshakes by openssl s_client: TLS 1.3 with its default signature
# algorithms, TLS 1.2 with its default ciphers, and TLS 1.3 offering RSA
# signatures only; the key size of the certificate served names it (256
# bits: ECDSA P-256, 2048: RSA). One line in the log and in meta.txt.
dual_cert_check() {
	local port out got=() args
	RUN_NAME=spliced-dual-cert
	next_port
	port=$PORT
	FAIL_REASON=""
	if ! start_spliced tls hs-ecdsa "$port" ||
		! api "$ADMIN_PORT" POST /api/v1/certificates "$(jq -n --rawfile cert "$CERTS/rsa.crt" --rawfile key "$CERTS/rsa.key" \
			'{name:"bench-rsa",cert_pem:$cert,key_pem:$key}')" ||
		! api "$ADMIN_PORT" PATCH /api/v1/frontends/bench "{\"binds\":[{\"name\":\"b1\",\"address\":\"127.0.0.1\",\"port\":$port,
			\"tls\":{\"certificates\":[\"bench\",\"bench-rsa\"]}}]}"; then
		log "bench: tls: dual-certificate check not run: $FAIL_REASON"
		[[ -n $PROXY_PID ]] && stop_pid "$PROXY_PID"
		return 0
	fi
	for args in "-tls1_3" "-tls1_2" "-tls1_3 -sigalgs rsa_pss_rsae_sha256:rsa_pkcs1_sha256"; do
		# shellcheck disable=SC2086 # args are words
		out=$(timeout 10 openssl s_client -connect "127.0.0.1:$port" $args </dev/null 2>/dev/null |
			sed -n 's/^Server public key is \([0-9]*\) bit.*/\1/p')
		case $out in 256) got+=(ECDSA) ;; 2048) got+=(RSA) ;; *) got+=("none(${out:-no handshake})") ;; esac
	done
	stop_pid "$PROXY_PID"
	local verdict="ok"
	[[ ${got[*]} == "ECDSA ECDSA RSA" ]] || verdict="NOT AS DESIGNED"
	log "bench: tls: one bind with an ECDSA and an RSA certificate served TLS 1.3 default: ${got[0]}, TLS 1.2 default: ${got[1]}, TLS 1.3 RSA signatures only: ${got[2]} ($verdict)"
	echo "dual_cert=${got[*]} $verdict" >>"$TMP/meta.txt"
}
if [[ " $BENCH_MODES " == *" tls "* && " $BENCH_PROXIES " == *" spliced "* ]]; then
	dual_cert_check
fi
log "bench: ${BENCH_SECONDS}s per run, ${BENCH_REPEAT} repeat(s), modes: $BENCH_MODES, rows: $BENCH_ROWS"
log "bench: proxies on CPU $BENCH_PROXY_CPU (one thread), wrk -t1 and origin on CPU $BENCH_LOAD_CPU"
for ((rep = 1; rep <= BENCH_REPEAT; rep++)); do
	for mode in $BENCH_MODES; do
		[[ $mode == cluster ]] && continue # its own tool, below
		for row in $BENCH_ROWS; do
			row_applies "$mode" "$row" || continue
			log "bench: [$rep/$BENCH_REPEAT] $mode/$row"
			for proxy in $(candidates "$mode" "$row"); do
				[[ " $BENCH_PROXIES " == *" ${proxy%%-*} "* ]] || continue
				kill -0 "$ORIGIN_PID" 2>/dev/null || die "origin nginx died"
				run_one "$mode" "$row" "$proxy" "$rep"
			done
		done
	done
done

OUT_JSON=$BENCH_OUT/$STAMP.json
"$BT" report -in "$RESULTS" -meta "$TMP/meta.txt" -repeat "$BENCH_REPEAT" -out "$OUT_JSON"
log ""
log "bench: raw numbers in ${OUT_JSON#"$ROOT"/}"

# apply: runtime server changes through the admin API with many servers
# configured, live connections of other servers kept (bench/README.md).
if [[ " $BENCH_ROWS " == *" apply "* ]]; then
	log "bench: apply: server changes with 1 000 and 10 000 servers"
	"$GO" build -o "$TMP/bin/applybench" ./bench/applybench
	rc=0
	wait_fg "$TMP/bin/applybench" -bin "$SPLICED_BIN" -servers 1000,10000 -reps 20 >"$TMP/apply.txt" || rc=$?
	cp "$TMP/apply.txt" "$BENCH_OUT/$STAMP-apply.txt"
	cat "$TMP/apply.txt"
	((rc == 0)) || log "bench: apply: FAILED (exit $rc; a connection dropped or a change was refused)"
fi

# seed001: seed 001's accept distributions (p2c-rr, p2c, round-robin,
# least-conn) with 2 and 4 loops and a few long-lived h2load clients:
# completion time and per-loop spread (bench/README.md). spliced is not
# pinned (its loops need both CPUs), nor is h2load; the origin stays on
# BENCH_LOAD_CPU.
if [[ " $BENCH_ROWS " == *" seed001 "* ]]; then
	log "bench: seed001: accept distributions, h2load with 6, 10, 14 long-lived clients, 2 and 4 loops"
	rc=0
	wait_fg "$BT" seed001 -bin "$SPLICED_BIN" -origin "127.0.0.1:$ORIGIN_PORT" -dir "$TMP/seed001" \
		-repeat "${BENCH_SEED001_REPEAT:-3}" -reqs "${BENCH_SEED001_REQS:-5000}" >"$TMP/seed001.txt" || rc=$?
	cp "$TMP/seed001.txt" "$BENCH_OUT/$STAMP-seed001.txt"
	cat "$TMP/seed001.txt"
	((rc == 0)) || log "bench: seed001: FAILED (exit $rc)"
fi

# sched: seed 000's table (bench/README.md): spliced with one loop pinned to
# BENCH_PROXY_CPU, the load on BENCH_LOAD_CPU, each scenario with the new
# (default) and the old class shares.
if [[ " $BENCH_ROWS " == *" sched "* ]]; then
	log "bench: sched: seed 000's scenarios, class shares 33/50/17 and 17/33/50"
	rc=0
	wait_fg "$BT" sched -bin "$SPLICED_BIN" -origin "127.0.0.1:$ORIGIN_PORT" -dir "$TMP/sched" \
		-seconds "$BENCH_SECONDS" -repeat "$BENCH_REPEAT" -cpu "$BENCH_PROXY_CPU" -load-cpus "$BENCH_LOAD_CPU" \
		-wrk-script "$ROOT/bench/wrk-report.lua" ${BENCH_SCHED_SCENARIOS:+-scenarios "$BENCH_SCHED_SCENARIOS"} >"$TMP/sched.txt" || rc=$?
	cp "$TMP/sched.txt" "$BENCH_OUT/$STAMP-sched.txt"
	cat "$TMP/sched.txt"
	((rc == 0)) || log "bench: sched: FAILED (exit $rc)"
fi

# cluster: a write on one of three spliced nodes sharing an embedded etcd,
# until all three run it, against a push + reload of three HAProxy
# (bench/README.md, bench/clusterbench).
if [[ " $BENCH_MODES " == *" cluster "* && " $BENCH_ROWS " == *" cluster "* ]]; then
	log "bench: cluster: 3 nodes, $BENCH_CLUSTER_WRITES writes with $BENCH_CLUSTER_SERVERS servers, against HAProxy push + reload"
	"$GO" build -o "$TMP/bin/clusterbench" ./bench/clusterbench
	rc=0
	wait_fg "$TMP/bin/clusterbench" -bin "$SPLICED_BIN" -servers "$BENCH_CLUSTER_SERVERS" \
		-writes "$BENCH_CLUSTER_WRITES" -reloads "$BENCH_CLUSTER_RELOADS" >"$TMP/cluster.txt" || rc=$?
	cp "$TMP/cluster.txt" "$BENCH_OUT/$STAMP-cluster.txt"
	cat "$TMP/cluster.txt"
	((rc == 0)) || log "bench: cluster: FAILED (exit $rc; a node did not apply, a write or a reload failed)"
fi
