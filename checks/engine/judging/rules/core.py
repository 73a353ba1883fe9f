"""The rules every puzzle applies to what the replay of every graded call did, and the read limits a puzzle asks for.

Each is a pure function of a `CaseContext`: what the grader re-derived itself (inputs, reference)
and what the grading process observed (launches, buffers, loads, returned tensors), declared beside
its function (`checks.engine.judging.rules.declare`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from checks import verdict as V
from checks.engine.access.log import LOAD, AccessLog, F
from checks.engine.access.queries import load_count, loads_of, log_of
from checks.engine.judging.rules import mistakes
from checks.engine.judging.rules.atomic_poison import atomics_on_unwritten_memory
from checks.engine.judging.rules.compare import (
    ALL_ZERO,
    Mismatch,
    compare,
    first_bad,
    index_of,
    locate,
    without_guesses,
)
from checks.engine.judging.rules.declare import ACCESS_LOG, EVERY_CALL, ON_REQUEST, rule
from checks.engine.judging.rules.low_precision import float16_accumulator
from checks.engine.judging.rules.masked_lanes import masked_load_without_other
from checks.engine.judging.rules.pictures import ACCESS_MAP, ERROR_MAP, OVERHANG, launch_blocks, overhang_picture
from checks.engine.judging.rules.problem import CaseContext, Problem
from checks.memory import is_poison
from checks.verdict import agree, plural


@rule(
    EVERY_CALL,
    checks="your function launched a `@triton.jit` kernel of your own",
    message="Compute the answer in a `@triton.jit` kernel that your function launches with `kernel[grid](...)`.",
    taught_in="1",
)
def kernel_launched(ctx: CaseContext) -> Problem | None:
    """The learner's function launched at least one Triton kernel defined in the learner's own code."""
    if any(launch.own for launch in ctx.obs.launches):
        return None
    others = sorted({launch.kernel for launch in ctx.obs.launches})
    extra = f" (it launched only kernels defined elsewhere: {', '.join(others)})" if others else ""
    return Problem(
        f"Your function launched none of your own Triton kernels{extra}: compute the answer in a "
        "@triton.jit kernel that your function launches with kernel[grid](...).",
    )


@rule(
    EVERY_CALL,
    checks="nothing is written past the edges of any tensor (a store without its mask)",
    message="Give every store a mask, or offsets that stay inside the tensor.",
    taught_in="1",
    picture=OVERHANG,
    explains_gpu_values=True,
)
def no_write_outside(ctx: CaseContext) -> Problem | None:
    """Nothing was written into the guard bands around any tensor: inputs first, then allocations."""
    for buf in ctx.obs.buffers:
        if buf.role == "input" and (buf.before or buf.after):
            where = (
                f"{V.plural(buf.after, 'element')} past its end"
                if buf.after
                else f"{V.plural(buf.before, 'element')} before its start"
            )
            return Problem(
                f"{_who_stored(ctx, buf)} wrote outside the input {buf.label} ({where}): "
                "a store is missing its mask or uses the wrong offsets.",
            )
    for buf in ctx.obs.buffers:
        if buf.role != "allocated" or not (buf.before or buf.after):
            continue
        label = buf.label
        if buf.output is not None and 0 <= buf.output < len(ctx.expected):
            label = f"the output {ctx.expected[buf.output].name} ({label})"
        if buf.after:
            start = (
                "right after its last element"
                if buf.first_after == 0
                else f"{V.plural(buf.first_after, 'element')} after its end"
            )
            where = f"{V.plural(buf.after, 'element')} past its end, starting {start}"
        else:
            where = f"{buf.before} elements before its start"
        message = f"{_who_stored(ctx, buf)} wrote outside {label}: {where}; " + _what_went_past(ctx, buf)
        picture = overhang_picture(ctx, buf, message) if buf.after else None
        return Problem(message, picture=picture)
    return None


def _what_went_past(ctx: CaseContext, buf: Any) -> str:
    """What the elements written past the end of an output say, and what to change: a whole slice of the output
    written past its end while a slice of it was never written (a program's rows landed in another's place, which
    a mask would only hide), or one element past the end (a bound off by one); else a mask or offsets."""
    out = ctx.outputs[buf.output] if buf.output is not None and 0 <= buf.output < len(ctx.outputs) else None
    if buf.after and isinstance(out, torch.Tensor) and out.dim() >= 2:
        exp = ctx.expected[buf.output]
        unwritten = is_poison(out.detach().cpu())
        for k in range(1, out.dim()):
            size = math.prod(out.shape[k:])
            slices = unwritten.reshape(-1, size)
            missing = slices.all(dim=1)
            if buf.after % size or not bool(missing.any()) or bool((slices.any(dim=1) & ~missing).any()):
                continue
            names = exp.dims if len(exp.dims) == out.dim() else tuple(f"axis {a}" for a in range(out.dim()))
            inner = " x ".join(str(n) for n in out.shape[k:])
            count = int(missing.sum())
            at = ", ".join(str(index_of(int(i), tuple(out.shape[:k]))) for i in missing.nonzero()[:4, 0])
            outer = ", ".join(names[:k])
            return (
                f"that is exactly {plural(buf.after // size, 'whole slice')} of {exp.name} along "
                f"({', '.join(names[k:])}), {inner} elements each, and {plural(count, 'such slice')} of {exp.name} "
                f"({at}{' ...' if count > 4 else ''} along {outer}) no kernel wrote: a program's rows landed past "
                "the end instead of in their own place, which a mask would only hide. Check how your kernel turns "
                f"its program id into the indices along {outer} (one program per (batch, head): batch = pid // H, "
                "head = pid % H) and which stride multiplies each."
            )
    if buf.after == 1 and buf.first_after == 0:
        return (
            "your store lets exactly one element past the end through, so its mask or bound is off by one "
            "(offsets <= n where offsets < n belongs): fix that comparison."
        )
    return "give that store a mask, or offsets that stay inside the tensor."


def _who_stored(ctx: CaseContext, buf: Any) -> str:
    """'Your kernel `k` (line N, a store through its argument `p`)' when the access log saw the store; else
    'Your code' (on a GPU there is no log)."""
    if not ctx.obs.access:
        return "Your code"
    log = AccessLog.from_dict(ctx.obs.access)
    for site in log.store_sites:
        region = log.regions[int(site["region"])] if 0 <= int(site["region"]) < len(log.regions) else {}
        if region.get("label") != buf.label:
            continue
        kernel, function = str(site.get("kernel", "")), str(site.get("function", ""))
        where = f"`{kernel}`" + (f" (in `{function}`)" if function and function != kernel else "")
        through = f", the store through its argument `{site['argument']}`" if site.get("argument") else ""
        line = f"line {site['line']}" if site.get("line") else "a store"
        return f"Your kernel {where} ({line}{through})"
    return "Your code"


@rule(
    EVERY_CALL,
    checks="the inputs are the same after the call",
    message="Write results to a new tensor, never into an input.",
    taught_in="1",
    explains_gpu_values=True,
)
def inputs_unchanged(ctx: CaseContext) -> Problem | None:
    """No input changed (writes into the guard bands around one are `no_write_outside`)."""
    for buf in ctx.obs.buffers:
        if buf.role == "input" and buf.changed and not (buf.before or buf.after):
            return Problem(
                f"Your code changed its input {buf.label} ({V.plural(buf.changed, 'element')}): "
                "write results to a new tensor, never into an input.",
            )
    return None


@rule(
    EVERY_CALL,
    checks="in the interpreter, no load reads past the edges of a tensor, even when the values come out right",
    message=(
        "Give every load a mask, and offsets that stay inside the tensor: on a GPU a load outside reads garbage "
        "or faults."
    ),
    taught_in="3",
    needs=(ACCESS_LOG,),
    explains_gpu_values=True,
)
def no_load_outside(ctx: CaseContext) -> Problem | None:
    """In the interpreter: no load touched a guard band (an unmasked or mis-offset load)."""
    outside = AccessLog.from_dict(ctx.obs.access).outside() if ctx.obs.access else {}
    if not outside:
        return None
    label, count = next(iter(outside.items()))
    return Problem(
        f"Your kernel loaded {V.plural(count, 'element')} from outside {label} (from the grader's guard "
        "band around it): "
        "a load is missing its mask, or its offsets run past the tensor; on a GPU this reads garbage or faults.",
    )


@rule(
    EVERY_CALL,
    checks="the outputs' count, type, device, shape, dtype and contiguity",
    message=(
        "Return the tensors the puzzle's contract names, on the inputs' device, with the expected shape and dtype, "
        "contiguous where the puzzle asks."
    ),
    taught_in="1",
)
def output_form(ctx: CaseContext) -> Problem | None:
    """As many outputs as the contract says, each a tensor of the right device, shape, dtype and layout."""
    outputs, expected = ctx.outputs, ctx.expected
    if len(outputs) != len(expected):
        names = ", ".join(e.name for e in expected)
        many = ctx.obs.returned.split(" of ")[0] in ("tuple", "list")
        what = f"{len(outputs)} values" if many else f"a {ctx.obs.returned}"
        return Problem(f"Your function returned {what}; it must return {len(expected)} tensor(s): {names}.")
    for out, exp in zip(outputs, expected, strict=True):
        problem = _one_output_form(out, exp)
        if problem:
            return Problem(problem)
    return None


def _one_output_form(out: Any, exp: Any) -> str:
    if not isinstance(out, torch.Tensor):
        return f"Your function returned something other than a tensor for {exp.name}; return a torch tensor."
    if out.device.type != exp.value.device.type:
        return f"{exp.name} is on {out.device}; return it on the inputs' device ({exp.value.device})."
    if tuple(out.shape) != tuple(exp.value.shape):
        return f"{exp.name} has shape {tuple(out.shape)}; expected {tuple(exp.value.shape)}."
    if out.dtype != exp.dtype:
        return f"{exp.name} is {out.dtype}; expected {exp.dtype}: convert in the kernel before the store (x.to(...))."
    if exp.contiguous and not out.is_contiguous():
        return (
            f"{exp.name} has strides {tuple(out.stride())}; the puzzle asks for a contiguous result, "
            "so allocate it with torch.empty(shape)."
        )
    return ""


def compare_all(ctx: CaseContext, outputs: list[Any]) -> list[tuple[Any, Mismatch | None]]:
    """(expected output, its Mismatch or None) for every output, each with its own tolerance."""
    pairs = []
    for out, exp in zip(outputs, ctx.expected, strict=True):
        atol, rtol = _tolerance(ctx, exp)
        pairs.append((exp, compare(exp.name, out, exp.value, atol, rtol, exp.dims)))
    return pairs


def overflowed(ctx: CaseContext, exp: Any) -> bool:
    """Whether the learner's output holds NaN or inf where the reference is finite while every input element the
    kernels could have used is finite (no -inf or NaN in the inputs made them): the mark of an exp that overflowed.
    With an access log (the interpreter) that is every element they loaded, so the NaN the grader puts in the
    slots of a paged cache that hold no key (13) does not count unless it was read; on a GPU, every element."""
    index = next(i for i, e in enumerate(ctx.expected) if e is exp)
    out = ctx.outputs[index]
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        return False
    y, e = out.detach().cpu(), exp.value.detach().cpu()
    if y.shape != e.shape or not bool((~torch.isfinite(y) & torch.isfinite(e) & ~is_poison(y)).any()):
        return False
    log = log_of(ctx)
    for name, t in ctx.inputs.items():
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            continue
        bad = ~torch.isfinite(t.detach().cpu())
        if log is not None and log.index(name) >= 0:
            bad &= loads_of(log, name) > 0
        if bool(bad.any()):
            return False
    return True


_EXP_LIMIT_FP16 = 11.09  # exp(x) is inf in float16 above this (88.7 in float32)


def score_bound(ctx: CaseContext) -> float | None:
    """In an attention puzzle (inputs q, k and sm_scale): the largest score |q.k * sm_scale| (q and k of one (batch,
    head) layout, and not too many scores), else a bound on it from the largest norms of a query and a key
    (Cauchy-Schwarz); None in other puzzles."""
    q, k, scale = (ctx.inputs.get(name) for name in ("q", "k", "sm_scale"))
    if not (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(scale, float)):
        return None
    q, k = q.detach().double(), k.detach().double()
    scores = q.numel() // q.shape[-1] * k.shape[-2]
    if q.dim() == k.dim() == 4 and q.shape[:2] == k.shape[:2] and scores <= _MOST_SCORES:
        return abs(scale) * float((q @ k.transpose(-1, -2)).abs().max())
    return abs(scale) * float(q.norm(dim=-1).max()) * float(k.norm(dim=-1).max())


def no_overflow(bound: float) -> str:
    """What NaN from finite inputs is not, when no score is large enough for exp to overflow."""
    return (
        f"yet the exp of these scores cannot overflow: every score q.k * sm_scale is at most {bound:.3g} in size, "
        "and exp overflows only above 11.1 in float16 (88.7 in float32). Look at the first NaN: a row whose max "
        "stays -inf (a row that sees no key: exp(-inf - (-inf)) is NaN), or a sum of 0 that a row is divided by."
    )


def _tolerance(ctx: CaseContext, exp: Any) -> tuple[float, float]:
    """(atol, rtol) of an output in this case: the puzzle's, widened where the case allows more: a case of
    ill-conditioned inputs may allow a larger rtol, and one of scaled-up inputs a larger atol."""
    atol, rtol = ctx.puzzle.tolerance_for(exp.name)
    return max(atol, float(ctx.case.atol or 0.0)), max(rtol, float(ctx.case.rtol or 0.0))


_MOST_SCORES = 1 << 25  # the largest score matrix (all heads) the causal recomputation makes


def fully_masked_rows(ctx: CaseContext, exp: Any) -> str:
    """A sentence when, in a causal case, the NaN elements of the learner's output are exactly the first r query rows
    of every head: the rows that see no key when the causal boundary is r keys to the left of the diagonal."""
    if ctx.inputs.get("causal") is not True or len(exp.dims) != 4:
        return ""
    index = next(i for i, e in enumerate(ctx.expected) if e is exp)
    out = ctx.outputs[index]
    if not isinstance(out, torch.Tensor) or out.dim() != 4:
        return ""
    nan = torch.isnan(out.detach().cpu().double())
    rows = nan.all(dim=-1)  # (B, H, N)
    r = int(rows[0, 0].sum())
    if not r or bool((nan.any(dim=-1) != rows).any()) or not bool(rows[..., :r].all()) or bool(rows[..., r:].any()):
        return ""
    before = "" if r == 1 else f" and {plural(r - 1, 'key')} before it"
    return (
        f"Exactly query rows 0..{r - 1} of every head are NaN: the rows that see no key at all when the causal mask "
        f"leaves out the diagonal{before} (query row i seeing only "
        f"the keys 0..i - {r}). A row with no allowed key keeps the row max -inf, and exp(-inf - (-inf)) is NaN: let "
        "query row i see the keys 0..i."
    )


@rule(
    EVERY_CALL,
    checks=(
        "a tensor your function keeps between calls (made at import) leaves every call right, not only the first: "
        "the calls are replayed one after another with what they keep"
    ),
    message=(
        "Make that tensor in each call, or have your kernels leave it as the next call needs it (counters set back "
        "to zero, say)."
    ),
    taught_in="11",
)
def kept_state(ctx: CaseContext) -> Problem | None:
    """A call whose outputs are wrong from the state in which earlier calls left the tensors it keeps between calls,
    and right when run again from the state they were made in (the replay runs it twice then)."""
    if not ctx.obs.kept_changed or ctx.fresh_outputs is None:
        return None
    wrong = [(exp, m) for exp, m in compare_all(ctx, ctx.outputs) if m is not None]
    if not wrong or any(m is not None for _, m in compare_all(ctx, ctx.fresh_outputs)):
        return None  # right, or wrong from the first state too: the values rule says where
    exp, first = wrong[0]
    kept = "; ".join(ctx.obs.kept_changed)
    return Problem(
        f"{first.headline}. This call ran on a tensor your function keeps between calls ({kept}) as the calls "
        "before it left it, and the same call is right from the state that tensor was made in (the grader replays "
        "the calls one after another, as your own process runs them): make that tensor in each call, or have your "
        "kernels leave it as the next call needs it (counters set back to zero, say).",
        details=list(first.lines),
        cause=True,
        diagnosed=True,
    )


@rule(
    EVERY_CALL,
    checks="every output matches the torch reference within the tolerance; the report says where it does not",
    message=(
        "Look at where the output is wrong (the report names the elements, rows and blocks, and the shape of the "
        "error) and fix the offsets, masks or arithmetic that compute them."
    ),
    taught_in="1",
    picture=ERROR_MAP,
    explained_by_interpreter=True,
)
def values(ctx: CaseContext) -> Problem | None:
    """Every output matches the reference within its tolerance; the first wrong one is described."""
    mismatches = compare_all(ctx, ctx.outputs)
    wrong = [(exp, m) for exp, m in mismatches if m is not None]
    if not wrong:
        return None
    plain = wrong[0][1]  # as compare() tells it, before the poison is traced
    sources = poisoned_sources(ctx)
    mismatches = [(e, from_poison(ctx, e, m, sources) if m is not None else None) for e, m in mismatches]
    wrong = [(exp, m) for exp, m in mismatches if m is not None]
    exp, first = wrong[0]
    details = list(first.lines)
    message = first.headline
    unwritten = _FROM_POISON in first.headline  # seen in the access log; on a GPU only a lead, and the causes
    diagnosed = True  # below are still looked for; if none is found, only where the values are wrong is said
    causal_side = False
    fits, degenerate, stated = mistakes.fitting(ctx), mistakes.degenerate(ctx), ""
    if unread := keys_not_read(ctx):  # the access log's own evidence, which explains the poison read too
        message, details = f"{plain.headline}: {unread}", list(plain.lines)
        if first is not plain:
            label, kernel = sources[0]
            details.append(
                f"Where a program loaded none of its keys it stored nothing, and {label} (read by `{kernel}`) still "
                f"held the grader's poison there: {first.headline.split(': ', 1)[1].split(' (the first')[0]}."
            )
        unwritten, first = False, plain  # the other outputs: what the poison did, without pointing at the merge
        mismatches = [(e, replace(m, headline=m.headline.replace(_READ_WRITTEN, "")) if m else m)
                      for e, m in mismatches]  # fmt: skip
    elif unwritten:
        pass  # the headline names the cause: memory no kernel wrote
    elif masked := masked_load_without_other(ctx, exp):
        message = f"{first.headline}: {masked}"
    elif summed := atomics_on_unwritten_memory(ctx, exp):
        message = f"{first.headline}: {summed}"
    elif low := float16_accumulator(ctx, exp):
        message = f"{first.headline}: {low}"
        details = [without_guesses(line) for line in details]  # the rows past a block are the sums that overflowed
    elif past_the_sequence := keys_past_seq_lens(ctx):
        message = f"{first.headline}: {past_the_sequence}"
    elif fits:  # the reference with a mistake gives these values: named if it fits every failing case (the stage)
        stated = next(iter(fits))
        details = [fits[stated], *(line for line in details[first.shapes :] if line != ALL_ZERO)]  # the rest guessed
        causal_side = stated in mistakes.CAUSAL_SIDE
    elif not degenerate and (rows := fully_masked_rows(ctx, exp)):
        details = [rows, *details[first.shapes :]]
        causal_side = True
    elif overflowed(ctx, exp) and (bound := score_bound(ctx)) is not None and bound < _EXP_LIMIT_FP16:
        details.insert(0, f"Your output has NaN or inf although every input is finite, {no_overflow(bound)}")
        diagnosed = False  # where, and what it is not: no cause is proven
    elif overflowed(ctx, exp):
        details.insert(0, f"Your output has NaN or inf although every input is finite: {V.OVERFLOW}")
    elif merge := merge_of_splits(ctx, first):
        message = f"{first.headline}: {merge}"
    else:
        diagnosed = False
    cause = first.cause or (diagnosed and not unwritten)  # a poisoned output keeps its pattern over the cases
    if causal_side:  # a cause on the causal side of the cases: a split of failing cases by causal agrees with it
        cause = False
    if len(mismatches) > 1:
        others = [
            f"{e.name} {'also wrong: ' + m.headline.split(': ', 1)[1] if m else 'matches the reference'}"
            for e, m in mismatches
            if e is not exp
        ]
        details.append("Other outputs: " + "; ".join(others) + ".")
    blocks = launch_blocks(ctx)
    picture = {
        "kind": ERROR_MAP.name,
        "error": first.error.float(),
        "bad": first.bad,
        "dims": exp.dims,
        "name": exp.name,
        "headline": first.headline,
        "blocks": blocks,
    }
    if first.unwritten is not None:
        picture["unwritten"] = first.unwritten
    if first.ratio is not None:
        picture["ratio"] = first.ratio.float()
    return Problem(
        message, details, picture, cause=cause, diagnosed=diagnosed, fits=fits, degenerate=degenerate, stated=stated
    )


def keys_past_seq_lens(ctx: CaseContext) -> str:
    """In a puzzle graded with `pages_in_table` (13): what that rule finds, when the values are wrong because the
    kernels read slots past seq_lens (the grader fills them with NaN; on a GPU a page number read past a row of
    block_table can fault). '' when the rule finds nothing."""
    from checks.engine.judging.rules import decoding

    name = decoding.pages_in_table.name
    params = ctx.puzzle.rules.get(name) if isinstance(ctx.puzzle.rules, dict) else None
    if params is None or not ctx.obs.access:
        return ""
    problem = decoding.pages_in_table(ctx, **(params or {}))
    if problem is None:
        return ""
    return f"your kernels read keys past seq_lens (the rule {name}). {problem.message}"


def keys_not_read(ctx: CaseContext) -> str:
    """In a puzzle graded with `pages_in_table` (13): the keys below seq_lens that no program loaded, from the
    access log; '' when every key was read, or without a log."""
    from checks.engine.judging.rules import decoding

    params = ctx.puzzle.rules.get(decoding.pages_in_table.name) if isinstance(ctx.puzzle.rules, dict) else None
    if params is None or not ctx.obs.access:
        return ""
    return decoding.keys_never_read(ctx, **(params or {}))


def merge_of_splits(ctx: CaseContext, mismatch: Mismatch) -> str | None:
    """In a decoding puzzle: the merge of the splits named as the cause, when only split heads are wrong."""
    from checks.engine.judging.rules import decoding

    return decoding.wrong_only_where_split(ctx, mismatch) if ctx.obs.access else None


_FROM_POISON = "were computed from memory no kernel wrote"
_READ_WRITTEN = "; read only the parts of it that a kernel wrote"  # the advice of a poisoned headline (access log)
_MAYBE_POISON = "are NaN"  # on a GPU: a scratch tensor held poison, but whether the kernels read it is not known


def poisoned_sources(ctx: CaseContext) -> list[tuple[str, str]]:
    """(label, the kernel that read it) of each tensor the learner allocated and did not return that still holds
    the grader's poison where the kernels read it (in the interpreter: elements loaded, never stored; on a GPU,
    without an access log: any element no kernel wrote)."""
    candidates = [b for b in ctx.obs.buffers if b.role == "allocated" and b.output is None and b.poisoned]
    if not ctx.obs.access:
        return [(b.label, "") for b in candidates]
    log = AccessLog.from_dict(ctx.obs.access)
    found = []
    for buf in candidates:
        i = log.index(buf.label)
        if i < 0 or log.reads[i].numel() == 0:
            continue
        never_stored = log.writes[i] == 0 if log.writes[i].numel() else torch.ones_like(log.reads[i], dtype=torch.bool)
        if bool(((log.reads[i] > 0) & never_stored).any()):
            loads = log.records_of(buf.label, LOAD)
            kernel = log.launches[int(loads[0, F["launch"]])]["kernel"] if len(loads) else ""
            found.append((buf.label, kernel))
    return found


def from_poison(ctx: CaseContext, exp: Any, m: Mismatch, sources: list[tuple[str, str]]) -> Mismatch:
    """The mismatch told as values computed from memory no kernel wrote, when they are: NaN (the poison itself,
    which arithmetic on it keeps, at elements a kernel stored; or another NaN) while a tensor the kernels read
    still held the poison. Else the mismatch as it is."""
    if not sources:
        return m
    index = next(i for i, e in enumerate(ctx.expected) if e is exp)
    yours = ctx.outputs[index].detach().cpu()
    unwritten = m.unwritten if m.unwritten is not None else torch.zeros_like(m.bad)
    stored = _stored(ctx, exp.name, m.bad)
    nan = torch.isnan(yours.double()) & m.bad
    computed = nan & ~unwritten | (unwritten & stored)
    if not bool(computed.any()):
        return m
    label, kernel = sources[0]
    read_by = f" (read by `{kernel}`)" if kernel else ""
    first = f"{int(computed.sum())} of {m.bad.numel()} elements"
    if ctx.obs.access:  # the access log shows the loads of unwritten memory
        headline = (
            f"{exp.name}: {first} {_FROM_POISON} (the first at {list(first_bad(computed))}): your kernels read "
            f"{label}{read_by} where no kernel had stored anything, so it still held the grader's poison value (NaN) "
            f"there{_READ_WRITTEN}"
        )
    else:  # a GPU keeps no access log: which elements the kernels read is not known, so this is a lead, no more
        headline = (
            f"{exp.name}: {first} {_MAYBE_POISON} (the first NaN at {list(first_bad(computed))}) while {label} still "
            "held the grader's poison value (NaN) where no kernel had stored anything: if your kernels read it "
            "there, read only the parts of it that a kernel wrote"
        )
    lines = locate(computed, exp.dims)
    rest = unwritten & ~stored
    if bool(rest.any()):
        lines.append(f"{int(rest.sum())} more elements were never written, first at {list(first_bad(rest))}.")
    other = m.bad & ~computed & ~rest  # wrong for another reason: reported too, where they are
    if bool(other.any()):
        where = "; ".join(line for line in locate(other, exp.dims) if not line.split(": ", 1)[1].startswith("all "))
        lines.append(
            f"{int(other.sum())} more elements are wrong, not from that memory: first at {list(first_bad(other))}"
            + (f" ({where})." if where else ".")
        )
    return replace(m, headline=headline, lines=lines, unwritten=rest, cause=bool(ctx.obs.access), shapes=0)


def _stored(ctx: CaseContext, name: str, like: torch.Tensor) -> torch.Tensor:
    """Which elements of the output `name` a kernel stored to (the access log's count); all False without a log."""
    if ctx.obs.access:
        log = AccessLog.from_dict(ctx.obs.access)
        if log.index(name) >= 0:
            counts = log.element_counts(name, "store")
            if tuple(counts.shape) == tuple(like.shape):
                return counts > 0
    return torch.zeros_like(like, dtype=torch.bool)


@rule(
    EVERY_CALL,
    checks=(
        "where the puzzle judges the method (a rule of its own on the access log), every element of every output "
        "was stored by your kernels in the call, directly or through a copy of what they stored"
    ),
    message=(
        "Store every element of each output from your kernels (a copy of what they stored counts as theirs): the "
        "method rules judge how your kernels computed the answer from what they store."
    ),
    needs=(ACCESS_LOG,),
    taught_in="4",
)
def outputs_stored(ctx: CaseContext) -> Problem | None:
    """In the interpreter, for a puzzle with method rules: the kernels of this call stored every output element
    (a store or an atomic), so that no method rule passes for want of stores to judge."""
    if not ctx.obs.access or not ctx.puzzle.rules:
        return None
    log = AccessLog.from_dict(ctx.obs.access)
    for exp, out in zip(ctx.expected, ctx.outputs, strict=False):
        if not isinstance(out, torch.Tensor) or out.numel() == 0:
            continue
        if log.index(exp.name) < 0:
            missing, total = out.numel(), out.numel()
        else:
            counts = log.stored_counts(exp.name)  # a copy of what the kernels stored counts as their store
            missing, total = int((counts == 0).sum()), counts.numel()
        if missing:
            return Problem(
                f"{plural(missing, 'element')} of {total} of {exp.name} {agree(missing, 'was', 'were')} not "
                "stored by your kernels in this call "
                f"(a copy of an input, or memory no kernel of this call wrote): the puzzle's method rules judge how "
                f"your kernels computed {exp.name} from their stores. Store every element of {exp.name} from a kernel.",
            )
    return None


@rule(
    ON_REQUEST,
    checks=(
        "at most the passes over each tensor that `puzzles.yaml` allows (6: three over x, 7: two, 8: K and V once, "
        "9a and 9: Q once, 11: K and V once), and no block wider than allowed"
    ),
    message=(
        "Read each input no more often than the puzzle allows, in loads no wider than it allows: the report says "
        "why the puzzle asks it."
    ),
    needs=(ACCESS_LOG,),
    picture=ACCESS_MAP,
)
def limits(
    ctx: CaseContext,
    why: str = "",
    max_block: int | None = None,
    reads_per_element: dict[str, float] | None = None,
    count_all: bool = False,
) -> Problem | None:
    """In the interpreter: the puzzle's caps on passes over memory and on the lanes of one load.

    `reads_per_element` {input: n} caps the average number of loads of each element of an input (the passes
    over memory); `max_block` caps the lanes of one tl.load; `why` says, to the learner, what the caps are for.
    Passes are counted by where the data came from (`passes`): a read of any copy of an input, made by the
    host code or by a kernel, of whatever size, counts as a read of the input's element it copies; with
    `count_all` (one-input puzzles such as softmax) so do re-reads of what the kernels computed, the output
    included: re-reading what you wrote is another pass over memory.
    """
    if not ctx.obs.access:
        return None
    log = AccessLog.from_dict(ctx.obs.access)
    if max_block and log.widest > max_block:
        return Problem(
            f"One of your loads had {log.widest} lanes; this puzzle allows at most {max_block} in one tl.load: {why}",
        )
    for name, most in (reads_per_element or {}).items():
        seen = passes(log, name, count_all)
        if seen == 0 and log.index(name) >= 0 and int(log.regions[log.index(name)]["numel"]) > 0:
            return Problem(
                f"Your kernels never loaded {name} (nor a copy of it) in this call, so there are no passes over it "
                f"to judge: compute from {name} inside your kernels. {why}".strip(),
            )
        if seen > most + 1e-6:
            return Problem(
                f"Your kernels read each element of {name} {_times(seen, most)} times on average; "
                f"this puzzle allows at most {most}: {why}",
            )
    return None


def _times(seen: float, most: float) -> str:
    """`seen` with two decimals, or more when two would show it equal to the cap it exceeds."""
    return f"{seen:.2f}" if round(seen, 2) > most else f"{seen:.6f}"


def passes(log: AccessLog, name: str, count_all: bool) -> float:
    """Loads per element of input `name`, counted by where the data came from: every load of one of its elements,
    directly or through any copy of it (`loads_of`: the plan's copies and the kernels' own), and with count_all the
    loads of what the kernels computed and stored (the output, or a scratch buffer of exp(x - m)), once those make
    up at least half a pass.

    What the kernels computed is counted as a pass over memory when its distinct elements loaded come to at least
    half of the input's, and to more than two per row of it: statistics a pass leaves for the next (a row's max and
    sum, a block's partial max) are far fewer, and reading them is not a pass. A pass that reads less than half of
    its elements from computed data still reads the rest from the input or its copies, where it is counted; data
    that is a copy of the input is counted wherever it lives, whatever its size.
    """
    i = log.index(name)
    if i < 0:
        return 0.0
    numel = int(log.regions[i]["numel"])
    shape = log.regions[i].get("shape") or [numel]
    rows = numel // max(1, int(shape[-1]))  # the input's rows: elements over the length of one
    loaded = float(load_count(log, name))  # loads_of(log, name).sum()
    if count_all and log.derived_loaded:
        own = [r for r, region in enumerate(log.regions) if region["role"] != "input"]
        distinct = sum(log.derived_elements[r] for r in own)
        if distinct >= max(numel / 2, 2 * rows + 1):
            loaded += sum(log.derived_loaded[r] for r in own)
    return loaded / max(1, numel)
