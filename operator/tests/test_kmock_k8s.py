"""k8s.Client against kmock's Kubernetes emulator: the verbs, typed errors, and `ensure`
(create when absent, patch only when an owned field differs)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import kmock
import kopf
import pytest
from strom_operator import k8s


@pytest.fixture
async def client(kmock: kmock.KubernetesEmulator) -> AsyncIterator[k8s.Client]:
    async with k8s.Client(kopf.ConnectionInfo(server=str(kmock.url))) as client:
        yield client


def configmap(data: dict[str, str], labels: dict[str, str] | None = None) -> k8s.JsonObject:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns", "labels": labels or {"app": "strom"}},
        "data": data,
    }


async def test_ensure_creates_then_patches_only_what_differs(client: k8s.Client) -> None:
    _, first = await client.ensure(configmap({"a": "1"}))
    assert first is k8s.Ensured.CREATED
    # a field added by someone else is not ours to remove
    await client.merge_patch("ConfigMap", "ns", "c", {"metadata": {"annotations": {"x": "y"}}})
    _, again = await client.ensure(configmap({"a": "1"}))
    assert again is k8s.Ensured.UNCHANGED
    live, changed = await client.ensure(configmap({"a": "2"}))
    assert changed is k8s.Ensured.PATCHED
    assert live["data"] == {"a": "2"}
    assert (await client.get("ConfigMap", "ns", "c"))["metadata"]["annotations"] == {"x": "y"}


async def test_missing_objects_are_typed_errors(client: k8s.Client) -> None:
    with pytest.raises(k8s.NotFound):
        await client.get("ConfigMap", "ns", "absent")
    assert await client.get_or_none("ConfigMap", "ns", "absent") is None
    assert await client.delete("ConfigMap", "ns", "absent") is False
    await client.create(configmap({}))
    with pytest.raises(k8s.Conflict):
        await client.create(configmap({}))


async def test_list_filters_by_labels_and_delete_removes(client: k8s.Client) -> None:
    await client.create(configmap({}, labels={"app": "strom"}))
    other = configmap({}, labels={"app": "other"})
    other["metadata"]["name"] = "d"
    await client.create(other)
    listed = await client.list("ConfigMap", "ns", {"app": "strom"})
    assert [item["metadata"]["name"] for item in listed] == ["c"]
    assert await client.delete("ConfigMap", "ns", "c") is True
    assert await client.list("ConfigMap", "ns", {"app": "strom"}) == []
