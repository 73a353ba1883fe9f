"""Records read from JSON, checked against their annotations: what the grader and its grading processes send each other.

`build(cls, data)` makes the dataclass `cls` from a decoded JSON object and checks every field against the type its
annotation declares: int, float (an int is taken too, as it is), bool (which is no int here), str, None, `X | Y`,
`list[X]` and `dict[str, X]` (each item checked), a nested dataclass (built from its object the same way) and `Any`
(taken as it is). A key the class does not declare, a required field missing (one without a default) or a value of
another type raises `WireError`, whose message names the field by its path (`plan.raised_where[1]`). The job
(`checks.engine.contract.protocol.Job`), each event of the grading processes' reports and the observation of a
replayed case
(`checks.engine.contract.observations.CaseObservation`) are read through it. Stdlib dataclasses, not pydantic or
msgspec:
the GPU machines the grader runs on have neither.
"""

from __future__ import annotations

import functools
import types
import typing
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, TypeVar

T = TypeVar("T")


class WireError(TypeError):
    """A JSON value that does not fit the record it is read as; the message names the field."""


def build(cls: type[T], data: Any, where: str = "") -> T:
    """The dataclass `cls` from the JSON object `data`, every field checked; `where` names it in messages."""
    where = where or cls.__name__
    if not isinstance(data, dict):
        raise WireError(f"{where} is {_shown(data)}, not an object")
    declared = _fields(cls)
    unknown = [key for key in data if key not in declared]
    if unknown:
        raise WireError(f"{where} has an unknown field {str(unknown[0])[:40]!r}")
    missing = [name for name, (_, required) in declared.items() if required and name not in data]
    if missing:
        raise WireError(f"{where} lacks its field {missing[0]!r}")
    return cls(**{key: _value(value, declared[key][0], f"{where}.{key}") for key, value in data.items()})


@functools.cache
def _fields(cls: type) -> dict[str, tuple[Any, bool]]:
    """A record's fields: name -> (its annotation, whether the JSON must carry it)."""
    hints = typing.get_type_hints(cls)
    return {f.name: (hints[f.name], f.default is MISSING and f.default_factory is MISSING) for f in fields(cls)}


def _members(hint: Any) -> tuple[Any, ...]:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return typing.get_args(hint)
    return (hint,)


def _value(value: Any, hint: Any, where: str) -> Any:
    """`value` checked against `hint`; WireError naming `where` when it does not fit."""
    members = _members(hint)
    if len(members) > 1:
        if value is None and type(None) in members:
            return None
        candidates = [m for m in members if m is not type(None)]
        if len(candidates) == 1:  # `X | None`: what is wrong with it as an X
            return _value(value, candidates[0], where)
        for member in candidates:
            try:
                return _value(value, member, where)
            except WireError:
                continue
        raise WireError(f"{where} is {_shown(value)}, not {_wanted(hint)}")
    if hint is Any or hint is object:
        return value
    if is_dataclass(hint) and isinstance(hint, type):
        return build(hint, value, where)
    origin = typing.get_origin(hint)
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(hint) or (Any,)
        return [_value(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict and isinstance(value, dict):
        key, item = typing.get_args(hint) or (Any, Any)
        return {_value(k, key, f"{where} key"): _value(v, item, f"{where}[{str(k)[:40]!r}]") for k, v in value.items()}
    if origin is None and _fits(value, hint):
        return value
    if origin is None and hint not in _WORDS:
        raise TypeError(f"{where}: no JSON form for {hint!r}")  # the record's own annotation, not the data
    raise WireError(f"{where} is {_shown(value)}, not {_wanted(hint)}")


def _fits(value: Any, hint: Any) -> bool:
    if hint is type(None) or hint is None:
        return value is None
    if hint in (int, float) and isinstance(value, bool):
        return False
    return isinstance(value, (int, float) if hint is float else hint)


_WORDS: dict[Any, str] = {
    bool: "true or false",
    int: "a whole number",
    float: "a number",
    str: "text",
    list: "a list",
    dict: "an object",
    type(None): "null",
    None: "null",
}


def _wanted(hint: Any) -> str:
    kinds = [dict if is_dataclass(m) else typing.get_origin(m) or m for m in _members(hint)]
    return " or ".join(dict.fromkeys(_WORDS.get(k, str(k)) for k in kinds))


def _shown(value: Any) -> str:
    return _WORDS.get(type(value), f"a {type(value).__name__}")
