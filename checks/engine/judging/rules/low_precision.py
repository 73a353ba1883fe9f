"""The cause of lost digits or an overflow: a float16 running accumulator.

A matmul's tile loop that keeps its sum in float16 (`acc = tl.zeros(..., tl.float16)`, then `acc += tl.dot(a, b)`
cast to float16, or `tl.dot(a, b, acc)` into it) rounds the sum to 11 bits after every K block: on a long K, or where
the products do not cancel, the sum loses digits the float32 reference keeps. An attention kernel's output
accumulator (the running sum of p @ v, divided by l only at the end) in float16 holds at most 65504: where v's values
are large and the weights spread over many keys, that sum grows to l times v and overflows while o itself is
representable. Its running sum l in float16, near 1 where one key leads the others, moves in steps of 2^-10 and
loses each later key block's sum below half a step: lse (m + ln(l)) comes out off by what those keys add. The cause
is named only on proof: the output is, within the tolerance (inf and NaN where yours has them), the reference
recomputed with that float16 running sum over one of the kernel's blocks (in decoding, in one of the splits of a
head's keys a kernel may choose, each split on its own and merged as a decoding kernel merges them; the closest such
recomputation is named), and not the reference itself (`float16_accumulator`; for l, o and lse both, and only where
the float16 l moves lse past its tolerance).
"""

from __future__ import annotations

from typing import Any

import torch

from checks.engine.judging.rules.problem import CaseContext
from checks.verdict import plural

K_BLOCKS = (16, 32, 64, 128, 256)  # K blocks tried when no launch names one (BLOCK_K, BK)
MOST_STEPS = 4096  # K blocks the recomputation walks at most
KEY_BLOCKS = (16, 32, 64, 128)  # key blocks tried beside those the launches name (BLOCK_N, BN)
MOST_SCORES = 1 << 22  # the largest score matrix (all heads) the attention recomputation walks
FLOAT16_MAX = 65504.0
MOST_LSE_OFF = 0.25  # how far a float16 l moves lse at most where it is recomputed: 2^-11 a block, 512 blocks
MOST_SPLIT_STEPS = 4096  # key blocks a split's walk takes, summed over the splits tried (decoding), at most
CLOSE = 0.1  # a recomputation this close to yours (a tenth of the tolerance) ends the search: it is the one


def float16_running_sum(a: torch.Tensor, b: torch.Tensor, block_k: int) -> torch.Tensor:
    """a @ b summed as a float16 accumulator sums it: each K block's product in float32, rounded to float16, added
    to the float16 sum and rounded again."""
    a32, b32 = a.detach().cpu().float(), b.detach().cpu().float()
    acc = torch.zeros((a32.shape[0], b32.shape[1]), dtype=torch.float16)
    for k0 in range(0, a32.shape[1], block_k):
        part = (a32[:, k0 : k0 + block_k] @ b32[k0 : k0 + block_k]).half()
        acc = (acc.float() + part.float()).half()
    return acc


def float16_accumulator(ctx: CaseContext, exp: Any) -> str | None:
    """What a float16 running accumulator did, when the output `exp` is, within the tolerance, the reference
    recomputed with one (a matmul's c, an attention's o, its row sum l); None otherwise."""
    return float16_matmul_accumulator(ctx, exp) or float16_output_accumulator(ctx, exp) or float16_row_sum(ctx, exp)


def float16_matmul_accumulator(ctx: CaseContext, exp: Any) -> str | None:
    """'c is the float16 running sum...' when this matmul output (the product of the inputs a and b) matches the
    reference recomputed with a float16 accumulator over one of the kernels' K blocks; None otherwise."""
    a, b = ctx.inputs.get("a"), ctx.inputs.get("b")
    if not all(isinstance(t, torch.Tensor) and t.dim() == 2 and t.dtype == torch.float16 for t in (a, b)):
        return None
    index = next((i for i, e in enumerate(ctx.expected) if e is exp), None)
    out = ctx.outputs[index] if index is not None and index < len(ctx.outputs) else None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (a.shape[0], b.shape[1]) or a.shape[1] != b.shape[0]:
        return None
    named = [v for launch in ctx.obs.launches for k, v in launch.blocks.items() if "K" in k.upper().split("_")[-1]]
    atol, rtol = ctx.puzzle.tolerance_for(exp.name)
    yours = out.detach().cpu().double()
    for block_k in dict.fromkeys([*named, *K_BLOCKS]):
        if block_k <= 0 or a.shape[1] > block_k * MOST_STEPS:
            continue
        twin = float16_running_sum(a, b, block_k).double()
        if bool(((yours - twin).abs() <= atol + rtol * twin.abs()).all()):
            return (
                f"{exp.name} is, within the tolerance, a @ b summed in a float16 accumulator over blocks of "
                f"{block_k} along K: your running sum is float16, which keeps 11 bits and loses the small products "
                "as the sum grows. Keep the accumulator in float32 (tl.zeros(..., dtype=tl.float32), and tl.dot's "
                "float32 result added to it) and convert to float16 only when you store."
            )
    return None


def float16_attention_output(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    sm_scale: float,
    causal: bool,
    block_n: int,
    kept: str = "acc",
    split: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(o, lse, the largest |sum of p @ v| on the way) of softmax(q k^T * sm_scale) v for (..., N, D) q, k, v,
    computed as a kernel computes it that keeps one running sum in float16, `kept`: "acc", the output accumulator
    (per block of `block_n` keys, the accumulator rescaled and rounded to float16, p rounded to float16 (tl.dot's
    operand) and p @ v added to it in float32, rounded to float16 again), or "l", the row sum (l * alpha + the block's
    sum of p, in float32, rounded to float16). The running max, and the sum that is not kept in float16, are float64;
    o = acc / l at the end, lse = m + ln(l). With `causal`, the queries are aligned with the last keys: query i of n_q
    sees the keys 0 to n_k - n_q + i (0 to i where n_q = n_k). With `split` (keys per split; 0: one split of every
    key), each split of the keys walks its own blocks from its start, as a decoding kernel's programs do, and the
    splits' (acc / l, m + ln(l)) are merged in float64 in logsumexp form."""
    q64, k64, v32 = q.detach().cpu().double(), k.detach().cpu().double(), v.detach().cpu().float()
    n_q, n_k = q64.shape[-2], k64.shape[-2]
    size = split if 0 < split < n_k else max(n_k, 1)
    splits = -(-n_k // size) if n_k else 1
    pad = (0, 0, 0, splits * size - n_k)  # the last split's keys past the last key: none (a copy only where needed)
    keys, values = (torch.nn.functional.pad(t, pad) if pad[-1] else t for t in (k64, v32))
    keys, values = keys.unflatten(-2, (splits, size)), values.unflatten(-2, (splits, size))  # (..., splits, size, D)
    index = torch.arange(splits * size).view(splits, 1, size)  # each key's place in the sequence
    hidden = index >= n_k  # the padding
    if causal:  # query i of n_q sees the keys up to n_k - n_q + i
        hidden = hidden | (index > (torch.arange(n_q)[:, None] + (n_k - n_q)))
    acc, row_sum, m, peak = _walk(q64.unsqueeze(-3), keys, values, sm_scale, hidden, block_n, kept)
    lses = m + torch.log(row_sum)  # (..., splits, N, 1): each split's own
    top = lses.amax(-3)
    weights = torch.exp(lses - torch.where(torch.isinf(top), torch.zeros_like(top), top).unsqueeze(-3))
    total = weights.sum(-3)
    o = (weights * (acc.double() / row_sum)).sum(-3) / total
    return o.half(), (top + torch.log(total)).squeeze(-1), peak


def _walk(
    q64: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    sm_scale: float,
    hidden: torch.Tensor,
    block_n: int,
    kept: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """(acc, l, m, the largest |sum of p @ v|) of every split at once, (..., splits, N, D) and (..., splits, N, 1)
    twice, after its blocks of `block_n` keys as `float16_attention_output` walks them: q (..., 1, N, D), keys and
    values (..., splits, size, D), and the scores `hidden` (splits, N or 1, size) masks."""
    m = torch.full((*keys.shape[:-2], q64.shape[-2], 1), float("-inf"), dtype=torch.float64)
    row_sum = torch.zeros_like(m)
    acc = torch.zeros((*m.shape[:-1], values.shape[-1]), dtype=torch.float16 if kept == "acc" else torch.float32)
    peak = 0.0
    for start in range(0, keys.shape[-2], block_n):
        end = start + block_n
        s = (q64 @ keys[..., start:end, :].transpose(-1, -2)) * sm_scale  # (..., splits, N, block)
        s = s.masked_fill(hidden[..., start:end], float("-inf"))
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)  # a row that sees no key yet
        p = torch.exp(s - safe)
        alpha = torch.exp(m - safe)
        if kept == "l":  # l_i = (l_i * alpha + tl.sum(p, 1)).to(tl.float16)
            row_sum = (row_sum.float() * alpha.float() + p.float().sum(-1, keepdim=True)).half().double()
        else:
            row_sum = row_sum * alpha + p.sum(-1, keepdim=True)
        pv = p.half().float() @ values[..., start:end, :]
        wide = (acc.float() * alpha.float()).to(acc.dtype).float() + pv
        peak = max(peak, float(wide.abs().nan_to_num(posinf=0.0).amax())) if wide.numel() else peak
        acc = wide.to(acc.dtype)
        m = m_new
    return acc, row_sum, m, peak


Streams = tuple[list[tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]], bool, float]  # (where, q, k, v), causal


def attention_streams(inputs: dict[str, Any]) -> Streams | None:
    """The attention puzzle's inputs as `float16_attention_twin` walks them: ([(where in o, q, k, v)], causal,
    sm_scale), one sequence and head at a time, heads first, q and k in float64, v in float32: q, k, v of (B, H, N, D)
    (8a-9), decoding's q (B, H_q, D) against k, v (B, H_kv, N, D) (11, 12) or a paged cache up to seq_lens (13), the G
    query heads of each kv head as its rows, packed sequences (14) and their cached contexts before them (15). None
    for other inputs or where the scores would be too many to recompute here."""
    from checks.puzzles.p13_paged_decoding import gather

    q, k, v, scale = (inputs.get(n) for n in ("q", "k", "v", "sm_scale"))
    if not isinstance(q, torch.Tensor) or q.dtype != torch.float16 or not isinstance(scale, float):
        return None
    causal = bool(inputs.get("causal", "context_lens" in inputs))  # 15 is causal, aligned bottom-right
    cache, table = inputs.get("k_cache"), inputs.get("block_table")
    streams: list[tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]] = []  # (where in o, q, k, v), heads first
    if q.dim() == 4 and isinstance(k, torch.Tensor) and k.shape == q.shape:  # 8a-9
        streams.append(((), q, k, v))
    elif q.dim() == 3 and isinstance(k, torch.Tensor) and k.dim() == 4:  # 11, 12: a kv head's G queries, its rows
        streams.append(((), q.unflatten(1, (k.shape[1], -1)), k, v))
    elif q.dim() == 3 and isinstance(cache, torch.Tensor) and "seq_lens" in inputs:  # 13
        for b, n in enumerate(inputs["seq_lens"].tolist()):
            kv = [gather(inputs[c], table[b], n) for c in ("k_cache", "v_cache")]  # (H_kv, n, D)
            streams.append(((b,), q[b].unflatten(0, (cache.shape[2], -1)), *kv))
    elif q.dim() == 3 and isinstance(k, torch.Tensor) and "cu_seqlens" in inputs:  # 14, 15
        group = q.shape[1] // k.shape[1]
        cu = inputs["cu_seqlens"].tolist()
        contexts = inputs["context_lens"].tolist() if "context_lens" in inputs else [0] * (len(cu) - 1)
        for b, (start, end) in enumerate(zip(cu[:-1], cu[1:], strict=True)):
            if end == start:
                continue
            kv = [
                torch.cat([gather(inputs[c], table[b], contexts[b]).transpose(0, 1), t[start:end]])
                if contexts[b]
                else t[start:end]
                for c, t in (("k_cache", k), ("v_cache", v))
            ]  # (context + new, H_kv, D)
            keys, values = (t.transpose(0, 1).repeat_interleave(group, 0) for t in kv)
            streams.append(((slice(start, end),), q[start:end].transpose(0, 1), keys, values))
    else:
        return None
    if sum(t[1].numel() // t[1].shape[-1] * t[2].shape[-2] for t in streams) > MOST_SCORES:
        return None
    wide = [
        (where, *(t.detach().cpu().double() for t in (qs, ks)), vs.detach().cpu().float())
        for where, qs, ks, vs in streams
    ]
    return wide, causal, scale


def float16_attention_twin(
    inputs: dict[str, Any], block_n: int, kept: str = "acc", split: int = 0, streams: Streams | None = None
) -> tuple[torch.Tensor, torch.Tensor, float] | None:
    """(o, lse, the largest |sum of p @ v| on the way) of the attention puzzle whose inputs these are (as
    `attention_streams` reads them, or `streams` where given), recomputed by `float16_attention_output` over blocks of
    `block_n` keys with the running sum `kept` in float16 (in splits of `split` keys, where not 0); lse shaped as each
    puzzle returns it. None where `attention_streams` is."""
    found = streams or attention_streams(inputs)
    if found is None:
        return None
    parts, causal, scale = found
    q = inputs["q"]
    o = torch.zeros(q.shape, dtype=torch.float16)
    packed = q.dim() == 3 and "cu_seqlens" in inputs
    lse = torch.zeros((q.shape[1], q.shape[0]) if packed else q.shape[:-1], dtype=torch.float64)
    peak = 0.0
    for where, qs, ks, vs in parts:
        twin, twin_lse, top = float16_attention_output(qs, ks, vs, scale, causal, block_n, kept, split)
        if q.dim() == 4:
            o, lse = twin, twin_lse
        elif where and isinstance(where[0], slice):
            o[where] = twin.transpose(0, 1)  # (n, H_q, D)
            lse[:, where[0]] = twin_lse  # (H_q, n)
        else:  # decoding: the G query heads of each kv head
            o[where] = twin.flatten(-3, -2)
            lse[where] = twin_lse.flatten(-2)
        peak = max(peak, top)
    return o, lse, peak


def float16_output_accumulator(ctx: CaseContext, exp: Any) -> str | None:
    """'o is the reference recomputed with a float16 output accumulator...' when this attention output matches that
    recomputation (`float16_attention_twin`) over one of the kernels' key blocks and its sum grew past float16's
    range; None otherwise."""
    index = next((i for i, e in enumerate(ctx.expected) if e is exp), None)
    out = ctx.outputs[index] if index is not None and index < len(ctx.outputs) else None
    q = ctx.inputs.get("q")
    if exp.name != "o" or not isinstance(out, torch.Tensor) or not isinstance(q, torch.Tensor) or out.shape != q.shape:
        return None
    if bool(torch.isfinite(out).all()):  # an overflowed sum leaves inf (or NaN) in o: nothing to recompute
        return None
    atol, rtol = ctx.puzzle.tolerance_for(exp.name)
    yours = out.detach().cpu().double()
    streams = attention_streams(ctx.inputs)
    best: tuple[float, int, int, torch.Tensor, float] | None = None  # (distance, block, split, o, peak)
    for block_n, split in key_walks(ctx) if streams is not None else []:
        found = float16_attention_twin(ctx.inputs, block_n, split=split, streams=streams)
        finite = torch.isfinite(found[0]) if found is not None else None
        if finite is None or bool(finite.all()) or not bool(finite.any()):  # the twin's finite values tell it apart
            continue
        distance = _distance(yours, found[0].double(), atol, rtol)
        if distance <= 1 and (best is None or distance < best[0]):
            best = (distance, block_n, split, found[0], found[2])
        if distance <= CLOSE:
            break
    if best is None:
        return None
    _, block_n, split, twin, peak = best
    overflowed = int((~torch.isfinite(twin)).any(-1).sum())
    walked = _blocks(block_n, split, sized=False)
    return (
        f"{exp.name} is, within the tolerance, the reference recomputed with the running sum of p @ v (the "
        f"output accumulator, divided by l only at the end) kept in float16 over {walked}: "
        f"that sum grows to about l times v, here up to {peak:.4g}, past float16's largest value, 65504, and "
        f"{plural(overflowed, 'query row')} came out inf or NaN. Keep the accumulator in float32 "
        "(tl.zeros(..., dtype=tl.float32), and tl.dot(p.to(tl.float16), v, acc) into it, as Triton's "
        "fused-attention tutorial does; l and m too) and convert to float16 only when you store o."
    )


def key_blocks(ctx: CaseContext) -> list[int]:
    """The key-block sizes a float16 running sum is recomputed over: the kernels' own (constexprs whose name ends in a
    part with N: BLOCK_N, BN), then the usual ones (`KEY_BLOCKS`), each once."""
    named = [v for launch in ctx.obs.launches for key, v in launch.blocks.items() if "N" in key.upper().split("_")[-1]]
    return [block_n for block_n in dict.fromkeys([*named, *KEY_BLOCKS]) if block_n > 0]


def key_walks(ctx: CaseContext) -> list[tuple[int, int]]:
    """(block, split) pairs a float16 running sum is recomputed over: every one of `key_blocks` over all of a head's
    keys (split 0) first; then, in decoding (11-13, whose kernels split each head's keys over programs), each of them
    in the splits a kernel sizes: its n blocks shared by s programs (ceil(n / s) blocks each, for every s) or a power
    of two blocks each, as many as `MOST_SPLIT_STEPS` allow."""
    blocks = key_blocks(ctx)
    walks = [(block_n, 0) for block_n in blocks]
    longest = decoding_keys(ctx.inputs)
    steps = 0
    for block_n in blocks:
        n = -(-longest // block_n)
        shared = {-(-n // s) for s in range(2, n + 1)}
        for per_split in sorted(shared | {1 << j for j in range(n.bit_length()) if 1 << j < n}):
            steps += per_split
            if steps > MOST_SPLIT_STEPS:
                return walks
            walks.append((block_n, per_split * block_n))
    return walks


def decoding_keys(inputs: dict[str, Any]) -> int:
    """The keys of the longest head of a decoding puzzle's inputs (11-13: one query per head, q (B, H_q, D)); 0 for
    other inputs."""
    q, k, lens = inputs.get("q"), inputs.get("k"), inputs.get("seq_lens")
    if not isinstance(q, torch.Tensor) or q.dim() != 3 or "cu_seqlens" in inputs:
        return 0
    if isinstance(k, torch.Tensor) and k.dim() == 4:  # 11, 12
        return int(k.shape[-2])
    return int(lens.max()) if isinstance(lens, torch.Tensor) and lens.numel() else 0  # 13


def _blocks(block_n: int, split: int, sized: bool = True) -> str:
    """The key blocks a recomputation walked ("blocks of 16 keys"), and its splits where it had them: their size where
    `sized` (a float16 l's error grows with the blocks a split walks), else only that there were splits (an overflow
    comes out alike in every split long enough)."""
    if not split:
        return f"blocks of {block_n} keys"
    splits = f"{split} keys" if sized else "a head's keys"
    return f"blocks of {block_n} keys, each split of {splits} on its own"


def _distance(yours: torch.Tensor, twin: torch.Tensor, atol: float, rtol: float) -> float:
    """How far yours is from the twin, as a multiple of the tolerance (at most 1: within it), over the twin's finite
    values; inf unless yours has inf (of the same sign) and NaN exactly where the twin has them."""
    finite = torch.isfinite(twin)
    if not bool((torch.isfinite(yours) == finite).all()) or not bool((torch.isnan(yours) == torch.isnan(twin)).all()):
        return float("inf")
    if not bool((yours[torch.isinf(twin)] == twin[torch.isinf(twin)]).all()):
        return float("inf")
    if not bool(finite.any()):
        return 0.0
    return float(((yours - twin).abs() / (atol + rtol * twin.abs()))[finite].max())


def float16_row_sum(ctx: CaseContext, exp: Any) -> str | None:
    """'lse is the reference recomputed with the row sum l kept in float16...' when every output of this attention
    call (o and lse) matches that recomputation (`float16_attention_twin`, kept "l") over one of the kernels' key
    blocks; None otherwise."""
    names = [e.name for e in ctx.expected]
    if exp.name not in ("o", "lse") or "lse" not in names or "o" not in names or len(ctx.outputs) < len(names):
        return None
    outs = dict(zip(names, ctx.outputs, strict=False))
    if not all(isinstance(outs[n], torch.Tensor) for n in ("o", "lse")):
        return None
    expected = next(e for e in ctx.expected if e.name == "lse").value.detach().cpu().double()
    yours_lse = outs["lse"].detach().cpu().double()
    if yours_lse.shape != expected.shape or not bool((yours_lse - expected).abs().le(MOST_LSE_OFF).all()):
        return None  # not a float16 l, which moves lse by at most half a step (2^-11) a key block: no recomputation
    atol, rtol = ctx.puzzle.tolerance_for("lse")
    if _distance(yours_lse, expected, atol, rtol) <= 1:
        return None  # lse is right: a float16 l, which moves o no more than lse, is not what failed
    streams = attention_streams(ctx.inputs)
    best: tuple[float, int, int, torch.Tensor] | None = None  # (distance, block, split, lse)
    for block_n, split in key_walks(ctx) if streams is not None else []:
        found = float16_attention_twin(ctx.inputs, block_n, kept="l", split=split, streams=streams)
        if found is None or tuple(found[1].shape) != tuple(expected.shape):
            continue
        if _distance(found[1].double(), expected, atol, rtol) <= 1:
            continue  # this float16 l stays inside lse's tolerance: it reproduces no failure
        distance = 0.0
        for name, twin in zip(("o", "lse"), found[:2], strict=True):
            yours = outs[name].detach().cpu().double()
            fit = _distance(yours, twin.double(), *ctx.puzzle.tolerance_for(name)) if yours.shape == twin.shape else 2.0
            distance = max(distance, fit)
        if distance <= 1 and (best is None or distance < best[0]):
            best = (distance, block_n, split, found[1])
        if distance <= CLOSE:
            break
    if best is None:
        return None
    _, block_n, split, twin_lse = best
    off = float((twin_lse.double() - expected).abs().nan_to_num(0.0).amax())
    return (
        f"{exp.name} is, within the tolerance, the reference recomputed with the running sum l (the softmax's "
        f"denominator) kept in float16 over {_blocks(block_n, split)}: rounded to float16's 11 bits after every "
        "block, l near 1 moves in steps of 2^-10 (0.000977), so a block's sum of p below half a step is lost and a "
        f"larger one rounded to whole steps, and lse = m + ln(l) is off here by up to {off:.2g}. Keep l in float32 "
        "(tl.zeros(..., dtype=tl.float32), l * alpha + tl.sum(p, 1) in float32; m "
        "and the accumulator too) and convert to float16 only when you store o."
    )
