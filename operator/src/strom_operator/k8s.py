"""A small asyncio client of the Kubernetes REST API: the only module of the operator that
speaks HTTP to the apiserver itself (kopf does its own watching and patching of the
resources it handles).

Built over aiohttp with the credentials kopf logged in with (kopf.ConnectionInfo: server,
CA, client certificate or token). Objects are plain JSON dicts; failures are typed
(`NotFound`, `Conflict`, `Invalid`, with the apiserver's own message). `ensure` is how the
operator owns objects: create when absent, merge-patch when a field it owns differs.
Server-side apply would be neater, but kmock (the fast tier's emulator) treats every patch
as a JSON merge, so get + create / merge-patch is what works on both.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

import aiohttp
import kopf

JsonObject = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
DEFAULT_TIMEOUT_S = 10.0


@dataclasses.dataclass(frozen=True)
class Kind:
    """Where a kind lives in the API."""

    api_version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None, name: str | None = None) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced:
            if namespace is None:
                raise ValueError(f"{self.plural} are namespaced: a namespace is needed")
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name is not None else base


KINDS: dict[str, Kind] = {
    "ConfigMap": Kind("v1", "configmaps"),
    "Service": Kind("v1", "services"),
    "Pod": Kind("v1", "pods"),
    "PersistentVolumeClaim": Kind("v1", "persistentvolumeclaims"),
    "Event": Kind("v1", "events"),
    "StatefulSet": Kind("apps/v1", "statefulsets"),
    "PodDisruptionBudget": Kind("policy/v1", "poddisruptionbudgets"),
    "StorageClass": Kind("storage.k8s.io/v1", "storageclasses", namespaced=False),
    "KafkaCluster": Kind("strom.io/v1alpha1", "kafkaclusters"),
    "Topic": Kind("strom.io/v1alpha1", "topics"),
    # what a SparkJob involves
    "SparkJob": Kind("strom.io/v1alpha1", "sparkjobs"),
    "Job": Kind("batch/v1", "jobs"),
    "ServiceAccount": Kind("v1", "serviceaccounts"),
    "Role": Kind("rbac.authorization.k8s.io/v1", "roles"),
    "RoleBinding": Kind("rbac.authorization.k8s.io/v1", "rolebindings"),
}


class Propagation(enum.Enum):
    """DeleteOptions.propagationPolicy."""

    BACKGROUND = "Background"
    FOREGROUND = "Foreground"
    ORPHAN = "Orphan"


class ApiError(Exception):
    """The apiserver refused a request; the message is its own."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    """409: already exists, or a stale resourceVersion."""


class Invalid(ApiError):
    """422: the object does not pass the schema or a validation rule."""


_ERRORS: dict[int, type[ApiError]] = {404: NotFound, 409: Conflict, 422: Invalid}


class Ensured(enum.Enum):
    CREATED = "created"
    PATCHED = "patched"
    UNCHANGED = "unchanged"


class Client:
    """One aiohttp session to the apiserver; close it (or use `async with`)."""

    def __init__(self, info: kopf.ConnectionInfo, *, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.server = info.server.rstrip("/")
        headers = dict(info.as_http_headers())
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=info.as_ssl_context()),
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=timeout),
        )

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._session.close()

    # --- verbs ------------------------------------------------------------------------

    async def get(self, kind: str, namespace: str | None, name: str) -> JsonObject:
        return await self._request("GET", KINDS[kind].path(namespace, name))

    async def get_or_none(self, kind: str, namespace: str | None, name: str) -> JsonObject | None:
        try:
            return await self.get(kind, namespace, name)
        except NotFound:
            return None

    async def list(
        self, kind: str, namespace: str | None, selector: Mapping[str, str] | None = None
    ) -> list[JsonObject]:
        params = {}
        if selector:
            params["labelSelector"] = ",".join(f"{k}={v}" for k, v in selector.items())
        answer = await self._request("GET", KINDS[kind].path(namespace), params=params)
        items: list[JsonObject] = answer.get("items") or []
        # the apiserver filters by the selector already; kmock does not
        return [item for item in items if _labelled(item, selector or {})]

    async def create(self, body: JsonObject) -> JsonObject:
        namespace = body.get("metadata", {}).get("namespace")
        return await self._request("POST", KINDS[body["kind"]].path(namespace), json=body)

    async def replace(self, body: JsonObject) -> JsonObject:
        meta = body["metadata"]
        path = KINDS[body["kind"]].path(meta.get("namespace"), meta["name"])
        return await self._request("PUT", path, json=body)

    async def merge_patch(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        patch: JsonObject,
        *,
        subresource: str | None = None,
    ) -> JsonObject:
        """A JSON merge patch (RFC 7386); `subresource` "status" or "scale"."""
        path = KINDS[kind].path(namespace, name)
        if subresource:
            path += f"/{subresource}"
        return await self._request("PATCH", path, json=patch, headers={"Content-Type": MERGE_PATCH})

    async def patch_status(
        self, kind: str, namespace: str | None, name: str, status: JsonObject
    ) -> JsonObject:
        return await self.merge_patch(
            kind, namespace, name, {"status": status}, subresource="status"
        )

    async def scale(self, kind: str, namespace: str | None, name: str, replicas: int) -> JsonObject:
        return await self.merge_patch(
            kind, namespace, name, {"spec": {"replicas": replicas}}, subresource="scale"
        )

    async def delete(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        *,
        propagation: Propagation = Propagation.BACKGROUND,
    ) -> bool:
        """Delete an object; False if it was already gone."""
        options = {"apiVersion": "v1", "kind": "DeleteOptions"}
        options["propagationPolicy"] = propagation.value
        try:
            await self._request("DELETE", KINDS[kind].path(namespace, name), json=options)
        except NotFound:
            return False
        return True

    async def ensure(self, desired: JsonObject) -> tuple[JsonObject, Ensured]:
        """Make the object exist with the fields of `desired`: create it when absent,
        merge-patch it when one of the fields `desired` names differs (fields the apiserver
        or others added are left alone)."""
        meta = desired["metadata"]
        live = await self.get_or_none(desired["kind"], meta.get("namespace"), meta["name"])
        if live is None:
            try:
                return await self.create(desired), Ensured.CREATED
            except Conflict:  # made meanwhile (another replica, a retry): patch it instead
                live = await self.get(desired["kind"], meta.get("namespace"), meta["name"])
        owned = {key: value for key, value in desired.items() if key != "status"}
        if contains(live, owned):
            return live, Ensured.UNCHANGED
        patched = await self.merge_patch(
            desired["kind"], meta.get("namespace"), meta["name"], owned
        )
        # a field the apiserver writes in its own form (a quantity, a defaulted list item)
        # differs on every comparison; the patch then changes nothing, nor the version
        before = live.get("metadata", {}).get("resourceVersion")
        if before is not None and before == patched.get("metadata", {}).get("resourceVersion"):
            return patched, Ensured.UNCHANGED
        return patched, Ensured.PATCHED

    # --- plumbing ---------------------------------------------------------------------

    async def _request(
        self,
        method: str,
        path: str,
        *,
        json: JsonObject | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> JsonObject:
        async with self._session.request(
            method, self.server + path, json=json, params=params, headers=headers
        ) as response:
            try:
                answer: Any = await response.json(content_type=None)
            except ValueError:
                answer = {"message": await response.text()}
            if response.status >= 400:
                answer = answer if isinstance(answer, dict) else {}
                error = _ERRORS.get(response.status, ApiError)
                raise error(
                    response.status,
                    str(answer.get("reason") or response.reason or ""),
                    str(answer.get("message") or f"{method} {path}"),
                )
            return answer if isinstance(answer, dict) else {}


def contains(live: Any, desired: Any) -> bool:
    """Whether `live` has every field of `desired` with its value: dicts by key (extra keys
    in `live` are defaults or others' fields), lists item by item with the same length."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(
            key in live and contains(live[key], value) for key, value in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(live) == len(desired)
            and all(contains(a, b) for a, b in zip(live, desired, strict=True))
        )
    return bool(live == desired)


def owner_reference(owner: Mapping[str, Any]) -> JsonObject:
    """An ownerReference to `owner` (a KafkaCluster): Kubernetes' garbage collector deletes
    the owned object with it."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _labelled(item: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    labels = item.get("metadata", {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in selector.items())
