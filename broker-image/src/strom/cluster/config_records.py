"""ConfigRecords: the metadata records that set or delete configs of a resource."""

from __future__ import annotations

from collections.abc import Mapping

from kio.static.primitive import i8

from strom.cluster import records


def change(
    resource_type: int, resource_name: str, name: str, value: str | None
) -> records.ConfigRecord:
    return records.ConfigRecord(
        resource_type=i8(resource_type), resource_name=resource_name, name=name, value=value
    )


def changes(
    resource_type: int, resource_name: str, before: Mapping[str, str], after: Mapping[str, str]
) -> list[records.MetadataRecord]:
    changes: list[records.MetadataRecord] = [
        change(resource_type, resource_name, key, value)
        for key, value in sorted(after.items())
        if before.get(key) != value
    ]
    changes.extend(
        change(resource_type, resource_name, key, None)
        for key in sorted(before)
        if key not in after
    )
    return changes
