#!/bin/sh
# Installs the prebuilt retrace binaries (retrace, retrace-dump) from a release: detects the
# platform, downloads its archive and the release's SHA256SUMS, verifies the archive's
# checksum, and installs into ~/.local/bin (or --dir). Nothing is installed unless the
# checksum matches. No Rust toolchain needed.
#
#   sh install.sh [--version X.Y.Z] [--dir DIR] [--libc gnu|musl] [--base-url URL] [--repo OWNER/NAME]
#
# The release workflow publishes this file as a release asset with the repository and the
# version filled in, so `curl -fsSL <release>/install.sh | sh` needs no options. From a
# checkout, name the release: --repo OWNER/NAME --version X.Y.Z, or --base-url URL (a
# directory holding the archives and SHA256SUMS, e.g. a mirror).
set -eu

say() { printf 'retrace-install: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# Everything runs from main, called on the last line: a download cut short runs nothing.
main() {
# Filled in by .github/workflows/release.yml in the copy it publishes.
REPO="${RETRACE_REPO:-@REPO@}"
VERSION="${RETRACE_VERSION:-@VERSION@}"
VERSION="${VERSION#v}"
BASE_URL="${RETRACE_DOWNLOAD_URL:-}"
[ -n "${RETRACE_INSTALL_DIR:-}" ] || [ -n "${HOME:-}" ] || die "HOME is not set: give --dir DIR"
DIR="${RETRACE_INSTALL_DIR:-${HOME:-}/.local/bin}"
LIBC=""

while [ $# -gt 0 ]; do
    case "$1" in
        --version) [ $# -ge 2 ] || die "--version needs a value"; VERSION="${2#v}"; shift 2 ;;
        --dir) [ $# -ge 2 ] || die "--dir needs a value"; DIR="$2"; shift 2 ;;
        --libc) [ $# -ge 2 ] || die "--libc needs gnu or musl"; LIBC="$2"; shift 2 ;;
        --base-url) [ $# -ge 2 ] || die "--base-url needs a value"; BASE_URL="$2"; shift 2 ;;
        --repo) [ $# -ge 2 ] || die "--repo needs OWNER/NAME"; REPO="$2"; shift 2 ;;
        -h|--help) say "usage: sh install.sh [--version X.Y.Z] [--dir DIR] [--libc gnu|musl] [--base-url URL] [--repo OWNER/NAME]"; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done

# The platform: Linux on x86_64 or aarch64 (docs/platforms.md says why not others yet).
os=$(uname -s)
machine=$(uname -m)
case "$os" in
    Linux) ;;
    Darwin) die "no prebuilt retrace for macOS yet: retrace runs on Linux only for now (docs/platforms.md lists what a macOS port needs)" ;;
    *) die "no prebuilt retrace for $os: retrace runs on Linux only for now (see docs/platforms.md)" ;;
esac
case "$machine" in
    x86_64|amd64) arch=x86_64 ;;
    aarch64|arm64) arch=aarch64 ;;
    *) die "no prebuilt retrace for Linux on $machine (x86_64 and aarch64 only); build it from source: cargo install --locked retrace-cli" ;;
esac
if [ -z "$LIBC" ]; then
    # The glibc build needs glibc 2.34 or newer (built on Ubuntu 22.04); the musl build is
    # static and runs on any Linux: the choice without glibc or with an older one.
    LIBC=musl
    glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }') || glibc=""
    case "$glibc" in
        2.*) [ "${glibc#2.}" -ge 34 ] 2>/dev/null && LIBC=gnu ;;
        [3-9].*) LIBC=gnu ;;
    esac
fi
case "$LIBC" in
    gnu|musl) ;;
    *) die "--libc takes gnu or musl, not $LIBC" ;;
esac
target="$arch-unknown-linux-$LIBC"

case "$VERSION" in
    @*|"") die "which release? give --version X.Y.Z (and --repo OWNER/NAME or --base-url URL)" ;;
esac
if [ -z "$BASE_URL" ]; then
    case "$REPO" in
        @*|"") die "where from? give --repo OWNER/NAME or --base-url URL" ;;
    esac
    BASE_URL="https://github.com/$REPO/releases/download/v$VERSION"
fi
BASE_URL="${BASE_URL%/}"
archive="retrace-$VERSION-$target.tar.gz"

if command -v curl >/dev/null 2>&1; then
    fetch() { curl --proto '=https,http' -fsSL "$1" -o "$2"; }
elif command -v wget >/dev/null 2>&1; then
    fetch() { wget -q "$1" -O "$2"; }
else
    die "neither curl nor wget is installed: install one of them"
fi
if command -v sha256sum >/dev/null 2>&1; then
    sha256() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v shasum >/dev/null 2>&1; then
    sha256() { shasum -a 256 "$1" | cut -d' ' -f1; }
else
    die "neither sha256sum nor shasum is installed: cannot verify the download"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/retrace-install.XXXXXX") || die "cannot create a temporary directory (TMPDIR?)"
trap 'rm -rf "$tmp"' EXIT
trap 'rm -rf "$tmp"; exit 130' INT TERM

say "downloading $archive ($BASE_URL)"
fetch "$BASE_URL/$archive" "$tmp/$archive" || die "cannot download $BASE_URL/$archive (no such release or platform?)"
fetch "$BASE_URL/SHA256SUMS" "$tmp/SHA256SUMS" || die "cannot download $BASE_URL/SHA256SUMS"
want=$(awk -v f="$archive" '$2 == f || $2 == "*" f { print $1 }' "$tmp/SHA256SUMS")
[ -n "$want" ] || die "SHA256SUMS lists no $archive: nothing installed"
got=$(sha256 "$tmp/$archive")
[ "$want" = "$got" ] || die "checksum mismatch for $archive (expected $want, got $got): nothing installed"

mkdir -p "$tmp/x"
tar -xzf "$tmp/$archive" -C "$tmp/x" || die "cannot unpack $archive: nothing installed"
src="$tmp/x/retrace-$VERSION-$target"
for b in retrace retrace-dump; do
    [ -f "$src/$b" ] || die "$archive holds no $b: nothing installed"
done
mkdir -p "$DIR" || die "cannot create $DIR"
DIR=$(cd "$DIR" && pwd)
# Both copied beside their names first, then each renamed into place: never a half-written
# binary under its name, and a failed copy leaves the old pair.
for b in retrace retrace-dump; do
    if ! { cp "$src/$b" "$DIR/.$b.new" && chmod 755 "$DIR/.$b.new"; }; then
        rm -f "$DIR/.retrace.new" "$DIR/.retrace-dump.new"
        die "cannot write into $DIR: nothing installed"
    fi
done
for b in retrace retrace-dump; do
    mv -f "$DIR/.$b.new" "$DIR/$b" || die "cannot rename $DIR/.$b.new to $DIR/$b"
done
say "installed retrace $VERSION ($target) into $DIR"
case ":$PATH:" in
    *":$DIR:"*) ;;
    *) say "$DIR is not on your PATH: add it, e.g. echo 'export PATH=\"$DIR:\$PATH\"' >> ~/.profile (then open a new shell)" ;;
esac
say "next: retrace demo"
}

main "$@"
