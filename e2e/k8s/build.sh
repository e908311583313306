#!/usr/bin/env bash
# Build the Kubernetes control plane the e2e/k8s tests run, from Go modules (go.mod beside
# this script): etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl.
#
# The binaries go to ${STROM_K8S_CACHE:-~/.cache/strom/k8s}/<kubernetes version>/ and the
# build is skipped when that folder is complete, so only a cold machine pays for it.
# Needs the Go toolchain named in go.mod (go 1.26 or newer); /usr/local/go/bin is searched too.
#
#   bash e2e/k8s/build.sh          build if missing, print the binary folder
#   bash e2e/k8s/build.sh --print  print the binary folder, build nothing
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")"
etcd_version="$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")"
cache="${STROM_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strom/k8s}"
out="$cache/$version"
tools=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)

if [[ "${1:-}" == "--print" ]]; then
    echo "$out"
    exit 0
fi

if [[ -f "$out/.complete" ]]; then
    echo "$out"
    exit 0
fi

if ! command -v go >/dev/null 2>&1; then
    export PATH="$PATH:/usr/local/go/bin"
fi
command -v go >/dev/null 2>&1 || {
    echo "build.sh: the Go toolchain is not installed (go 1.26+ is needed)" >&2
    exit 1
}

mkdir -p "$cache"
work="$(mktemp -d "$cache/.build-$version.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# What `kube-apiserver --version` and `kubectl version` report; Kubernetes' own build sets
# the same variables (hack/lib/version.sh). Without them the binaries say v0.0.0-master.
minor="${version#v1.}"
minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

cd "$here"
export CGO_ENABLED=0 GOFLAGS="-trimpath"
start=$SECONDS
echo "build.sh: building Kubernetes $version and etcd $etcd_version into $out" >&2
go build -ldflags="$ldflags" -o "$work/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl
go build -ldflags="-s -w" -o "$work/etcd" go.etcd.io/etcd/server/v3
for tool in "${tools[@]}"; do
    test -x "$work/$tool" || { echo "build.sh: $tool was not built" >&2; exit 1; }
done
echo "kubernetes=$version etcd=$etcd_version seconds=$((SECONDS - start))" >"$work/.complete"
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
echo "build.sh: done in $((SECONDS - start))s" >&2
echo "$out"
