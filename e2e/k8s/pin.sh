#!/usr/bin/env bash
# Pin e2e/k8s/go.mod to another Kubernetes release: k8s.io/kubernetes at vX.Y.Z and every
# staging module it requires at v0 (`k8s.io/<name> v0.0.0` upstream, replaced there by
# ./staging/src/...) replaced by its published v0.Y.Z. Then `go mod tidy` fills go.sum and
# picks the etcd server version that release requires.
#   bash e2e/k8s/pin.sh v1.36.3
set -euo pipefail
version="${1:?usage: pin.sh vX.Y.Z}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
staging_version="v0.${version#v1.}"
cd "$here"
upstream="$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')"
mods="$(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$upstream" | sort -u)"
{
    echo '// The Kubernetes control plane for the e2e/k8s tests, built from Go modules by build.sh.'
    echo '// k8s.io/kubernetes is not meant to be required as a module: its staging modules are'
    echo '// replaced by their published versions (v0.<minor>.<patch> for Kubernetes v1.<minor>.<patch>).'
    echo '// To move to another release, run: bash e2e/k8s/pin.sh vX.Y.Z'
    echo 'module strom.local/e2e/k8s'
    echo
    echo "go $(awk '$1 == "go" {print $2; exit}' "$upstream")"
    echo
    echo 'tool ('
    echo '	go.etcd.io/etcd/server/v3'
    echo '	k8s.io/kubernetes/cmd/kube-apiserver'
    echo '	k8s.io/kubernetes/cmd/kube-controller-manager'
    echo '	k8s.io/kubernetes/cmd/kube-scheduler'
    echo '	k8s.io/kubernetes/cmd/kubectl'
    echo ')'
    echo
    echo "require k8s.io/kubernetes $version"
    echo
    echo 'replace ('
    for m in $mods; do printf '\t%s => %s %s\n' "$m" "$m" "$staging_version"; done
    echo ')'
} >go.mod
rm -f go.sum
go mod tidy
echo "pinned Kubernetes $version (staging modules $staging_version)"
