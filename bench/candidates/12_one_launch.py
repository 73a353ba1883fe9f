"""Puzzle 12's answer key in one launch: the last split of each (batch, kv head) to finish merges them all.

A candidate measured against the key (bench/host_time.py, bench/tune_launch.py). Its kernel runs the key's own
`_attn_decode_split` (imported from solutions/12_gqa_decoding.py, at the key's `launch_shape`); after storing its
partials, each program adds one to its head's counter (`tl.atomic_add`, acquire-release), and the program that sees
the count reach NUM_SPLITS - 1 reads every split's partials and writes the output, then sets the counter back to
zero. The counters live between calls (counters="kept"), so a call makes no fill launch, or are made zero in each
call with torch.zeros (counters="zeros"); the partial results are allocated in each call (partials="each call") or
kept between calls too, one set per shape (partials="kept"), so that a call allocates only its two outputs. Since
its kernel calls one from another file, the grader (which takes the kernels from a submission's own source) does
not grade this file as it stands.
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from checks.engine.submission import load_module  # noqa: E402

key = load_module(ROOT / "solutions" / "12_gqa_decoding.py", "key_12_of_one_launch")
_attn_decode_split = key._attn_decode_split  # a global of this module, so that the kernel below can call it
LN2 = tl.constexpr(0.6931471805599453)
_kept: dict[torch.device, torch.Tensor] = {}
_kept_partials: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def split_counters(n: int, device: torch.device, counters: str) -> torch.Tensor:
    """n int32 counters at zero: made by torch.zeros ("zeros"), or kept between calls ("kept"), since each launch
    leaves them at zero again."""
    if counters == "zeros":
        return torch.zeros((n,), dtype=torch.int32, device=device)
    kept = _kept.get(device)
    if kept is None or kept.numel() < n:
        kept = _kept[device] = torch.zeros((max(n, 1024),), dtype=torch.int32, device=device)
    return kept


@triton.jit
def _attn_decode(
    q_ptr, k_ptr, v_ptr, o_part_ptr, lse_part_ptr, count_ptr, o_ptr, lse_ptr, qk_scale,
    stride_qz, stride_qh, stride_qk,
    stride_kz, stride_kh, stride_kn, stride_kk,
    stride_vz, stride_vh, stride_vn, stride_vk,
    stride_oz, stride_oh, stride_ok,
    H_KV, N_CTX, SPLIT_SIZE, NUM_SPLITS,
    GROUP: tl.constexpr, BLOCK_G: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
    SPLITS_POW2: tl.constexpr,
):  # fmt: skip
    _attn_decode_split(
        q_ptr, k_ptr, v_ptr, o_part_ptr, lse_part_ptr, qk_scale,
        stride_qz, stride_qh, stride_qk, stride_kz, stride_kh, stride_kn, stride_kk,
        stride_vz, stride_vh, stride_vn, stride_vk, H_KV, N_CTX, SPLIT_SIZE, NUM_SPLITS,
        GROUP=GROUP, BLOCK_G=BLOCK_G, HEAD_DIM=HEAD_DIM, BLOCK_N=BLOCK_N,
    )  # fmt: skip
    off_hz = tl.program_id(1)
    off_z = off_hz // H_KV
    off_h = off_hz % H_KV
    offs_d = tl.arange(0, HEAD_DIM)
    tl.debug_barrier()  # every thread's stores are issued before the count says this split is done
    if tl.atomic_add(count_ptr + off_hz, 1, sem="acq_rel") == NUM_SPLITS - 1:  # the last split: merge them all
        offs_s = tl.arange(0, SPLITS_POW2)
        mask_s = offs_s < NUM_SPLITS
        for g in tl.static_range(GROUP):
            head = off_z * H_KV * GROUP + off_h * GROUP + g
            lse_s = tl.load(lse_part_ptr + head * NUM_SPLITS + offs_s, mask=mask_s, other=float("-inf"),
                            cache_modifier=".cg")  # fmt: skip
            o_s = tl.load(o_part_ptr + (head * NUM_SPLITS + offs_s[:, None]) * HEAD_DIM + offs_d[None, :],
                          mask=mask_s[:, None], other=0.0, cache_modifier=".cg")  # fmt: skip
            m = tl.max(lse_s, 0)
            w = tl.math.exp2(lse_s - m)
            l_sum = tl.sum(w, 0)
            o = tl.sum(w[:, None] * o_s, 0) / l_sum
            tl.store(o_ptr + off_z * stride_oz + (off_h * GROUP + g) * stride_oh + offs_d * stride_ok,
                     o.to(o_ptr.dtype.element_ty))  # fmt: skip
            tl.store(lse_ptr + head, (m + tl.math.log2(l_sum)) * LN2)
        tl.store(count_ptr + off_hz, 0)  # ready for the next call


def split_partials(rows: int, splits: int, d: int, device: torch.device, partials: str) -> tuple[torch.Tensor, ...]:
    """(o_part, lse_part): made in each call ("each call"), or kept between calls, one pair per shape ("kept")."""
    if partials == "kept" and (rows, splits, d, device) in _kept_partials:
        return _kept_partials[rows, splits, d, device]
    pair = (torch.empty((rows, splits, d), dtype=torch.float32, device=device),
            torch.empty((rows, splits), dtype=torch.float32, device=device))  # fmt: skip
    if partials == "kept":
        _kept_partials[rows, splits, d, device] = pair
    return pair


def gqa_decoding(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    sm_scale: float,
    counters: str = "kept",
    partials: str = "each call",
) -> tuple[torch.Tensor, torch.Tensor]:
    B, H_kv, N, D = k.shape
    H_q = q.shape[1]
    group = H_q // H_kv
    BLOCK_N, split_size, num_stages = key.launch_shape(N, B * H_kv, q.device)
    num_splits = key.cdiv(N, split_size)
    o_part, lse_part = split_partials(B * H_q, num_splits, D, q.device, partials)
    o = torch.empty((B, H_q, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H_q), dtype=torch.float32, device=q.device)
    _attn_decode[(num_splits, B * H_kv)](
        q, k, v, o_part, lse_part, split_counters(B * H_kv, q.device, counters), o, lse, sm_scale * 1.4426950408889634,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(), H_kv, N, split_size, num_splits,
        GROUP=group, BLOCK_G=max(16, key.next_power_of_2(group)), HEAD_DIM=D, BLOCK_N=BLOCK_N,
        SPLITS_POW2=key.next_power_of_2(num_splits), num_stages=num_stages,
    )  # fmt: skip
    return o, lse
