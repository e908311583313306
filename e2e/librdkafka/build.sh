#!/usr/bin/env bash
# Build librdkafka's own test suite (its tests/ `test-runner`) from Debian's source package
# of librdkafka, for e2e/test_librdkafka_suite.py (e2e/README.md).
#
# The Debian source package (bookworm's, pinned below) carries upstream's tests/ folder. It
# is fetched with a private deb-src sources list and private apt state (the machine's own
# apt lists are left alone), unpacked, configured without SSL, SASL and curl (the suite's
# SSL/SASL/OIDC tests are left out anyway), patched with the upstream fixes in patches/ and
# built once into
# ${STROM_LIBRDKAFKA_CACHE:-~/.cache/strom/librdkafka}/<version>/; the build is skipped when
# that folder is complete, so only a cold machine pays for it (about 2 minutes on 2 cores).
# The build dependencies are Debian packages (gcc, g++, make, zlib, zstd, dpkg-dev, and
# RapidJSON, with which the tests check the statistics JSON: 0053, 0110).
#
#   bash e2e/librdkafka/build.sh          build if missing, print the source folder
#   bash e2e/librdkafka/build.sh --print  print the source folder, build nothing
set -euo pipefail

# bookworm's librdkafka; `apt-get source` wants the Debian revision too.
upstream_version="2.0.2"
debian_version="$upstream_version-1"
suite="bookworm"
mirror="${STROM_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

# No SSL, SASL or curl: the tests that need them are not run (tests.txt). LZ4 is built in.
# (--disable-gssapi is what the deprecated --disable-sasl means.)
configure_flags=(--no-download --disable-ssl --disable-gssapi --disable-curl --disable-lz4-ext
    --enable-zstd --enable-zlib)
dev_packages=(zlib1g-dev libzstd-dev rapidjson-dev)
# Upstream fixes of later librdkafka releases, applied to the source before the build; each
# patch says which bug of 2.0.2's it mends and where upstream fixed it.
patch_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/patches"
shopt -s nullglob
patches=("$patch_dir"/*.patch)
shopt -u nullglob
# What the folder was built with: a change here (or in a patch) builds it again.
recipe="librdkafka=$debian_version ${configure_flags[*]} ${dev_packages[*]} patches=$(
    cat /dev/null "${patches[@]}" | sha256sum | cut -c1-16)"

cache="${STROM_LIBRDKAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strom/librdkafka}"
out="$cache/$upstream_version"
log() { echo "e2e/librdkafka/build.sh: $*" >&2; }

if [[ "${1:-}" == "--print" ]]; then
    echo "$out"
    exit 0
fi
if [[ -f "$out/.complete" && "$(head -1 "$out/.complete")" == "$recipe" ]]; then
    echo "$out"
    exit 0
fi

# apt_install (as root, or with sudo; the lists refreshed only if needed)
# shellcheck source=../peers/java_peer.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../peers/java_peer.sh"

needed=()
command -v gcc >/dev/null || needed+=(gcc)
command -v g++ >/dev/null || needed+=(g++)
command -v make >/dev/null || needed+=(make)
command -v dpkg-source >/dev/null || needed+=(dpkg-dev)
command -v patch >/dev/null || needed+=(patch)
command -v python3 >/dev/null || needed+=(python3) # librdkafka's lds-gen.py
for package in "${dev_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed' ||
        needed+=("$package")
done
if [[ ${#needed[@]} -gt 0 ]]; then
    apt_install "${needed[@]}"
fi

mkdir -p "$cache"
work="$(mktemp -d "$cache/.build-$upstream_version.XXXXXX")"
trap 'rm -rf "$work"' EXIT
start=$SECONDS

# A private apt: its own sources list (deb-src only), lists and cache, so the update
# neither needs nor touches the machine's /etc/apt and /var/lib/apt.
apt_dir="$work/apt"
mkdir -p "$apt_dir/sources.list.d" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
cat >"$apt_dir/sources.list.d/debian-src.sources" <<EOF
Types: deb-src
URIs: $mirror
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
apt_options=(
    -o "Dir::Etc::SourceList=/dev/null"
    -o "Dir::Etc::SourceParts=$apt_dir/sources.list.d"
    -o "Dir::State::Lists=$apt_dir/lists"
    -o "Dir::Cache=$apt_dir/cache"
    -o "APT::Sandbox::User=root"
)
log "fetching Debian's source package librdkafka $debian_version ($suite, $mirror)"
if ! apt-get "${apt_options[@]}" -q update >&2; then
    log "cannot read the deb-src lists of $suite from $mirror (network? STROM_DEBIAN_MIRROR?)"
    exit 1
fi
if ! (cd "$work" && apt-get "${apt_options[@]}" -q source --download-only \
    "librdkafka=$debian_version" >&2); then
    log "cannot fetch the source package librdkafka=$debian_version from $mirror $suite"
    exit 1
fi
(cd "$work" && dpkg-source -x "librdkafka_$debian_version.dsc" src >&2)

src="$work/src"
for patch_file in "${patches[@]}"; do
    log "applying $(basename "$patch_file")"
    patch --quiet --forward -p1 -d "$src" <"$patch_file" >&2 ||
        { log "$(basename "$patch_file") does not apply to librdkafka $upstream_version"; exit 1; }
done
log "building librdkafka $upstream_version and its test-runner"
(
    cd "$src"
    ./configure "${configure_flags[@]}"
    make -j"$(nproc)" libs
    make -j"$(nproc)" -C tests build
) >"$work/build.log" 2>&1 || {
    tail -40 "$work/build.log" >&2
    log "the build failed (log above)"
    exit 1
}
test -x "$src/tests/test-runner" || { log "tests/test-runner was not built"; exit 1; }

rm -rf "$out"
mv "$src" "$out"
printf '%s\nseconds=%s\n' "$recipe" "$((SECONDS - start))" >"$out/.complete"
log "done in $((SECONDS - start))s"
echo "$out"
