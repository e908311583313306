"""A local-path provisioner: one host directory per PersistentVolumeClaim.

Like rancher's local-path-provisioner, for a StorageClass whose provisioner is PROVISIONER:
a claim the scheduler has placed on this node (volumeBindingMode WaitForFirstConsumer sets
`volume.kubernetes.io/selected-node`) or an Immediate claim gets a PersistentVolume with
`spec.local.path` in the node's volume root, node affinity to this node and a claimRef to
the claim; kube-controller-manager's PV controller binds the two. A Released volume whose
reclaim policy is Delete is deleted with its directory.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from k8s_api import Api, ApiError

PROVISIONER = "strom.io/local-path"
log = logging.getLogger("provisioner")


def pv_name(claim: dict) -> str:
    return f"pvc-{claim['metadata']['uid']}"


def sync(api: Api, node: str, root: Path) -> None:
    classes = {
        c["metadata"]["name"]: c
        for c in api.items("/apis/storage.k8s.io/v1/storageclasses")
        if c.get("provisioner") == PROVISIONER
    }
    for claim in api.items("/api/v1/persistentvolumeclaims"):
        meta, spec = claim["metadata"], claim["spec"]
        annotations = meta.get("annotations") or {}
        storage_class = classes.get(spec.get("storageClassName") or "")
        if storage_class is None or spec.get("volumeName"):
            continue
        if claim.get("status", {}).get("phase") != "Pending" or meta.get("deletionTimestamp"):
            continue
        selected = annotations.get("volume.kubernetes.io/selected-node")
        wait_for_consumer = storage_class.get("volumeBindingMode") == "WaitForFirstConsumer"
        if (wait_for_consumer and selected != node) or (selected and selected != node):
            continue
        provision(api, node, root, claim, storage_class)
    for volume in api.items("/api/v1/persistentvolumes"):
        annotations = volume["metadata"].get("annotations") or {}
        if annotations.get("pv.kubernetes.io/provisioned-by") != PROVISIONER:
            continue
        released = volume.get("status", {}).get("phase") in ("Released", "Failed")
        if released and volume["spec"].get("persistentVolumeReclaimPolicy") == "Delete":
            path = Path(volume["spec"]["local"]["path"])
            if path.parent == root:
                shutil.rmtree(path, ignore_errors=True)
            api.delete(f"/api/v1/persistentvolumes/{volume['metadata']['name']}")
            log.info("deleted volume %s and %s", volume["metadata"]["name"], path)


def provision(api: Api, node: str, root: Path, claim: dict, storage_class: dict) -> None:
    meta = claim["metadata"]
    name = pv_name(claim)
    path = root / f"{name}_{meta['namespace']}_{meta['name']}"
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o777)
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": name,
            "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": claim["spec"]["resources"]["requests"]["storage"]},
            "accessModes": claim["spec"].get("accessModes") or ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy", "Delete"),
            "storageClassName": storage_class["metadata"]["name"],
            "volumeMode": "Filesystem",
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
            "local": {"path": str(path)},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": [node],
                                }
                            ]
                        }
                    ]
                }
            },
        },
    }
    try:
        api.create("/api/v1/persistentvolumes", volume)
    except ApiError as e:
        if e.status != 409:
            raise
        return
    log.info("provisioned %s for %s/%s at %s", name, meta["namespace"], meta["name"], path)
