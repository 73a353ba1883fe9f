"""A launch plan: what a learner's host function asked of the GPU in one call, as plain data.

The grading process records a plan while it runs the learner's function (`checks.engine.record.plan_recorder`):
the tensors it allocated, the copies and fills it made of them, every kernel launch with every argument, and
which tensors it returned. Nothing else the function does is kept. The replay process
(`checks.engine.replay`) performs the plan on the grader's own inputs with the submission's kernels taken from
its source text; its outputs are what the grader judges.

A plan is JSON. Its parts:

    {"ops": [op, ...], "returned": [value, ...], "kind": "tensor" | "tuple of 2" | ..., "globals": {name: value}}

    op     {"op": "alloc", "id": "a3", "dtype": "float16", "numel": 120, "shape": [...], "strides": [...],
            "fill": "empty" | 0.0 | ...}
           {"op": "const", "id": "c1", "dtype": "int32", "values": [...], "device": "cuda" | "cpu"}
                                   a small tensor made on the host from no data (a page count, offsets), replayed on
                                   the device it was on
           {"op": "const", "id": "kept1", "kept": true, "dtype": ..., "values": [...] | "numel": n, "fill": x}
                                   a tensor kept between calls (made at import, or by an earlier call): its whole
                                   storage, once per call, under a name that stays the same from call to call; the
                                   replay keeps its state from one replayed call to the next
           {"op": "fill", "dst": ref, "value": number}
           {"op": "copy", "dst": ref, "src": ref}                             a layout or dtype copy
           {"op": "host_write", "dst": ref, "what": "aten.add_", "where": "..."}   not replayed: the message says so
           {"op": "launch", "kernel": name, "where": "...", "alternatives": [launch, ...],
            "reset_to_zero": [names], "restore_value": [names], "benchmarks": bool}
                                   an autotuned launch; `benchmarks`: its autotuner holds several configs, so it
                                   benchmarks them (and zeroes `reset_to_zero`) on the first call of each key
    launch {"grid": [x, y, z], "args": {name: value}, "options": {"num_warps": 4, ...}, "config": {name: value}}
                                   an autotuned launch has one per config the autotuner would try; its "config" names
                                   the arguments the config sets (the values the replay reads are the args')
    ref    {"storage": "input:q" | "a3" | "c1", "dtype": "float16", "offset": bytes, "shape": [...],
            "strides": [...]}
    value  {"tensor": ref} | {"host": {"what": "aten.add", "where": "..."}} | {"scalar": number | bool | str | None}
           | {"dtype": "fp16"} | {"tuple": [value, ...]} | {"kernel": name} | {"unsupported": "type name"}
           | {"descriptor": {"base": ref, "shape": [...], "strides": [...], "block_shape": [...],
                             "layout": {NVMMASharedLayout's fields}, "padding": "zero" | "nan"}}
                                   a Gluon tensor descriptor (the Hopper track): TMA's view of a plan tensor

Two plans of the same case, drawn with different values, must be equal (`first_difference`): a plan depends on
shapes, strides, dtypes, scalar inputs and integer (metadata) inputs, never on the values of the data.
"""

from __future__ import annotations

import json
import math
from typing import Any

# Launch options a plan may carry besides the kernel's own arguments (Triton's launch keywords).
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "launch_cooperative_grid", "launch_pdl")
CONST_LIMIT = 1 << 16  # elements of a host-made tensor a plan may carry by value
OPS_LIMIT = 1 << 14  # operations one call may ask for (launches, allocations, copies): no answer key needs 100
DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")


class PlanError(ValueError):
    """A plan that cannot be replayed as it is: the message says why, in the learner's terms."""


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_ref(ref: Any, where: str) -> None:
    if not isinstance(ref, dict):
        raise PlanError(f"{where}: a tensor reference that is not an object")
    if not isinstance(ref.get("storage"), str) or ref.get("dtype") not in DTYPES:
        raise PlanError(f"{where}: a tensor reference without a known storage and dtype")
    shape, strides, offset = ref.get("shape"), ref.get("strides"), ref.get("offset")
    if not isinstance(offset, int) or not isinstance(shape, list) or not isinstance(strides, list):
        raise PlanError(f"{where}: a tensor reference without offset, shape and strides")
    if len(shape) != len(strides) or not all(isinstance(x, int) and x >= 0 for x in shape):
        raise PlanError(f"{where}: a tensor reference whose shape and strides do not fit")
    if not all(isinstance(x, int) for x in strides):
        raise PlanError(f"{where}: a tensor reference with strides that are not integers")


def _check_value(value: Any, where: str, depth: int = 0) -> None:
    if not isinstance(value, dict) or len(value) != 1 or depth > 8:
        raise PlanError(f"{where}: a value the plan cannot hold")
    ((kind, body),) = value.items()
    if kind == "tensor":
        _check_ref(body, where)
    elif kind == "tuple":
        if not isinstance(body, list):
            raise PlanError(f"{where}: a tuple that is not a list")
        for i, item in enumerate(body):
            _check_value(item, f"{where}[{i}]", depth + 1)
    elif kind == "scalar":
        if not (body is None or isinstance(body, (bool, int, float, str))):
            raise PlanError(f"{where}: a scalar of an unknown kind")
    elif kind in ("dtype", "kernel", "unsupported"):
        if not isinstance(body, str):
            raise PlanError(f"{where}: a {kind} that is not a name")
    elif kind == "host":
        if not isinstance(body, dict):
            raise PlanError(f"{where}: a host computation without its description")
    elif kind == "descriptor":
        _check_descriptor(body, where)
    else:
        raise PlanError(f"{where}: a value of kind {kind!r}, which a plan does not have")


DESCRIPTOR_LAYOUT = {
    "swizzle_byte_width": int, "element_bitwidth": int, "rank": int, "transposed": bool, "fp4_padded": bool,
    "cga_layout": list,
}  # fmt: skip  # NVMMASharedLayout's fields, as a plan may carry them


def _check_descriptor(body: Any, where: str) -> None:
    """A Gluon tensor descriptor's value: a plan tensor, whole numbers for its shape, strides and box, a layout of
    NVMMASharedLayout's fields and a padding TMA knows."""
    keys = {"base", "shape", "strides", "block_shape", "layout", "padding"}
    if not isinstance(body, dict) or set(body) != keys:
        raise PlanError(f"{where}: a tensor descriptor without its base, shape, strides, box, layout and padding")
    _check_ref(body["base"], where)
    sizes = [body["shape"], body["strides"], body["block_shape"]]
    if not all(isinstance(s, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in s) for s in sizes):
        raise PlanError(f"{where}: a tensor descriptor whose shape, strides or box are not whole numbers")
    layout = body["layout"]
    if (
        not isinstance(layout, dict)
        or not set(layout) <= set(DESCRIPTOR_LAYOUT)
        or not all(
            isinstance(v, DESCRIPTOR_LAYOUT[k]) and (DESCRIPTOR_LAYOUT[k] is bool or not isinstance(v, bool))
            for k, v in layout.items()
        )
    ):
        raise PlanError(f"{where}: a tensor descriptor with a layout the grader does not build")
    if body["padding"] not in ("zero", "nan"):
        raise PlanError(f"{where}: a tensor descriptor with a padding TMA does not have")


def check(plan: Any) -> dict[str, Any]:
    """The plan, when it has the form above; a PlanError saying what is wrong otherwise."""
    if (
        not isinstance(plan, dict)
        or not isinstance(plan.get("ops"), list)
        or not isinstance(plan.get("returned"), list)
    ):
        raise PlanError("a plan without its operations and returned values")
    for i, op in enumerate(plan["ops"]):
        where = f"operation {i + 1}"
        kind = op.get("op") if isinstance(op, dict) else None
        if kind == "alloc":
            if op.get("dtype") not in DTYPES or not isinstance(op.get("numel"), int) or op["numel"] < 0:
                raise PlanError(f"{where}: an allocation without dtype and size")
            if not (op.get("fill") == "empty" or _is_number(op.get("fill"))):
                raise PlanError(f"{where}: an allocation filled with something other than a number")
        elif kind == "const":
            values = op.get("values")
            if not isinstance(op.get("kept", False), bool):
                raise PlanError(f"{where}: a tensor kept between calls marked with something other than true")
            if op.get("kept") and "fill" in op and "values" not in op:  # a kept tensor of one value throughout
                if op.get("dtype") not in DTYPES or not _is_number(op.get("numel")) or not _is_number(op["fill"]):
                    raise PlanError(f"{where}: a kept tensor the plan cannot carry")
                continue
            if "digest" in op and "values" not in op:  # too large to carry; judged, never performed
                if (
                    op.get("dtype") not in DTYPES
                    or not isinstance(op["digest"], str)
                    or not _is_number(op.get("numel"))
                ):
                    raise PlanError(f"{where}: a host-made tensor the plan cannot carry")
                continue
            if op.get("dtype") not in DTYPES or not isinstance(values, list) or len(values) > CONST_LIMIT:
                raise PlanError(f"{where}: a host-made tensor the plan cannot carry")
            if not all(_is_number(v) or isinstance(v, bool) for v in values):
                raise PlanError(f"{where}: a host-made tensor with values that are not numbers")
        elif kind == "fill":
            _check_ref(op.get("dst"), where)
            if not (_is_number(op.get("value")) or isinstance(op.get("value"), bool)):
                raise PlanError(f"{where}: a fill with a value that is not a number")
        elif kind == "copy":
            _check_ref(op.get("dst"), where)
            _check_ref(op.get("src"), where)
        elif kind == "host_write":
            _check_ref(op.get("dst"), where)
        elif kind == "launch":
            if not isinstance(op.get("kernel"), str) or not isinstance(op.get("alternatives"), list):
                raise PlanError(f"{where}: a launch without its kernel")
            if not op["alternatives"]:
                raise PlanError(f"{where}: a launch without a configuration")
            for alt in op["alternatives"]:
                grid = alt.get("grid") if isinstance(alt, dict) else None
                if not isinstance(grid, list) or not 1 <= len(grid) <= 3:
                    raise PlanError(f"{where}: a launch whose grid is not 1 to 3 numbers")
                if not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in grid):
                    raise PlanError(f"{where}: a launch whose grid is not 1 to 3 whole numbers")
                if not isinstance(alt.get("args"), dict) or not isinstance(alt.get("options"), dict):
                    raise PlanError(f"{where}: a launch without its arguments")
                for name, value in alt["args"].items():
                    _check_value(value, f"{where}, argument {name}")
                for name, value in alt["options"].items():
                    if name not in LAUNCH_OPTIONS or not (value is None or isinstance(value, (bool, int))):
                        raise PlanError(f"{where}: a launch option {name!r} the grader does not pass on")
                config = alt.get("config", {})
                if not isinstance(config, dict) or not all(isinstance(name, str) for name in config):
                    raise PlanError(f"{where}: an autotuner config that does not name its arguments")
            for names in (op.get("reset_to_zero", []), op.get("restore_value", [])):
                if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                    raise PlanError(f"{where}: reset_to_zero or restore_value that are not names")
            if not isinstance(op.get("benchmarks", False), bool):
                raise PlanError(f"{where}: an autotuner's `benchmarks` that is not true or false")
        else:
            raise PlanError(f"{where}: an operation of kind {kind!r}, which a plan does not have")
    for i, value in enumerate(plan["returned"]):
        _check_value(value, f"returned value {i + 1}")
    if not isinstance(plan.get("globals", {}), dict):
        raise PlanError("globals that are not a table")
    return plan


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b if not isinstance(a, (dict, list)) else _same_nested(a, b)


def _same_nested(a: Any, b: Any) -> bool:
    if type(a) is not type(b) or len(a) != len(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return all(_same(x, y) for x, y in zip(a, b, strict=True))


def describe_value(value: dict[str, Any]) -> str:
    """A value of a plan as a learner reads it."""
    ((kind, body),) = value.items()
    if kind == "tensor":
        return f"a {tuple(body['shape'])} {body['dtype']} tensor"
    if kind == "scalar":
        return repr(body)
    if kind == "tuple":
        return "(" + ", ".join(describe_value(v) for v in body) + ")"
    if kind == "host":
        return f"a tensor computed on the host ({body.get('what', '?')})"
    return f"{kind} {body}"


KEPT_ADVICE = (
    " (a tensor kept between calls makes each call's plan depend on the calls before it: make the tensors your "
    "launches use in each call, or once, when your module is imported)"
)


def carried(plan: dict[str, Any]) -> set[str]:
    """The storages a plan carries by value (its `const` operations: made before the call, or outside torch)."""
    return {op["id"] for op in plan["ops"] if op.get("op") == "const"}


def kept(body: dict[str, Any], consts: set[str]) -> bool:
    """Whether a plan's tensor is one kept between calls (a `const` operation marked `kept`)."""
    storage = str(body.get("storage", ""))
    return storage in consts and storage.startswith("kept")


def tensor_origin(body: dict[str, Any], consts: set[str]) -> str:
    """Where a plan's tensor comes from (`consts`: the plan's storages carried by value), and where in it a view
    starts, in words."""
    storage = str(body.get("storage", ""))
    if storage.startswith("input:"):
        origin = f"viewing the input `{storage.removeprefix('input:')}`"
    elif kept(body, consts):
        origin = "kept between calls: made before this call, at import or by an earlier call"
    elif storage in consts:
        origin = "made outside torch in this call (from numpy or Python values), carried by value"
    else:
        origin = "allocated in this call"
    offset, strides = body.get("offset", 0), tuple(body.get("strides", ()))
    return f"({origin}; strides {strides}, offset {offset})"


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """Where two plans of one case (drawn with different data values) differ, in words; None when equal."""
    launches_a = [op for op in a["ops"] if op.get("op") == "launch"]
    launches_b = [op for op in b["ops"] if op.get("op") == "launch"]
    if len(launches_a) != len(launches_b):
        return f"your function launched {len(launches_a)} kernels on one draw and {len(launches_b)} on the other"
    for n, (la, lb) in enumerate(zip(launches_a, launches_b, strict=True), start=1):
        name = la["kernel"]
        if la["kernel"] != lb["kernel"]:
            return f"launch {n} is `{la['kernel']}` on one draw and `{lb['kernel']}` on the other"
        if len(la["alternatives"]) != len(lb["alternatives"]):
            return f"launch {n} (`{name}`) tries a different number of autotuning configs on the two draws"
        for alt_a, alt_b in zip(la["alternatives"], lb["alternatives"], strict=True):
            if not _same(alt_a["grid"], alt_b["grid"]):
                grids = f"{tuple(alt_a['grid'])} on one draw and {tuple(alt_b['grid'])} on the other"
                return f"the grid of launch {n} (`{name}`) is {grids}"
            for arg in alt_a["args"].keys() | alt_b["args"].keys():
                va, vb = alt_a["args"].get(arg), alt_b["args"].get(arg)
                if va is None or vb is None or not _same(va, vb):
                    shown_a = describe_value(va) if va else "nothing"
                    shown_b = describe_value(vb) if vb else "nothing"
                    advice = ""
                    if va and vb and "tensor" in va and "tensor" in vb:
                        consts_a, consts_b = carried(a), carried(b)
                        if shown_a == shown_b:  # alike in shape and dtype: say what differs
                            shown_a = f"{shown_a} {tensor_origin(va['tensor'], consts_a)}"
                            shown_b = f"{shown_b} {tensor_origin(vb['tensor'], consts_b)}"
                        if kept(va["tensor"], consts_a) != kept(vb["tensor"], consts_b):
                            advice = KEPT_ADVICE
                    return (
                        f"argument `{arg}` of launch {n} (`{name}`) is {shown_a} on one draw and {shown_b} on the "
                        f"other{advice}"
                    )
            if not _same(alt_a["options"], alt_b["options"]):
                return f"the launch options of launch {n} (`{name}`) differ between the draws"
    for name in a.get("globals", {}).keys() | b.get("globals", {}).keys():
        if not _same(a.get("globals", {}).get(name), b.get("globals", {}).get(name)):
            return f"the module-level value `{name}` your kernels use differs between the draws"
    for op_a, op_b in zip(a["ops"], b["ops"], strict=False):
        if op_a.get("op") == op_b.get("op") == "const" and not (
            _same(op_a.get("values"), op_b.get("values"))
            and op_a.get("digest") == op_b.get("digest")
            and _same(op_a.get("fill"), op_b.get("fill"))
        ):
            made = op_a.get("where") or "from numpy or Python values"
            return (
                f"a tensor your code made on the host ({made}) holds other values on the two draws: it was computed "
                "from the data"
            )
    if not _same(a["ops"], b["ops"]):
        return "the allocations, copies or fills your function made differ between the draws"
    if not _same(a["returned"], b["returned"]):
        return "what your function returned differs between the draws (other tensors, or other values)"
    return None


def as_outputs(returned: Any) -> list[Any]:
    """What a learner's function returned, as a list of outputs (one tensor or a tuple of them)."""
    return list(returned) if isinstance(returned, (tuple, list)) else [returned]


def returned_kind(returned: Any) -> str:
    """How the plan names what a call returned: 'tensor', 'tuple of 2', or the type's name."""
    import torch

    if isinstance(returned, (tuple, list)):
        return f"{type(returned).__name__} of {len(returned)}"
    return "tensor" if isinstance(returned, torch.Tensor) else type(returned).__name__


def distinct_alternatives(op: dict[str, Any]) -> list[int]:
    """The indices of an autotuned launch's configs that the interpreter runs differently: the first of each that
    differs from the ones before it in its grid or its arguments (launch settings such as num_warps and num_stages
    change nothing in the interpreter)."""
    seen: dict[str, int] = {}
    for index, alternative in enumerate(op["alternatives"]):
        seen.setdefault(json.dumps([alternative["grid"], alternative["args"]], sort_keys=True, default=str), index)
    return sorted(seen.values())


def method_alternatives(plans: list[dict[str, Any]]) -> int:
    """The most distinct configs (`distinct_alternatives`) any autotuned launch of these plans has."""
    counts = [
        len(distinct_alternatives(op)) for plan in plans for op in plan.get("ops", []) if op.get("op") == "launch"
    ]
    return max(counts, default=1)
