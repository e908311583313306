"""Check a request's length fields against the frame before kio decodes it.

kio's native decoder reserves memory for an array from its declared element count; a
client that declares billions of elements in a small frame would make it allocate
gigabytes and abort the process (an allocation failure is not an exception). This walk
follows the same schema, reading only lengths and counts, and refuses any array whose
count exceeds the bytes left in the frame (every element takes at least one byte).
Strings and bytes are bounds-checked the same way while skipping them.

The same walk refuses a null (length -1) array where the schema's array is not nullable:
kio decodes it as None, which no handler expects (Kafka's generated parsers refuse it
too). Which arrays are nullable comes from kio's type hints, once per entity type.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from dataclasses import dataclass
from typing import Any

_FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_VARIABLE = ("string", "bytes", "records")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class LengthError(Exception):
    """A length or count field cannot be right for the bytes that follow it."""


class NullArrayError(LengthError):
    """A null array where the schema's array is not nullable."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str  # Entity.field, for error messages
    kafka_type: str | None  # primitive type, or None for a nested entity
    entity: type[Any] | None
    is_array: bool
    nullable_array: bool
    nullable_struct: bool
    tag: int | None
    legacy: bool  # encoded in the legacy format even inside a flexible entity


@dataclass(frozen=True, slots=True)
class _Plan:
    flexible: bool
    fields: tuple[_Field, ...]  # untagged fields, in wire order
    tagged: dict[int, _Field]


_PLANS: dict[type[Any], _Plan] = {}


def _plan(entity: type[Any]) -> _Plan:
    cached = _PLANS.get(entity)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(entity)
    fields = []
    tagged = {}
    for field in dataclasses.fields(entity):
        annotation = hints[field.name]
        is_array = False
        nullable = False
        nullable_array = False
        inner = annotation
        while True:
            origin = typing.get_origin(inner)
            if origin in (typing.Union, types.UnionType):
                nullable = True
                inner = next(a for a in typing.get_args(inner) if a is not type(None))
            elif origin is tuple:
                is_array = True
                nullable_array = nullable  # `tuple[...] | None`, not a nullable element
                inner = typing.get_args(inner)[0]
            else:
                break
        nested = inner if dataclasses.is_dataclass(inner) else None
        spec = _Field(
            name=f"{entity.__name__}.{field.name}",
            kafka_type=None if nested else field.metadata.get("kafka_type"),
            entity=nested if isinstance(nested, type) else None,
            is_array=is_array,
            nullable_array=nullable_array,
            nullable_struct=nullable and nested is not None and not is_array,
            tag=field.metadata.get("tag"),
            # Kafka keeps RequestHeader.client_id a legacy string in every version.
            legacy=entity.__name__ == "RequestHeader" and field.name == "client_id",
        )
        if spec.tag is None:
            fields.append(spec)
        else:
            tagged[int(spec.tag)] = spec
    plan = _Plan(bool(getattr(entity, "__flexible__", False)), tuple(fields), tagged)
    _PLANS[entity] = plan
    return plan


def _uvarint(data: memoryview, position: int, end: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if position >= end:
            raise LengthError("varint runs past the end of the frame")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
        if shift > 63:
            raise LengthError("varint is longer than 10 bytes")


def _need(position: int, size: int, end: int, what: str) -> int:
    if size < 0 or position + size > end:
        raise LengthError(f"{what} of {size} bytes does not fit in the {end - position} left")
    return position + size


def _skip_primitive(
    data: memoryview, position: int, end: int, kafka_type: str, flexible: bool
) -> int:
    fixed = _FIXED_SIZES.get(kafka_type)
    if fixed is not None:
        return _need(position, fixed, end, kafka_type)
    if kafka_type not in _VARIABLE:
        raise LengthError(f"unknown field type {kafka_type}")
    if flexible:
        length, position = _uvarint(data, position, end)
        return _need(position, length - 1, end, kafka_type) if length else position
    if kafka_type == "string":
        _need(position, 2, end, "string length")
        (length,) = _INT16.unpack_from(data, position)
        position += 2
    else:
        _need(position, 4, end, "bytes length")
        (length,) = _INT32.unpack_from(data, position)
        position += 4
    return position if length == -1 else _need(position, length, end, kafka_type)


def _skip_field(data: memoryview, position: int, end: int, spec: _Field, flexible: bool) -> int:
    if spec.is_array:
        if flexible:
            count, position = _uvarint(data, position, end)
            count -= 1  # compact arrays store count + 1; 0 is null
        else:
            _need(position, 4, end, "array length")
            (count,) = _INT32.unpack_from(data, position)
            position += 4
            if count < -1:
                raise LengthError(f"array length {count}")
        if count == -1 and not spec.nullable_array:
            raise NullArrayError(f"{spec.name} was null, but the field is not nullable")
        if count > end - position:
            raise LengthError(f"array of {count} elements in {end - position} bytes")
        for _ in range(max(count, 0)):
            position = _skip_one(data, position, end, spec, flexible)
        return position
    if spec.nullable_struct:
        _need(position, 1, end, "struct marker")
        marker = data[position]
        position += 1
        if marker == 0xFF:  # -1: null struct
            return position
    return _skip_one(data, position, end, spec, flexible)


def _skip_one(data: memoryview, position: int, end: int, spec: _Field, flexible: bool) -> int:
    if spec.entity is not None:
        return skip_entity(data, position, end, spec.entity)
    assert spec.kafka_type is not None
    return _skip_primitive(data, position, end, spec.kafka_type, flexible)


def skip_entity(data: memoryview, position: int, end: int, entity: type[Any]) -> int:
    """Walk one entity from `position`, returning where it ends; raise LengthError."""
    plan = _plan(entity)
    for spec in plan.fields:
        position = _skip_field(data, position, end, spec, plan.flexible and not spec.legacy)
    if plan.flexible:
        count, position = _uvarint(data, position, end)
        if count > end - position:
            raise LengthError(f"{count} tagged fields in {end - position} bytes")
        for _ in range(count):
            tag, position = _uvarint(data, position, end)
            size, position = _uvarint(data, position, end)
            tag_end = _need(position, size, end, "tagged field")
            known = plan.tagged.get(tag)
            if known is not None:
                _skip_field(data, position, tag_end, known, plan.flexible)
            position = tag_end
    return position


def check_request(frame: memoryview, header_type: type[Any], body_type: type[Any]) -> None:
    """Raise LengthError if any count or length in the frame is impossible."""
    end = len(frame)
    position = skip_entity(frame, 0, end, header_type)
    skip_entity(frame, position, end, body_type)
