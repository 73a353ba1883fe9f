"""The submission's kernels, built from their source text for the replay (`checks.engine.contract.kernel_source`)."""

from __future__ import annotations

import importlib
import linecache
from pathlib import Path
from typing import Any

from checks.engine.contract.kernel_language import BUILTINS
from checks.engine.contract.kernel_source import KernelSource
from checks.engine.contract.plan import PlanError


def global_value(recorded: dict[str, Any]) -> Any:
    """A module-level value a kernel reads, as the plan recorded it (a number, a string, a dtype, a constexpr)."""
    import triton.language as tl

    ((kind, body),) = recorded.items()
    if kind == "dtype":
        return getattr(
            tl, {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64"}.get(body, body)
        )
    if kind == "constexpr":
        return tl.constexpr(body)
    if kind == "scalar":
        return body
    raise ValueError(f"a module-level value of kind {kind}")


def kernel_builtins() -> dict[str, Any]:
    """The builtins a kernel's namespace holds: the language's few, nothing else (no open, exec or __import__)."""
    import builtins

    return {name: getattr(builtins, name) for name in BUILTINS if hasattr(builtins, name)}


def remember_text(filename: str, text: str) -> None:
    """Serve `text` as the source of `filename` from memory: Triton's interpreter and compiler read a kernel's lines
    through linecache (inspect.getsourcelines), and an entry without a modification time is never read again from
    a file, so both compile the text that was checked, whatever lies on the disk at that name."""
    lines = [line + "\n" for line in text.split("\n")]
    linecache.cache[filename] = (len(text), None, lines, filename)


def language_object(target: str) -> Any:
    """What a language alias names: a module of triton.language or Gluon's language, or a function of one (Gluon's
    `warpgroup_mma`, imported by name)."""
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError:
        module, _, name = target.rpartition(".")
        return getattr(importlib.import_module(module), name)


def gluon_jit() -> Any:
    """Gluon's decorator, for the kernels written @gluon.jit (the Hopper track)."""
    from triton.experimental import gluon

    return gluon.jit


def build(source: KernelSource, globals_: dict[str, Any], workdir: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """(name -> kernel, file -> how messages name it): each file's kernels, as checked, compiled from memory at their
    own lines (no file is written) in one namespace that holds only triton.language, the recorded module-level
    values, the kernels and the language's builtins."""
    import triton

    namespace: dict[str, Any] = {"__builtins__": kernel_builtins(), "__name__": "submission_kernels"}
    for alias, target in source.language_aliases.items():
        namespace[alias] = language_object(target)
    for name in source.global_names:
        if name not in globals_:
            where = source.global_reads.get(name, "a kernel")
            raise PlanError(f"the module-level name `{name}` ({where}) has no value the plan recorded")
        namespace[name] = global_value(globals_[name])
    names: dict[str, str] = {}
    for index, file in enumerate(source.files):
        filename = str((workdir / file.compiled_name(index)).resolve())
        remember_text(filename, file.text)
        names[filename] = file.label
        exec(compile(file.text, filename, "exec"), namespace)
        for kernel, options in file.jit_options.items():
            jit = gluon_jit() if kernel in source.gluon_kernels else triton.jit
            namespace[kernel] = jit(namespace[kernel], **options)
    return {name: namespace[name] for name in source.kernels if name in namespace}, names
