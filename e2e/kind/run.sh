#!/usr/bin/env bash
# Run the Kubernetes e2e tests (e2e/k8s) against a kind cluster: for users and CI systems
# with Docker. NOT runnable on the project's own machines (no Docker there): those run the
# same tests against the Go-built control plane of e2e/k8s (`make e2e-k8s`).
#
# Needs: docker, kind, kubectl, a Linux host (the tests talk to pod IPs, so the pod CIDR is
# routed to the kind node's container address; that needs sudo), and `make install` done.
#
#   e2e/kind/run.sh                   create the cluster, build + load the image, run the tests
#   KEEP_CLUSTER=1 e2e/kind/run.sh    leave the cluster running afterwards
#   e2e/kind/run.sh -k produce        extra arguments go to pytest
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cluster="${KIND_CLUSTER:-strom-e2e}"
image="strom/broker:e2e"  # the image e2e/k8s/manifests/strom.yaml names
cd "$repo"

for tool in docker kind kubectl; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool is not installed" >&2; exit 1; }
done

if ! kind get clusters | grep -qx "$cluster"; then
    kind create cluster --name "$cluster" --wait 180s
fi
kubeconfig="$(mktemp)"
kind get kubeconfig --name "$cluster" >"$kubeconfig"

docker build -f broker-image/Dockerfile -t "$image" .
kind load docker-image "$image" --name "$cluster"

# The tests produce and consume through a pod's address from this host, as they do on the
# harness's node: route the pod CIDR through the kind node's container.
node="$cluster-control-plane"
node_ip="$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$node")"
pod_cidr="$(kubectl --kubeconfig "$kubeconfig" get node "$node" -o jsonpath='{.spec.podCIDR}')"
sudo ip route replace "$pod_cidr" via "$node_ip"

cleanup() {
    sudo ip route del "$pod_cidr" via "$node_ip" || true
    kubectl --kubeconfig "$kubeconfig" delete namespace strom-e2e --ignore-not-found --wait=false || true
    if [[ -z "${KEEP_CLUSTER:-}" ]]; then
        kind delete cluster --name "$cluster"
    fi
    rm -f "$kubeconfig"
}
trap cleanup EXIT

# Same tests, another cluster: the harness is not started, node-level checks (processes,
# network namespaces, the claim's files on the node) are skipped.
STROM_K8S_KUBECONFIG="$kubeconfig" .venv/bin/pytest e2e/k8s "$@"
