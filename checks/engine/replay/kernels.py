"""The submission's kernels, built from their source text for the replay (`checks.engine.kernel_source`)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from checks.engine.kernel_source import KernelSource


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


def build(source: KernelSource, globals_: dict[str, Any], workdir: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """(name -> kernel, file -> how messages name it): each file's kernels written out at their own lines and run
    in one namespace that holds only triton.language, the recorded module-level values and the kernels."""
    import triton

    namespace: dict[str, Any] = {"__builtins__": __builtins__, "__name__": "submission_kernels"}
    for alias, target in source.language_aliases.items():
        namespace[alias] = importlib.import_module(target)
    for name in source.global_names:
        if name in globals_:
            namespace[name] = global_value(globals_[name])
    names: dict[str, str] = {}
    for index, file in enumerate(source.files):
        path = workdir / f"kernels_{index}_{Path(file.path).stem}.py"
        path.write_text(file.text, encoding="utf-8")
        names[str(path.resolve())] = file.label
        exec(compile(file.text, str(path.resolve()), "exec"), namespace)
        for kernel, options in file.jit_options.items():
            namespace[kernel] = triton.jit(namespace[kernel], **options)
    return {name: namespace[name] for name in source.kernels if name in namespace}, names
