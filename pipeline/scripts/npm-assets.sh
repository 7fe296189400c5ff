#!/usr/bin/env bash
# Fetches the front-end assets a lock file pins from the npm registry.
#
# Usage: npm-assets.sh LOCK DIR
#
# Each line of LOCK (after # comments) is: package version integrity files...
# The package's tarball is downloaded from the registry (NPM_REGISTRY,
# default https://registry.npmjs.org), its sha512 checked against the
# integrity, and the files extracted into DIR/package/. A package whose
# DIR/package/.version already says its version and integrity is skipped.
set -euo pipefail

PROG=${0##*/}
REGISTRY=${NPM_REGISTRY:-https://registry.npmjs.org}

die() {
	echo "$PROG: $*" >&2
	exit 1
}

(($# == 2)) || die "usage: $PROG LOCK DIR"
lock=$1 dir=$2
command -v curl >/dev/null 2>&1 || die "curl is missing (make deps installs it)"

while read -r pkg version integrity files; do
	[[ -z $pkg || $pkg == \#* ]] && continue
	[[ -n $files ]] || die "$lock: $pkg: no files listed"
	out=$dir/$pkg
	stamp="$version $integrity"
	if [[ -f $out/.version && $(<"$out/.version") == "$stamp" ]]; then
		continue
	fi
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	url=$REGISTRY/$pkg/-/${pkg##*/}-$version.tgz
	echo "$PROG: $pkg $version from $url" >&2
	curl -fsSL --retry 3 -o "$tmp/pkg.tgz" "$url" || die "$pkg $version: cannot download $url"
	got="sha512-$(openssl dgst -sha512 -binary "$tmp/pkg.tgz" | base64 -w0)"
	[[ $got == "$integrity" ]] || die "$pkg $version: integrity $got, want $integrity (the lock file pins it)"
	members=()
	for f in $files; do
		members+=("package/$f")
	done
	tar -xzf "$tmp/pkg.tgz" -C "$tmp" "${members[@]}" || die "$pkg $version: the tarball lacks one of: $files"
	rm -rf "$out"
	mkdir -p "$out"
	for f in $files; do
		cp "$tmp/package/$f" "$out/"
	done
	echo "$stamp" >"$out/.version"
	rm -rf "$tmp"
	trap - EXIT
done <"$lock"
