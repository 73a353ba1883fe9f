"""Triton's interpreter passes a kernel's scalar arguments as Triton's compiler specialises them on a GPU, so that no
kernel text can tell the two apart.

On a GPU, Triton's launcher types each scalar argument before it compiles (`triton.runtime.jit`'s binder, made by
`create_function_from_signature`, calls `native_specialize_impl` for every parameter): an int equal to 1 becomes the
constexpr 1 (unless the parameter is in `do_not_specialize`, or its annotation names a type), another int an `i32`
scalar (`i64` out of int32's range), a float an `fp32` scalar, a bool an `i1` (`u1`) scalar, None the constexpr None.
Triton's own interpreter turns every int into a 0-d tensor and leaves a float a Python float, so a kernel could ask
`isinstance(ONE, tl.tensor)`, `ONE.dtype` or `len(ONE.shape)` (and likewise of a float) and run one method in the
interpreter, where the grader sees every load, and another on a GPU. Here the interpreter asks the same binder: an
argument the compiler makes a constexpr reaches the kernel as the interpreter passes a declared constexpr (the
value itself), and a float or a bool as a 0-d tensor of the type the compiler gives it.

`compiler_arguments()` changes Triton's interpreter in this process (a grading process, the fork server); it does
nothing where the interpreter is missing or has changed shape.
"""

from __future__ import annotations

import inspect
from typing import Any

SCALARS = (bool, int, float)


def compiler_arguments() -> bool:
    """Make the interpreter's launches pass scalars as the compiler specialises them; whether that is in place."""
    try:
        import triton.runtime.interpreter as interpreter
        from triton.runtime import jit
    except ImportError:
        return False
    function = getattr(interpreter, "InterpretedFunction", None)
    executor = getattr(interpreter, "GridExecutor", None)
    if function is None or executor is None or not hasattr(jit, "create_function_from_signature"):
        return False
    if getattr(function.run, "compiler_arguments", False):
        return True

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if warmup:
            return None
        fn = self.rewrite()
        launch = executor(fn, self.arg_names, grid, self.pre_run_hooks)
        arguments = dict(zip(self.arg_names, args, strict=False))
        arguments.update(kwargs)
        for name, (kind, value) in specialised(self, arguments).items():
            if kind == "constexpr":
                if name not in launch.constexprs:
                    launch.constexprs.append(name)
            else:
                arguments[name] = value
        return launch(**arguments)

    run.compiler_arguments = True  # type: ignore[attr-defined]
    run.original = function.run  # type: ignore[attr-defined]
    function.run = run
    return True


def specialised(kernel: Any, arguments: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """The scalar arguments the compiler would type otherwise than the interpreter does: name -> ("constexpr", value)
    for an argument the compiler makes a constexpr, ("tensor", a 0-d tensor of the compiler's type) for a float or a
    bool (Triton's own interpreter cannot pass a bool: it puts one in an int32 array of an int1 tensor, and fails)."""
    import numpy as np
    import triton.language as tl
    import triton.runtime.interpreter as interpreter

    types = compiler_types(kernel, arguments)
    found: dict[str, tuple[str, Any]] = {}
    defaults = {p.name: p.default for p in _typing(kernel)[0]}
    for name, kind in types.items():
        value = arguments.get(name, defaults.get(name))
        if kind == "constexpr" and isinstance(value, int) and not isinstance(value, bool):
            found[name] = ("constexpr", value)
        elif isinstance(value, (bool, float)) and kind in ("u1", "fp16", "bf16", "fp32", "fp64"):
            ty = tl.str_to_ty(kind, None)
            handle = interpreter.TensorHandle(np.array([value], dtype=interpreter._get_np_dtype(ty)), ty)
            found[name] = ("tensor", tl.tensor(handle, ty))
    return found


def compiler_types(kernel: Any, arguments: dict[str, Any]) -> dict[str, str]:
    """name -> the type Triton's launcher gives each scalar argument not declared constexpr ("constexpr" for one it
    specialises into a constant), computed by Triton's own binder with the kernel's `do_not_specialize` options."""
    params, binder = _typing(kernel)
    # only the scalars are typed here: every other argument stands in as None (a constexpr to the binder)
    given = {}
    for p in params:
        value = arguments.get(p.name, p.default)
        given[p.name] = value if isinstance(value, SCALARS) else None
    try:
        _, specialization, _ = binder(**given)
    except Exception:  # noqa: BLE001 - a launch the binder cannot type is left to the interpreter's own error
        return {}
    return {
        p.name: str(spec[0])
        for p, spec in zip(params, specialization, strict=True)
        if not p.is_constexpr and isinstance(given.get(p.name), SCALARS)
    }


def _typing(kernel: Any) -> tuple[list[Any], Any]:
    """A kernel's parameters as Triton's launcher sees them (`KernelParam`, with its `do_not_specialize` options) and
    Triton's binder for them, made once per kernel function and options."""
    from triton.backends.compiler import BaseBackend
    from triton.runtime import jit

    options = getattr(kernel, "kwargs", {}) or {}
    never = tuple(options.get("do_not_specialize") or ())
    never_aligned = tuple(options.get("do_not_specialize_on_alignment") or ())
    key = (kernel.fn, never, never_aligned)
    if key not in _binders:
        signature = inspect.signature(kernel.fn)
        params = [
            jit.KernelParam(i, p, i in never or p.name in never, i in never_aligned or p.name in never_aligned)
            for i, p in enumerate(signature.parameters.values())
        ]
        _binders[key] = (params, jit.create_function_from_signature(signature, params, BaseBackend))
    return _binders[key]


_binders: dict[Any, tuple[list[Any], Any]] = {}  # (kernel function, options) -> its parameters and Triton's binder
