"""Certificates for a throwaway control plane, made with the openssl command.

One CA signs the apiserver's serving certificate (loopback, the `kubernetes` Service names
and the node's bridge address) and one client certificate in `system:masters`, which the
controller-manager, the scheduler, the test kubelet and kubectl all use. A separate EC key
signs service-account tokens. Keys are P-256 EC: fast to make, accepted everywhere here.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

DAYS = "2"


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {proc.stderr.strip()}")


def _key(path: Path) -> None:
    _openssl(
        "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", path.name, cwd=path.parent
    )
    path.chmod(0o600)


@dataclass(frozen=True)
class Pki:
    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def server_cert(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def server_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def admin_cert(self) -> Path:
        return self.dir / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.dir / "admin.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"


def make(directory: Path, ip_addresses: list[str]) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)
    _key(pki.ca_key)
    _openssl(
        "req",
        "-x509",
        "-new",
        "-key",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        DAYS,
        "-subj",
        "/CN=strom-e2e-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )
    names = [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    alt = ",".join([f"DNS:{n}" for n in names] + [f"IP:{a}" for a in ip_addresses])
    _sign(pki, "apiserver", "/CN=kube-apiserver", f"subjectAltName={alt}", "serverAuth")
    _sign(pki, "admin", "/O=system:masters/CN=strom-e2e-admin", None, "clientAuth")
    _key(pki.sa_key)
    _openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=directory)
    return pki


def _sign(pki: Pki, name: str, subject: str, alt: str | None, usage: str) -> None:
    _key(pki.dir / f"{name}.key")
    _openssl(
        "req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=pki.dir
    )
    ext = pki.dir / f"{name}.ext"
    lines = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        f"extendedKeyUsage={usage}",
    ]
    if alt:
        lines.append(alt)
    ext.write_text("\n".join(lines) + "\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        f"{name}.crt",
        "-days",
        DAYS,
        "-extfile",
        ext.name,
        cwd=pki.dir,
    )


def kubeconfig(pki: Pki, server: str, path: Path) -> Path:
    """A kubeconfig (JSON is valid YAML) with the admin client certificate."""
    import json

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "strom-e2e",
                "cluster": {"server": server, "certificate-authority": str(pki.ca)},
            }
        ],
        "users": [
            {
                "name": "strom-e2e-admin",
                "user": {
                    "client-certificate": str(pki.admin_cert),
                    "client-key": str(pki.admin_key),
                },
            }
        ],
        "contexts": [
            {"name": "strom-e2e", "context": {"cluster": "strom-e2e", "user": "strom-e2e-admin"}}
        ],
        "current-context": "strom-e2e",
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)
    return path
