"""What the grader finds wrong in the plans a recording process reported, before anything is replayed.

Each finding names the rule it breaks (a rule of `checks.engine.judging.rules.plan_rules`, by its name) and says, in the
learner's terms, what to change. A plan that is not of the form `checks.engine.contract.plan` describes was not
written by
the grader's recorder: the report was tampered with.
"""

from __future__ import annotations

from typing import Any

from checks.engine.contract.kernel_source import BUILTINS, KernelSource
from checks.engine.contract.plan import CONST_LIMIT, KEPT_ADVICE, PlanError, check, first_difference
from checks.engine.contract.protocol import Tampered
from checks.engine.judging.mma_waits import first_early_read
from checks.engine.judging.rules.plan_rules import (
    kernel_calls,
    kernels_from_source,
    mma_waited,
    plan_from_shapes,
    torch_free,
)

ALLOWED_CALLS = ", ".join(sorted(BUILTINS - {"True", "False", "None"}))
REPLAYED = "the grader replays only what your function asks of the GPU (allocations, views, copies and launches)"


def _found(rule: str, message: str, details: list[str] | None = None) -> dict[str, Any]:
    return {"rule": rule, "message": message, "details": details or []}


def source_problem(source: KernelSource) -> dict[str, Any] | None:
    """The first use of something outside the kernel language in a kernel body, then the first read of an
    asynchronous warpgroup MMA's result before a wait retires it (`checks.engine.judging.mma_waits`), or None."""
    if not source.problems:
        early = first_early_read(source)
        return _found(mma_waited.name, early.message()) if early is not None else None
    if any(f"in kernel `{name}`:" in source.problems[0] for name in source.gluon_kernels):  # the Hopper track
        return _found(
            kernel_calls.name,
            f"A Gluon kernel uses what the course's Gluon language does not hold: {source.problems[0]}. A @gluon.jit "
            "kernel may call only the gl.* functions, layouts and dtypes the Hopper lessons introduce (with "
            f"mbarrier, tma, warpgroup_mma, warpgroup_mma_wait and fence_async_shared), your other @gluon.jit "
            f"functions and {ALLOWED_CALLS}; none of your kernels ran.",
            source.problems[1:6],
        )
    return _found(
        kernel_calls.name,
        f"A kernel uses what a Triton kernel cannot: {source.problems[0]}. A kernel body may call only "
        f"triton.language (tl.*), your other @triton.jit functions and {ALLOWED_CALLS}; none of your kernels ran. "
        "Move that work into a tl.* operation, or out of the kernel.",
        source.problems[1:6],
    )


def _values(value: dict[str, Any], name: str) -> list[tuple[str, dict[str, Any]]]:
    ((kind, body),) = value.items()
    if kind == "tuple":
        return [item for i, v in enumerate(body) for item in _values(v, f"{name}[{i}]")]
    return [(name, value)]


def _host_text(body: dict[str, Any]) -> str:
    where = f" at {body['where']}" if body.get("where") else ""
    return f"{body.get('what', 'a computation')}{where}"


def plan_problem(plans: list[dict[str, Any]], source: KernelSource) -> dict[str, Any] | None:
    """The first rule the recorded plans of one case break, or None; Tampered when a plan is malformed."""
    try:
        for plan in plans:
            check(plan)
    except PlanError as exc:
        raise Tampered(f"a plan the grader's recorder did not write ({exc})") from exc
    found = source_problem(source)
    if found or not plans:
        return found
    plan = plans[0]
    for name in source.global_names:
        if name not in plan.get("globals", {}):
            return _found(
                kernel_calls.name,
                f"A kernel reads the module-level name `{name}` ({source.global_reads.get(name, 'in a kernel')}), "
                "which holds something a kernel cannot take from the module (a function, a module, a tensor, or "
                "nothing yet when your function runs); none of your kernels ran. A kernel may read a module-level "
                "number, string, dtype or tl.constexpr of one: pass anything else as an argument.",
            )
    kernels = set(source.kernels)
    launches = [op for op in plan["ops"] if op["op"] == "launch"]
    for n, op in enumerate(launches, start=1):
        at = f" ({op['where']})" if op.get("where") else ""
        if op["kernel"] not in kernels:
            shown = ", ".join(f"`{k}`" for k in sorted(kernels)) or "none"
            return _found(
                kernels_from_source.name,
                f"Launch {n}{at} runs `{op['kernel']}`, which is not a @triton.jit function of your code: the grader "
                f"runs only the kernels it reads in your source (yours: {shown}). Define the kernel in the code you "
                "grade (your graded cell, or the file) and launch that one.",
            )
        if op.get("host_hook"):
            return _found(
                torch_free.name,
                f"Launch {n} (`{op['kernel']}`){at} has a pre_hook or post_hook, host code that {REPLAYED} does not "
                "run: use the autotuner's reset_to_zero or restore_value instead.",
            )
        for arg, value in op["alternatives"][0]["args"].items():
            for name, item in _values(value, arg):
                ((kind, body),) = item.items()
                if kind == "kernel" and body not in kernels:
                    return _found(
                        kernels_from_source.name,
                        f"Argument `{name}` of launch {n} (`{op['kernel']}`) is the kernel `{body}`, which is not in "
                        "your code: pass a @triton.jit function you define.",
                    )
                if kind == "host":
                    return _found(
                        torch_free.name,
                        f"Argument `{name}` of launch {n} (`{op['kernel']}`){at} is a tensor your function computed on "
                        f"the host from the data ({_host_text(body)}); {REPLAYED}, so that work never reaches your "
                        "kernel. Do it inside a kernel.",
                    )
                if kind == "unsupported":
                    return _found(
                        torch_free.name,
                        f"Argument `{name}` of launch {n} (`{op['kernel']}`){at} is {body}, which the grader cannot "
                        "pass to your replayed kernel: pass tensors, numbers, booleans, strings, dtypes or tuples.",
                    )
    for op in plan["ops"]:
        if op["op"] == "host_write":
            return _found(
                torch_free.name,
                f"Your function changed a {tuple(op['dst']['shape'])} tensor on the host with {op['what']}"
                f"{' at ' + op['where'] if op.get('where') else ''}; {REPLAYED}, so that change never happens "
                "there. Make a kernel write it.",
            )
    for i, value in enumerate(plan["returned"]):
        ((kind, body),) = value.items()
        if kind == "host":
            return _found(
                torch_free.name,
                f"Output {i + 1} that your function returned was computed on the host ({_host_text(body)}), not by a "
                f"kernel: {REPLAYED}, and a returned tensor must be one of them. Return a tensor your kernel wrote.",
            )
    if len(plans) > 1:
        difference = first_difference(plans[0], plans[1])
        if difference and difference.endswith(KEPT_ADVICE):  # the draws differ in what the first call kept
            return _found(
                plan_from_shapes.name,
                f"What your function asks of the GPU changed from one call to the next: {difference}. A launch may "
                "depend on shapes, strides, dtypes, scalar inputs and integer inputs (a page table), never on the "
                "calls before it.",
            )
        if difference:
            return _found(
                plan_from_shapes.name,
                f"What your function asks of the GPU changed with the values of the inputs: {difference}. A launch "
                "may depend on shapes, strides, dtypes, scalar inputs and integer inputs (a page table), never on "
                "the values of the data: compute with the data only inside your kernels.",
            )
    for op in plan["ops"]:
        if op["op"] == "const" and op.get("kept") and "values" not in op and "fill" not in op:
            return _found(
                torch_free.name,
                f"A tensor your function keeps between calls (made before this call, first used at "
                f"{op.get('where') or 'a launch'}) holds {op['numel']} elements that are not all one value, more "
                f"than the {CONST_LIMIT} the grader carries by value into the replay. Make it in each call with "
                "torch.empty or torch.zeros, or keep it filled with one value (torch.zeros) when it is made.",
            )
        if op["op"] == "const" and "values" not in op and "fill" not in op:
            return _found(
                torch_free.name,
                f"A tensor your code made outside torch ({op.get('where') or 'from numpy or Python values'}) holds "
                f"{op['numel']} elements, more than the {CONST_LIMIT} the grader carries by value into the replay. "
                "Make it on the GPU with torch (torch.arange, torch.full, ...) or compute it inside a kernel.",
            )
    return None
