"""Triton's interpreter without the work it does and then throws away: every kernel it runs gives the same values,
raises the same errors, and takes less time (`bench/results/check-time-cpu.md`).

Three kinds of waste, all in the interpreter's Python (a kernel in the interpreter spends its time in Triton's
front end, building a type for every operation, not in numpy):

- The overflow check of integer `+`, `-` and `*`. With its default options the interpreter builds the check for every
  integer operation (both operands cast to int64, the operation again, two comparisons and an `and`) and hands it
  to `device_assert`, which drops it at once because the interpreter's options never turn debugging on. The check
  is not built where it would be dropped.
- The numpy dtype of a Triton type: the interpreter builds a table of 20 numpy dtypes for every lookup. Each
  scalar type's answer is kept after its first lookup.
- The name of a tuple's type (`tuple_type.name`, text such as "[:constexpr_type[16],:constexpr_type[32]]"): every
  tensor's shape is a tuple, so every operation formats one, and only printing a type reads it. It is formatted
  when read, from the fields and types the tuple type was made with.

`lean_interpreter()` changes Triton's interpreter module in this process (a grading process, the fork server, a
notebook's kernel); it does nothing where the interpreter is missing or has changed shape, which costs only time.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Callable
from typing import Any


def lean_interpreter() -> bool:
    """Skip the interpreter's discarded work in this process; whether all three changes are in place."""
    try:
        import triton.language as tl
        import triton.runtime.interpreter as interpreter
    except ImportError:
        return False
    return _no_dropped_overflow_checks(interpreter) & _kept_numpy_dtypes(interpreter, tl) & _names_when_read(tl)


def _no_dropped_overflow_checks(interpreter: Any) -> bool:
    """The interpreter's builder does not build the overflow checks its own `device_assert` drops."""
    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if options is None or not dataclasses.is_dataclass(options) or not hasattr(options, "sanitize_overflow"):
        return False
    if getattr(options, "debug", True):  # a debugging interpreter runs the checks: they are kept
        return not options.sanitize_overflow
    if options.sanitize_overflow:
        builder.options = dataclasses.replace(options, sanitize_overflow=False)
    return True


def _kept_numpy_dtypes(interpreter: Any, tl: Any) -> bool:
    """The interpreter's `_get_np_dtype` answers a scalar type's lookup from what it answered before."""
    original: Callable[[Any], Any] | None = getattr(interpreter, "_get_np_dtype", None)
    if original is None:
        return False
    if getattr(original, "kept", False):
        return True
    kept: dict[Any, Any] = {}

    def get_np_dtype(tt_dtype: Any) -> Any:
        scalar = tt_dtype.element_ty if isinstance(tt_dtype, tl.block_type) else tt_dtype
        if isinstance(scalar, tl.pointer_type):  # a pointer's value is an address, whatever it points to
            return original(tt_dtype)
        found = kept.get(scalar)
        if found is None:
            found = kept[scalar] = original(scalar)
        return found

    get_np_dtype.kept = True  # type: ignore[attr-defined]
    get_np_dtype.original = original  # type: ignore[attr-defined]
    interpreter._get_np_dtype = get_np_dtype
    return True


def _names_when_read(tl: Any) -> bool:
    """`tuple_type.name` formatted when it is read, from the fields and types given when the tuple type was made."""
    tuple_type = getattr(getattr(tl, "core", None), "tuple_type", None)
    if tuple_type is None:
        return False
    if isinstance(getattr(tuple_type, "name", None), property):
        return True
    made = tuple_type.__init__

    def __init__(self: Any, types: Any, fields: Any = None) -> None:
        self.types = types
        self.fields = fields or [""] * len(types)
        self.__dict__["named_from"] = (builtins.tuple(self.fields), builtins.tuple(self.types))

    def name(self: Any) -> str:
        if "name" not in self.__dict__:
            fields, types = self.__dict__["named_from"]
            self.__dict__["name"] = "[" + ",".join([f"{k}:{v}" for k, v in zip(fields, types, strict=False)]) + "]"
        return self.__dict__["name"]

    def set_name(self: Any, value: str) -> None:
        self.__dict__["name"] = value

    __init__.made = made  # type: ignore[attr-defined]
    tuple_type.__init__ = __init__
    tuple_type.name = property(name, set_name)
    return True
