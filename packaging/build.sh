#!/usr/bin/env bash
# Builds the spliced packages with nfpm (a Go tool dependency, see go.mod):
#   $DIST_DIR/spliced_<version>_<debarch>.deb
#   $DIST_DIR/spliced-<version>.<rpmarch>.rpm
#
# Environment:
#   VERSION      git describe output (the Makefile passes it); default: run it here
#   PKG_VERSION  package version; default: derived from VERSION by
#                packaging/version.sh (0.1.0-3-gabc1234 -> 0.1.0+3.gabc1234)
#   GOARCH       target architecture; default: the host's
#   DIST_DIR     output directory; default: dist
#   SOURCE_DATE_EPOCH  timestamps inside the packages; default: the last commit
# The binary is built with CGO_ENABLED=0 (static: the same file runs on every
# deb and rpm distribution) and gets PKG_VERSION injected, so `spliced
# version` and the package manager show the same string.
set -euo pipefail
cd "$(dirname "$0")/.."
. packaging/version.sh

GO=${GO:-go}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)}
PKG_VERSION=${PKG_VERSION:-$(spliced_pkg_version "$VERSION" .)}
spliced_check_pkg_version "$PKG_VERSION"
GOARCH=${GOARCH:-$($GO env GOARCH)}
deb_arch=$(spliced_deb_arch "$GOARCH")
rpm_arch=$(spliced_rpm_arch "$GOARCH")
DIST_DIR=${DIST_DIR:-dist}
if [[ -z ${SOURCE_DATE_EPOCH:-} ]]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH

work=$(mktemp -d "${TMPDIR:-/tmp}/spliced-pkg.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "build.sh: spliced $PKG_VERSION (from VERSION=$VERSION) for linux/$GOARCH"
CGO_ENABLED=0 GOOS=linux GOARCH=$GOARCH $GO build -trimpath \
	-ldflags "-s -w -X github.com/spliced-proxy/spliced/cmd/spliced/internal/version.Version=$PKG_VERSION" \
	-o "$work/spliced" ./cmd/spliced

# Man pages are installed compressed, without name or time stamp in the gzip
# header so that rebuilding gives the same bytes.
gzip -9n <packaging/spliced.8 >"$work/spliced.8.gz"

# copyright: ours, then one paragraph per module linked into the binary with
# the module's own licence text.
licence_id() {
	if grep -q 'Apache License' "$1" && grep -q 'Version 2.0' "$1"; then
		echo Apache-2.0
	elif grep -q 'Permission is hereby granted, free of charge' "$1"; then
		echo "MIT"
	elif grep -q 'Neither the name' "$1"; then
		echo "BSD-3-clause"
	elif grep -q 'Redistribution and use in source and binary forms' "$1"; then
		echo "BSD-2-clause"
	else
		echo "other"
	fi
}
# paragraph FILES LICENCE_FILE: a DEP-5 Files paragraph carrying the text.
paragraph() {
	local id copyright
	id=$(licence_id "$2")
	copyright=$(grep -m1 -i '^ *copyright (c)\|^ *copyright [0-9]' "$2" | sed 's/^ *//; s/^[Cc]opyright *//; s/^([Cc]) *//' || true)
	printf '\nFiles: %s\nCopyright: %s\n' "$1" "${copyright:-see the licence text}"
	if [[ $id == Apache-2.0 ]]; then
		echo "License: Apache-2.0"
		return
	fi
	printf 'License: %s\n' "$id"
	# Continuation lines start with a space; empty lines become " .".
	sed 's/[[:space:]]*$//; s/^$/./; s/^/ /' "$2"
}
{
	cat packaging/copyright.head
	paragraph "vendor/go/*" "$($GO env GOROOT)/LICENSE"
	while read -r path version dir; do
		lic=$(find "$dir" -maxdepth 1 -type f \( -iname 'LICENSE*' -o -iname 'LICENCE*' -o -iname 'COPYING*' \) | sort | head -n1)
		if [[ -z $lic ]]; then
			echo "build.sh: no licence file in $path@$version ($dir)" >&2
			exit 1
		fi
		paragraph "vendor/$path/*" "$lic"
	done < <(CGO_ENABLED=0 GOOS=linux GOARCH=$GOARCH $GO list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}} {{.Dir}}{{end}}{{end}}' ./cmd/spliced | sort -u)
	cat packaging/copyright.tail
} >"$work/copyright"

# A Debian native package carries /usr/share/doc/spliced/changelog.gz: one
# entry for this version with the commits since the previous tag (at most 50).
maintainer=$(sed -n 's/^maintainer: *//p' packaging/nfpm.yaml)
{
	printf 'spliced (%s) unstable; urgency=medium\n\n' "$PKG_VERSION"
	printf '  * Built from %s.\n' "$VERSION"
	since=$(git describe --tags --abbrev=0 2>/dev/null || true)
	git log --no-merges -n 50 --format='%s' ${since:+"$since..HEAD"} 2>/dev/null |
		cut -c1-72 | sed 's/^/  * /' || true
	printf '\n -- %s  %s\n' "$maintainer" "$(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$work/changelog.gz"

export SPLICED_PKG_VERSION=$PKG_VERSION SPLICED_GOARCH=$GOARCH SPLICED_BUILD_DIR=$work
mkdir -p "$DIST_DIR"
deb="$DIST_DIR/spliced_${PKG_VERSION}_${deb_arch}.deb"
rpm="$DIST_DIR/spliced-${PKG_VERSION}.${rpm_arch}.rpm"
# GOARCH names the target; nfpm itself runs on this machine.
env -u GOOS -u GOARCH $GO tool nfpm package --config packaging/nfpm.yaml --packager deb --target "$deb"
env -u GOOS -u GOARCH $GO tool nfpm package --config packaging/nfpm.yaml --packager rpm --target "$rpm"
echo "build.sh: wrote $deb $rpm"
