"""Inside a pod, before its container command: volumes, /etc/hosts, hostname, then exec.

The test kubelet starts every container as
    ip netns exec <pod netns> python k8s_podinit.py <spec.json>
`ip netns exec` gives the process the pod's network namespace and a mount namespace of its
own (its root made a slave of the host's, so nothing mounted here is seen outside, and all
of it is gone when the container's last process exits). This script then takes a UTS
namespace for the pod's hostname, bind-mounts the volumes and /etc/hosts, and execs the
container's command, so the container process keeps this process id.

No directory is ever created on the host for a mount path that does not exist there:
- below an existing host directory (/var/lib/strom), that directory gets an overlay in the
  pod (the host's files show through; what the pod writes lands in its own upper layer);
- directly below / (/data), the pod gets a root of its own: a tmpfs holding bind mounts of
  the host's top-level entries plus the new directories, and the command runs chrooted
  into it (exec probes enter it with `nsenter -r`).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from pathlib import Path

CLONE_NEWUTS = 0x04000000
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MNT_DETACH = 2

_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    rc = _libc.mount(
        source.encode(),
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    if rc != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


class PodMounts:
    """Mounts made in the pod's mount namespace, by the paths the pod will see."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.root = Path("/")
        self.writable: list[Path] = []  # overlays and volumes: making paths there is fine
        self.overlays = 0

    def real(self, path: Path) -> Path:
        return self.root / path.relative_to("/")

    def needs_new_root(self, paths: list[Path]) -> bool:
        return any(not (Path("/") / p.parts[1]).exists() for p in paths if len(p.parts) > 1)

    def make_new_root(self) -> None:
        """A tmpfs root with the host's top-level entries bind-mounted, for paths like /data."""
        root = self.scratch / "root"
        root.mkdir(parents=True)
        _mount("tmpfs", str(root), "tmpfs", 0, "mode=0755")
        for entry in sorted(os.scandir("/"), key=lambda e: e.name):
            dest = root / entry.name
            if entry.is_symlink():
                dest.symlink_to(os.readlink(entry.path))
            elif entry.is_dir():
                dest.mkdir()
                _mount(entry.path, str(dest), None, MS_BIND | MS_REC, None)
            else:
                dest.touch()
                _mount(entry.path, str(dest), None, MS_BIND, None)
        # The recursive bind of the folder that holds `root` copied `root` into itself.
        copy = root / root.relative_to("/")
        if copy.is_mount() and _libc.umount2(str(copy).encode(), MNT_DETACH) != 0:
            raise OSError(ctypes.get_errno(), f"umount {copy}")
        self.root = root

    def ensure(self, target: Path, is_dir: bool) -> None:
        real = self.real(target)
        if real.exists():
            return
        parent = target.parent
        while not self.real(parent).exists():
            parent = parent.parent
        if parent == Path("/"):
            if self.root == Path("/"):
                raise SystemExit(f"podinit: {target} needs a new root (make_new_root)")
        elif not _inside(parent, self.writable):
            self.overlays += 1
            layer = self.scratch / f"overlay-{self.overlays}"
            (layer / "upper").mkdir(parents=True)
            (layer / "work").mkdir()
            lower = self.real(parent)
            options = f"lowerdir={lower},upperdir={layer}/upper,workdir={layer}/work"
            _mount("overlay", str(lower), "overlay", 0, options)
            self.writable.append(parent)
        if is_dir:
            real.mkdir(parents=True, exist_ok=True)
        else:
            real.parent.mkdir(parents=True, exist_ok=True)
            real.touch()

    def bind(self, source: str, target: Path, read_only: bool, is_dir: bool = True) -> None:
        self.ensure(target, is_dir)
        real = str(self.real(target))
        _mount(source, real, None, MS_BIND | MS_REC, None)
        if read_only:
            _mount(source, real, None, MS_BIND | MS_REMOUNT | MS_RDONLY, None)
        self.writable.append(target)


def pinned(path: str) -> str:
    """A name for `path` that still reaches it once a mount covers its real path: a volume
    at /tmp (an emptyDir) covers the pod's state directory and the claims' directories,
    which live under the harness's tmp dir. The descriptor closes at exec (O_CLOEXEC)."""
    return f"/proc/self/fd/{os.open(path, os.O_PATH)}"


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    if os.readlink("/proc/self/ns/mnt") == spec["host_mount_ns"]:
        raise SystemExit("podinit: refusing to mount in the host's mount namespace")
    if _libc.unshare(CLONE_NEWUTS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUTS)")
    hostname = spec["hostname"].encode()
    if _libc.sethostname(hostname, len(hostname)) != 0:
        raise OSError(ctypes.get_errno(), "sethostname")
    mounts = PodMounts(Path(spec["scratch"]))
    workdir = Path(spec["workdir"])
    targets = [Path(m["target"]) for m in spec["mounts"]]
    if mounts.needs_new_root([*targets, workdir]):
        mounts.make_new_root()
    # Every source (and the overlays' scratch) pinned before the first mount may cover it.
    Path(spec["scratch"]).mkdir(parents=True, exist_ok=True)
    mounts.scratch = Path(pinned(spec["scratch"]))
    sources = [pinned(m["source"]) for m in spec["mounts"]]
    hosts = pinned(spec["hosts"])
    image = {path: pinned(path) for path in spec.get("image_paths", [])}
    # Parents before children, so a volume under another volume lands inside it.
    for source, m in sorted(
        zip(sources, spec["mounts"], strict=True), key=lambda x: len(Path(x[1]["target"]).parts)
    ):
        mounts.bind(source, Path(m["target"]), m["readOnly"], Path(source).is_dir())
    # The image's files (the project and its virtualenv here) stay where they are even
    # when a volume covers them, as an image's would under a volume on /tmp.
    for path, pin in image.items():
        if any(Path(path) == t or t in Path(path).parents for t in targets):
            mounts.bind(pin, Path(path), read_only=True)
    mounts.bind(hosts, Path("/etc/hosts"), read_only=False, is_dir=False)
    mounts.ensure(workdir, True)
    if mounts.root != Path("/"):
        os.chroot(mounts.root)
    os.chdir(workdir)
    argv = spec["argv"]
    os.execvpe(argv[0], argv, spec["env"])


if __name__ == "__main__":
    main()
