"""The mistakes a report may name as the cause of wrong values: each is the reference recomputed with one mistake put
in (a scale left out, a base-2 score in a base-e exp, the causal boundary a key off, a normaliser left out...).

A mistake *fits* a case when what it predicts, stored in each output's dtype as a kernel stores it (past 65504 a
float16 is inf), reproduces every output it predicts, within the puzzle's tolerance (NaN where yours is NaN), and at
least one of them is wrong in yours. A cause is named only when exactly one mistake of the list fits every failing
case, and one of those cases is not degenerate (a sequence of one key or one row fits several mistakes at once: it
never decides alone); `proven` decides that over the cases, in the grader's stage. Each mistake says nothing where its
inputs are not there (`predict` returns None), so the list is the puzzle's: the mistakes whose inputs the puzzle has.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from checks.engine.judging.rules.compare import locate
from checks.engine.judging.rules.problem import CaseContext
from checks.verdict import plural

LOG2E = 1.0 / math.log(2.0)
_MOST_SCORES = 1 << 25  # the largest score matrix (all heads) a mistake's reference is recomputed for

Prediction = dict[str, torch.Tensor]  # an output's name -> what the reference with the mistake gives


@dataclass(frozen=True)
class Mistake:
    name: str  # how results and tests name it
    label: str  # a few words, for a line that says where it fits and where it does not
    predict: Callable[[CaseContext], Prediction | None]  # None where the case has no input it needs
    says: Callable[[CaseContext], str]  # the sentence that names it, for the case it is said on


def _float(ctx: CaseContext, name: str) -> float | None:
    value = ctx.inputs.get(name)
    return value if isinstance(value, float) else None


def _reference_with(ctx: CaseContext, **changed: Any) -> Prediction:
    from checks.puzzles import spec_module

    return {e.name: e.value for e in spec_module(ctx.puzzle).reference({**ctx.inputs, **changed})}


def _attention(ctx: CaseContext) -> bool:
    """A forward attention case small enough to recompute here: q, k, v of (B, H, N, D), a float sm_scale, and an
    output o."""
    names = ("q", "k", "v")
    return (
        _float(ctx, "sm_scale") is not None
        and all(isinstance(ctx.inputs.get(n), torch.Tensor) and ctx.inputs[n].dim() == 4 for n in names)
        and any(e.name == "o" for e in ctx.expected)
        and _small(ctx)
    )


# -- sm_scale used another way -----------------------------------------------------------------------------------


def _scaled(other: Callable[[float, CaseContext], float | None], only: tuple[str, ...] = ()) -> Callable:
    def predict(ctx: CaseContext) -> Prediction | None:
        scale = _float(ctx, "sm_scale")
        if scale is None or (value := other(scale, ctx)) is None or math.isclose(value, scale, rel_tol=1e-9):
            return None
        twin = _reference_with(ctx, sm_scale=value)
        return {k: v for k, v in twin.items() if k in only} if only else twin

    return predict


def _head_dim(ctx: CaseContext) -> int | None:
    q = ctx.inputs.get("q")
    return int(q.shape[-1]) if isinstance(q, torch.Tensor) else None


def _hard_coded(scale: float, ctx: CaseContext) -> float | None:
    d = _head_dim(ctx)
    return 1.0 / math.sqrt(d) if d else None


def _say_scale(what: str) -> Callable[[CaseContext], str]:
    return lambda ctx: what.format(scale=_float(ctx, "sm_scale") or 0.0, d=_head_dim(ctx) or 0)


SCALE_MISTAKES = (
    Mistake(
        "sm_scale left out",
        "sm_scale left out",
        _scaled(lambda s, ctx: 1.0),
        _say_scale(
            "Yours is what the reference gives with sm_scale = 1 instead of {scale:.4g}, on every failing case: "
            "sm_scale is left out; multiply the scores by it exactly once, where the puzzle says."
        ),
    ),
    Mistake(
        "sm_scale applied twice",
        "sm_scale applied twice",
        _scaled(lambda s, ctx: s * s),
        _say_scale(
            "Yours is what the reference gives with sm_scale squared ({scale:.4g}^2), on every failing case: "
            "sm_scale is applied twice; multiply the scores by it exactly once."
        ),
    ),
    Mistake(
        "exp of base-2 scores",
        "tl.exp of scores scaled for exp2",
        _scaled(lambda s, ctx: s * LOG2E, only=("o", "out")),
        _say_scale(
            "Your o is what the reference gives with sm_scale = {scale:.4g} x log2(e), on every failing case: the "
            "scores are scaled by sm_scale x log2(e) for exp2, then given to tl.exp; use tl.math.exp2 on scores so "
            "scaled (or tl.exp on scores scaled by sm_scale alone), and keep the running max in the same units."
        ),
    ),
    Mistake(
        "hard-coded 1/sqrt(D)",
        "1/sqrt(D) in place of sm_scale",
        _scaled(_hard_coded),
        _say_scale(
            "Yours is what the reference gives with sm_scale = 1/sqrt({d}) instead of the {scale:.4g} the call "
            "passed, on every failing case, and exactly the cases whose sm_scale is not 1/sqrt(D) fail: the scale "
            "is written into the kernel; multiply by the sm_scale argument."
        ),
    ),
)


# -- the softmax's parts -----------------------------------------------------------------------------------------


def _small(ctx: CaseContext) -> bool:
    q, k = ctx.inputs["q"], ctx.inputs["k"]
    return q.numel() // q.shape[-1] * k.shape[-2] <= _MOST_SCORES


def _scores_dtype(ctx: CaseContext) -> torch.dtype:
    return torch.float64 if ctx.inputs["q"].device.type == "cpu" else torch.float32


def _scores(ctx: CaseContext, shift: int | None = 0) -> torch.Tensor:
    """The scaled scores of a forward attention case on the inputs' device, in the reference's precision (float64
    on the CPU, float32 on a GPU), with the causal mask (shifted by `shift` keys) where the case is causal; keys a
    row may not see are -inf."""
    q, wide = ctx.inputs["q"], _scores_dtype(ctx)
    s = (q.detach().to(wide) @ ctx.inputs["k"].detach().to(wide).transpose(-1, -2)) * float(ctx.inputs["sm_scale"])
    if ctx.inputs.get("causal") is True and shift is not None:
        rows = torch.arange(s.shape[-2], device=s.device)[:, None]
        cols = torch.arange(s.shape[-1], device=s.device)[None, :]
        s = s.masked_fill(cols > rows + shift, float("-inf"))
    return s


def _softmax_parts(
    s: torch.Tensor, v: torch.Tensor, start_max: float | None = None, dtype: torch.dtype | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(o, lse, l) of scores `s` (the row max starting at `start_max`), computed in `dtype` (the scores' own by
    default) as a kernel would, returned on the CPU in float64."""
    s = s.to(dtype or s.dtype)
    m = s.max(dim=-1, keepdim=True).values
    if start_max is not None:
        m = m.clamp_min(start_max)
    p = torch.exp(s - m)
    l_sum = p.sum(dim=-1, keepdim=True)
    o = (p @ v.detach().to(s.dtype)) / l_sum
    return o.cpu().double(), (m + torch.log(l_sum)).squeeze(-1).cpu().double(), l_sum.cpu().double()


def _no_normaliser(ctx: CaseContext) -> Prediction | None:
    if not _attention(ctx):
        return None
    o, _, l_sum = _softmax_parts(_scores(ctx), ctx.inputs["v"])
    if bool(torch.allclose(l_sum, torch.ones_like(l_sum))):
        return None
    return {"o": o * l_sum}


def _max_from_zero(ctx: CaseContext) -> Prediction | None:
    """The running max starting at 0 instead of -inf, in float32 as a kernel computes it: where every score of a row
    is far below 0, exp(s - 0) underflows and the row's sum is 0."""
    x = ctx.inputs.get("x")
    if isinstance(x, torch.Tensor) and x.dim() == 2:
        xf = x.detach().cpu().float()
        m = xf.max(dim=-1, keepdim=True).values.clamp_min(0.0)
        p = torch.exp(xf - m)
        return {"out": (p / p.sum(dim=-1, keepdim=True)).double()}
    if not _attention(ctx):
        return None
    o, lse, _ = _softmax_parts(_scores(ctx), ctx.inputs["v"], 0.0, torch.float32)
    return {"o": o, "lse": lse}


SOFTMAX_MISTAKES = (
    Mistake(
        "no normaliser",
        "o not divided by the row sum l",
        _no_normaliser,
        lambda ctx: (
            "Yours / expected is exactly each query row's sum l = sum of exp(s - m) over its keys, on every failing "
            "case: o is never divided by l; divide the accumulator by l once, after the last key block."
        ),
    ),
    Mistake(
        "running max from 0",
        "the running max starting at 0",
        _max_from_zero,
        lambda ctx: (
            "Yours is what the softmax gives when the running max starts at 0 instead of -inf, on every failing "
            "case: a row whose every value is far below 0 then has exp(x - 0) = 0 for each, a sum of 0 and NaN or "
            "inf out; start the max at -inf (float('-inf')), so that it is the row's own max."
        ),
    ),
)


# -- the keys a query row sees -----------------------------------------------------------------------------------

_SHIFTS = (-1, 1, -2, 2)  # where a causal boundary may be off: the diagonal left out, a key past it let in, ...


def _shifted_attention(inputs: dict[str, Any], shift: int, padded: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) on the CPU when query row i sees the keys j <= i + shift, in float64 (float32 on a GPU, as the
    reference). With `padded`, the keys past the end that the shift lets in count as a kernel that loads them as 0
    counts them: score 0, value 0. A row that sees no key is NaN, as a kernel computes it (its max is -inf, and
    exp(-inf - (-inf)) is NaN)."""
    wide = torch.float64 if inputs["q"].device.type == "cpu" else torch.float32
    q, k, v = (inputs[name].detach().to(wide) for name in ("q", "k", "v"))
    n, n_keys = q.shape[-2], k.shape[-2]
    extra = max(0, n - 1 + shift - (n_keys - 1)) if padded else 0
    s = (q @ k.transpose(-1, -2)) * float(inputs["sm_scale"])
    if extra:
        s = torch.cat([s, s.new_zeros((*s.shape[:-1], extra))], dim=-1)
        v = torch.cat([v, v.new_zeros((*v.shape[:-2], extra, v.shape[-1]))], dim=-2)
    rows = torch.arange(n, device=s.device)[:, None]
    cols = torch.arange(s.shape[-1], device=s.device)[None, :]
    s = s.masked_fill(cols > rows + shift, float("-inf"))
    m = s.max(dim=-1, keepdim=True).values
    p = torch.exp(s - m)
    l_sum = p.sum(dim=-1, keepdim=True)
    return ((p @ v) / l_sum).cpu().double(), (m + torch.log(l_sum)).squeeze(-1).cpu().double()


def _keys_seen(shift: int) -> str:
    return f"0..i{shift:+d}".replace("+", " + ").replace("-", " - ") if shift else "0..i"


def causal_boundary(ctx: CaseContext, exp: Any) -> str:
    """A sentence when the learner's attention output is the reference with the causal boundary moved by a key or
    two (query row i seeing the keys 0..i - 1, or 0..i + 1), every element of it; else ''. A row that sees no key
    under the moved boundary is NaN in both, and the sentence says so."""
    inputs = ctx.inputs
    if inputs.get("causal") is not True or not isinstance(inputs.get("sm_scale"), float):
        return ""
    if not all(isinstance(inputs.get(name), torch.Tensor) and inputs[name].dim() == 4 for name in ("q", "k", "v")):
        return ""
    index = next(i for i, e in enumerate(ctx.expected) if e is exp)
    out = ctx.outputs[index]
    q = inputs["q"]
    which = {tuple(q.shape): 0, tuple(q.shape[:3]): 1}.get(tuple(exp.value.shape))
    if q.numel() // q.shape[-1] * inputs["k"].shape[-2] > _MOST_SCORES:
        return ""  # too large to recompute five times here
    if which is None or not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(exp.value.shape):
        return ""
    yours = out.detach().cpu().double()
    atol, rtol = _tolerance(ctx, exp.name)
    expected = exp.value.detach().cpu().double()
    bad = ~((yours - expected).abs() <= atol + rtol * expected.abs())  # NaN counts as wrong
    best = None
    for shift in _SHIFTS:
        for padded in (False, True) if shift > 0 else (False,):
            twin = _shifted_attention(inputs, shift, padded)[which]
            same = ((yours - twin).abs() <= atol + rtol * twin.abs()) | (torch.isnan(yours) & torch.isnan(twin))
            if best is None or int((~same).sum()) < int((~best[2]).sum()):
                best = (shift, padded, same, twin)
    if best is None:
        return ""
    shift, padded, same, twin = best
    explained = bad & same
    if int(explained.sum()) < 0.8 * int(bad.sum()) or int((~same).sum()) > 0.2 * int(bad.sum()):
        return ""  # the moved boundary does not account for (nearly) every wrong element: not proven
    side = "left" if shift < 0 else "right"
    keys = "key" if abs(shift) == 1 else "keys"
    what = (
        "the diagonal key (query i's own) is left out"
        if shift == -1
        else f"{abs(shift)} {keys} on the diagonal's side are left out"
        if shift < 0
        else f"{shift} {keys} past the diagonal {'is' if shift == 1 else 'are'} let in"
    )
    whole = (
        ""
        if bool(same.all())
        else f" on every one of your {int(bad.sum())} wrong elements"
        if bool(explained.eq(bad).all())
        else f" on {int(explained.sum())} of your {int(bad.sum())} wrong elements"
    )
    text = (
        f"Yours is what the reference gives when query row i sees the keys {_keys_seen(shift)} instead of 0..i"
        f"{whole}: the causal boundary is {abs(shift)} {keys} to the {side} of the diagonal ({what}; look at the "
        "comparison that builds the causal mask, < against <=, or a bound one off)."
    )
    nan = torch.isnan(twin) & torch.isnan(yours)
    if bool(nan.any()):
        rows = int(nan.reshape(-1, nan.shape[-1]).all(dim=-1).sum()) if which == 0 else int(nan.sum())
        first_rows = "Query row 0 then sees" if shift == -1 else f"Query rows 0..{-shift - 1} then see"
        text += (
            f" {first_rows} no key at all: the row max stays -inf and exp(-inf - (-inf)) is NaN, which is why "
            f"{plural(rows, 'row')} of {exp.name} {'is' if rows == 1 else 'are'} NaN (the row max is subtracted as "
            "it should be)."
        )
    if padded:
        text += (
            " The keys past the end of the sequence that this lets in count too, with the score 0 of a key loaded "
            "as 0: give them the score -inf as well."
        )
    if not bool(same.all()):  # the elements the moved boundary does not give: where they are, right or wrong
        other = ~same
        where = "; ".join(locate(other, exp.dims))
        right, wrong = int((other & ~bad).sum()), int((other & bad).sum())
        text += (
            f" Yours differs from that recomputation at {plural(int(other.sum()), 'element')} ({where}): "
            + (f"{right} right and {wrong} wrong in another way" if wrong else "yours is right there")
            + "; look at which keys your kernel lets in for those rows."
        )
    return text


def _within_block(ctx: CaseContext, shift: int, padded: bool) -> Prediction | None:
    """The causal boundary `shift` keys to the right, but never past the end of the query block's diagonal key block:
    a kernel whose stage on the diagonal stops at start_m * BLOCK_M + BLOCK_M lets the extra keys in only there.
    With `padded`, the keys past N it lets in count as a kernel that loads them as 0 counts them (score 0, value 0)."""
    blocks = _blocks(ctx)
    if blocks is None:
        return None
    s, v = _scores(ctx, shift=None), ctx.inputs["v"].detach().to(_scores_dtype(ctx))
    n, n_keys = s.shape[-2], s.shape[-1]
    extra = max(0, n - 1 + shift - (n_keys - 1)) if padded else 0
    if extra:
        s = torch.cat([s, s.new_zeros((*s.shape[:-1], extra))], dim=-1)
        v = torch.cat([v, v.new_zeros((*v.shape[:-2], extra, v.shape[-1]))], dim=-2)
    rows = torch.arange(n, device=s.device)[:, None]
    cols = torch.arange(s.shape[-1], device=s.device)[None, :]
    s = s.masked_fill((cols > rows + shift) | (cols >= (rows // blocks[0] + 1) * blocks[0]), float("-inf"))
    o, lse, _ = _softmax_parts(s, v)
    return {"o": o, "lse": lse}


def _shift_variants(ctx: CaseContext, shift: int) -> list[Prediction]:
    variants = [
        {"o": o, "lse": lse}
        for o, lse in (_shifted_attention(ctx.inputs, shift, padded) for padded in (False, True)[: 1 + (shift > 0)])
    ]
    if shift > 0:
        variants += [p for p in (_within_block(ctx, shift, padded) for padded in (False, True)) if p is not None]
    return variants


def _shift(shift: int) -> Callable[[CaseContext], Prediction | None]:
    def predict(ctx: CaseContext) -> Prediction | None:
        if not _attention(ctx) or ctx.inputs.get("causal") is not True:
            return None
        return _either(ctx, _shift_variants(ctx, shift))

    return predict


def _either(ctx: CaseContext, predictions: list[Prediction]) -> Prediction | None:
    """The first of `predictions` that reproduces the case (the variants of one mistake), else the first."""
    for prediction in predictions:
        if reproduces(ctx, prediction):
            return prediction
    return predictions[0] if predictions else None


def _say_shift(shift: int) -> Callable[[CaseContext], str]:
    def says(ctx: CaseContext) -> str:
        variants = _shift_variants(ctx, shift)
        if any(reproduces(ctx, p) for p in variants[: 1 + (shift > 0)]):
            return causal_boundary(ctx, next(e for e in ctx.expected if e.name == "o"))
        keys = "key" if shift == 1 else "keys"
        return (
            f"Yours is what the reference gives when query row i sees the keys 0..i + {shift} instead of 0..i, but no "
            f"key past the end of its query block, on every failing case: the causal boundary is {shift} {keys} to "
            f"the right of the diagonal (look at the comparison that builds the causal mask, < against <=, or a bound "
            "one off); the rows at the end of a block do not show it, since the stage on the diagonal stops there."
        )

    return says


def _not_causal(ctx: CaseContext) -> Prediction | None:
    if not _attention(ctx) or ctx.inputs.get("causal") is not True or ctx.inputs["q"].shape[-2] < 2:
        return None
    o, lse, _ = _softmax_parts(_scores(ctx, shift=None), ctx.inputs["v"])
    return {"o": o, "lse": lse}


def _blocks(ctx: CaseContext) -> tuple[int, int] | None:
    from checks.engine.judging.rules.pictures import launch_blocks

    blocks = launch_blocks(ctx)
    m, n = blocks.get("BLOCK_M"), blocks.get("BLOCK_N")
    return (m, n) if m and n else None


def _diagonal_late(ctx: CaseContext) -> Prediction | None:
    """The stage on the diagonal starting one key block late: a query row of block i never sees the keys
    i * BLOCK_M .. i * BLOCK_M + BLOCK_N - 1, the first key block of its diagonal."""
    if not _attention(ctx) or ctx.inputs.get("causal") is not True or (blocks := _blocks(ctx)) is None:
        return None
    block_m, block_n = blocks
    s = _scores(ctx)
    n, n_keys = s.shape[-2], s.shape[-1]
    start = (torch.arange(n, device=s.device) // block_m * block_m)[:, None]
    cols = torch.arange(n_keys, device=s.device)[None, :]
    s = s.masked_fill((cols >= start) & (cols < start + block_n), float("-inf"))
    o, lse, _ = _softmax_parts(s, ctx.inputs["v"])
    return {"o": o, "lse": lse}


def _diagonal_one_key_block(ctx: CaseContext) -> Prediction | None:
    """The stage on the diagonal covering one key block where BLOCK_M > BLOCK_N (a square block assumed): a query
    row of block i sees its diagonal's keys only up to i * BLOCK_M + BLOCK_N - 1."""
    if not _attention(ctx) or ctx.inputs.get("causal") is not True or (blocks := _blocks(ctx)) is None:
        return None
    block_m, block_n = blocks
    if block_m <= block_n:
        return None
    s = _scores(ctx)
    start = (torch.arange(s.shape[-2], device=s.device) // block_m * block_m)[:, None]
    cols = torch.arange(s.shape[-1], device=s.device)[None, :]
    o, lse, _ = _softmax_parts(s.masked_fill(cols >= start + block_n, float("-inf")), ctx.inputs["v"])
    return {"o": o, "lse": lse}


def _padding(ctx: CaseContext) -> int:
    """How many lanes of the last key block lie past N, for the BLOCK_N the kernels were launched with (0 without)."""
    blocks = _blocks(ctx)
    n_keys = int(ctx.inputs["k"].shape[-2])
    return -n_keys % blocks[1] if blocks else 0


def _padding_scored_zero(ctx: CaseContext) -> Prediction | None:
    """The lanes of the last key block past N counted with the score 0 and the value 0 (K and V loaded as 0 there,
    and no -inf for them): every row's softmax gets their share."""
    if not _attention(ctx) or ctx.inputs.get("causal") is True or not (pad := _padding(ctx)):
        return None
    s, v = _scores(ctx), ctx.inputs["v"].detach().to(_scores_dtype(ctx))
    s = torch.cat([s, s.new_zeros((*s.shape[:-1], pad))], dim=-1)
    v = torch.cat([v, v.new_zeros((*v.shape[:-2], pad, v.shape[-1]))], dim=-2)
    o, lse, _ = _softmax_parts(s, v)
    return {"o": o, "lse": lse}


KEY_MISTAKES = (
    *(
        Mistake(
            f"causal boundary {shift:+d}",
            f"the causal boundary {abs(shift)} key{'s' if abs(shift) > 1 else ''} to the "
            f"{'left' if shift < 0 else 'right'} of the diagonal",
            _shift(shift),
            _say_shift(shift),
        )
        for shift in (-1, 1, -2, 2)
    ),
    Mistake(
        "causal mask left out",
        "every key seen by every row (no causal mask)",
        _not_causal,
        lambda ctx: (
            "Yours is what the reference gives with causal=False, on every failing case: each query row sees every "
            "key up to N, its future ones too; the keys past the diagonal get the score -inf (on the diagonal's key "
            "block, with a mask that keeps key j for query i only when j <= i)."
        ),
    ),
    Mistake(
        "padding scored 0",
        "the lanes past N scored 0 instead of -inf",
        _padding_scored_zero,
        lambda ctx: (
            f"Yours is what the reference gives when the {_padding(ctx)} lanes of the last key block past N count "
            "with the score 0 and the value 0, on every failing case: masked lanes loaded as 0 get the score 0 "
            "instead of -inf and a share of the softmax; give every masked lane the score -inf before the max and "
            "the sum (tl.where(mask, s, float('-inf')))."
        ),
    ),
    Mistake(
        "diagonal stage one key block",
        "the diagonal's stage one key block long (BLOCK_M = BLOCK_N assumed)",
        _diagonal_one_key_block,
        lambda ctx: (
            "Yours is what the reference gives when each query block sees only the first key block of its diagonal "
            "(keys up to start_m * BLOCK_M + BLOCK_N - 1), on every failing case: the stage on the diagonal covers "
            "one key block, as if BLOCK_M were BLOCK_N; let it run to start_m * BLOCK_M + BLOCK_M (or N), in steps "
            "of BLOCK_N."
        ),
    ),
    Mistake(
        "diagonal stage one block late",
        "the diagonal's first key block left out",
        _diagonal_late,
        lambda ctx: (
            "Yours is what the reference gives when each query block leaves out the first key block on its diagonal "
            "(keys start_m * BLOCK_M .. start_m * BLOCK_M + BLOCK_N - 1), on every failing case: the stage on the "
            "diagonal starts one key block late; start it where the stage before it ends."
        ),
    ),
)


# -- which head, which keys --------------------------------------------------------------------------------------


def _kv_heads_by_modulo(ctx: CaseContext) -> Prediction | None:
    """Query head h reading the keys and values of head h % H_kv instead of h // G."""
    q = ctx.inputs.get("q")
    if not isinstance(q, torch.Tensor) or q.dim() != 3 or _float(ctx, "sm_scale") is None:
        return None
    names, axis = (("k", "v"), 1) if "k" in ctx.inputs else (("k_cache", "v_cache"), 2)
    if not all(isinstance(ctx.inputs.get(n), torch.Tensor) for n in names):
        return None
    h_q, h_kv = q.shape[1], ctx.inputs[names[0]].shape[axis]
    if h_kv in (1, h_q):
        return None  # one kv head, or one per query head: both mappings are the same
    index = torch.tensor([h % h_kv for h in range(h_q)], device=q.device)
    return _reference_with(ctx, **{n: ctx.inputs[n].index_select(axis, index) for n in names})


def _keys_up_to(ctx: CaseContext, kept: int) -> Prediction:
    k, v = (ctx.inputs[n][:, :, :kept] for n in ("k", "v"))
    return _reference_with(ctx, k=k, v=v)


def _kept_keys(ctx: CaseContext) -> int | None:
    """How many keys of every head the returned lse sums over, when it is the logsumexp of the first K scores of
    each head for one K < N (from the running logsumexp of each head's scores); else None."""
    q, k = ctx.inputs.get("q"), ctx.inputs.get("k")
    if not (isinstance(q, torch.Tensor) and q.dim() == 3 and isinstance(k, torch.Tensor) and k.dim() == 4):
        return None
    names = [e.name for e in ctx.expected]
    if "lse" not in names or k.numel() > _MOST_SCORES or _float(ctx, "sm_scale") is None:
        return None
    lse = ctx.outputs[names.index("lse")]
    if not isinstance(lse, torch.Tensor) or not bool(torch.isfinite(lse).all()):
        return None
    group = q.shape[1] // k.shape[1]
    keys = k.detach().cpu().double().repeat_interleave(group, dim=1)  # (B, H_q, N, D)
    s = torch.einsum("bhd,bhnd->bhn", q.detach().cpu().double(), keys) * float(ctx.inputs["sm_scale"])
    running = torch.logcumsumexp(s, dim=-1)  # (B, H_q, N): the logsumexp of the first j + 1 scores
    gap = (running - lse.detach().cpu().double()[..., None]).abs().amax(dim=(0, 1))  # (N,)
    kept = int(gap.argmin()) + 1
    return kept if kept < k.shape[2] else None


def _tail_left_out(ctx: CaseContext) -> Prediction | None:
    """The last keys of every head left out (a count of splits or blocks rounded down): as many as the lse shows."""
    kept = _kept_keys(ctx)
    return _keys_up_to(ctx, kept) if kept else None


def _say_tail(ctx: CaseContext) -> str:
    n, kept = int(ctx.inputs["k"].shape[2]), _kept_keys(ctx) or 0
    return (
        f"Yours is what the reference gives with only the keys 0..{kept - 1} of the {n} (every head's last "
        f"{n - kept} left out), on every failing case: the keys past the last whole split count in no program, as "
        "when the number of splits (or of key blocks) is N // size where cdiv(N, size) belongs; let the last split run "
        "to N, masked."
    )


HEAD_MISTAKES = (
    Mistake(
        "kv head h % H_kv",
        "query head h reading kv head h % H_kv",
        _kv_heads_by_modulo,
        lambda ctx: (
            "Yours is what the reference gives when query head h reads the keys and values of kv head h % H_kv, on "
            "every failing case: the G query heads of a group share kv head h // G (heads 0..G-1 read kv head 0); "
            "divide, do not take the remainder."
        ),
    ),
    Mistake("keys past the last split left out", "the last keys of every head left out", _tail_left_out, _say_tail),
)


# -- an input read through other strides -------------------------------------------------------------------------

_READ = ("x", "a", "b", "q", "k", "v")  # the inputs a kernel reads through strides it is passed


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(shape[d + 1 :]) for d in range(len(shape)))


def _other_strides(ctx: CaseContext, name: str, how: str) -> tuple[int, ...] | None:
    """The strides input `name` is read through under mistake `how`: 'swapped' (its last two exchanged),
    'contiguous' (those of a contiguous tensor of its shape) or another input's name (that input's strides)."""
    x = ctx.inputs.get(name)
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        return None
    own = tuple(x.stride())
    if how == "swapped":
        alt = (*own[:-2], own[-1], own[-2])
    elif how == "contiguous":
        alt = _contiguous_strides(tuple(x.shape))
    else:
        other = ctx.inputs.get(how)
        if not isinstance(other, torch.Tensor) or other.shape != x.shape:
            return None
        alt = tuple(other.stride())
    return alt if alt != own else None


def _through(x: torch.Tensor, alt: tuple[int, ...]) -> torch.Tensor | None:
    """`x` read through the strides `alt`, where they reach no further than its own; else None (a read past the
    tensor, which the rule on loads outside a tensor names)."""
    reach = sum((size - 1) * stride for size, stride in zip(x.shape, alt, strict=True))
    if min(alt) < 0 or reach > sum((size - 1) * stride for size, stride in zip(x.shape, x.stride(), strict=True)):
        return None
    return torch.as_strided(x, tuple(x.shape), alt, x.storage_offset())


def _read_through(name: str, how: str) -> Callable[[CaseContext], Prediction | None]:
    def predict(ctx: CaseContext) -> Prediction | None:
        alt = _other_strides(ctx, name, how)
        twin = _through(ctx.inputs[name], alt) if alt is not None else None
        return _reference_with(ctx, **{name: twin}) if twin is not None else None

    return predict


def _strided(ctx: CaseContext) -> list[str]:
    """The inputs of the case whose strides are not those of a contiguous tensor of their shape."""
    return [name for name in _READ if _other_strides(ctx, name, "contiguous") is not None]


def _as_contiguous(ctx: CaseContext) -> Prediction | None:
    """Every input read through the strides of a contiguous tensor of its shape (strides computed from the shape)."""
    changed = {}
    for name in _strided(ctx):
        twin = _through(ctx.inputs[name], _contiguous_strides(tuple(ctx.inputs[name].shape)))
        if twin is None:
            return None
        changed[name] = twin
    return _reference_with(ctx, **changed) if changed else None


def _say_contiguous(ctx: CaseContext) -> str:
    names = _strided(ctx)
    listed = ", ".join(f"{n}.stride() = {tuple(ctx.inputs[n].stride())}" for n in names)
    who = names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"
    return (
        f"Yours is what the reference gives when {who} {'is' if len(names) == 1 else 'are'} read as if contiguous, "
        f"on every failing case (here {listed}): the offsets use strides computed from the shape; pass each "
        "tensor's own strides (x.stride(0), x.stride(1), ...) to the kernel and use them in its loads."
    )


def _say_read(name: str, how: str) -> Callable[[CaseContext], str]:
    def says(ctx: CaseContext) -> str:
        strides = tuple(ctx.inputs[name].stride())
        if how == "swapped":
            last, before = strides[-1], strides[-2]
            what = f"its last two strides swapped ({last}, {before} where {before}, {last} belong)"
            fix = f"pass {name}.stride() in the order of the kernel's parameters and multiply each index by its own"
        else:
            what = f"the strides of {how} {tuple(ctx.inputs[how].stride())} instead of its own {strides}"
            fix = f"pass {name}'s own strides for the loads from {name}"
        return f"Yours is what the reference gives when {name} is read through {what}, on every failing case: {fix}."

    return says


def _read_label(name: str, how: str) -> str:
    if how == "swapped":
        return f"{name} read through its strides swapped"
    return f"{name} read through {how}'s strides"


READ_MISTAKES = (
    Mistake("inputs read as contiguous", "every input read as if contiguous", _as_contiguous, _say_contiguous),
    *(
        Mistake(
            f"{name} read through {how} strides", _read_label(name, how), _read_through(name, how), _say_read(name, how)
        )  # fmt: skip
        for name in _READ
        for how in ("swapped", *(other for other in _READ if other != name))
    ),
)


# -- the backward's factors --------------------------------------------------------------------------------------

_FACTORS: dict[str, Callable[[float], float]] = {
    "log2(e)": lambda scale: LOG2E,
    "ln(2)": lambda scale: 1.0 / LOG2E,
    "1/sm_scale": lambda scale: 1.0 / scale,
    "sm_scale": lambda scale: scale,
}
_WHY_FACTOR = {
    "log2(e)": "scaled by log2(e) once too often: the exp2 form's log2(e) belongs in the exponent only",
    "ln(2)": "divided by log2(e): a factor of the exp2 form taken out where none was put in",
    "1/sm_scale": "without sm_scale: the chain rule through s = sm_scale * q k^T multiplies it by sm_scale",
    "sm_scale": "scaled by sm_scale twice",
}


def _gradient_factors(factors: dict[str, str]) -> Callable[[CaseContext], Prediction | None]:
    """`factors` {output: factor's name}: those outputs scaled so, every other one right."""

    def predict(ctx: CaseContext) -> Prediction | None:
        scale = _float(ctx, "sm_scale")
        names = {e.name for e in ctx.expected}
        if scale is None or not set(factors) <= names:
            return None
        c = {out: _FACTORS[which](scale) for out, which in factors.items()}
        if any(math.isclose(value, 1.0, rel_tol=1e-6) for value in c.values()):
            return None  # this case cannot tell the factor from none
        return {e.name: e.value * c.get(e.name, 1.0) for e in ctx.expected}

    return predict


def _say_factors(factors: dict[str, str]) -> Callable[[CaseContext], str]:
    def says(ctx: CaseContext) -> str:
        scale = _float(ctx, "sm_scale") or 1.0
        parts = [f"your {out} is exactly {which} x the expected {out} ({_FACTORS[which](scale):.4g}x)"
                 for out, which in factors.items()]  # fmt: skip
        why = "; ".join(f"{out} is {_WHY_FACTOR[which]}" for out, which in factors.items())
        text = "; ".join(parts)
        return f"{text[0].upper()}{text[1:]}, every other output right, on every failing case: {why}."

    return says


def _gradient_mistakes() -> tuple[Mistake, ...]:
    choices = [None, *_FACTORS]
    found = []
    for dq in choices:
        for dk in choices:
            factors = {out: which for out, which in (("dq", dq), ("dk", dk)) if which is not None}
            if factors:
                label = " and ".join(f"{out} scaled by {which}" for out, which in factors.items())
                found.append(Mistake(label, label, _gradient_factors(factors), _say_factors(factors)))
    return tuple(found)


GRADIENT_MISTAKES = _gradient_mistakes()

MISTAKES: tuple[Mistake, ...] = (
    *SCALE_MISTAKES,
    *SOFTMAX_MISTAKES,
    *KEY_MISTAKES,
    *HEAD_MISTAKES,
    *READ_MISTAKES,
    *GRADIENT_MISTAKES,
)
BY_NAME = {m.name: m for m in MISTAKES}
CAUSAL_SIDE = {m.name for m in KEY_MISTAKES}  # mistakes on the causal cases alone: a split by causal agrees


def _tolerance(ctx: CaseContext, name: str) -> tuple[float, float]:
    atol, rtol = ctx.puzzle.tolerance_for(name)
    case = getattr(ctx, "case", None)
    return max(atol, float(getattr(case, "atol", 0.0) or 0.0)), max(rtol, float(getattr(case, "rtol", 0.0) or 0.0))


def _same(yours: torch.Tensor, twin: torch.Tensor, atol: float, rtol: float) -> bool:
    """Every element within the tolerance of the twin, or the same infinity, or not finite where the twin is NaN (a
    row that sees no key has no defined value: a kernel may give NaN or -inf there)."""
    close = (yours - twin).abs() <= atol + rtol * twin.abs()
    if bool(close.all()):
        return True
    y, t = yours[~close], twin[~close]
    return bool(((torch.isnan(t) & ~torch.isfinite(y)) | (torch.isinf(y) & (y == t))).all())


def stored(twin: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """The prediction `twin` as a kernel stores it into `out`, on the CPU in float64: rounded to out's dtype where
    that is a narrower float (a value past float16's 65504 is stored as inf)."""
    twin = twin.detach().cpu()
    floats = out.dtype.is_floating_point and twin.dtype.is_floating_point
    if floats and torch.finfo(out.dtype).bits < torch.finfo(twin.dtype).bits:
        twin = twin.to(out.dtype)
    return twin.double()


def reproduces(ctx: CaseContext, prediction: Prediction) -> bool:
    """Whether every output `prediction` predicts, stored in that output's dtype, is yours within the tolerance,
    and one of them is wrong."""
    wrong = False
    for exp, out in zip(ctx.expected, ctx.outputs, strict=False):
        twin = prediction.get(exp.name)
        if twin is None:
            continue
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(twin.shape):
            return False
        atol, rtol = _tolerance(ctx, exp.name)
        yours, twin64 = out.detach().cpu().double(), stored(twin, out)
        if not _same(yours, twin64, atol, rtol):
            return False
        wrong = wrong or not _same(yours, exp.value.detach().cpu().double(), atol, rtol)
    return wrong


def fitting(ctx: CaseContext) -> dict[str, str]:
    """The mistakes that reproduce this case (in the order of MISTAKES), each with the sentence that names it."""
    found = {}
    for mistake in MISTAKES:
        try:
            prediction = mistake.predict(ctx)
            if prediction is not None and reproduces(ctx, prediction):
                found[mistake.name] = mistake.says(ctx)
        except (RuntimeError, ValueError, IndexError, TypeError):  # inputs the recomputation cannot take: no fit
            continue
    return found


def degenerate(ctx: CaseContext) -> bool:
    """A case too small to tell mistakes apart: one query row or one key in a sequence, one column of a row."""
    for name in ("q", "k", "x"):
        value = ctx.inputs.get(name)
        if isinstance(value, torch.Tensor) and value.dim() >= 2 and value.shape[-2 if name != "x" else -1] == 1:
            return True
    lens = ctx.inputs.get("seq_lens")
    return isinstance(lens, torch.Tensor) and bool((lens <= 1).any())


def proven(fits: Sequence[Sequence[str]], degenerates: Sequence[bool]) -> str | None:
    """The one mistake that fits every failing case (`fits[i]` of failing case i), where a case that is not
    degenerate is among them; None when none does, or more than one."""
    if not fits or all(degenerates):
        return None
    common = [name for name in fits[0] if all(name in f for f in fits[1:])]
    return common[0] if len(common) == 1 else None
