"""The pod network of the test node: a bridge, one network namespace and veth pair per pod.

Names carry the run id so that a sweep removes exactly what one run made:
  bridge         skb<run>            (host side, holds the subnet's .1 address)
  veth, host     skv<run><n>         (enslaved to the bridge)
  veth, pod      eth0                (inside the pod's namespace, with the pod IP)
  netns          strom-k8s-<run>-<n>
Pods get no default route: they reach the pod subnet (other pods and the host's bridge
address) and nothing else, so no pod traffic can leave this machine.
"""

from __future__ import annotations

import ipaddress
import subprocess
from pathlib import Path

NETNS_DIR = Path("/run/netns")
IP_TIMEOUT_S = 10.0


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def bridge_name(run_id: str) -> str:
    return f"skb{run_id}"


def veth_prefix(run_id: str) -> str:
    return f"skv{run_id}"


def netns_prefix(run_id: str) -> str:
    return f"strom-k8s-{run_id}-"


def pick_subnet(base: str = "10.213.0.0/16") -> ipaddress.IPv4Network:
    """The first /24 of `base` that no route on this machine overlaps."""
    used = []
    for line in ip("-4", "route", "show", "table", "all").stdout.splitlines():
        word = line.split()[0] if line.split() else ""
        if word in ("local", "broadcast", "unreachable", "blackhole", "prohibit"):
            word = line.split()[1]
        if word == "default":
            continue
        try:
            used.append(ipaddress.ip_network(word, strict=False))
        except ValueError:
            continue
    for candidate in ipaddress.ip_network(base).subnets(new_prefix=24):
        if not any(candidate.overlaps(net) for net in used):
            return candidate
    raise RuntimeError(f"no free /24 left in {base}")


def create_bridge(run_id: str, subnet: ipaddress.IPv4Network) -> str:
    name = bridge_name(run_id)
    gateway = next(subnet.hosts())
    ip("link", "add", name, "type", "bridge")
    ip("addr", "add", f"{gateway}/{subnet.prefixlen}", "dev", name)
    ip("link", "set", name, "up")
    return name


def create_pod_network(
    run_id: str, index: int, address: ipaddress.IPv4Address, prefixlen: int
) -> tuple[str, str]:
    """A netns with lo and eth0 (the pod IP), its veth peer on the run's bridge."""
    netns = f"{netns_prefix(run_id)}{index}"
    host_veth = f"{veth_prefix(run_id)}{index:x}"
    ip("netns", "add", netns)
    try:
        ip("link", "add", host_veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
        ip("link", "set", host_veth, "master", bridge_name(run_id), "up")
        ip("-n", netns, "link", "set", "lo", "up")
        ip("-n", netns, "addr", "add", f"{address}/{prefixlen}", "dev", "eth0")
        ip("-n", netns, "link", "set", "eth0", "up")
    except Exception:
        delete_pod_network(netns, host_veth)
        raise
    return netns, host_veth


def netns_pids(netns: str) -> list[int]:
    proc = ip("netns", "pids", netns, check=False)
    return [int(word) for word in proc.stdout.split() if word.isdigit()]


def delete_pod_network(netns: str, host_veth: str) -> None:
    """Deleting the namespace destroys eth0 and with it the host veth; delete both anyway."""
    ip("link", "del", host_veth, check=False)
    ip("netns", "del", netns, check=False)


def run_links(run_id: str) -> list[str]:
    """Interfaces on the host that this run made (bridge and host-side veths)."""
    names = []
    for line in ip("-o", "link", "show").stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name == bridge_name(run_id) or name.startswith(veth_prefix(run_id)):
            names.append(name)
    return names


def run_netns(run_id: str) -> list[str]:
    names = [line.split()[0] for line in ip("netns", "list").stdout.splitlines() if line]
    return [name for name in names if name.startswith(netns_prefix(run_id))]


def sweep(run_id: str) -> None:
    """Remove every namespace and interface of a run (processes must be gone first)."""
    for netns in run_netns(run_id):
        ip("netns", "del", netns, check=False)
    for name in run_links(run_id):
        if name != bridge_name(run_id):
            ip("link", "del", name, check=False)
    ip("link", "del", bridge_name(run_id), check=False)
