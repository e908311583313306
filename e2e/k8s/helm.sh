#!/usr/bin/env bash
# Build Helm for the chart's tests (charts/strom: operator/tests/test_chart.py and
# e2e/k8s/test_helm.py) from Go modules: helm/go.mod beside this script pins
# helm.sh/helm/v3, in a module of its own so that Helm's Kubernetes libraries never move
# the control plane's pins (go.mod here).
#
# The binary goes to ${STROM_HELM_CACHE:-~/.cache/strom/helm}/<helm version>/helm and the
# build is skipped when it is there. Needs the Go toolchain named in helm/go.mod.
#
#   bash e2e/k8s/helm.sh          build if missing, print the binary's path
#   bash e2e/k8s/helm.sh --print  print the binary's path, build nothing
set -euo pipefail

module="$(cd "$(dirname "${BASH_SOURCE[0]}")/helm" && pwd)"
version="$(awk '$1 == "helm.sh/helm/v3" && $2 ~ /^v/ {print $2; exit}' "$module/go.mod")"
[[ -n "$version" ]] || { echo "helm.sh: helm/go.mod does not require helm.sh/helm/v3" >&2; exit 1; }
cache="${STROM_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strom/helm}"
out="$cache/$version"

if [[ "${1:-}" == "--print" || -f "$out/.complete" ]]; then
    echo "$out/helm"
    exit 0
fi

if ! command -v go >/dev/null 2>&1; then
    export PATH="$PATH:/usr/local/go/bin"
fi
command -v go >/dev/null 2>&1 || {
    echo "helm.sh: the Go toolchain is not installed (see e2e/k8s/helm/go.mod)" >&2
    exit 1
}

mkdir -p "$cache"
work="$(mktemp -d "$cache/.build-$version.XXXXXX")"
trap 'rm -rf "$work"' EXIT

cd "$module"
# What `helm version` reports and the Kubernetes version `helm lint`/`helm template` assume
# without a cluster: the variables Helm's own Makefile sets (client-go v0.X.Y is 1.X).
client_go="$(go list -m -f '{{.Version}}' k8s.io/client-go)"
k8s_minor="$(echo "$client_go" | cut -d. -f2)"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done

export CGO_ENABLED=0 GOFLAGS="-trimpath"
start=$SECONDS
echo "helm.sh: building Helm $version into $out" >&2
go build -ldflags="$ldflags" -o "$work/helm" helm.sh/helm/v3/cmd/helm
"$work/helm" version --short >/dev/null
echo "helm=$version seconds=$((SECONDS - start))" >"$work/.complete"
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
echo "helm.sh: done in $((SECONDS - start))s" >&2
echo "$out/helm"
