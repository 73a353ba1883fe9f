"""Typed records read from plain data, checked against their annotations: the one reader of the course's files and
messages.

`build(cls, data)` makes the dataclass `cls` from plain data (a decoded JSON object, a YAML file's values) and
checks every field against the type its annotation declares: int, float (an int is taken too, as it is), bool
(which is no int here), str, None, `X | Y`, `Literal[...]` (one of the values listed), `list[X]`, `tuple[X, ...]`
(read from a list), `dict[str, X]` (each item checked), a nested dataclass (built from its object the same way) and
`Any` (taken as it is). A key the class does not declare, a required field missing (one without a default) or a
value of another type raises `RecordError`, which names the field by its path (`plan.raised_where[1]`) and carries
the `Mismatch` itself, so that a reader of a file can name the file's line (`checks.registry` does, for
puzzles.yaml). Where an `X | Y` of records and mappings does not fit, the mismatch found deepest inside the value
is the one reported: it is the one a person most likely meant.

Read through it: puzzles.yaml (`checks.registry`), the job and the events between the grader and its grading
processes (`checks.engine.contract.protocol`, `checks.engine.contract.observations`), the fork server's messages
(`checks.engine.contract.messages`) and the warm grader's (`checks.warm`). Stdlib dataclasses, not pydantic or
msgspec: the GPU machines the grader runs on have neither. This module imports nothing but the standard library.
"""

from __future__ import annotations

import difflib
import functools
import types
import typing
from dataclasses import MISSING, dataclass, fields, is_dataclass
from typing import Any, Literal, TypeVar

T = TypeVar("T")

Key = str | int  # a record's field, a mapping's key or a list's index


@dataclass(frozen=True)
class Mismatch:
    """What in the data does not fit its record, and where.

    `kind` is "type" (a value of another type), "value" (a value not among those allowed), "unknown" (a key the
    record does not declare) or "missing" (a required key absent). `path` is the keys and indices from the top to the
    value, or to the mapping for "unknown" and "missing"; `place` the same path as text (`.cases[1]`, `['o']`).
    `found` is the value ("type", "value") or the key ("unknown", "missing"); `wanted` says in words what belongs
    there; `allowed` lists the keys ("unknown", "missing": the required ones) or the values ("value") allowed."""

    kind: Literal["type", "value", "unknown", "missing"]
    path: tuple[Key, ...]
    place: str
    found: Any
    wanted: str = ""
    allowed: tuple[str, ...] = ()
    advice: str = ""  # the record's own advice on a key it does not declare (its `advice` class variable)

    def guess(self) -> str | None:
        """The allowed key or value closest to the one found, where one is close."""
        close = difflib.get_close_matches(str(self.found), self.allowed, n=1)
        return close[0] if close else None

    def describe(self, where: str) -> str:
        """The mismatch as one clause, the value named `where` (its place, as the reader names it)."""
        if self.kind == "unknown":
            return f"{where} has an unknown field {str(self.found)[:40]!r}"
        if self.kind == "missing":
            return f"{where} lacks its field {self.found!r}"
        if self.kind == "value":
            return f"{where} is {_quoted(self.found)}, not {self.wanted}"
        return f"{where} is {shown(self.found)}, not {self.wanted}"


class RecordError(TypeError):
    """Data that does not fit the record it is read as; the message names the field, `mismatch` says how."""

    def __init__(self, root: str, mismatch: Mismatch) -> None:
        super().__init__(mismatch.describe(root + mismatch.place))
        self.root, self.mismatch = root, mismatch


def build(cls: type[T], data: Any, where: str = "") -> T:
    """The dataclass `cls` from the plain data `data`, every field checked; `where` names it in messages (its class
    name when not given). RecordError when the data does not fit."""
    root = where or cls.__name__
    try:
        return _record(cls, data, (), "")
    except _Misfit as misfit:
        raise RecordError(root, misfit.mismatch) from None


class _Misfit(Exception):
    def __init__(self, mismatch: Mismatch) -> None:
        self.mismatch = mismatch


@functools.cache
def fields_of(cls: type) -> dict[str, tuple[Any, bool]]:
    """A record's fields: name -> (its annotation, whether the data must carry it)."""
    hints = typing.get_type_hints(cls)
    return {f.name: (hints[f.name], f.default is MISSING and f.default_factory is MISSING) for f in fields(cls)}


def _record(cls: type[T], data: Any, path: tuple[Key, ...], place: str) -> T:
    if not isinstance(data, dict):
        raise _Misfit(Mismatch("type", path, place, data, "an object"))
    declared = fields_of(cls)
    for key in data:
        if key not in declared:
            advice = getattr(cls, "advice", "")
            raise _Misfit(Mismatch("unknown", path, place, key, "", tuple(declared), advice))
    for name, (_, required) in declared.items():
        if required and name not in data:
            needed = tuple(n for n, (_, must) in declared.items() if must)
            raise _Misfit(Mismatch("missing", path, place, name, "", needed))
    values = {key: _value(value, declared[key][0], (*path, key), f"{place}.{key}") for key, value in data.items()}
    return cls(**values)


def members(hint: Any) -> tuple[Any, ...]:
    """The members of a union annotation (`X | Y`), or the annotation alone."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return typing.get_args(hint)
    return (hint,)


def _value(value: Any, hint: Any, path: tuple[Key, ...], place: str) -> Any:
    """`value` checked against `hint` (and built, where a record); _Misfit naming `place` when it does not fit."""
    options = members(hint)
    if len(options) > 1:
        return _union(value, options, hint, path, place)
    if hint is Any or hint is object:
        return value
    if is_dataclass(hint) and isinstance(hint, type):
        return _record(hint, value, path, place)
    origin = typing.get_origin(hint)
    if origin is Literal:
        allowed = typing.get_args(hint)
        if any(value == a and type(value) is type(a) for a in allowed):
            return value
        words = tuple(str(a) for a in allowed)
        raise _Misfit(Mismatch("value", path, place, value, "one of " + ", ".join(map(_quoted, allowed)), words))
    if origin in (list, tuple) and isinstance(value, list):
        item = (typing.get_args(hint) or (Any,))[0]
        items = [_value(v, item, (*path, i), f"{place}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict and isinstance(value, dict):
        key_hint, item = typing.get_args(hint) or (Any, Any)
        return {
            _value(k, key_hint, path, f"{place} key"): _value(v, item, (*path, k), f"{place}[{str(k)[:40]!r}]")
            for k, v in value.items()
        }
    if origin is None and _fits(value, hint):
        return value
    if origin is None and hint not in _WORDS:
        raise TypeError(f"{place}: no plain form for {hint!r}")  # the record's own annotation, not the data
    raise _Misfit(Mismatch("type", path, place, value, wanted(hint)))


def _union(value: Any, options: tuple[Any, ...], hint: Any, path: tuple[Key, ...], place: str) -> Any:
    if value is None and type(None) in options:
        return None
    candidates = [m for m in options if m is not type(None)]
    if len(candidates) == 1:  # `X | None`: what is wrong with it as an X
        return _value(value, candidates[0], path, place)
    if isinstance(value, dict):  # a record whose fields the mapping uses is the one meant
        meant = [m for m in candidates if is_dataclass(m) and value.keys() & fields_of(m).keys()]
        if meant:
            return _value(value, meant[0], path, place)
    deepest: Mismatch | None = None
    for member in candidates:
        try:
            return _value(value, member, path, place)
        except _Misfit as misfit:
            if deepest is None or len(misfit.mismatch.path) > len(deepest.path):
                deepest = misfit.mismatch
    if deepest is not None and len(deepest.path) > len(path):  # it fitted one of them, but for something inside
        raise _Misfit(deepest)
    raise _Misfit(Mismatch("type", path, place, value, wanted(hint)))


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
    tuple: "a list",
    dict: "an object",
    type(None): "null",
    None: "null",
}


def wanted(hint: Any) -> str:
    """What an annotation asks for, in words: "a whole number or text"."""
    words = []
    for member in members(hint):
        origin = typing.get_origin(member)
        if origin is Literal:
            words.append("one of " + ", ".join(map(_quoted, typing.get_args(member))))
        else:
            words.append(_WORDS.get(dict if is_dataclass(member) else origin or member, str(member)))
    return " or ".join(dict.fromkeys(words))


def shown(value: Any) -> str:
    """A value's kind, in words: "text", "a list"."""
    return _WORDS.get(type(value), f"a {type(value).__name__}")


def _quoted(value: Any) -> str:
    return repr(value)[:60]
