"""Build kio message objects of any version from one version-independent description.

A handler describes a response once, as nested dicts and lists with the union of the
fields that any version has; ``build`` keeps the fields the requested version's class
declares and drops the rest. That is how one handler serves every version of an API
without a class per version written by hand.

Plain ints become ``ErrorCode``, ``timedelta`` or ``datetime`` where the schema's
``kafka_type`` says so, so handlers deal in milliseconds and error numbers.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

E = TypeVar("E")

_EPOCH = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)


def _to_error_code(value: Any) -> Any:
    return value if isinstance(value, ErrorCode) else ErrorCode(int(value))


def _to_timedelta(value: Any) -> Any:
    if isinstance(value, datetime.timedelta):
        return value
    return datetime.timedelta(milliseconds=int(value))


def _to_datetime(value: Any) -> Any:
    if value is None or isinstance(value, datetime.datetime):
        return value
    if int(value) < 0:
        return None
    return _EPOCH + datetime.timedelta(milliseconds=int(value))


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "error_code": _to_error_code,
    "timedelta_i32": _to_timedelta,
    "timedelta_i64": _to_timedelta,
    "datetime_i64": _to_datetime,
}


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    nested: type[Any] | None  # entity class of a nested struct or of array items
    is_array: bool
    convert: Callable[[Any], Any] | None
    null_if_missing: bool  # nullable and without a default: absent means null
    # A non-nullable string or bytes field given None: versions before a field became
    # nullable carry "" where later versions carry null (JoinGroup's protocol name, ...).
    empty_if_null: str | bytes | None


def _entity_of(annotation: Any) -> tuple[type[Any] | None, bool]:
    """Find the dataclass inside `X`, `X | None`, `tuple[X, ...]` or `tuple[X, ...] | None`."""
    is_array = False
    candidates = [annotation]
    while candidates:
        current = candidates.pop()
        origin = typing.get_origin(current)
        if origin is tuple:
            is_array = True
            candidates.extend(typing.get_args(current))
        elif origin in (typing.Union, types.UnionType):
            candidates.extend(typing.get_args(current))
        elif isinstance(current, type) and dataclasses.is_dataclass(current):
            return current, is_array
    return None, is_array


_PLANS: dict[type[Any], tuple[_FieldPlan, ...]] = {}


def _plan(cls: type[Any]) -> tuple[_FieldPlan, ...]:
    cached = _PLANS.get(cls)
    if cached is None:
        cached = _PLANS[cls] = _make_plan(cls)
    return cached


def _make_plan(cls: type[Any]) -> tuple[_FieldPlan, ...]:
    hints = typing.get_type_hints(cls)
    plans = []
    for field in dataclasses.fields(cls):
        nested, is_array = _entity_of(hints[field.name])
        kafka_type = field.metadata.get("kafka_type", "")
        annotation = hints[field.name]
        nullable = typing.get_origin(annotation) in (typing.Union, types.UnionType) and (
            type(None) in typing.get_args(annotation)
        )
        no_default = (
            field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        )
        empty: str | bytes | None = None
        if annotation is str:
            empty = ""
        elif annotation is bytes:
            empty = b""
        plans.append(
            _FieldPlan(
                field.name,
                nested,
                is_array,
                _CONVERTERS.get(kafka_type),
                nullable and no_default,
                empty,
            )
        )
    return tuple(plans)


def build(cls: type[E], data: Mapping[str, Any]) -> E:
    """Instantiate `cls` from `data`, recursing into nested structs and arrays."""
    kwargs: dict[str, Any] = {}
    for plan in _plan(cls):
        if plan.name not in data:
            if plan.null_if_missing:
                kwargs[plan.name] = None
            continue
        value = data[plan.name]
        if value is None and plan.empty_if_null is not None:
            value = plan.empty_if_null
        if plan.nested is not None and value is not None:
            if plan.is_array:
                value = tuple(_build_item(plan.nested, item) for item in value)
            elif isinstance(value, Mapping):
                value = build(plan.nested, value)
        elif plan.convert is not None:
            value = plan.convert(value)
        elif plan.is_array and isinstance(value, list):
            value = tuple(value)
        kwargs[plan.name] = value
    return cls(**kwargs)


def _build_item(cls: type[Any], item: Any) -> Any:
    return build(cls, item) if isinstance(item, Mapping) else item


def field_names(cls: type[Any]) -> frozenset[str]:
    return frozenset(plan.name for plan in _plan(cls))


def nested_class(cls: type[Any], field_name: str) -> type[Any]:
    for plan in _plan(cls):
        if plan.name == field_name and plan.nested is not None:
            return plan.nested
    raise KeyError(f"{cls.__name__}.{field_name} is not a nested struct")


def as_millis(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def seq(values: Sequence[Any] | None) -> Sequence[Any]:
    """Arrays in requests may be null; handlers treat null as empty unless it means 'all'."""
    return () if values is None else values
