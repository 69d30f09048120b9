# Sourced by build.sh and test.sh (bash). Turns `git describe --tags --always
# --dirty` output into a version that dpkg and rpm both accept and order the
# way the commits are ordered:
#
#   describe                package version          why
#   v1.2.3                  1.2.3                    a release
#   v1.2.3-rc1              1.2.3~rc1                "~" sorts before 1.2.3 (dpkg and rpm >= 4.10)
#   v1.2.3-4-gabc1234       1.2.3+4.gabc1234         commits after a tag sort after it, by count
#   v1.2.3-rc1-4-gabc1234   1.2.3~rc1+4.gabc1234
#   abc1234 (no tag yet)    0.0.0~git31.gabc1234     31 = commits up to abc1234, so untagged
#                                                    builds still upgrade in order, and any
#                                                    real 0.0.0 or later release supersedes them
#                                                    (an id of digits only, 1280912, too: it is
#                                                    a commit's, not a version, when git says so)
#   ...-dirty               ... then "+dirty" or ".dirty" (sorts after the clean build)
#   0.0.0-dev (no git)      0.0.0~dev
#
# The result uses only [0-9A-Za-z.+~] and starts with a digit: no "-", which
# would be read as the Debian revision or is forbidden in an rpm Version.
# The same string is injected into the binary, so `spliced version`,
# /api/v1/info, `dpkg -l` and `rpm -q` all show one version.

# spliced_pkg_version DESCRIBE [GIT_DIR_FOR_COUNT]
spliced_pkg_version() {
	local v=${1#v} dirty="" out="" n
	if [[ $v == *-dirty ]]; then
		dirty=1
		v=${v%-dirty}
	fi
	local num='[0-9]+(\.[0-9]+)*' pre='[0-9A-Za-z.]+'
	if [[ $v =~ ^($num)(-($pre))?-([0-9]+)-g([0-9a-f]+)$ ]]; then
		out=${BASH_REMATCH[1]}
		[[ -n ${BASH_REMATCH[4]} ]] && out+="~${BASH_REMATCH[4]}"
		out+="+${BASH_REMATCH[5]}.g${BASH_REMATCH[6]}"
	elif [[ $v =~ ^[0-9a-f]{4,40}$ ]] && { [[ ! $v =~ ^[0-9]+$ ]] || spliced_is_commit_id "$v" "$2"; }; then
		# An abbreviated commit id: no tag is reachable.
		if n=$(git ${2:+-C "$2"} rev-list --count "$v" 2>/dev/null) && [[ $n =~ ^[0-9]+$ ]]; then
			out="0.0.0~git$n.g$v"
		else
			out="0.0.0~g$v"
		fi
	elif [[ $v =~ ^($num)(-($pre))?$ ]]; then
		out=${BASH_REMATCH[1]}
		[[ -n ${BASH_REMATCH[4]} ]] && out+="~${BASH_REMATCH[4]}"
	else
		echo "spliced_pkg_version: cannot turn VERSION=$1 into a deb/rpm version;" \
			"tag releases as vX.Y.Z or set PKG_VERSION" >&2
		return 1
	fi
	if [[ -n $dirty ]]; then
		if [[ $out == *+* ]]; then out+=".dirty"; else out+="+dirty"; fi
	fi
	spliced_check_pkg_version "$out" || return 1
	printf '%s\n' "$out"
}

# spliced_is_commit_id ID [GIT_DIR]: ID, digits only, abbreviates a commit
# and names no tag. `git describe --always` prints such an id for about one
# commit in 27 (seven hex digits without a letter); read as a version,
# 1280912 would sort above every release, and a release would never
# upgrade that build.
spliced_is_commit_id() {
	! git ${2:+-C "$2"} rev-parse -q --verify "refs/tags/$1" >/dev/null 2>&1 &&
		git ${2:+-C "$2"} rev-parse -q --verify "$1^{commit}" >/dev/null 2>&1
}

# spliced_check_pkg_version V: accepts what dpkg (native version) and rpm
# (Version tag) both accept.
spliced_check_pkg_version() {
	if [[ ! $1 =~ ^[0-9][0-9A-Za-z.+~]*$ ]]; then
		echo "package version '$1' must start with a digit and use only [0-9A-Za-z.+~]" >&2
		return 1
	fi
}

# spliced_deb_arch GOARCH / spliced_rpm_arch GOARCH: the names nfpm writes
# into the packages, used for the file names.
spliced_deb_arch() {
	case $1 in
	amd64 | arm64 | s390x | riscv64) echo "$1" ;;
	386) echo i386 ;;
	ppc64le) echo ppc64el ;;
	*) echo "unsupported GOARCH $1 for packaging" >&2; return 1 ;;
	esac
}
spliced_rpm_arch() {
	case $1 in
	amd64) echo x86_64 ;;
	arm64) echo aarch64 ;;
	386) echo i386 ;;
	ppc64le | s390x | riscv64) echo "$1" ;;
	*) echo "unsupported GOARCH $1 for packaging" >&2; return 1 ;;
	esac
}
