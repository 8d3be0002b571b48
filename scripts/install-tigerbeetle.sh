#!/usr/bin/env bash
# Installs the official TigerBeetle release binary that matches the Go client in go.mod.
set -euo pipefail

readonly VERSION="0.17.9"
readonly RELEASES="https://github.com/tigerbeetle/tigerbeetle/releases/download"
readonly PROG="${0##*/}"

usage() {
	cat <<EOF
Usage: $PROG [DIR]

Installs tigerbeetle $VERSION (the server that matches the Go client in go.mod) into DIR,
./bin by default, and prints the export line that makes tblimit's tests use it.

It downloads the official release zip for this system from
  $RELEASES/$VERSION/tigerbeetle-<arch>-<os>.zip
(x86_64-linux, aarch64-linux, universal-macos), checks that the binary runs, and moves it
into place. Nothing is installed when the download or the check fails. If DIR already
holds tigerbeetle $VERSION, nothing is downloaded.

Needs curl or wget, and unzip, bsdtar or python3.

Then run the tests against a real server:
  export TIGERBEETLE_BIN=DIR/tigerbeetle
  go test ./...

Options:
  -h, --help  print this help and exit
EOF
}

die() {
	printf '%s: %s\n' "$PROG" "$*" >&2
	exit 1
}

asset_name() {
	local os arch
	os="$(uname -s)"
	arch="$(uname -m)"
	case "$os" in
	Linux)
		case "$arch" in
		x86_64 | amd64) echo "tigerbeetle-x86_64-linux.zip" ;;
		aarch64 | arm64) echo "tigerbeetle-aarch64-linux.zip" ;;
		*) die "no TigerBeetle release for Linux on $arch (only x86_64 and aarch64)" ;;
		esac
		;;
	Darwin) echo "tigerbeetle-universal-macos.zip" ;;
	*) die "no TigerBeetle release for $os in this script (Linux and macOS only; on Windows download tigerbeetle-x86_64-windows.zip from $RELEASES/$VERSION/)" ;;
	esac
}

download() {
	local url="$1" out="$2"
	if command -v curl >/dev/null 2>&1; then
		curl --fail --silent --show-error --location --retry 2 --connect-timeout 20 --output "$out" "$url"
	elif command -v wget >/dev/null 2>&1; then
		wget --quiet --tries=3 --timeout=20 --output-document="$out" "$url"
	else
		die "neither curl nor wget is installed"
	fi
}

extract() {
	local zip="$1" dir="$2"
	if command -v unzip >/dev/null 2>&1; then
		unzip -q -o "$zip" -d "$dir"
	elif command -v bsdtar >/dev/null 2>&1; then
		bsdtar -x -f "$zip" -C "$dir"
	elif command -v python3 >/dev/null 2>&1; then
		python3 -m zipfile -e "$zip" "$dir"
	else
		die "cannot unpack $zip: install unzip, bsdtar or python3"
	fi
}

# installed_version prints the version line of the binary at $1, or nothing.
installed_version() {
	"$1" version 2>/dev/null | head -n 1 || true
}

main() {
	case "${1:-}" in
	-h | --help)
		usage
		return 0
		;;
	-*) die "unknown option $1 (see --help)" ;;
	esac
	[[ $# -le 1 ]] || die "too many arguments (see --help)"

	local dest="${1:-./bin}"
	mkdir -p "$dest" || die "cannot create $dest"
	dest="$(cd "$dest" && pwd)"
	local bin="$dest/tigerbeetle"

	if [[ -x "$bin" && "$(installed_version "$bin")" == *"$VERSION"* ]]; then
		echo "tigerbeetle $VERSION is already installed at $bin"
	else
		local asset url tmp
		asset="$(asset_name)"
		url="$RELEASES/$VERSION/$asset"
		tmp="$(mktemp -d)"
		# shellcheck disable=SC2064 # expand $tmp now: it is local to main
		trap "rm -rf '$tmp'" EXIT

		echo "downloading $url"
		download "$url" "$tmp/$asset" ||
			die "could not download $url (no network access to github.com?). Download it by hand, unzip it and set TIGERBEETLE_BIN to the tigerbeetle binary inside."
		extract "$tmp/$asset" "$tmp/unpacked" || die "could not unpack $asset"
		[[ -f "$tmp/unpacked/tigerbeetle" ]] || die "$asset holds no tigerbeetle binary at its top level"
		chmod +x "$tmp/unpacked/tigerbeetle"

		local version
		version="$(installed_version "$tmp/unpacked/tigerbeetle")"
		[[ -n "$version" ]] || die "the downloaded tigerbeetle does not run on this system ('tigerbeetle version' failed)"
		if [[ "$version" != *"$VERSION"* ]]; then
			echo "$PROG: warning: 'tigerbeetle version' says '$version', expected $VERSION" >&2
		fi
		mv -f "$tmp/unpacked/tigerbeetle" "$bin"
		echo "installed $version at $bin"
	fi

	echo
	echo "To run the tests against it:"
	echo "  export TIGERBEETLE_BIN=$bin"
}

main "$@"
