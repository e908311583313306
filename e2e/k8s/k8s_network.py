"""The pod network of the test node: a bridge, one network namespace and veth pair per pod.

Names carry the run id so that a sweep removes exactly what one run made:
  bridge         skb<run>            (host side, holds the subnet's .1 address)
  veth, host     skv<run><n>         (enslaved to the bridge)
  veth, pod      eth0                (inside the pod's namespace, with the pod IP)
  netns          strom-k8s-<run>-<n>
Pods get no default route: they reach the pod subnet (other pods and the host's bridge
address) and nothing else, so no pod traffic can leave this machine.

The bridge, namespace and veth plumbing is e2e/netns.py's (shared with the fault tests'
Hosts); this module only names things for the kubelet and the harness.
"""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

# The kubelet runs as `python k8s_kubelet.py` (sys.path[0] is this folder), and the harness
# by hand as `python k8s_harness.py up`: both need e2e/ for the shared module.
E2E_DIR = Path(__file__).resolve().parent.parent
if str(E2E_DIR) not in sys.path:
    sys.path.append(str(E2E_DIR))

import netns as shared  # noqa: E402
from netns import ip as ip  # noqa: E402
from netns import netns_pids as netns_pids  # noqa: E402

POD_SUBNETS = "10.213.0.0/16"


def bridge_name(run_id: str) -> str:
    return f"skb{run_id}"


def veth_prefix(run_id: str) -> str:
    return f"skv{run_id}"


def netns_prefix(run_id: str) -> str:
    return f"strom-k8s-{run_id}-"


def pick_subnet(base: str = POD_SUBNETS) -> ipaddress.IPv4Network:
    """The first /24 of `base` that no route on this machine overlaps."""
    return shared.pick_subnet(base)


def create_bridge(run_id: str, subnet: ipaddress.IPv4Network) -> str:
    name = bridge_name(run_id)
    shared.create_bridge(name, subnet)
    return name


def create_pod_network(
    run_id: str, index: int, address: ipaddress.IPv4Address, prefixlen: int
) -> tuple[str, str]:
    """A netns with lo and eth0 (the pod IP), its veth peer on the run's bridge."""
    netns = f"{netns_prefix(run_id)}{index}"
    host_veth = f"{veth_prefix(run_id)}{index:x}"
    shared.create_netns_on_bridge(netns, host_veth, bridge_name(run_id), address, prefixlen)
    return netns, host_veth


def delete_pod_network(netns: str, host_veth: str) -> None:
    shared.delete_netns(netns, host_veth)


def run_links(run_id: str) -> list[str]:
    """Interfaces on the host that this run made (bridge and host-side veths)."""
    return shared.list_links(bridge_name(run_id), veth_prefix(run_id))


def run_netns(run_id: str) -> list[str]:
    return shared.list_netns(netns_prefix(run_id))


def sweep(run_id: str) -> None:
    """Remove every namespace and interface of a run (processes must be gone first)."""
    for netns in run_netns(run_id):
        ip("netns", "del", netns, check=False)
    for name in run_links(run_id):
        if name != bridge_name(run_id):
            ip("link", "del", name, check=False)
    ip("link", "del", bridge_name(run_id), check=False)
