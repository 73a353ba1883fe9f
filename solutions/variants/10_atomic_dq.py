"""Puzzle 10, another design: the FlashAttention-2 paper's backward, with dQ summed by atomic adds.

Not a puzzle: `make bench` times it beside the answer key (solutions/10_flash_attention_v2_bwd.py),
as the `variants` of puzzle 10's bench entry in puzzles.yaml, and notebook 10 explains the result.
It defines the same function as the answer key and passes the same grader:
`python -m checks 10 --file solutions/variants/10_atomic_dq.py`.

Two kernels, launched one after the other:
  _attn_bwd_preprocess  one program per block of query rows: delta = rowsum(dO * O), and lse in base 2
  _attn_bwd_atomic      one program per block of keys: keeps K, V, dK, dV on chip and walks the query
                        blocks; at each step it also computes that tile's share of dQ, dS K, and adds
                        it into a float32 dQ buffer with tl.atomic_add
The answer key walks every tile twice (once in its dK/dV kernel, once in its dQ kernel) and recomputes
S and dP in the second walk: 7 tile products per tile. Here each tile is visited once, 5 products, but
every key-block program adds into the same dQ rows: the adds contend for those rows, and the order in
which they land (so the last bits of dQ) changes from run to run.
"""

import os

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # log2(e): exp(x) == exp2(x * LOG2E)

if os.environ.get("TRITON_INTERPRET") == "1":
    # One config in the interpreter, with small blocks so that short sequences span several of them.
    CONFIGS = [triton.Config({"BLOCK_M": 16, "BLOCK_N": 32, "BLK_SLICE_FACTOR": 2})]
else:
    # First the config that short sequences get (prune_configs); the dK/dV configs of the answer key.
    CONFIGS = [
        triton.Config({"BLOCK_M": BM, "BLOCK_N": BN, "BLK_SLICE_FACTOR": 2}, num_warps=w, num_stages=s)
        for BM, BN, w, s in [(32, 128, 8, 3), (32, 128, 4, 5), (32, 128, 8, 5), (64, 128, 8, 3), (32, 64, 4, 3)]
    ]


def prune_configs(configs: list, named_args: dict, **kwargs) -> list:
    """Short sequences take the first config: tuning them would cost more than it saves."""
    n_ctx = {**named_args, **kwargs}["N_CTX"]
    return configs if n_ctx >= 4096 else configs[:1]


@triton.jit
def _attn_bwd_preprocess(
    o_ptr, do_ptr, lse_ptr,  # o, do: (B, H, N, D) float16; lse: (B, H, N) float32, natural log
    delta_ptr, lse2_ptr,  # outputs, (B * H, N) float32: rowsum(dO * O), and lse in base 2
    stride_oz, stride_oh, stride_om, stride_od,
    stride_doz, stride_doh, stride_dom, stride_dod,
    stride_lz, stride_lh, stride_lm,
    H, N_CTX,
    BLOCK_M: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    off_hz = tl.program_id(1)  # which (batch, head)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    in_seq = offs_m < N_CTX
    o_base = o_ptr + off_z * stride_oz + off_h * stride_oh
    do_base = do_ptr + off_z * stride_doz + off_h * stride_doh
    o = tl.load(o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od,
                mask=in_seq[:, None], other=0.0)  # (BLOCK_M, HEAD_DIM)
    do = tl.load(do_base + offs_m[:, None] * stride_dom + offs_d[None, :] * stride_dod,
                 mask=in_seq[:, None], other=0.0)  # (BLOCK_M, HEAD_DIM)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)  # (BLOCK_M,)
    lse = tl.load(lse_ptr + off_z * stride_lz + off_h * stride_lh + offs_m * stride_lm, mask=in_seq)  # (BLOCK_M,)
    rows = off_hz.to(tl.int64) * N_CTX + offs_m
    tl.store(delta_ptr + rows, delta, mask=in_seq)
    tl.store(lse2_ptr + rows, lse * LOG2E, mask=in_seq)  # exp(x - lse) == exp2(x * LOG2E - lse2)


@triton.jit
def _attn_bwd_atomic_inner(
    dk, dv,  # (BLOCK_N, HEAD_DIM) float32 accumulators
    k, v,  # (BLOCK_N, HEAD_DIM): this program's keys and values
    q_base, do_base, dq_base, lse2_base, delta_base,  # this (batch, head)'s q[0, 0], do[0, 0], dq32[0, 0], ...
    stride_qm, stride_qd, stride_dom, stride_dod,  # dq32 is contiguous: row stride HEAD_DIM
    offs_n, offs_d,  # this program's key rows, head-dim columns
    lo, hi,  # this stage walks the query rows lo, lo + BLOCK_M, ... below hi
    N_CTX, sm_scale, qk_scale,  # sequence length; the softmax scale; sm_scale * log2(e)
    BLOCK_M: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    MASKED: tl.constexpr,  # steps that may hold queries or keys >= N_CTX (and, with CAUSAL, queries before a key)
    CAUSAL: tl.constexpr,
    BULK_DQ: tl.constexpr,  # add each dQ tile with one bulk reduction through a tensor descriptor (TMA, GPU only)
):
    if BULK_DQ:
        desc_dq = tl.make_tensor_descriptor(dq_base, shape=[N_CTX, HEAD_DIM], strides=[HEAD_DIM, 1],
                                            block_shape=[BLOCK_M, HEAD_DIM])
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        in_seq = offs_m < N_CTX
        qT = tl.load(q_base + offs_d[:, None] * stride_qd + offs_m[None, :] * stride_qm,
                     mask=in_seq[None, :], other=0.0)  # (HEAD_DIM, BLOCK_M)
        lse2 = tl.load(lse2_base + offs_m, mask=in_seq, other=0.0)  # (BLOCK_M,)
        # -- P^T = exp2(S^T * qk_scale - lse2): (BLOCK_N, BLOCK_M)
        pT = tl.math.exp2(tl.dot(k, qT) * qk_scale - lse2[None, :])
        if MASKED:
            keep = in_seq[None, :] & (offs_n < N_CTX)[:, None]
            if CAUSAL:
                keep = keep & (offs_m[None, :] >= offs_n[:, None])  # query i sees key j only if j <= i
            pT = tl.where(keep, pT, 0.0)
        do = tl.load(do_base + offs_m[:, None] * stride_dom + offs_d[None, :] * stride_dod,
                     mask=in_seq[:, None], other=0.0)  # (BLOCK_M, HEAD_DIM)
        # -- dV += P^T dO
        dv += tl.dot(pT.to(tl.float16), do)
        # -- dS^T = P^T * (dP^T - delta), with dP^T = V dO^T
        delta = tl.load(delta_base + offs_m, mask=in_seq, other=0.0)  # (BLOCK_M,)
        dsT = (pT * (tl.dot(v, tl.trans(do)) - delta[None, :])).to(tl.float16)  # (BLOCK_N, BLOCK_M)
        # -- dK += dS^T Q (times sm_scale, once, after the walk)
        dk += tl.dot(dsT, tl.trans(qT))
        # -- this tile's share of dQ, sm_scale * dS K, added into the rows of every key block's program
        dq = tl.dot(tl.trans(dsT), k) * sm_scale  # (BLOCK_M, HEAD_DIM)
        if BULK_DQ:
            desc_dq.atomic_add([start_m, 0], dq)  # rows past N_CTX are dropped
        else:
            tl.atomic_add(dq_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], dq,
                          mask=in_seq[:, None], sem="relaxed")
    return dk, dv


@triton.autotune(configs=CONFIGS, key=["N_CTX", "HEAD_DIM", "CAUSAL"],
                 prune_configs_by={"early_config_prune": prune_configs},
                 reset_to_zero=["dq_ptr"])  # the autotuner's trial runs add into dq too
@triton.jit
def _attn_bwd_atomic(
    q_ptr, k_ptr, v_ptr, do_ptr,  # (B, H, N, D) float16, any strides
    dk_ptr, dv_ptr,  # outputs, (B, H, N, D) float16
    dq_ptr,  # output, (B * H, N, D) float32, contiguous, zeroed before the launch
    lse2_ptr, delta_ptr,  # (B * H, N) float32, from _attn_bwd_preprocess
    sm_scale,
    stride_qz, stride_qh, stride_qm, stride_qd,
    stride_kz, stride_kh, stride_kn, stride_kd,
    stride_vz, stride_vh, stride_vn, stride_vd,
    stride_doz, stride_doh, stride_dom, stride_dod,
    stride_dkz, stride_dkh, stride_dkn, stride_dkd,
    stride_dvz, stride_dvh, stride_dvn, stride_dvd,
    H, N_CTX,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,  # query rows per step of the walk
    BLOCK_N: tl.constexpr,  # key rows per program
    BLK_SLICE_FACTOR: tl.constexpr,  # the diagonal block is walked in thinner steps: BLOCK_M // BLK_SLICE_FACTOR
    BULK_DQ: tl.constexpr = False,  # see _attn_bwd_atomic_inner (bench/tune_keys.py times both)
):
    tl.static_assert(BLOCK_N % BLOCK_M == 0)  # the walk past the diagonal starts on a query block boundary
    start_n = tl.program_id(0) * BLOCK_N  # first key row of this program
    off_hz = tl.program_id(1)  # which (batch, head)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    q_base = q_ptr + off_z * stride_qz + off_h * stride_qh
    k_base = k_ptr + off_z * stride_kz + off_h * stride_kh
    v_base = v_ptr + off_z * stride_vz + off_h * stride_vh
    do_base = do_ptr + off_z * stride_doz + off_h * stride_doh
    dq_base = dq_ptr + off_hz.to(tl.int64) * N_CTX * HEAD_DIM
    lse2_base = lse2_ptr + off_hz.to(tl.int64) * N_CTX
    delta_base = delta_ptr + off_hz.to(tl.int64) * N_CTX
    qk_scale = sm_scale * LOG2E  # fold log2(e) into the scale

    # This program's keys and values stay on chip for the whole walk over the queries.
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    key_in_seq = offs_n < N_CTX
    k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                mask=key_in_seq[:, None], other=0.0)  # (BLOCK_N, HEAD_DIM)
    v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                mask=key_in_seq[:, None], other=0.0)  # (BLOCK_N, HEAD_DIM)
    dk = tl.zeros((BLOCK_N, HEAD_DIM), tl.float32)
    dv = tl.zeros((BLOCK_N, HEAD_DIM), tl.float32)

    if CAUSAL:
        # Queries before start_n see none of these keys (and get nothing from them in dQ): never load
        # them. Stage 1, on-band: the query rows of the diagonal block, masked, in thinner steps.
        dk, dv = _attn_bwd_atomic_inner(dk, dv, k, v, q_base, do_base, dq_base, lse2_base, delta_base,
                                        stride_qm, stride_qd, stride_dom, stride_dod, offs_n, offs_d,
                                        start_n, tl.minimum(start_n + BLOCK_N, N_CTX), N_CTX, sm_scale, qk_scale,
                                        BLOCK_M=BLOCK_M // BLK_SLICE_FACTOR, HEAD_DIM=HEAD_DIM,
                                        MASKED=True, CAUSAL=True, BULK_DQ=BULK_DQ)
        lo = start_n + BLOCK_N
    else:
        lo = 0
    # Stage 2, off-band: whole query blocks below the diagonal (all of them when not causal), no mask,
    # but in the last key block when it holds keys past N: their K rows load as 0, so their P is not 0,
    # and their dS would reach dQ (in the answer key it only reaches rows of dK that are never stored).
    hi = tl.maximum(lo, N_CTX - N_CTX % BLOCK_M)
    if start_n + BLOCK_N > N_CTX:
        dk, dv = _attn_bwd_atomic_inner(dk, dv, k, v, q_base, do_base, dq_base, lse2_base, delta_base,
                                        stride_qm, stride_qd, stride_dom, stride_dod, offs_n, offs_d,
                                        lo, hi, N_CTX, sm_scale, qk_scale,
                                        BLOCK_M=BLOCK_M, HEAD_DIM=HEAD_DIM, MASKED=True, CAUSAL=CAUSAL,
                                        BULK_DQ=BULK_DQ)
    else:
        dk, dv = _attn_bwd_atomic_inner(dk, dv, k, v, q_base, do_base, dq_base, lse2_base, delta_base,
                                        stride_qm, stride_qd, stride_dom, stride_dod, offs_n, offs_d,
                                        lo, hi, N_CTX, sm_scale, qk_scale,
                                        BLOCK_M=BLOCK_M, HEAD_DIM=HEAD_DIM, MASKED=False, CAUSAL=CAUSAL,
                                        BULK_DQ=BULK_DQ)
    # Stage 3: the partial last query block, if any and not already walked on the diagonal, masked.
    dk, dv = _attn_bwd_atomic_inner(dk, dv, k, v, q_base, do_base, dq_base, lse2_base, delta_base,
                                    stride_qm, stride_qd, stride_dom, stride_dod, offs_n, offs_d,
                                    hi, N_CTX, N_CTX, sm_scale, qk_scale,
                                    BLOCK_M=BLOCK_M, HEAD_DIM=HEAD_DIM, MASKED=True, CAUSAL=CAUSAL,
                                        BULK_DQ=BULK_DQ)

    dk *= sm_scale  # dK = dS^T Q * sm_scale
    dk_base = dk_ptr + off_z * stride_dkz + off_h * stride_dkh
    dv_base = dv_ptr + off_z * stride_dvz + off_h * stride_dvh
    tl.store(dk_base + offs_n[:, None] * stride_dkn + offs_d[None, :] * stride_dkd,
             dk.to(dk_ptr.dtype.element_ty), mask=key_in_seq[:, None])
    tl.store(dv_base + offs_n[:, None] * stride_dvn + offs_d[None, :] * stride_dvd,
             dv.to(dv_ptr.dtype.element_ty), mask=key_in_seq[:, None])


def flash_attention_v2_bwd(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, do: torch.Tensor,
    causal: bool, sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) of o = softmax(q k^T * sm_scale) v, given o, its logsumexp lse and dL/do."""
    B, H, N, D = q.shape
    dk = torch.empty_like(k)
    dv = torch.empty_like(v)
    dq32 = torch.zeros((B, H, N, D), dtype=torch.float32, device=q.device)  # the atomic adds' target
    delta = torch.empty((B * H, N), dtype=torch.float32, device=q.device)
    lse2 = torch.empty((B * H, N), dtype=torch.float32, device=q.device)

    PRE_BLOCK = 128
    _attn_bwd_preprocess[(triton.cdiv(N, PRE_BLOCK), B * H)](
        o, do, lse, delta, lse2,
        *o.stride(), *do.stride(), *lse.stride(),
        H, N, BLOCK_M=PRE_BLOCK, HEAD_DIM=D,
    )
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_N"]), B * H)
    _attn_bwd_atomic[grid](
        q, k, v, do, dk, dv, dq32, lse2, delta, sm_scale,
        *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dk.stride(), *dv.stride(),
        H, N_CTX=N, HEAD_DIM=D, CAUSAL=causal,
    )
    return dq32.to(q.dtype), dk, dv  # float16, as the contract asks
