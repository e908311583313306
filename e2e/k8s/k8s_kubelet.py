"""The test kubelet: a Node whose pods run as local processes in their own namespaces.

Run by the harness as `python k8s_kubelet.py CONFIG.json` (root). It

- registers its Node (Ready, capacity of this machine) and renews the node Lease;
- polls the pods bound to it and runs each in a PodWorker thread: a network namespace with
  its own IP on the harness's bridge, a mount namespace per container where volumes are
  bind-mounted (PVCs from the local-path provisioner, ConfigMap, Secret, projected
  service-account token, downward API, emptyDir, hostPath) and /etc/hosts names the
  cluster's Services and headless-Service pods (there is no DNS server);
- starts each container's command with its env ($(VAR) expansion, fieldRef, configMap and
  secret refs); no image is pulled: the command is looked up on the host's PATH with the
  project's venv first, so `strom-server` is the installed one;
- reports phase, pod IP, container states and Ready from the readiness probe (HTTP, TCP,
  exec), restarts containers per restartPolicy (liveness and startup probes too), and on
  deletion sends SIGTERM, waits the grace period, SIGKILLs, then deletes the pod object;
- runs the local-path provisioner (k8s_provisioner).

What a real node does and this one does not: images, resource limits (cgroups), user and
security contexts (everything runs as root), `kubectl exec/logs/port-forward` (no kubelet
API: logs are files in the pod's state directory), Service ClusterIPs (no kube-proxy: a
Service name resolves to its ready endpoints' pod IPs), live updates of ConfigMap volumes.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
import logging
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import k8s_api
import k8s_network
import k8s_provisioner
from k8s_api import Api, ApiError

JSON = dict[str, Any]
RUN_MARKER = "E2E_K8S_RUN"
HERE = Path(__file__).resolve().parent
SYNC_INTERVAL_S = 0.5
HEARTBEAT_INTERVAL_S = 10.0
TICK_S = 0.1
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 30.0
CLUSTER_DOMAIN = "cluster.local"

log = logging.getLogger("kubelet")


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def image_paths(path_prefix: str) -> list[str]:
    """The host directories a container's command runs from (no image is pulled): the
    project (its sources, for the editable install) and the virtualenv of `path_prefix`,
    outermost only."""
    candidates = sorted({HERE.parents[1], Path(path_prefix).parent}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in candidates:
        if not any(path == k or k in path.parents for k in kept):
            kept.append(path)
    return [str(path) for path in kept]


@dataclass
class Config:
    server: str
    ca: str
    cert: str
    key: str
    node_name: str
    run_id: str
    subnet: str
    state_dir: str
    path_prefix: str  # prepended to PATH in every container: the project's venv bin
    kubernetes_version: str  # reported as the kubelet's version (+strom-test-kubelet)

    @classmethod
    def load(cls, path: str) -> Config:
        return cls(**json.loads(Path(path).read_text()))


# --- env, fieldRef, $(VAR) -------------------------------------------------------------

_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: defined names are replaced, $$ is $, the rest stays."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR_REF.sub(sub, text)


_FIELD_MAP = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


def field_value(pod: JSON, path: str, pod_ip: str, host_ip: str) -> str:
    meta, spec = pod["metadata"], pod["spec"]
    m = _FIELD_MAP.match(path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    simple = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta["namespace"],
        "metadata.uid": meta["uid"],
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
    }
    if path not in simple:
        raise ValueError(f"unsupported fieldRef {path}")
    return str(simple[path])


# --- containers ------------------------------------------------------------------------


@dataclass
class Probe:
    spec: JSON
    successes: int = 0
    failures: int = 0
    next_at: float = 0.0

    def threshold(self, key: str, default: int) -> int:
        return int(self.spec.get(key, default))


@dataclass
class Container:
    spec: JSON
    init: bool = False
    proc: subprocess.Popen[bytes] | None = None
    restart_count: int = 0
    state: JSON = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: JSON = field(default_factory=dict)
    ready: bool = False
    started: bool = False  # startup probe passed (or none)
    restart_at: float | None = None
    start_retry_at: float | None = None  # the last start failed (e.g. a missing ConfigMap)
    done: bool = False  # terminated and not going to be restarted
    exit_code: int | None = None
    probes: dict[str, Probe] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class PodWorker(threading.Thread):
    """Runs one pod from sandbox set-up to teardown and keeps its status up to date."""

    def __init__(self, kubelet: Kubelet, pod: JSON) -> None:
        meta = pod["metadata"]
        super().__init__(name=f"pod-{meta['namespace']}/{meta['name']}", daemon=True)
        self.kubelet = kubelet
        self.pod = pod
        self.uid: str = meta["uid"]
        self.namespace: str = meta["namespace"]
        self.pod_name: str = meta["name"]
        self.api_path = f"/api/v1/namespaces/{self.namespace}/pods/{self.pod_name}"
        self.dir = Path(kubelet.cfg.state_dir) / "pods" / self.uid
        self.hosts_file = self.dir / "etc-hosts"
        self.terminate = threading.Event()
        self.grace_s = float(pod["spec"].get("terminationGracePeriodSeconds", 30))
        self.deleted_from_api = False
        self.ip: ipaddress.IPv4Address | None = None
        self.netns: str | None = None
        self.host_veth: str | None = None
        self.volumes: dict[str, str] = {}
        self.containers = [Container(c, init=True) for c in pod["spec"].get("initContainers", [])]
        self.containers += [Container(c) for c in pod["spec"]["containers"]]
        self.phase = "Pending"
        self.conditions: dict[str, JSON] = {}
        self.start_time = now()
        self.message = ""
        self.reported: JSON | None = None
        self.finished = False

    # ----- lifecycle

    def request_termination(self, grace_s: float, deleted_from_api: bool = False) -> None:
        self.grace_s = min(self.grace_s, grace_s)
        self.deleted_from_api = self.deleted_from_api or deleted_from_api
        self.terminate.set()

    def run(self) -> None:
        try:
            if self.set_up():
                self.run_containers()
        except Exception as e:
            log.exception("pod %s/%s failed", self.namespace, self.pod_name)
            self.message = f"test kubelet error: {e}"
        finally:
            self.stop_containers(self.grace_s if self.terminate.is_set() else 0.0)
            self.tear_down()
            self.finish()

    def set_up(self) -> bool:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "logs").mkdir(exist_ok=True)
        (self.dir / "workdir").mkdir(exist_ok=True)
        self.ip = self.kubelet.allocate_ip()
        self.netns, self.host_veth = k8s_network.create_pod_network(
            self.kubelet.cfg.run_id,
            self.kubelet.next_index(),
            self.ip,
            self.kubelet.subnet.prefixlen,
        )
        self.write_hosts(self.kubelet.cluster_hosts)
        self.set_condition("PodReadyToStartContainers", True)
        while not self.terminate.is_set():
            try:
                self.volumes = self.materialize_volumes()
                return True
            except (RuntimeError, ApiError, ValueError, KeyError) as e:
                self.message = str(e)
                self.report()
                self.terminate.wait(1.0)
        return False

    def tear_down(self) -> None:
        if self.netns and self.host_veth:
            for pid in k8s_network.netns_pids(self.netns):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            k8s_network.delete_pod_network(self.netns, self.host_veth)
            self.netns = None
        if self.ip is not None:
            self.kubelet.release_ip(self.ip)

    def finish(self) -> None:
        """Final status; for a pod deleted through the API, remove the object (grace 0)."""
        for c in self.containers:
            if not c.done and "terminated" not in c.state:
                c.state = {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": now()}}
            c.ready = False
        self.set_condition("Ready", False)
        self.set_condition("ContainersReady", False)
        self.set_condition("PodReadyToStartContainers", False)
        if not self.deleted_from_api and not self.kubelet.stopping.is_set():
            self.report()
            if self.terminate.is_set():
                with contextlib.suppress(ApiError):
                    self.kubelet.api.delete(
                        self.api_path,
                        {"gracePeriodSeconds": 0, "preconditions": {"uid": self.uid}},
                    )
        self.finished = True

    # ----- volumes

    def materialize_volumes(self) -> dict[str, str]:
        api = self.kubelet.api
        paths: dict[str, str] = {}
        for volume in self.pod["spec"].get("volumes", []):
            name = volume["name"]
            target = self.dir / "volumes" / name
            if "persistentVolumeClaim" in volume:
                claim_name = volume["persistentVolumeClaim"]["claimName"]
                claim = api.get(
                    f"/api/v1/namespaces/{self.namespace}/persistentvolumeclaims/{claim_name}"
                )
                volume_name = claim["spec"].get("volumeName")
                if claim.get("status", {}).get("phase") != "Bound" or not volume_name:
                    raise RuntimeError(f"persistentvolumeclaim {claim_name} is not bound")
                pv = api.get(f"/api/v1/persistentvolumes/{volume_name}")
                source = pv["spec"].get("local") or pv["spec"].get("hostPath")
                if not source:
                    raise RuntimeError(f"volume {volume_name}: only local and hostPath PVs")
                paths[name] = source["path"]
            elif "emptyDir" in volume:
                target.mkdir(parents=True, exist_ok=True)
                paths[name] = str(target)
            elif "hostPath" in volume:
                host_path = Path(volume["hostPath"]["path"])
                if volume["hostPath"].get("type") == "DirectoryOrCreate":
                    host_path.mkdir(parents=True, exist_ok=True)
                paths[name] = str(host_path)
            else:
                files = self.volume_files(volume)
                if target.exists():
                    shutil.rmtree(target)
                target.mkdir(parents=True)
                for rel, (data, mode) in files.items():
                    dest = target / rel
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(data)
                    dest.chmod(mode)
                paths[name] = str(target)
        return paths

    def volume_files(self, volume: JSON) -> dict[str, tuple[bytes, int]]:
        if "configMap" in volume:
            return self.object_files(volume["configMap"], "configmaps", secret=False)
        if "secret" in volume:
            ref = dict(volume["secret"], name=volume["secret"]["secretName"])
            return self.object_files(ref, "secrets", secret=True)
        if "downwardAPI" in volume:
            return self.downward_files(volume["downwardAPI"])
        if "projected" in volume:
            files: dict[str, tuple[bytes, int]] = {}
            default_mode = volume["projected"].get("defaultMode", 0o644)
            for source in volume["projected"].get("sources", []):
                if "configMap" in source:
                    ref = dict(source["configMap"], defaultMode=default_mode)
                    files.update(self.object_files(ref, "configmaps", secret=False))
                elif "secret" in source:
                    ref = dict(source["secret"], defaultMode=default_mode)
                    files.update(self.object_files(ref, "secrets", secret=True))
                elif "downwardAPI" in source:
                    ref = dict(source["downwardAPI"], defaultMode=default_mode)
                    files.update(self.downward_files(ref))
                elif "serviceAccountToken" in source:
                    token = self.service_account_token(source["serviceAccountToken"])
                    files[source["serviceAccountToken"]["path"]] = (token.encode(), default_mode)
            return files
        raise ValueError(f"volume {volume['name']}: unsupported type {sorted(volume)}")

    def object_files(self, ref: JSON, kind: str, secret: bool) -> dict[str, tuple[bytes, int]]:
        path = f"/api/v1/namespaces/{self.namespace}/{kind}/{ref['name']}"
        obj = self.kubelet.api.get_or_none(path)
        if obj is None:
            if ref.get("optional"):
                return {}
            raise RuntimeError(f"{kind[:-1]} {ref['name']} not found")
        if secret:
            data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        else:
            data = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
            for k, v in (obj.get("binaryData") or {}).items():
                data[k] = base64.b64decode(v)
        mode = int(ref.get("defaultMode", 0o644))
        items = ref.get("items")
        if not items:
            return {k: (v, mode) for k, v in data.items()}
        return {
            item["path"]: (data[item["key"]], int(item.get("mode", mode)))
            for item in items
            if item["key"] in data
        }

    def downward_files(self, ref: JSON) -> dict[str, tuple[bytes, int]]:
        mode = int(ref.get("defaultMode", 0o644))
        files = {}
        for item in ref.get("items", []):
            if "fieldRef" not in item:
                raise ValueError("downwardAPI: only fieldRef items are supported")
            value = field_value(self.pod, item["fieldRef"]["fieldPath"], str(self.ip), "")
            files[item["path"]] = (value.encode(), int(item.get("mode", mode)))
        return files

    def service_account_token(self, source: JSON) -> str:
        account = self.pod["spec"].get("serviceAccountName") or "default"
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [source["audience"]] if source.get("audience") else None,
                "expirationSeconds": int(source.get("expirationSeconds", 3607)),
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": self.pod_name,
                    "uid": self.uid,
                },
            },
        }
        path = f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{account}/token"
        return str(self.kubelet.api.create(path, request)["status"]["token"])

    # ----- /etc/hosts

    def hostname(self) -> tuple[str, str]:
        spec = self.pod["spec"]
        name = spec.get("hostname") or self.pod_name
        if spec.get("subdomain"):
            fqdn = f"{name}.{spec['subdomain']}.{self.namespace}.svc.{CLUSTER_DOMAIN}"
        else:
            fqdn = name
        return name, fqdn

    def write_hosts(self, cluster: list[tuple[str, str, list[str], list[str]]]) -> None:
        """Rewrite this pod's /etc/hosts in place (it is bind-mounted: keep the inode)."""
        name, fqdn = self.hostname()
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        own = [fqdn, name] if fqdn != name else [name]
        others = []
        for address, namespace, short, qualified in cluster:
            # short names (no namespace in them) only for Services of the pod's namespace
            visible = (short if namespace == self.namespace else []) + qualified
            if address == str(self.ip):
                own += [n for n in visible if n not in own]
            elif visible:
                others.append(f"{address}\t{' '.join(visible)}")
        lines.append(f"{self.ip}\t{' '.join(own)}")
        lines += others
        text = "\n".join(lines) + "\n"
        if not self.hosts_file.exists() or self.hosts_file.read_text() != text:
            with self.hosts_file.open("w") as f:
                f.write(text)

    # ----- containers

    def container_env(self, spec: JSON) -> dict[str, str]:
        api, ns = self.kubelet.api, self.namespace
        name, _ = self.hostname()
        env = {
            "PATH": f"{self.kubelet.cfg.path_prefix}:/usr/local/sbin:/usr/local/bin"
            ":/usr/sbin:/usr/bin:/sbin:/bin",
            "HOSTNAME": name,
            "HOME": "/root",
            RUN_MARKER: self.kubelet.cfg.run_id,
        }
        for source in spec.get("envFrom", []):
            prefix = source.get("prefix", "")
            for kind, key in (("configmaps", "configMapRef"), ("secrets", "secretRef")):
                if key in source:
                    obj = api.get_or_none(f"/api/v1/namespaces/{ns}/{kind}/{source[key]['name']}")
                    if obj is None:
                        if source[key].get("optional"):
                            continue
                        raise RuntimeError(f"{kind[:-1]} {source[key]['name']} not found")
                    for k, v in (obj.get("data") or {}).items():
                        value = base64.b64decode(v).decode() if kind == "secrets" else v
                        env[prefix + k] = value
        for var in spec.get("env", []):
            if "valueFrom" not in var:
                env[var["name"]] = expand(var.get("value", ""), env)
                continue
            source = var["valueFrom"]
            if "fieldRef" in source:
                host_ip = str(next(self.kubelet.subnet.hosts()))
                path = source["fieldRef"]["fieldPath"]
                value = field_value(self.pod, path, str(self.ip), host_ip)
            elif "configMapKeyRef" in source or "secretKeyRef" in source:
                secret = "secretKeyRef" in source
                ref = source["secretKeyRef" if secret else "configMapKeyRef"]
                kind = "secrets" if secret else "configmaps"
                obj = api.get_or_none(f"/api/v1/namespaces/{ns}/{kind}/{ref['name']}")
                data = (obj or {}).get("data") or {}
                if ref["key"] not in data:
                    if ref.get("optional"):
                        continue
                    raise RuntimeError(f"{kind[:-1]} {ref['name']} has no key {ref['key']}")
                value = base64.b64decode(data[ref["key"]]).decode() if secret else data[ref["key"]]
            else:
                raise ValueError(f"env {var['name']}: unsupported valueFrom {sorted(source)}")
            env[var["name"]] = value
        return env

    def start_container(self, c: Container) -> None:
        spec = c.spec
        env = self.container_env(spec)
        command = [expand(a, env) for a in spec.get("command", [])]
        args = [expand(a, env) for a in spec.get("args", [])]
        if not command:
            raise ValueError(
                f"container {c.name} has no command: the test kubelet pulls no image, so it "
                "cannot know the image's entrypoint"
            )
        mounts = []
        for m in spec.get("volumeMounts", []):
            source = self.volumes[m["name"]]
            if m.get("subPath"):
                source = str(Path(source) / m["subPath"])
                Path(source).mkdir(parents=True, exist_ok=True)
            mounts.append(
                {"source": source, "target": m["mountPath"], "readOnly": bool(m.get("readOnly"))}
            )
        name, _ = self.hostname()
        spec_file = self.dir / f"{c.name}.{c.restart_count}.json"
        spec_file.write_text(
            json.dumps(
                {
                    "hostname": name,
                    "host_mount_ns": os.readlink("/proc/self/ns/mnt"),
                    "scratch": str(self.dir / f"scratch-{c.name}-{c.restart_count}"),
                    "mounts": mounts,
                    "hosts": str(self.hosts_file),
                    # what stands in for the image: the project and its virtualenv, kept
                    # visible where a volume covers them (an emptyDir at /tmp, with the
                    # project cloned under /tmp)
                    "image_paths": image_paths(self.kubelet.cfg.path_prefix),
                    "workdir": spec.get("workingDir") or str(self.dir / "workdir"),
                    "argv": command + args,
                    "env": env,
                }
            )
        )
        assert self.netns is not None
        podinit = [sys.executable, str(HERE / "k8s_podinit.py"), str(spec_file)]
        with (self.dir / "logs" / f"{c.name}.log").open("ab") as out:
            out.write(f"--- start {c.restart_count} at {now()}\n".encode())
            out.flush()
            c.proc = subprocess.Popen(
                ["ip", "netns", "exec", self.netns, *podinit],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                env={RUN_MARKER: self.kubelet.cfg.run_id, "PATH": os.environ["PATH"]},
            )
        c.state = {"running": {"startedAt": now()}}
        c.restart_at = None
        c.ready = False
        c.started = "startupProbe" not in spec
        t = time.monotonic()
        c.probes = {
            kind: Probe(spec[kind], next_at=t + spec[kind].get("initialDelaySeconds", 0))
            for kind in ("readinessProbe", "livenessProbe", "startupProbe")
            if kind in spec
        }
        log.info("%s/%s: started %s (pid %d)", self.namespace, self.pod_name, c.name, c.proc.pid)

    def kill_container(self, c: Container, grace_s: float) -> None:
        if c.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(c.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            c.proc.wait(max(grace_s, 0.0))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(c.proc.pid, signal.SIGKILL)
        c.proc.wait(10)

    def record_exit(self, c: Container) -> None:
        assert c.proc is not None
        code = c.proc.returncode
        code = 128 - code if code < 0 else code  # killed by signal N -> 128+N
        started = c.state.get("running", {}).get("startedAt", now())
        c.state = {
            "terminated": {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": started,
                "finishedAt": now(),
                "containerID": f"strom://{c.proc.pid}",
            }
        }
        c.exit_code = code
        c.ready = False
        policy = self.pod["spec"].get("restartPolicy", "Always")
        restart = policy == "Always" or (policy == "OnFailure" and code != 0)
        if c.init and code == 0:
            restart = False
        if restart and not self.terminate.is_set():
            delay = min(BACKOFF_BASE_S * 2**c.restart_count, BACKOFF_MAX_S)
            c.restart_at = time.monotonic() + delay
        else:
            c.done = True
        log.info("%s/%s: %s exited %d", self.namespace, self.pod_name, c.name, code)

    def restart(self, c: Container) -> None:
        c.last_state = c.state
        c.restart_count += 1
        self.try_start(c)

    def try_start(self, c: Container) -> None:
        """Start, or report CreateContainerConfigError and try again in 2 s, as kubelet does."""
        try:
            self.start_container(c)
            c.start_retry_at = None
        except (RuntimeError, ApiError, ValueError, KeyError, OSError) as e:
            c.proc = None
            c.restart_at = None
            c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(e)}}
            c.start_retry_at = time.monotonic() + 2.0

    def run_containers(self) -> None:
        for c in [c for c in self.containers if c.init]:
            self.try_start(c)
            while not c.done and not self.terminate.is_set():
                self.step(c)
                self.report()
                self.terminate.wait(TICK_S)
            if self.terminate.is_set():
                return
            if c.exit_code != 0:
                self.phase = "Failed"
                self.report()
                return
        self.set_condition("Initialized", True)
        main = [c for c in self.containers if not c.init]
        for c in main:
            self.try_start(c)
        while not self.terminate.is_set():
            for c in main:
                self.step(c)
            if self.phase == "Pending" and any(c.running for c in main):
                self.phase = "Running"
            ready = all(c.ready for c in main)
            self.set_condition("ContainersReady", ready)
            self.set_condition("Ready", ready)
            if all(c.done for c in main):
                failed = any(c.exit_code != 0 for c in main)
                self.phase = "Failed" if failed else "Succeeded"
                self.report()
                return
            self.report()
            self.terminate.wait(TICK_S)

    def step(self, c: Container) -> None:
        if c.done:
            return
        if c.start_retry_at is not None:
            if time.monotonic() >= c.start_retry_at:
                self.try_start(c)
            return
        if c.restart_at is not None:
            if time.monotonic() >= c.restart_at:
                self.restart(c)
            return
        if c.proc is not None and c.proc.poll() is not None:
            self.record_exit(c)
            return
        if not c.init:
            self.run_probes(c)

    def run_probes(self, c: Container) -> None:
        t = time.monotonic()
        for kind, probe in c.probes.items():
            if t < probe.next_at or (kind != "startupProbe" and not c.started):
                continue
            if kind == "startupProbe" and c.started:
                continue
            probe.next_at = t + probe.spec.get("periodSeconds", 10)
            if self.probe(c, probe.spec):
                probe.successes += 1
                probe.failures = 0
            else:
                probe.failures += 1
                probe.successes = 0
            if kind == "readinessProbe":
                if probe.successes >= probe.threshold("successThreshold", 1):
                    c.ready = True
                elif probe.failures >= probe.threshold("failureThreshold", 3):
                    c.ready = False
            elif kind == "startupProbe" and probe.successes >= 1:
                c.started = True
            elif probe.failures >= probe.threshold("failureThreshold", 3):
                log.info("%s/%s: %s failed its %s", self.namespace, self.pod_name, c.name, kind)
                self.kill_container(c, float(self.grace_s))
                self.record_exit(c)
                return
        if "readinessProbe" not in c.probes:
            c.ready = c.started and c.running

    def probe(self, c: Container, spec: JSON) -> bool:
        timeout = float(spec.get("timeoutSeconds", 1))
        try:
            if "httpGet" in spec:
                get = spec["httpGet"]
                port = self.port_number(c, get["port"])
                host = get.get("host") or str(self.ip)
                url = f"{get.get('scheme', 'HTTP').lower()}://{host}:{port}{get.get('path', '/')}"
                req = urllib.request.Request(url)
                for header in get.get("httpHeaders", []):
                    req.add_header(header["name"], header["value"])
                with k8s_api.direct.open(req, timeout=timeout) as resp:
                    return 200 <= resp.status < 400
            if "tcpSocket" in spec:
                port = self.port_number(c, spec["tcpSocket"]["port"])
                with socket.create_connection((str(self.ip), port), timeout=timeout):
                    return True
            if "exec" in spec and c.proc is not None:
                pid = str(c.proc.pid)
                argv = ["nsenter", "-t", pid, "-n", "-m", "-u", "-r", "-w", "--"]
                argv += spec["exec"]["command"]
                env = {RUN_MARKER: self.kubelet.cfg.run_id, "PATH": os.environ["PATH"]}
                done = subprocess.run(argv, capture_output=True, timeout=timeout, env=env)
                return done.returncode == 0
        except (OSError, urllib.error.URLError, subprocess.TimeoutExpired, ValueError):
            return False
        return False

    @staticmethod
    def port_number(c: Container, port: int | str) -> int:
        if isinstance(port, int) or str(port).isdigit():
            return int(port)
        for p in c.spec.get("ports", []):
            if p.get("name") == port:
                return int(p["containerPort"])
        raise ValueError(f"container {c.name} has no port named {port}")

    def stop_containers(self, grace_s: float) -> None:
        running = [c for c in self.containers if c.running]
        for c in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(c.proc.pid, signal.SIGTERM)  # type: ignore[union-attr]
        deadline = time.monotonic() + grace_s
        for c in running:
            assert c.proc is not None
            try:
                c.proc.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(c.proc.pid, signal.SIGKILL)
                c.proc.wait(10)
            # the group may outlive its leader
            with contextlib.suppress(ProcessLookupError):
                os.killpg(c.proc.pid, signal.SIGKILL)
            self.record_exit(c)

    # ----- status

    def set_condition(self, kind: str, value: bool) -> None:
        status = "True" if value else "False"
        old = self.conditions.get(kind)
        if old is None or old["status"] != status:
            self.conditions[kind] = {"type": kind, "status": status, "lastTransitionTime": now()}

    def container_status(self, c: Container) -> JSON:
        status: JSON = {
            "name": c.name,
            "image": c.spec.get("image", ""),
            "imageID": "",
            "ready": c.ready,
            "restartCount": c.restart_count,
            "started": c.running and c.started,
            "state": c.state,
            "lastState": c.last_state,
        }
        if c.proc is not None:
            status["containerID"] = f"strom://{c.proc.pid}"
        if c.restart_at is not None:
            status["state"] = {
                "waiting": {"reason": "CrashLoopBackOff", "message": "back-off restarting"}
            }
        return status

    def report(self) -> None:
        status: JSON = {
            "phase": self.phase,
            "hostIP": str(next(self.kubelet.subnet.hosts())),
            "hostIPs": [{"ip": str(next(self.kubelet.subnet.hosts()))}],
            "startTime": self.start_time,
            "conditions": list(self.conditions.values()),
            "containerStatuses": [self.container_status(c) for c in self.containers if not c.init],
        }
        init = [self.container_status(c) for c in self.containers if c.init]
        if init:
            status["initContainerStatuses"] = init
        if self.ip is not None:
            status["podIP"] = str(self.ip)
            status["podIPs"] = [{"ip": str(self.ip)}]
        if self.message:
            status["message"] = self.message
        if status == self.reported:
            return
        try:
            self.kubelet.api.strategic_patch(self.api_path + "/status", {"status": status})
            self.reported = status
        except ApiError as e:
            if e.status == 404:
                self.request_termination(0, deleted_from_api=True)
            else:
                log.warning("status of %s/%s: %s", self.namespace, self.pod_name, e)
        except OSError as e:
            log.warning("status of %s/%s: %s", self.namespace, self.pod_name, e)


# --- the node --------------------------------------------------------------------------


class Kubelet:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.api = Api(cfg.server, cfg.ca, cfg.cert, cfg.key)
        self.subnet = ipaddress.ip_network(cfg.subnet)
        hosts = list(self.subnet.hosts())
        self.host_ip = hosts[0]
        self.free_ips = hosts[1:]
        self.lock = threading.Lock()
        self.counter = 0
        self.workers: dict[str, PodWorker] = {}
        self.stopping = threading.Event()
        self.cluster_hosts: list[tuple[str, str, list[str], list[str]]] = []
        self.volume_root = Path(cfg.state_dir) / "volumes"
        self.volume_root.mkdir(parents=True, exist_ok=True)
        self.started_at = now()

    def allocate_ip(self) -> ipaddress.IPv4Address:
        with self.lock:
            if not self.free_ips:
                raise RuntimeError("pod subnet exhausted")
            return self.free_ips.pop(0)

    def release_ip(self, address: ipaddress.IPv4Address) -> None:
        with self.lock:
            self.free_ips.append(address)

    def next_index(self) -> int:
        with self.lock:
            self.counter += 1
            return self.counter

    # ----- node object

    def node_status(self) -> JSON:
        cpus = str(os.cpu_count() or 1)
        memory = f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // 1024}Ki"
        resources = {"cpu": cpus, "memory": memory, "pods": "110", "ephemeral-storage": "50Gi"}
        conditions = [
            ("Ready", "True", "KubeletReady", "the test kubelet is posting ready status"),
            ("MemoryPressure", "False", "KubeletHasSufficientMemory", ""),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", ""),
            ("PIDPressure", "False", "KubeletHasSufficientPID", ""),
        ]
        stamp = now()
        return {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {
                    "type": kind,
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastHeartbeatTime": stamp,
                    "lastTransitionTime": self.started_at,
                }
                for kind, status, reason, message in conditions
            ],
            "addresses": [
                {"type": "InternalIP", "address": str(self.host_ip)},
                {"type": "Hostname", "address": self.cfg.node_name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
            "nodeInfo": {
                "machineID": self.cfg.run_id,
                "systemUUID": self.cfg.run_id,
                "bootID": self.cfg.run_id,
                "kernelVersion": platform.release(),
                "osImage": "strom test kubelet: pods are local processes",
                "containerRuntimeVersion": "strom-processes://1",
                "kubeletVersion": f"{self.cfg.kubernetes_version}+strom-test-kubelet",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        }

    def register(self) -> None:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.cfg.node_name,
                "labels": {
                    "kubernetes.io/hostname": self.cfg.node_name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                },
            },
            "spec": {"podCIDR": self.cfg.subnet, "podCIDRs": [self.cfg.subnet]},
        }
        try:
            self.api.create("/api/v1/nodes", node)
        except ApiError as e:
            if e.status != 409:
                raise
        self.heartbeat()

    def heartbeat(self) -> None:
        path = f"/api/v1/nodes/{self.cfg.node_name}/status"
        self.api.strategic_patch(path, {"status": self.node_status()})
        leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
        lease_path = f"{leases}/{self.cfg.node_name}"
        spec = {
            "holderIdentity": self.cfg.node_name,
            "leaseDurationSeconds": 40,
            "renewTime": now_micro(),
        }
        if self.api.get_or_none(lease_path) is None:
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.cfg.node_name, "namespace": "kube-node-lease"},
                "spec": spec,
            }
            self.api.create(leases, lease)
        else:
            self.api.merge_patch(lease_path, {"spec": spec})

    # ----- the loop

    def sync_pods(self) -> None:
        pods = self.api.items("/api/v1/pods", fieldSelector=f"spec.nodeName={self.cfg.node_name}")
        seen = set()
        for pod in pods:
            meta = pod["metadata"]
            uid = meta["uid"]
            seen.add(uid)
            worker = self.workers.get(uid)
            deleting = meta.get("deletionTimestamp") is not None
            grace = float(meta.get("deletionGracePeriodSeconds") or 0)
            if worker is None:
                if deleting:  # never started here: nothing to stop
                    with contextlib.suppress(ApiError):
                        self.api.delete(
                            f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                            {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}},
                        )
                    continue
                if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                    continue
                worker = PodWorker(self, pod)
                self.workers[uid] = worker
                worker.start()
            elif worker.finished:
                if deleting:  # completed earlier; the object only waits for its kubelet
                    with contextlib.suppress(ApiError):
                        self.api.delete(
                            f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                            {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}},
                        )
            else:
                worker.pod = pod
                if deleting:
                    worker.request_termination(grace)
        for uid, worker in list(self.workers.items()):
            if uid not in seen:
                worker.request_termination(0, deleted_from_api=True)
            if worker.finished and uid not in seen:
                del self.workers[uid]

    def sync_hosts(self) -> None:
        """Service and headless-Service pod names for every pod's /etc/hosts."""
        services = {
            (s["metadata"]["namespace"], s["metadata"]["name"]): s
            for s in self.api.items("/api/v1/services")
        }
        # (address, namespace) -> names without the namespace, names with it
        entries: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
        for eps in self.api.items("/apis/discovery.k8s.io/v1/endpointslices"):
            ns = eps["metadata"]["namespace"]
            svc_name = (eps["metadata"].get("labels") or {}).get("kubernetes.io/service-name")
            if svc_name is None or (ns, svc_name) not in services:
                continue
            headless = services[(ns, svc_name)]["spec"].get("clusterIP") == "None"
            suffixes = [f"{ns}.svc.{CLUSTER_DOMAIN}", f"{ns}.svc", ns]
            for endpoint in eps.get("endpoints") or []:
                if not (endpoint.get("conditions") or {}).get("ready", True):
                    continue
                hostname = endpoint.get("hostname") if headless else None
                for address in endpoint.get("addresses", []):
                    short, qualified = entries.setdefault((address, ns), ([], []))
                    if hostname:
                        qualified += [f"{hostname}.{svc_name}.{s}" for s in suffixes]
                        short.append(f"{hostname}.{svc_name}")
                    qualified += [f"{svc_name}.{s}" for s in suffixes]
                    short.append(svc_name)
        self.cluster_hosts = sorted(
            (address, ns, sorted(set(short)), sorted(set(qualified), key=lambda n: -len(n)))
            for (address, ns), (short, qualified) in entries.items()
        )
        for worker in list(self.workers.values()):
            if worker.ip is not None and not worker.finished:
                worker.write_hosts(self.cluster_hosts)

    def run(self) -> None:
        self.register()
        last_heartbeat = time.monotonic()
        while not self.stopping.is_set():
            for step in (self.sync_pods, self.sync_hosts, self.sync_volumes):
                try:
                    step()
                except (ApiError, OSError, ValueError) as e:
                    log.warning("%s: %s", step.__name__, e)
            if time.monotonic() - last_heartbeat >= HEARTBEAT_INTERVAL_S:
                try:
                    self.heartbeat()
                    last_heartbeat = time.monotonic()
                except (ApiError, OSError) as e:
                    log.warning("heartbeat: %s", e)
            self.stopping.wait(SYNC_INTERVAL_S)
        self.shut_down()

    def sync_volumes(self) -> None:
        k8s_provisioner.sync(self.api, self.cfg.node_name, self.volume_root)

    def shut_down(self, grace_s: float = 10.0) -> None:
        """Node shutdown: stop every pod (SIGTERM, grace, SIGKILL), leave the API objects."""
        workers = list(self.workers.values())
        for worker in workers:
            worker.request_termination(grace_s)
        for worker in workers:
            worker.join(grace_s + 15)


def main() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(threadName)s: %(message)s"
    )
    kubelet = Kubelet(Config.load(sys.argv[1]))
    signal.signal(signal.SIGTERM, lambda *_: kubelet.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: kubelet.stopping.set())
    kubelet.run()


if __name__ == "__main__":
    main()
