#!/usr/bin/env bash
# Package test, run by `make test` (scripts/test.sh) and CI, as root.
#
# 1. The git describe -> package version mapping (packaging/version.sh), and
#    the order dpkg and rpm give the results.
# 2. Builds the .deb and .rpm twice: the version of this checkout, then a
#    higher one for the upgrade. Checks what dpkg-deb --info/--contents,
#    rpm -qip/-qlp/--scripts/--requires show, and runs lintian (fails on E:;
#    the one override is in packaging/lintian-overrides, with its reason).
# 3. As root only: dpkg -i, then starts the installed binary the way
#    spliced.service's ExecStart does (user spliced, the unit's capability
#    sets, NoNewPrivileges, UMask, SPLICED_OPTS from /etc/default/spliced,
#    with --admin-addr moved to a free port), creates a backend and a frontend
#    through the API, restarts the process and finds the frontend again,
#    upgrades with dpkg -i (state and a local edit of /etc/default/spliced
#    kept), removes (state kept) and purges (user, files and state gone).
#    Without root this part is skipped with a message, exit status 0.
# Everything it starts or installs is stopped and purged on exit, pass or fail.
set -euo pipefail
cd "$(dirname "$0")/.."
. packaging/version.sh
GO=${GO:-go}

step() { printf -- '--- packaging: %s\n' "$*"; }
ok() { printf '    ok: %s\n' "$*"; }
fail() {
	echo "packaging/test.sh: FAIL: $*" >&2
	exit 1
}
# expect_eq WHAT GOT WANT
expect_eq() {
	[[ $2 == "$3" ]] || fail "$1: got '$2', want '$3'"
	ok "$1 = $3"
}
# expect_in WHAT HAYSTACK NEEDLE (fixed string)
expect_in() {
	grep -qF -- "$3" <<<"$2" || fail "$1: '$3' not found in:"$'\n'"$2"
	ok "$1 has '$3'"
}

for cmd in dpkg-deb rpm lintian curl perl setpriv; do
	command -v "$cmd" >/dev/null || fail "$cmd is missing (scripts/test-deps.sh installs the test dependencies)"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/spliced-pkgtest.XXXXXX")
chmod 0755 "$work"
pid=""          # the spliced process this test started
installed=0     # 1 once this test ran dpkg -i: cleanup purges
log="$work/spliced.log"

stop_spliced() {
	[[ -n $pid ]] || return 0
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		local deadline=$((SECONDS + 15))
		while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
		if kill -0 "$pid" 2>/dev/null; then
			echo "    spliced (pid $pid) ignored SIGTERM for 15 s: SIGKILL" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	local rc=0
	wait "$pid" 2>/dev/null || rc=$?
	pid=""
	return "$rc"
}

cleanup() {
	local rc=$?
	set +e
	stop_spliced >/dev/null 2>&1
	if ((installed)); then
		dpkg --purge spliced >/dev/null 2>&1 || echo "cleanup: dpkg --purge spliced failed" >&2
	fi
	if ((rc != 0)) && [[ -s $log ]]; then
		echo "--- last lines of the spliced log:" >&2
		tail -n 30 "$log" >&2
	fi
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_port: a port the kernel just handed out on 127.0.0.1 (then released).
free_port() {
	perl -MIO::Socket::INET -e \
		'print IO::Socket::INET->new(Listen => 1, LocalAddr => "127.0.0.1:0", ReuseAddr => 1)->sockport' ||
		fail "no free port"
}

# free_low_port LIMIT: a free port in [600, LIMIT) on 127.0.0.1 (root may bind there).
free_low_port() {
	perl -MIO::Socket::INET -e '
		my $n = $ARGV[0] - 600;
		my $start = int(rand($n));
		for my $i (0 .. $n - 1) {
			my $p = 600 + ($start + $i) % $n;
			if (IO::Socket::INET->new(Listen => 1, LocalAddr => "127.0.0.1:$p", ReuseAddr => 1)) { print $p; exit 0 }
		}
		exit 1' "$1" || fail "no free port below $1"
}

sha256() { sha256sum <"$1" | cut -d' ' -f1; }

# vercmp A B: -1, 0 or 1 from rpm's own comparison.
rpm_vercmp() { rpm --eval "%{lua: print(rpm.vercmp('$1', '$2'))}"; }

###############################################################################
step "version mapping (packaging/version.sh)"
head_sha=$(git rev-parse --short HEAD)
head_count=$(git rev-list --count HEAD)
while read -r describe want; do
	got=$(spliced_pkg_version "$describe" .) || fail "spliced_pkg_version $describe failed"
	expect_eq "version of $describe" "$got" "$want"
done <<EOF
v1.2.3 1.2.3
1.2.3 1.2.3
v1.2.3-rc1 1.2.3~rc1
v1.2.3-4-gabc1234 1.2.3+4.gabc1234
v1.2.3-rc1-4-gabc1234 1.2.3~rc1+4.gabc1234
v1.2.3-4-gabc1234-dirty 1.2.3+4.gabc1234.dirty
v1.2.3-dirty 1.2.3+dirty
0.0.0-dev 0.0.0~dev
deadbeef0 0.0.0~gdeadbeef0
$head_sha 0.0.0~git$head_count.g$head_sha
$head_sha-dirty 0.0.0~git$head_count.g$head_sha+dirty
EOF
# A commit id of digits only (git describe --always, no tag: one commit in
# 27) is a commit, not a version: a repository of empty commits until one's
# id starts with five digits (1 in 10.5; 200 tries).
digits_git=$(mktemp -d)
git -C "$digits_git" init -q
for ((i = 1; i <= 200; i++)); do
	git -C "$digits_git" -c user.name=t -c user.email=t@example.invalid commit -q --allow-empty -m "$i"
	digits_id=$(git -C "$digits_git" rev-parse HEAD)
	[[ ${digits_id:0:5} =~ ^[0-9]+$ ]] && break
done
((i <= 200)) || fail "no commit id starting with five digits in 200 commits"
expect_eq "version of the all-digit commit id ${digits_id:0:5}" "$(spliced_pkg_version "${digits_id:0:5}" "$digits_git")" "0.0.0~git$i.g${digits_id:0:5}"
expect_eq "version of 202612060000 (no commit of that id)" "$(spliced_pkg_version 202612060000 "$digits_git")" "202612060000"
rm -rf "$digits_git"
for bad in 'v1.2.3 beta' 'release-1' 'v1.2-3-x'; do
	if spliced_pkg_version "$bad" . >/dev/null 2>&1; then fail "'$bad' was accepted as a version"; fi
	ok "'$bad' refused"
done
# Each version must sort after the one before, for dpkg and for rpm.
prev=""
for v in 0.0.0~git5.gaaa 0.0.0~git31.gbbb 0.1.0~rc1 0.1.0~rc1+2.gccc 0.1.0 0.1.0+1.gddd \
	0.1.0+1.gddd.dirty 0.1.0+12.geee 0.1.1; do
	if [[ -n $prev ]]; then
		dpkg --compare-versions "$prev" lt "$v" || fail "dpkg orders $prev >= $v"
		[[ $(rpm_vercmp "$prev" "$v") == -1 ]] || fail "rpm orders $prev >= $v"
	fi
	prev=$v
done
ok "dpkg and rpm both order 0.0.0~git5.gaaa < ... < 0.1.0 < 0.1.0+1.gddd < ... < 0.1.1"

###############################################################################
step "build the packages twice (this version, then a higher one)"
raw1=$(git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev) # as the Makefile
v1=$(spliced_pkg_version "$raw1" .)
v2="$v1.1"
dpkg --compare-versions "$v2" gt "$v1" || fail "dpkg: $v2 is not above $v1"
[[ $(rpm_vercmp "$v2" "$v1") == 1 ]] || fail "rpm: $v2 is not above $v1"
goarch=$($GO env GOARCH)
debarch=$(spliced_deb_arch "$goarch")
rpmarch=$(spliced_rpm_arch "$goarch")
VERSION=$raw1 DIST_DIR="$work/dist1" ./packaging/build.sh || fail "build.sh ($v1) failed"
VERSION=$raw1 PKG_VERSION=$v2 DIST_DIR="$work/dist2" ./packaging/build.sh || fail "build.sh ($v2) failed"
deb1="$work/dist1/spliced_${v1}_${debarch}.deb"
rpm1="$work/dist1/spliced-${v1}.${rpmarch}.rpm"
deb2="$work/dist2/spliced_${v2}_${debarch}.deb"
rpm2="$work/dist2/spliced-${v2}.${rpmarch}.rpm"
for f in "$deb1" "$rpm1" "$deb2" "$rpm2"; do
	[[ -s $f ]] || fail "build.sh did not write $f"
done
ok "built ${deb1##*/} ${rpm1##*/} ${deb2##*/} ${rpm2##*/}"

###############################################################################
step "deb: dpkg-deb --info"
dpkg-deb --info "$deb1" | sed 's/^/    /'
for f in Package:spliced Version:"$v1" Architecture:"$debarch" Section:net Priority:optional; do
	expect_eq "control ${f%%:*}" "$(dpkg-deb --field "$deb1" "${f%%:*}")" "${f#*:}"
done
expect_in "control Depends" "$(dpkg-deb --field "$deb1" Depends)" adduser
expect_eq "deb2 Version" "$(dpkg-deb --field "$deb2" Version)" "$v2"
mkdir "$work/ctl1"
dpkg-deb --control "$deb1" "$work/ctl1"
expect_eq "control members" "$(cd "$work/ctl1" && ls | tr '\n' ' ')" "conffiles control md5sums postinst postrm prerm "
expect_eq "conffiles" "$(cat "$work/ctl1/conffiles")" /etc/default/spliced
for s in postinst postrm prerm; do
	sh -n "$work/ctl1/$s" || fail "$s: shell syntax"
	cmp -s "$work/ctl1/$s" "packaging/deb/$s" || fail "$s in the .deb differs from packaging/deb/$s"
done
ok "maintainer scripts are packaging/deb/{postinst,postrm,prerm}, valid sh"
expect_in "postinst" "$(cat "$work/ctl1/postinst")" "adduser --system"
expect_in "postinst" "$(cat "$work/ctl1/postinst")" 'chmod 0700 "$STATE_DIR"'
expect_in "postrm" "$(cat "$work/ctl1/postrm")" "rm -rf /var/lib/spliced"
expect_in "postrm" "$(cat "$work/ctl1/postrm")" "deluser --system"

step "deb: dpkg-deb --contents"
dpkg-deb --contents "$deb1" | sed 's/^/    /'
want_deb="./etc/default/spliced
./lib/systemd/system/spliced.service
./usr/bin/spliced
./usr/share/doc/spliced/changelog.gz
./usr/share/doc/spliced/copyright
./usr/share/doc/spliced/examples/irq-pinning.conf
./usr/share/lintian/overrides/spliced
./usr/share/man/man8/spliced.8.gz"
expect_eq "regular files in the .deb" "$(dpkg-deb --contents "$deb1" | awk '$1 ~ /^-/ {print $6}' | sort)" "$want_deb"
expect_eq "owners in the .deb" "$(dpkg-deb --contents "$deb1" | awk '{print $2}' | sort -u)" root/root
expect_eq "mode of /usr/bin/spliced" "$(dpkg-deb --contents "$deb1" | awk '$6 == "./usr/bin/spliced" {print $1}')" -rwxr-xr-x
mkdir "$work/x1"
dpkg-deb --extract "$deb1" "$work/x1"
expect_eq "spliced version (from the .deb)" "$("$work/x1/usr/bin/spliced" version)" "spliced $v1"
cmp -s "$work/x1/lib/systemd/system/spliced.service" packaging/spliced.service || fail "unit differs"
cmp -s "$work/x1/etc/default/spliced" packaging/default || fail "/etc/default/spliced differs"
expect_in "/etc/default/spliced" "$(cat "$work/x1/etc/default/spliced")" \
	'SPLICED_OPTS="--admin-addr 127.0.0.1:9900 --state-dir /var/lib/spliced --log-format json"'
expect_in "unit" "$(cat "$work/x1/lib/systemd/system/spliced.service")" 'ExecStart=/usr/bin/spliced $SPLICED_OPTS'
zcat "$work/x1/usr/share/man/man8/spliced.8.gz" | cmp -s - packaging/spliced.8 || fail "man page differs"
for flag in --admin-addr --state-dir --config --log-format version validate "token add" "token list" "token revoke"; do
	grep -qF -- "$(sed 's/-/\\-/g' <<<"$flag")" packaging/spliced.8 || fail "man page does not document $flag"
done
ok "man page documents every flag and subcommand"
if command -v man >/dev/null; then
	warn=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$work/x1/usr/share/man/man8/spliced.8.gz" 2>&1 >/dev/null || true)
	[[ -z $warn ]] || fail "man --warnings: $warn"
	ok "man --warnings: none"
fi
expect_in "copyright" "$(cat "$work/x1/usr/share/doc/spliced/copyright")" "License: Apache-2.0"
expect_in "copyright" "$(cat "$work/x1/usr/share/doc/spliced/copyright")" "Files: vendor/github.com/go-chi/chi/v5/*"

step "lintian"
lint_rc=0
lint=$(lintian --fail-on error --display-info "$deb1" 2>&1) || lint_rc=$?
printf '%s\n' "${lint:-(no output)}" | grep -v 'running with root privileges' | sed 's/^/    /'
((lint_rc == 0)) || fail "lintian failed (exit $lint_rc)"
if grep -q '^E:' <<<"$lint"; then fail "lintian reports errors"; fi
ok "lintian: no errors (override: statically-linked-binary, see packaging/lintian-overrides)"

###############################################################################
step "rpm: rpm -qip / -qlp / --scripts / --requires"
rpm -qip "$rpm1" 2>/dev/null | sed 's/^/    /'
expect_eq "rpm header" "$(rpm -qp --qf '%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{LICENSE}' "$rpm1")" \
	"spliced $v1 1 $rpmarch Apache-2.0"
expect_eq "rpm2 version" "$(rpm -qp --qf '%{VERSION}' "$rpm2")" "$v2"
want_rpm="/etc/default/spliced
/usr/bin/spliced
/usr/lib/systemd/system/spliced.service
/usr/share/doc/spliced/copyright
/usr/share/doc/spliced/examples/irq-pinning.conf
/usr/share/licenses/spliced/LICENSE
/usr/share/man/man8/spliced.8.gz"
expect_eq "rpm -qlp" "$(rpm -qlp "$rpm1" | sort)" "$want_rpm"
expect_eq "config files and flags" "$(rpm -qp --qf '[%{FILENAMES} %{FILEFLAGS:fflags}\n]' "$rpm1" | awk '$2 ~ /c/')" \
	"/etc/default/spliced cn"
expect_eq "licence files" "$(rpm -qp --licensefiles "$rpm1")" /usr/share/licenses/spliced/LICENSE
expect_in "rpm requires" "$(rpm -qp --requires "$rpm1")" shadow-utils
scripts=$(rpm -qp --scripts "$rpm1")
printf '%s\n' "$scripts" | grep 'scriptlet' | sed 's/^/    /'
for s in "preinstall scriptlet" "postinstall scriptlet" "preuninstall scriptlet" "postuninstall scriptlet" \
	"useradd --system" "chmod 0700 /var/lib/spliced" "disable --now spliced.service" "try-restart spliced.service"; do
	expect_in "rpm scripts" "$scripts" "$s"
done
for s in packaging/rpm/*; do sh -n "$s" || fail "$s: shell syntax"; done
# The rpm carries the very binary checked above (same build, same bytes).
rpm_sum=$(rpm -qp --dump "$rpm1" | awk '$1 == "/usr/bin/spliced" {print $4}')
expect_eq "sha256 of /usr/bin/spliced in the rpm" "$rpm_sum" "$(sha256sum <"$work/x1/usr/bin/spliced" | cut -d' ' -f1)"

###############################################################################
if [[ $(id -u) != 0 ]]; then
	step "SKIPPED: install, restart, upgrade and purge need root (dpkg -i); run make test as root, as CI does"
	exit 0
fi
command -v dpkg >/dev/null || fail "dpkg missing: the install test needs a Debian-like machine"

step "install $v1 with dpkg -i"
status=$(dpkg-query -W -f='${db:Status-Status}' spliced 2>/dev/null || true)
[[ -z $status || $status == not-installed ]] ||
	fail "spliced is already on this machine (status $status): this test would purge it; remove it first"
! getent passwd spliced >/dev/null || fail "user spliced exists without the package: this test would delete it"
[[ ! -e /var/lib/spliced ]] || fail "/var/lib/spliced exists without the package: this test would delete it"
installed=1
dpkg -i "$deb1" </dev/null | sed 's/^/    /'
expect_eq "dpkg status" "$(dpkg-query -W -f='${Status} ${Version}' spliced)" "install ok installed $v1"
IFS=: read -r _ _ uid _ _ home shell <<<"$(getent passwd spliced)"
((uid < 1000)) || fail "spliced uid $uid is not a system uid"
ok "user spliced: system uid $uid"
expect_eq "home of spliced" "$home" /var/lib/spliced
expect_eq "shell of spliced" "$shell" /usr/sbin/nologin
getent group spliced >/dev/null || fail "group spliced missing"
expect_eq "/var/lib/spliced" "$(stat -c '%U:%G %a' /var/lib/spliced)" "spliced:spliced 700"
expect_eq "installed spliced version" "$(/usr/bin/spliced version)" "spliced $v1"
if command -v deb-systemd-helper >/dev/null; then
	[[ -L /etc/systemd/system/multi-user.target.wants/spliced.service ]] || fail "unit not enabled"
	ok "unit enabled (multi-user.target.wants)"
fi
if command -v systemd-analyze >/dev/null; then
	verify=$(systemd-analyze verify --man=no /lib/systemd/system/spliced.service 2>&1) ||
		fail "systemd-analyze verify: $verify"
	ok "systemd-analyze verify: unit valid"
fi

# start_spliced: what spliced.service does, without systemd: SPLICED_OPTS from
# EnvironmentFile=, User=/Group=, NoNewPrivileges=, AmbientCapabilities= and
# CapabilityBoundingSet=, UMask=, LimitNOFILE= (as far as the hard limit
# allows), a clean environment, cwd /. setpriv execs, so $! is spliced itself.
admin_port=""
start_spliced() {
	local opts
	# shellcheck disable=SC1091
	opts=$(. /etc/default/spliced && printf '%s' "$SPLICED_OPTS")
	[[ $opts == *"--admin-addr 127.0.0.1:9900"* ]] || fail "SPLICED_OPTS has no --admin-addr 127.0.0.1:9900: $opts"
	admin_port=$(free_port)
	opts=${opts/--admin-addr 127.0.0.1:9900/--admin-addr 127.0.0.1:$admin_port}
	echo "    start: setpriv (as spliced) /usr/bin/spliced $opts"
	(
		cd /
		umask 0027
		ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"
		# shellcheck disable=SC2086 # split like systemd splits $SPLICED_OPTS
		exec setpriv --reuid=spliced --regid=spliced --init-groups --no-new-privs \
			--inh-caps=-all,+net_bind_service --ambient-caps=+net_bind_service \
			--bounding-set=-all,+net_bind_service \
			env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin /usr/bin/spliced $opts
	) >>"$log" 2>&1 &
	pid=$!
	local deadline=$((SECONDS + 20))
	until curl -fsS -m 2 -o /dev/null "http://127.0.0.1:$admin_port/healthz" 2>/dev/null; do
		kill -0 "$pid" 2>/dev/null || fail "spliced exited before /healthz answered"
		((SECONDS < deadline)) || fail "/healthz did not answer within 20 s"
		sleep 0.1
	done
	expect_eq "user of the spliced process" "$(ps -o user= -p "$pid")" spliced
	ok "/healthz answers on 127.0.0.1:$admin_port (pid $pid)"
}

# api METHOD PATH [BODY]: sets code and body.
code="" body=""
api() {
	local args=(-sS -m 10 -o "$work/body" -w '%{http_code}' -X "$1")
	[[ -n ${3:-} ]] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
	code=$(curl "${args[@]}" "http://127.0.0.1:$admin_port$2") || fail "curl $1 $2 failed"
	body=$(tr -d ' \t\n' <"$work/body") # compact, whatever the encoder's layout
}

step "start the installed spliced as ExecStart does"
start_spliced

step "create a backend and a frontend through the API"
server_port=$(free_port)
api POST /api/v1/backends "{\"name\":\"web\",\"mode\":\"http\",\"balance\":\"roundrobin\",
  \"servers\":[{\"name\":\"s1\",\"address\":\"127.0.0.1\",\"port\":$server_port,\"weight\":100}]}"
expect_eq "POST /api/v1/backends" "$code" 201
for attempt in 1 2 3; do
	fe_port=$(free_port)
	api POST /api/v1/frontends "{\"name\":\"public\",\"mode\":\"http\",\"default_backend\":\"web\",
  \"binds\":[{\"name\":\"b1\",\"address\":\"127.0.0.1\",\"port\":$fe_port}]}"
	[[ $code == 409 ]] || break # 409: the port was taken meanwhile; try another
done
[[ $code == 201 ]] || fail "POST /api/v1/frontends: $code $body"
ok "POST /api/v1/frontends = 201 (bind 127.0.0.1:$fe_port)"
api GET /api/v1/frontends/public
expect_eq "GET /api/v1/frontends/public" "$code" 200
expect_in "frontend" "$body" "\"port\":$fe_port"
[[ -f /var/lib/spliced/config.json ]] || fail "no /var/lib/spliced/config.json"
expect_eq "owner of config.json" "$(stat -c %U /var/lib/spliced/config.json)" spliced
binds_open=0
if (exec 3<>"/dev/tcp/127.0.0.1/$fe_port") 2>/dev/null; then
	binds_open=1
	ok "the frontend bind accepts connections"
fi
unpriv_start=$(cat /proc/sys/net/ipv4/ip_unprivileged_port_start 2>/dev/null || echo 1024)
if ((unpriv_start <= 600)); then
	echo "    note: net.ipv4.ip_unprivileged_port_start=$unpriv_start: any user may bind low ports here,"
	echo "    so the CAP_NET_BIND_SERVICE check proves nothing and is skipped"
elif ((binds_open)); then
	# The unit's AmbientCapabilities=CAP_NET_BIND_SERVICE at work: the
	# unprivileged user binds a port below 1024 (409 EACCES without it).
	low_port=$(free_low_port "$unpriv_start")
	api POST /api/v1/frontends "{\"name\":\"low\",\"mode\":\"http\",\"default_backend\":\"web\",
  \"binds\":[{\"name\":\"b1\",\"address\":\"127.0.0.1\",\"port\":$low_port}]}"
	[[ $code == 201 ]] || fail "bind on privileged port $low_port as user spliced: $code $body"
	(exec 3<>"/dev/tcp/127.0.0.1/$low_port") 2>/dev/null || fail "privileged bind $low_port accepts no connection"
	ok "user spliced binds 127.0.0.1:$low_port (CAP_NET_BIND_SERVICE)"
	api DELETE /api/v1/frontends/low
	expect_eq "DELETE /api/v1/frontends/low" "$code" 204
else
	echo "    note: the frontend bind accepts no connection: this build's data plane does not open"
	echo "    binds, so the privileged-port (CAP_NET_BIND_SERVICE) check is skipped"
fi

step "restart the process: the frontend persists"
stop_spliced || fail "spliced exited with status $? on SIGTERM"
ok "stopped cleanly on SIGTERM"
start_spliced
api GET /api/v1/frontends/public
expect_eq "GET /api/v1/frontends/public after restart" "$code" 200
expect_in "frontend after restart" "$body" "\"port\":$fe_port"

step "upgrade to $v2 with dpkg -i (running process, local edit of /etc/default/spliced)"
sed -i 's/--log-format json/--log-format text/' /etc/default/spliced
echo "# local edit by packaging/test.sh" >>/etc/default/spliced
edited=$(sha256 /etc/default/spliced)
state_before=$(sha256 /var/lib/spliced/config.json)
dpkg -i "$deb2" </dev/null | sed 's/^/    /'
expect_eq "dpkg status" "$(dpkg-query -W -f='${Status} ${Version}' spliced)" "install ok installed $v2"
expect_eq "installed spliced version" "$(/usr/bin/spliced version)" "spliced $v2"
expect_eq "/etc/default/spliced after upgrade (local edit kept)" "$(sha256 /etc/default/spliced)" "$edited"
for f in /etc/default/spliced.dpkg-dist /etc/default/spliced.dpkg-new /etc/default/spliced.dpkg-old; do
	[[ ! -e $f ]] || fail "$f appeared: dpkg treated the conffile as changed"
done
expect_eq "config.json after upgrade" "$(sha256 /var/lib/spliced/config.json)" "$state_before"
expect_eq "uid of spliced after upgrade" "$(id -u spliced)" "$uid"
expect_eq "/var/lib/spliced after upgrade" "$(stat -c '%U:%G %a' /var/lib/spliced)" "spliced:spliced 700"
# postinst restarts the service on upgrade under systemd; do the same.
stop_spliced || fail "spliced exited with status $? on SIGTERM"
start_spliced
api GET /api/v1/frontends/public
expect_eq "GET /api/v1/frontends/public after upgrade" "$code" 200
api GET /api/v1/info
expect_eq "GET /api/v1/info" "$code" 200
expect_in "info after upgrade" "$body" "\"version\":\"$v2\""
grep -q 'level=INFO' "$log" || fail "the edited --log-format text was not used"
ok "the upgraded binary runs with the edited flags (text logs)"
stop_spliced || fail "spliced exited with status $? on SIGTERM"

step "remove (dpkg -r): state, conffile and user stay"
dpkg -r spliced </dev/null | sed 's/^/    /'
expect_eq "dpkg status" "$(dpkg-query -W -f='${Status}' spliced)" "deinstall ok config-files"
for f in /usr/bin/spliced /lib/systemd/system/spliced.service /usr/share/man/man8/spliced.8.gz; do
	[[ ! -e $f ]] || fail "$f still there after dpkg -r"
done
ok "program, unit and man page removed"
expect_eq "/etc/default/spliced after remove" "$(sha256 /etc/default/spliced)" "$edited"
expect_eq "config.json after remove" "$(sha256 /var/lib/spliced/config.json)" "$state_before"
getent passwd spliced >/dev/null || fail "user spliced gone after dpkg -r"
ok "user spliced kept"

step "purge (dpkg --purge): user, group, state and conffile gone"
dpkg --purge spliced </dev/null | sed 's/^/    /'
installed=0
status=$(dpkg-query -W -f='${db:Status-Status}' spliced 2>/dev/null || true)
[[ -z $status || $status == not-installed ]] || fail "dpkg status after purge: $status"
ok "package gone from the dpkg database"
! getent passwd spliced >/dev/null || fail "user spliced still exists"
! getent group spliced >/dev/null || fail "group spliced still exists"
ok "user and group spliced removed"
for f in /var/lib/spliced /etc/default/spliced /etc/systemd/system/multi-user.target.wants/spliced.service \
	/var/lib/systemd/deb-systemd-helper-enabled/spliced.service \
	/var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/spliced.service; do
	[[ ! -e $f && ! -L $f ]] || fail "$f still there after purge"
done
ok "/var/lib/spliced, /etc/default/spliced and the unit's enablement removed"
step "packages: all checks passed"
