"""Hosts in their own network namespaces on a private bridge, for multi-broker fault tests.

    with Hosts(3) as hosts:                     # needs root and `ip netns`
        h1, h2, h3 = hosts                      # 10.x.y.2, .3, .4; the root namespace is .1
        proc = h1.popen([sys.executable, "-c", "..."])   # runs inside h1's namespace
        hosts.partition({h1, h2}, {h3})         # 1,2 <-/-> 3; every host still reaches root
        hosts.isolate(h3)                       # h3 <-/-> everyone, the root namespace too
        hosts.delay(h3, 100); hosts.loss(h3, 5) # tc netem (NetemUnavailable without sch_netem)
        hosts.heal()                            # all of the above undone
    # every process killed and reaped, namespaces, veths and bridge deleted

Layout of one run (the run id is 8 hex digits, so parallel runs never share a name):
  bridge      snb<run>             in the root namespace, holds the subnet's .1
  veth, root  snv<run><n:x>        enslaved to the bridge
  veth, host  eth0                 in the host's namespace, address .<n+1> (hosts n = 1..count)
  netns       strom-net-<run>-<n>  lo up, eth0; no default route, so no traffic can leave
                                   the machine: hosts reach the subnet (each other, root), no more
  lock        /run/strom-netns/<run>.lock, flocked while the run is alive
A run that died without cleaning up (SIGKILL, a crash) leaves its lock unlocked: the next
Hosts() (or sweep_stale()) kills what still runs in its namespaces and deletes them.

Cuts (partition, isolate) are silent drops, as on a real network: each side gets a permanent
neighbour (ARP) entry for the other's address pointing at a MAC that no interface has
(DROP_MAC). Frames to it are flooded by the bridge and dropped by every receiver: a connect
times out, an established connection stalls, nobody gets an error or an ICMP. This needs
nothing but iproute2 (no iptables/nftables, no tc classifier modules), and heal() deletes the
entries, after which ARP resolves the real address again.

Used by `strom-dev-cluster --netns` (a node per host) and by the whole-system tests
(e2e/netns.py re-exports this module). The shared pieces (ip(), pick_subnet(),
create_bridge(), create_netns_on_bridge(), ...) are also the pod network of the Kubernetes
test kubelet (e2e/k8s/k8s_network.py). Standard library and iproute2 only.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import itertools
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

__all__ = [
    "BRIDGE_PREFIX",
    "DEFAULT_BASE",
    "DROP_MAC",
    "HOST_DEV",
    "IP_TIMEOUT_S",
    "KILL_TIMEOUT_S",
    "NETNS_PREFIX",
    "RUN_DIR",
    "RUN_ID_HEX",
    "VETH_PREFIX",
    "Host",
    "Hosts",
    "NetemUnavailable",
    "bridge_name",
    "create_bridge",
    "create_netns_on_bridge",
    "delete_netns",
    "ip",
    "kill_netns_processes",
    "leftovers",
    "list_links",
    "list_netns",
    "netns_name",
    "netns_pids",
    "pick_subnet",
    "run_links",
    "run_netns",
    "subnet_lock",
    "sweep_run",
    "sweep_stale",
    "unavailable_reason",
    "veth_name",
]

IP_TIMEOUT_S = 10.0
KILL_TIMEOUT_S = 10.0
DEFAULT_BASE = "10.214.0.0/16"
RUN_DIR = Path("/run/strom-netns")
NETNS_PREFIX = "strom-net-"
BRIDGE_PREFIX = "snb"
VETH_PREFIX = "snv"
RUN_ID_HEX = 8
# A locally administered unicast MAC that no interface here has: frames to it go nowhere.
DROP_MAC = "02:00:00:00:00:00"
HOST_DEV = "eth0"

# ----- shared with k8s/k8s_network.py


def ip(
    *args: str, check: bool = True, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`ip ARGS`; with check, a non-zero exit raises RuntimeError with its stderr."""
    proc = subprocess.run(
        ["ip", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=IP_TIMEOUT_S,
        check=False,
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def list_netns(prefix: str) -> list[str]:
    names = [line.split()[0] for line in ip("netns", "list").stdout.splitlines() if line]
    return [name for name in names if name.startswith(prefix)]


def list_links(*prefixes: str) -> list[str]:
    """Interfaces of the root namespace whose names start with one of `prefixes`."""
    names = []
    for line in ip("-o", "link", "show").stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(prefixes):
            names.append(name)
    return names


def _routes(*ns_args: str) -> list[ipaddress.IPv4Network]:
    used = []
    proc = ip(*ns_args, "-4", "route", "show", "table", "all", check=False)
    for line in proc.stdout.splitlines():
        words = line.split()
        word = words[0] if words else ""
        if word in ("local", "broadcast", "unreachable", "blackhole", "prohibit", "throw"):
            word = words[1] if len(words) > 1 else ""
        if word == "default":
            continue
        try:
            used.append(ipaddress.IPv4Network(word, strict=False))
        except ValueError:
            continue
    return used


def pick_subnet(base: str | Sequence[str] = DEFAULT_BASE) -> ipaddress.IPv4Network:
    """The first /24 of `base` (one range or several, in order) that nothing here uses.

    Used means overlapping a route (any table) of the root namespace or of any named
    namespace: every address, connected subnet and bridge of another run shows up there.
    Two runs racing for the same /24 must serialize pick and bridge creation: subnet_lock().
    """
    used = _routes()
    for name in list_netns(""):
        used += _routes("-n", name)
    for one in [base] if isinstance(base, str) else base:
        for candidate in ipaddress.IPv4Network(one).subnets(new_prefix=24):
            if not any(candidate.overlaps(net) for net in used):
                return candidate
    raise RuntimeError(f"no free /24 left in {base}")


@contextlib.contextmanager
def subnet_lock() -> Iterator[None]:
    """Held from pick_subnet() until the bridge holds its address (so the route exists)."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with (RUN_DIR / "subnets.lock").open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def create_bridge(
    name: str, subnet: ipaddress.IPv4Network, *, link_local: bool = True
) -> ipaddress.IPv4Address:
    """A bridge holding the subnet's first address; returns that address (the gateway)."""
    gateway = subnet.network_address + 1
    ip("link", "add", name, "type", "bridge")
    try:
        if not link_local:
            ip("link", "set", name, "addrgenmode", "none")
        ip("addr", "add", f"{gateway}/{subnet.prefixlen}", "dev", name)
        ip("link", "set", name, "up")
    except Exception:
        ip("link", "del", name, check=False)
        raise
    return gateway


def create_netns_on_bridge(
    netns: str,
    host_veth: str,
    bridge: str,
    address: ipaddress.IPv4Address,
    prefixlen: int,
    *,
    link_local: bool = True,
) -> None:
    """A namespace with lo up and eth0 (`address`), its veth peer `host_veth` on `bridge`.

    Without link_local, neither end gets an IPv6 link-local address (so no traffic can
    bypass the IPv4 neighbour entries that cut hosts apart). On failure nothing is left.
    """
    ip("netns", "add", netns)
    try:
        ip("link", "add", host_veth, "type", "veth", "peer", "name", HOST_DEV, "netns", netns)
        if not link_local:
            ip("link", "set", host_veth, "addrgenmode", "none")
            ip("-n", netns, "link", "set", HOST_DEV, "addrgenmode", "none")
        ip("link", "set", host_veth, "master", bridge, "up")
        ip("-n", netns, "link", "set", "lo", "up")
        ip("-n", netns, "addr", "add", f"{address}/{prefixlen}", "dev", HOST_DEV)
        ip("-n", netns, "link", "set", HOST_DEV, "up")
    except Exception:
        delete_netns(netns, host_veth)
        raise


def netns_pids(netns: str) -> list[int]:
    proc = ip("netns", "pids", netns, check=False)
    return [int(word) for word in proc.stdout.split() if word.isdigit()]


def kill_netns_processes(netns: str, timeout: float = KILL_TIMEOUT_S) -> list[int]:
    """SIGKILL everything in the namespace until none is left; returns what survived."""
    deadline = time.monotonic() + timeout
    while True:
        pids = netns_pids(netns)
        if not pids or time.monotonic() >= deadline:
            return pids
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def delete_netns(netns: str, host_veth: str) -> None:
    """Deleting the namespace destroys eth0 and with it the host veth, but asynchronously
    (the kernel's netns cleanup): delete the veth first so it is gone when this returns."""
    ip("link", "del", host_veth, check=False)
    ip("netns", "del", netns, check=False)


# ----- one run's names, leftovers and sweeps

_RUN_RE = re.compile(
    rf"^(?:{NETNS_PREFIX}(?P<ns>[0-9a-f]{{{RUN_ID_HEX}}})-\d+"
    rf"|{BRIDGE_PREFIX}(?P<br>[0-9a-f]{{{RUN_ID_HEX}}})"
    rf"|{VETH_PREFIX}(?P<ve>[0-9a-f]{{{RUN_ID_HEX}}})[0-9a-f]+)$"
)


_RUN_ID_RE = re.compile(rf"^[0-9a-f]{{{RUN_ID_HEX}}}$")


def bridge_name(run_id: str) -> str:
    return f"{BRIDGE_PREFIX}{run_id}"


def veth_name(run_id: str, number: int) -> str:
    return f"{VETH_PREFIX}{run_id}{number:x}"


def netns_name(run_id: str, number: int) -> str:
    return f"{NETNS_PREFIX}{run_id}-{number}"


def run_netns(run_id: str) -> list[str]:
    return list_netns(f"{NETNS_PREFIX}{run_id}-")


def run_links(run_id: str) -> list[str]:
    return [
        name
        for name in list_links(bridge_name(run_id), f"{VETH_PREFIX}{run_id}")
        if _RUN_RE.match(name)
    ]


def leftovers(run_id: str) -> list[str]:
    """What of a run still exists on the machine (should be [] once it is closed)."""
    found = []
    for name in run_netns(run_id):
        found.append(f"netns {name}")
        found += [f"process {pid} in {name}" for pid in netns_pids(name)]
    found += [f"link {name}" for name in run_links(run_id)]
    return found


def sweep_run(run_id: str) -> list[str]:
    """Kill the run's processes, delete its namespaces, veths and bridge; returns what is
    still there afterwards (processes that would not die keep their namespace alive)."""
    for name in run_netns(run_id):
        kill_netns_processes(name)
        ip("netns", "del", name, check=False)
    for name in run_links(run_id):
        ip("link", "del", name, check=False)
    return leftovers(run_id)


def _try_lock(path: Path) -> IO[str] | None:
    f = path.open("a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    return f


def sweep_stale() -> list[str]:
    """Sweep every run whose owner is gone (its lock is free); returns the run ids swept."""
    runs = set()
    for name in list_netns(NETNS_PREFIX) + list_links(BRIDGE_PREFIX, VETH_PREFIX):
        m = _RUN_RE.match(name)
        if m:
            runs.add(m.group("ns") or m.group("br") or m.group("ve"))
    if RUN_DIR.is_dir():
        runs.update(p.stem for p in RUN_DIR.glob("*.lock") if _RUN_ID_RE.match(p.stem))
    swept = []
    for run_id in sorted(runs):
        path = RUN_DIR / f"{run_id}.lock"
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        lock = _try_lock(path)
        if lock is None:
            continue  # alive
        try:
            sweep_run(run_id)
            path.unlink(missing_ok=True)
            swept.append(run_id)
        finally:
            lock.close()
    return swept


def unavailable_reason() -> str | None:
    """Why Hosts() cannot work here, or None: root, iproute2 and a working `ip netns`."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed"
    probe = f"{NETNS_PREFIX}probe-{os.getpid()}"
    proc = ip("netns", "add", probe, check=False)
    ip("netns", "del", probe, check=False)
    if proc.returncode != 0:
        return f"`ip netns add` fails here: {proc.stderr.strip()}"
    return None


class NetemUnavailable(RuntimeError):
    """tc netem cannot be used here (no `tc`, or a kernel without sch_netem)."""


# ----- hosts


class Host:
    """One host: a network namespace with one address on the run's bridge.

    Hashable by identity, so hosts go in sets: hosts.partition({h1, h2}, {h3}).
    """

    def __init__(self, number: int, netns: str, veth: str, address: ipaddress.IPv4Address):
        self.number = number
        self.name = f"h{number}"
        self.netns = netns
        self.veth = veth
        self.address = address
        self.procs: list[subprocess.Popen[Any]] = []

    @property
    def prefix(self) -> list[str]:
        """The argv prefix that runs a command in this host (e.g. StromProcess(wrap=...))."""
        return ["ip", "netns", "exec", self.netns]

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """subprocess.Popen(argv, **kwargs) inside this host's namespace.

        `ip netns exec` execs the command (same pid), with this process's environment
        unless env= says otherwise. Killed and reaped when the Hosts closes.
        """
        proc: subprocess.Popen[Any] = subprocess.Popen([*self.prefix, *argv], **kwargs)
        self.procs.append(proc)
        return proc

    def run(
        self, argv: Sequence[str], *, timeout: float, **kwargs: Any
    ) -> subprocess.CompletedProcess[Any]:
        """subprocess.run inside this host's namespace (a deadline is required)."""
        return subprocess.run([*self.prefix, *argv], timeout=timeout, check=False, **kwargs)

    def pids(self) -> list[int]:
        return netns_pids(self.netns)

    def kill_all(self) -> list[int]:
        """SIGKILL every process in the host and reap the ones it started; returns the pids
        that are somehow still there."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(KILL_TIMEOUT_S)
        self.procs.clear()
        return kill_netns_processes(self.netns)

    def __repr__(self) -> str:
        return f"Host({self.name}, {self.address}, netns={self.netns})"


_Endpoint = Host | None  # None is the root namespace (where the tests' clients run)


class Hosts:
    """`count` hosts on a private bridge, as a context manager (see the module's docstring)."""

    def __init__(self, count: int, *, base: str | Sequence[str] = DEFAULT_BASE) -> None:
        if not 1 <= count <= 253:
            raise ValueError(f"1..253 hosts fit a /24, not {count}")
        self.count = count
        self.base = base
        self.run_id = secrets.token_hex(RUN_ID_HEX // 2)
        self.bridge = bridge_name(self.run_id)
        self.subnet: ipaddress.IPv4Network | None = None
        self.gateway: ipaddress.IPv4Address | None = None
        self.hosts: list[Host] = []
        self._lock: IO[str] | None = None
        self._cuts: set[frozenset[_Endpoint]] = set()
        self._netem: dict[Host, dict[str, str]] = {}
        self._netem_reason: str | None = None  # "" once probed and available

    # ----- lifecycle

    def __enter__(self) -> Hosts:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def open(self) -> None:
        assert self._lock is None, "already open"
        sweep_stale()
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        self._lock = _try_lock(RUN_DIR / f"{self.run_id}.lock")
        assert self._lock is not None, f"run id {self.run_id} is taken"
        atexit.register(self.close)
        try:
            with subnet_lock():
                self.subnet = pick_subnet(self.base)
                self.gateway = create_bridge(self.bridge, self.subnet, link_local=False)
            for number in range(1, self.count + 1):
                host = Host(
                    number,
                    netns_name(self.run_id, number),
                    veth_name(self.run_id, number),
                    self.subnet.network_address + number + 1,
                )
                create_netns_on_bridge(
                    host.netns,
                    host.veth,
                    self.bridge,
                    host.address,
                    self.subnet.prefixlen,
                    link_local=False,
                )
                self.hosts.append(host)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Kill and reap every process, delete every namespace, veth and the bridge.

        Idempotent; also registered with atexit while open. Raises if something of the run
        could not be removed (after trying everything)."""
        if self._lock is None:
            return
        atexit.unregister(self.close)
        for host in self.hosts:
            host.kill_all()
        remaining = sweep_run(self.run_id)
        self.hosts.clear()
        self._cuts.clear()
        self._netem.clear()
        if not remaining:
            (RUN_DIR / f"{self.run_id}.lock").unlink(missing_ok=True)
        self._lock.close()
        self._lock = None
        if remaining:
            raise RuntimeError(f"netns run {self.run_id} left {remaining}")

    def leftovers(self) -> list[str]:
        return leftovers(self.run_id)

    # ----- the hosts as a sequence

    def __iter__(self) -> Iterator[Host]:
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    def __getitem__(self, index: int) -> Host:
        return self.hosts[index]

    # ----- faults

    def partition(self, *groups: Iterable[Host]) -> None:
        """Cut traffic both ways between every two hosts of different groups.

        Each group keeps talking inside itself and with the root namespace (the test's
        clients: a client of a minority broker sees what that broker answers, as a client
        on its side of a real partition would). Hosts in no group are left alone. Cuts add
        up until heal(); isolate() also cuts root.
        """
        sets = [set(group) for group in groups]
        if len(sets) < 2:
            raise ValueError("a partition needs at least two groups")
        seen: set[Host] = set()
        for group in sets:
            self._check(group)
            if seen & group:
                raise ValueError(f"{sorted(h.name for h in seen & group)} in two groups")
            seen |= group
        for left, right in itertools.combinations(sets, 2):
            for a in left:
                for b in right:
                    self._cut(a, b)

    def isolate(self, *hosts: Host) -> None:
        """Cut each host from every other host and from the root namespace."""
        self._check(hosts)
        for host in hosts:
            for other in [None, *self.hosts]:
                if other is not host:
                    self._cut(host, other)

    def heal(self) -> None:
        """Undo every cut, delay and loss."""
        for pair in self._cuts:
            a, b = pair
            self._neigh(a, b, "del")
            self._neigh(b, a, "del")
        self._cuts.clear()
        for host in self._netem:
            self._tc(host, "del")
        self._netem.clear()

    def delay(self, host: Host, ms: float, jitter_ms: float = 0.0) -> None:
        """Delay every packet the host sends by `ms` (tc netem on its eth0): its round trips
        to anyone grow by that much. NetemUnavailable if tc netem cannot run here."""
        self._check([host])
        params = self._netem.setdefault(host, {})
        params["delay"] = f"delay {ms}ms" + (f" {jitter_ms}ms" if jitter_ms else "")
        self._apply_netem(host)

    def loss(self, host: Host, percent: float) -> None:
        """Drop `percent` of the packets the host sends (tc netem on its eth0)."""
        self._check([host])
        self._netem.setdefault(host, {})["loss"] = f"loss {percent}%"
        self._apply_netem(host)

    def netem_unavailable(self) -> str | None:
        """Why tc netem cannot be used here, or None (probed once, on the first host)."""
        if self._netem_reason is None:
            self._netem_reason = self._probe_netem()
        return self._netem_reason or None

    def _probe_netem(self) -> str:
        if shutil.which("tc") is None:
            return "`tc` (iproute2) is not installed"
        probe = self.hosts[0]
        proc = self._tc(probe, "add", "netem", "delay", "0ms")
        if proc.returncode != 0:
            return f"tc netem: {proc.stderr.strip()} (the kernel has no sch_netem module?)"
        self._tc(probe, "del")
        return ""

    # ----- internals

    def _check(self, hosts: Collection[Host]) -> None:
        strangers = [h for h in hosts if h not in self.hosts]
        if strangers:
            raise ValueError(f"not hosts of this run: {strangers}")

    def _cut(self, a: _Endpoint, b: _Endpoint) -> None:
        pair = frozenset((a, b))
        if pair in self._cuts:
            return
        self._neigh(a, b, "replace")
        self._neigh(b, a, "replace")
        self._cuts.add(pair)

    def _neigh(self, at: _Endpoint, to: _Endpoint, verb: str) -> None:
        """At `at`, point the neighbour entry of `to`'s address at DROP_MAC (or delete it)."""
        assert self.gateway is not None
        address = str(self.gateway if to is None else to.address)
        where = [] if at is None else ["-n", at.netns]
        dev = self.bridge if at is None else HOST_DEV
        if verb == "del":
            ip(*where, "neigh", "del", address, "dev", dev, check=False)
        else:
            ip(
                *where,
                "neigh",
                "replace",
                address,
                "lladdr",
                DROP_MAC,
                "dev",
                dev,
                "nud",
                "permanent",
            )

    def _tc(self, host: Host, verb: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tc", "-n", host.netns, "qdisc", verb, "dev", HOST_DEV, "root", *args],
            capture_output=True,
            text=True,
            timeout=IP_TIMEOUT_S,
            check=False,
        )

    def _apply_netem(self, host: Host) -> None:
        reason = self.netem_unavailable()
        if reason is not None:
            del self._netem[host]
            raise NetemUnavailable(reason)
        args = " ".join(self._netem[host].values()).split()
        proc = self._tc(host, "replace", "netem", *args)
        if proc.returncode != 0:
            raise NetemUnavailable(f"tc netem {' '.join(args)}: {proc.stderr.strip()}")
