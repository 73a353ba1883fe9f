"""The rule on races between the programs of one launch, from the access log's race watch
(`checks.engine.access.races`): found in the interpreter, where the values still come out right."""

from __future__ import annotations

from checks.engine.access.log import AccessLog
from checks.engine.access.traffic import display_name
from checks.engine.judging.rules.core import compare_all
from checks.engine.judging.rules.declare import ACCESS_LOG, EVERY_CALL, rule
from checks.engine.judging.rules.problem import CaseContext, Problem


@rule(
    EVERY_CALL,
    checks=(
        "in the interpreter, no two programs of one launch store one element where the order they run in matters: "
        "after loading it (a race), or with different values, by tl.store or tl.atomic_xchg (a write collision); and "
        "no program loads an element another program of the launch stored, unless an atomic orders the two (an "
        "unordered read), and where one does, the outputs are right with the programs run last to first, and "
        "interleaved at their atomics, too"
    ),
    message=(
        "Give every element one program that stores it, add into a shared element with tl.atomic_add, and load what "
        "another program stored in a second launch: on a GPU the programs of a launch run at once, in no order."
    ),
    taught_in="10",
    needs=(ACCESS_LOG,),
    explains_gpu_values=True,
)
def no_race(ctx: CaseContext) -> Problem | None:
    """In the interpreter: no element stored by two programs of one launch that loaded it, or with different
    values, and none loaded by a program that another stored with no atomic between that orders them, although the
    interpreter, running the programs one after the other, computes the right values; and where an atomic ordered such
    a load, the call run again with the programs last to first, and interleaved at their atomics, is right too
    (`checks.engine.access.races`)."""
    log = AccessLog.from_dict(ctx.obs.access) if ctx.obs.access else None
    if log is None:
        return None
    if not log.races:
        return _wrong_in_another_order(ctx, log)
    found = next((f for f in log.races if f["kind"] == "race"), log.races[0])
    first, second, launch, where = _said(log, found)
    if found["kind"] == "race":
        return Problem(
            f"Programs {first} and {second} of {launch} both load and store {where}: the interpreter runs one program "
            "after the other, so the second loads what the first stored, but on a GPU they run at once, both load the "
            "old value and one of the two updates is lost (a race). Add into the element with tl.atomic_add, or give "
            "every element one program that stores it."
        )
    if found["kind"] == "read":
        return Problem(
            f"Program {second} of {launch} loads {where}, which program {first} of the same launch wrote: the "
            f"interpreter runs program {first} first, but on a GPU the programs of a launch run at once, in no order, "
            f"so program {second} may load the element before program {first} stores it (an unordered read). Load "
            "what another program stored in a second launch, as puzzle 11's merge kernel does, or compute it in the "
            "program that needs it."
        )
    return Problem(
        f"Programs {first} and {second} of {launch} store different values to {where}: on a GPU they run at once, so "
        "either value may be the one kept (a write collision). Give every element one program that stores it, with "
        "tl.store or tl.atomic_xchg."
    )


def _said(log: AccessLog, found: dict) -> tuple[int, int, str, str]:
    """A finding of the access log (a race, or a read another program's store reached) as the report says it: the two
    programs, "launch N", and "element [i, j] of NAME, at line L of `kernel` (in `function`)"."""
    region = log.regions[int(found["region"])] if 0 <= int(found["region"]) < len(log.regions) else {}
    name = display_name(region) if region else "a tensor"
    first, second = found["programs"]
    kernel, function = str(found.get("kernel", "")), str(found.get("function", ""))
    inside = f"`{kernel}`" + (f" (in `{function}`)" if function and function != kernel else "")
    where = f"element {list(found['index'])} of {name}, at line {found['line']} of {inside}"
    return first, second, f"launch {int(found['launch']) + 1}", where


# the other orders the replay runs a call in, as the report says them (ctx's outputs of each)
OTHER_ORDERS = (
    ("reversed_outputs", "run with the programs last to first"),
    ("interleaved_outputs", "run with the programs paused after their first atomic while later ones start"),
)


def _wrong_in_another_order(ctx: CaseContext, log: AccessLog) -> Problem | None:
    """A load of what another program of the launch stored, which an atomic ordered in the interpreter's order, where
    the same call is wrong with every launch's programs run in another order a GPU may run them in (last to first, or
    interleaved at their atomics: `checks.engine.access.interleaving`), and right as the interpreter ran it."""
    if not log.ordered_reads:
        return None
    if any(m is not None for _, m in compare_all(ctx, ctx.outputs)):
        return None  # wrong as it ran: the values rule says where
    runs = [(order, getattr(ctx, field)) for field, order in OTHER_ORDERS if getattr(ctx, field) is not None]
    order, wrong = next(((o, w) for o, run in runs if (w := [m for _, m in compare_all(ctx, run) if m is not None])),
                        ("", []))  # fmt: skip
    if not wrong:
        return None  # right in every order
    first, second, launch, where = _said(log, log.ordered_reads[0])
    return Problem(
        f"Program {second} of {launch} loads {where}, which program {first} of the same launch stored; an atomic "
        f"of each ordered the two as the interpreter ran them (program {first} first), but {order}, as a GPU may "
        f"run them, the call is wrong: {wrong[0].headline}. An atomic orders a load only when the program looks at "
        "what the atomic returned and that value counts the stores it needs (the program that finds the counter at "
        "its last value merges; a ticket drawn before storing counts no store); load what another program stored in "
        "a second launch, as puzzle 11's merge kernel does.",
        details=list(wrong[0].lines),
    )
