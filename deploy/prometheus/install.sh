#!/usr/bin/env bash
# Debian's Prometheus (the `prometheus` package, pinned below; it carries promtool) for
# e2e/test_dashboards.py and `make dashboards-preview`: the .deb is fetched with apt-get
# download (signed by the archive's Release files, as any apt install) and unpacked into
# ${STROM_PROMETHEUS_CACHE:-~/.cache/strom/prometheus}/<version>/, not installed: no
# service starts, no user or /var/lib/prometheus is made, and root is not needed. Skipped
# when that folder is complete.
#
#   bash deploy/prometheus/install.sh          unpack if missing, print the bin folder
#   bash deploy/prometheus/install.sh --print  print the bin folder, fetch nothing
set -euo pipefail

# bookworm's prometheus (2.42.0, with Debian's security fixes)
version="${STROM_PROMETHEUS_VERSION:-2.42.0+ds-5+deb12u1}"
cache="${STROM_PROMETHEUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strom/prometheus}"
out="$cache/$version"
bin="$out/usr/bin"
log() { echo "deploy/prometheus/install.sh: $*" >&2; }

if [[ "${1:-}" == "--print" ]]; then
    echo "$bin"
    exit 0
fi
if [[ -f "$out/.complete" ]]; then
    echo "$bin"
    exit 0
fi

mkdir -p "$cache"
work="$(mktemp -d "$cache/.fetch-$version.XXXXXX")"
trap 'rm -rf "$work"' EXIT

apt_options=()
# root's apt drops to the _apt user to download, which cannot write into $HOME's cache
[[ "$(id -u)" == 0 ]] && apt_options=(-o APT::Sandbox::User=root)
fetch() { (cd "$work" && apt-get "${apt_options[@]}" download -q "prometheus=$version" >&2); }
log "fetching Debian's prometheus $version"
if ! fetch; then
    # the lists may be stale or absent (a fresh container): refresh them when we may
    if [[ "$(id -u)" == 0 ]]; then
        apt-get update -q >&2
    elif command -v sudo >/dev/null; then
        sudo apt-get update -q >&2
    fi
    fetch || {
        log "apt cannot fetch prometheus=$version (apt-cache policy prometheus lists the"
        log "versions your sources have; STROM_PROMETHEUS_VERSION picks another)"
        exit 1
    }
fi

deb=("$work"/prometheus_*.deb)
got="$(dpkg-deb -f "${deb[0]}" Version)"
[[ "$got" == "$version" ]] || { log "fetched version $got, not $version"; exit 1; }
dpkg-deb -x "${deb[0]}" "$work/root"
"$work/root/usr/bin/prometheus" --version >&2
"$work/root/usr/bin/promtool" --version >/dev/null

rm -rf "$out"
mv "$work/root" "$out"
echo "$version" >"$out/.complete"
log "unpacked into $out"
echo "$bin"
