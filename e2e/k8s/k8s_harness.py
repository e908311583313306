"""A real Kubernetes control plane on this machine, started and torn down by the tests.

    Harness(root).start()  ->  etcd, kube-apiserver (https on 127.0.0.1), kube-controller-
                               manager, kube-scheduler, the pod bridge and the test kubelet
                               (k8s_kubelet.py), then the local-path StorageClass (addons/)
    Harness.stop()         ->  everything in reverse; then a sweep by run id of whatever is
                               left (processes, network namespaces, veths, the bridge)
    Harness.leftovers()    ->  what of this run still exists on the machine (should be [])

The binaries are built from Go modules by build.sh into BINARIES (see binaries_dir()).
Every process the harness starts, and every pod process, carries E2E_K8S_RUN=<run id> in
its environment: that is how leftovers are found. Every wait has a deadline.

`python e2e/k8s/k8s_harness.py up` starts one by hand and prints a KUBECONFIG to use;
Ctrl-C tears it down.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import k8s_api
import k8s_network
import k8s_pki
from k8s_api import Api, ApiError

HERE = Path(__file__).resolve().parent
RUN_MARKER = "E2E_K8S_RUN"
NODE_NAME = "strom-node"
SERVICE_CIDR = "10.96.0.0/16"
LOG_TAIL_CHARS = 4000
T = TypeVar("T")


def kubernetes_version() -> str:
    for line in (HERE / "go.mod").read_text().splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "k8s.io/kubernetes" and words[1].startswith("v"):
            return words[1]
    for line in (HERE / "go.mod").read_text().splitlines():
        words = line.split()
        if words[:2] == ["require", "k8s.io/kubernetes"]:
            return words[2]
    raise RuntimeError("go.mod does not require k8s.io/kubernetes")


def binaries_dir() -> Path:
    """Where build.sh puts the binaries: $STROM_K8S_CACHE or ~/.cache/strom/k8s, by version."""
    cache = os.environ.get("STROM_K8S_CACHE")
    if not cache:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        cache = str(Path(xdg) / "strom" / "k8s")
    return Path(cache) / kubernetes_version()


def binaries_built() -> bool:
    return (binaries_dir() / ".complete").exists()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Callable[[], T | None], timeout: float, every: float = 0.2) -> T:
    """Poll `check` until it returns something other than None/False; fail at the deadline."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = check()
            if result:
                return result
        except (OSError, ApiError, ValueError, KeyError, subprocess.SubprocessError) as e:
            last_error = e
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not within {timeout}s (last error: {last_error!r})")
        time.sleep(every)


class Component:
    """One control-plane process with its log file."""

    def __init__(self, name: str, argv: Sequence[str], log_dir: Path, run_id: str) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_dir / f"{name}.log"
        self.run_id = run_id
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                env={**os.environ, RUN_MARKER: self.run_id, "PYTHONUNBUFFERED": "1"},
            )

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}\n{self.log_tail()}")

    def stop(self, timeout: float) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc = None

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        if not self.log_path.exists():
            return "(no output)"
        return self.log_path.read_bytes()[-chars:].decode("utf-8", "replace")


class Harness:
    def __init__(self, root: Path, binaries: Path | None = None) -> None:
        self.root = Path(root)
        self.bin = binaries or binaries_dir()
        self.run_id = secrets.token_hex(3)
        self.logs = self.root / "logs"
        self.components: list[Component] = []
        self.api: Api | None = None
        self.kubeconfig = self.root / "kubeconfig"
        self.subnet = None
        self.bridge: str | None = None
        self.started = False
        self.timings: dict[str, float] = {}

    # ----- start

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _timed(self, name: str, since: float) -> None:
        self.timings[name] = round(time.monotonic() - since, 2)

    def _start(self) -> None:
        t0 = time.monotonic()
        self.logs.mkdir(parents=True, exist_ok=True)
        self.subnet = k8s_network.pick_subnet()
        self.bridge = k8s_network.create_bridge(self.run_id, self.subnet)
        node_ip = str(next(self.subnet.hosts()))
        pki = k8s_pki.make(self.root / "pki", ["127.0.0.1", "10.96.0.1", node_ip])
        self._timed("pki", t0)

        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        etcd = self._component(
            "etcd",
            self.bin / "etcd",
            "--name=strom-e2e",
            f"--data-dir={self.root / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=strom-e2e=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        )
        wait_for("etcd healthy", lambda: self._etcd_healthy(etcd, etcd_port), 30)
        self._timed("etcd", t0)

        server = f"https://127.0.0.1:{api_port}"
        apiserver = self._component(
            "kube-apiserver",
            self.bin / "kube-apiserver",
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--advertise-address={node_ip}",
            f"--tls-cert-file={pki.server_cert}",
            f"--tls-private-key-file={pki.server_key}",
            f"--client-ca-file={pki.ca}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            "--profiling=false",
        )
        self.api = Api(server, str(pki.ca), str(pki.admin_cert), str(pki.admin_key))
        k8s_pki.kubeconfig(pki, server, self.kubeconfig)
        wait_for("kube-apiserver /readyz", lambda: self._api_ready(apiserver), 120)
        self._timed("kube-apiserver", t0)

        common = [
            # no authentication/authorization kubeconfig: their own HTTPS endpoints then
            # serve only /healthz, /readyz, /livez (all the harness asks them)
            f"--kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
        ]
        kcm_port, scheduler_port = free_port(), free_port()
        kcm = self._component(
            "kube-controller-manager",
            self.bin / "kube-controller-manager",
            *common,
            f"--secure-port={kcm_port}",
            f"--cert-dir={self.root / 'kcm-certs'}",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca}",
            f"--cluster-signing-cert-file={pki.ca}",
            f"--cluster-signing-key-file={pki.ca_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
        )
        scheduler = self._component(
            "kube-scheduler",
            self.bin / "kube-scheduler",
            *common,
            f"--secure-port={scheduler_port}",
            f"--cert-dir={self.root / 'scheduler-certs'}",
        )
        wait_for("kube-controller-manager /healthz", lambda: self._healthz(kcm, kcm_port), 60)
        wait_for("kube-scheduler /healthz", lambda: self._healthz(scheduler, scheduler_port), 60)
        self._timed("controllers", t0)

        kubelet_config = self.root / "kubelet.json"
        kubelet_config.write_text(
            json.dumps(
                {
                    "server": server,
                    "ca": str(pki.ca),
                    "cert": str(pki.admin_cert),
                    "key": str(pki.admin_key),
                    "node_name": NODE_NAME,
                    "run_id": self.run_id,
                    "subnet": str(self.subnet),
                    "state_dir": str(self.root / "kubelet"),
                    "path_prefix": str(Path(sys.executable).parent),
                    "kubernetes_version": kubernetes_version(),
                }
            )
        )
        kubelet = self._component(
            "kubelet", sys.executable, str(HERE / "k8s_kubelet.py"), str(kubelet_config)
        )
        wait_for("node Ready", lambda: self._node_ready(kubelet), 60)
        self.kubectl("apply", "-f", str(HERE / "addons"))
        wait_for(
            "service account default/default",
            lambda: self.api.get_or_none("/api/v1/namespaces/default/serviceaccounts/default")
            if self._all_alive()
            else None,
            60,
        )
        self._timed("ready", t0)
        self.started = True

    def _component(self, name: str, *argv: object) -> Component:
        component = Component(name, [str(a) for a in argv], self.logs, self.run_id)
        self.components.append(component)
        component.start()
        return component

    def _all_alive(self) -> bool:
        for component in self.components:
            component.check_alive()
        return True

    @staticmethod
    def _etcd_healthy(etcd: Component, port: int) -> bool:
        etcd.check_alive()
        with k8s_api.direct.open(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return bool(json.loads(r.read()).get("health") == "true")

    def _api_ready(self, apiserver: Component) -> bool:
        apiserver.check_alive()
        assert self.api is not None
        try:
            self.api.request("GET", "/readyz", timeout=3)
        except json.JSONDecodeError:  # "ok" is not JSON: the request succeeded
            return True
        return True

    @staticmethod
    def _healthz(component: Component, port: int) -> bool:
        component.check_alive()
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # its own self-signed serving cert, on loopback
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
        with opener.open(f"https://127.0.0.1:{port}/healthz", timeout=2) as r:
            return r.status == 200

    def _node_ready(self, kubelet: Component) -> bool:
        kubelet.check_alive()
        assert self.api is not None
        node = self.api.get(f"/api/v1/nodes/{NODE_NAME}")
        conditions = node.get("status", {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    # ----- use

    def kubectl(
        self, *args: str, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return run_kubectl(str(self.bin / "kubectl"), str(self.kubeconfig), args, input, timeout)

    def logs_of(self, name: str) -> str:
        for component in self.components:
            if component.name == name:
                return component.log_tail()
        return "(no such component)"

    def pod_log(self, uid: str, container: str) -> str:
        path = self.root / "kubelet" / "pods" / uid / "logs" / f"{container}.log"
        if not path.exists():
            return "(no log)"
        return path.read_bytes()[-LOG_TAIL_CHARS:].decode("utf-8", "replace")

    # ----- stop

    def stop(self) -> None:
        """Stop everything in reverse order, then sweep what this run may have left."""
        for component in reversed(self.components):
            component.stop(timeout=60 if component.name == "kubelet" else 20)
        self.components.clear()
        self._kill_marked_processes()
        k8s_network.sweep(self.run_id)
        self.started = False

    def _marked_pids(self) -> list[int]:
        marker = f"{RUN_MARKER}={self.run_id}".encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if marker in environ.split(b"\0"):
                pids.append(int(entry.name))
        return pids

    def _kill_marked_processes(self) -> None:
        for _ in range(50):
            pids = self._marked_pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)

    def leftovers(self) -> list[str]:
        """Everything of this run that still exists on the machine."""
        found = [f"process {pid}" for pid in self._marked_pids()]
        found += [f"netns {name}" for name in k8s_network.run_netns(self.run_id)]
        found += [f"link {name}" for name in k8s_network.run_links(self.run_id)]
        needles = (str(self.root), f"strom-k8s-{self.run_id}-")
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            if any(needle in line for needle in needles):
                found.append(f"mount {line.split()[4]}")
        return found


def run_kubectl(
    kubectl: str, kubeconfig: str, args: Sequence[str], input: str | None, timeout: float
) -> subprocess.CompletedProcess[str]:
    """kubectl with a kubeconfig; a non-zero exit raises with its stderr."""
    proc = subprocess.run(
        [kubectl, f"--kubeconfig={kubeconfig}", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def main(argv: list[str]) -> None:
    if argv[1:] != ["up"]:
        raise SystemExit("usage: python e2e/k8s/k8s_harness.py up")
    import tempfile
    import threading

    stop = threading.Event()
    # handlers, not a blocked signal mask: children would inherit the mask
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    root = Path(tempfile.mkdtemp(prefix="strom-k8s-"))
    harness = Harness(root)
    try:
        harness.start()
        print(f"export KUBECONFIG={harness.kubeconfig}  # Ctrl-C to tear down", flush=True)
        print(f"{harness.bin}/kubectl get nodes", flush=True)
        while not stop.wait(1.0):
            pass
    finally:
        harness.stop()
        print(f"leftovers: {harness.leftovers() or 'none'}; logs in {root}/logs", flush=True)


if __name__ == "__main__":
    main(sys.argv)


class Cluster:
    """What the tests see: kubectl against a kubeconfig, and the harness if it is ours.

    `harness` is None when the tests run against another cluster (STROM_K8S_KUBECONFIG);
    tests that look at the node's processes, namespaces or disk skip there.
    """

    def __init__(self, kubectl: str, kubeconfig: str, harness: Harness | None) -> None:
        self.kubectl_path = kubectl
        self.kubeconfig = kubeconfig
        self.harness = harness

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 120) -> str:
        return run_kubectl(self.kubectl_path, self.kubeconfig, args, input, timeout).stdout

    def get(self, *args: str) -> dict:  # type: ignore[type-arg]
        return dict(json.loads(self.kubectl("get", "-o", "json", *args)))
