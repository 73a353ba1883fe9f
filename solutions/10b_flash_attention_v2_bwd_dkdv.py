"""Step 10b answer key: dK and dV of FlashAttention-2, without ever storing P.

Two kernels, launched one after the other:
  _attn_bwd_preprocess  one program per block of query rows: delta = rowsum(dO * O), and lse in base 2
  _attn_bwd_dkdv        one program per block of keys: keeps K, V, dK, dV on chip, walks the query blocks
The dK/dV kernel is the first half of puzzle 10's backward pass; puzzle 10 adds the dQ kernel and
uses these two kernels as they are. The learner writes one step of the walk (`_attn_bwd_dkdv_inner`),
the dK/dV kernel's loads before the walk and stores after it, and the host function; the
preprocessing kernel and the stage calls with their loop bounds are given.
The structure is that of Triton's fused-attention tutorial, with plain pointer arithmetic (any
strides) and masks for sequence lengths that are not a multiple of a block.

Run the grader on it with `python -m checks 10b --solution`.
"""

import os

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # log2(e): exp(x) == exp2(x * LOG2E)

if os.environ.get("TRITON_INTERPRET") == "1":
    # The interpreter cannot time configurations against each other: give it one, with small
    # blocks so that even short test sequences span several of them.
    DKDV_CONFIGS = [triton.Config({"BLOCK_M1": 16, "BLOCK_N1": 32, "BLK_SLICE_FACTOR": 2})]
else:
    # First the config that short sequences get (prune_configs): 8 warps keep the float32
    # accumulators in registers even at HEAD_DIM = 128. The list is the best of 12 configs per kernel
    # timed on an H100 (bench/tuning.md); 4 warps win at HEAD_DIM = 64 only.
    DKDV_CONFIGS = [
        triton.Config({"BLOCK_M1": BM, "BLOCK_N1": BN, "BLK_SLICE_FACTOR": 2}, num_warps=w, num_stages=s)
        for BM, BN, w, s in [(64, 128, 8, 3), (64, 128, 8, 4), (32, 64, 4, 3), (64, 64, 4, 3), (32, 128, 4, 4)]
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
    # -- delta: step 10a's rowsum(dy * y), with the rows of dO and O
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)  # (BLOCK_M,)
    lse = tl.load(lse_ptr + off_z * stride_lz + off_h * stride_lh + offs_m * stride_lm, mask=in_seq)  # (BLOCK_M,)
    rows = off_hz.to(tl.int64) * N_CTX + offs_m
    tl.store(delta_ptr + rows, delta, mask=in_seq)
    tl.store(lse2_ptr + rows, lse * LOG2E, mask=in_seq)  # exp(x - lse) == exp2(x * LOG2E - lse2)


@triton.jit
def _attn_bwd_dkdv_inner(
    dk, dv,  # (BLOCK_N1, HEAD_DIM) float32 accumulators
    k, v,  # (BLOCK_N1, HEAD_DIM): this program's keys and values
    q_base, do_base, lse2_base, delta_base,  # this (batch, head)'s q[0, 0], do[0, 0], lse2[0], delta[0]
    stride_qm, stride_qd, stride_dom, stride_dod,
    offs_n, offs_d,  # this program's key rows, head-dim columns
    lo, hi,  # this stage walks the query rows lo, lo + BLOCK_M1, ... below hi
    N_CTX, qk_scale,  # sequence length; sm_scale * log2(e)
    BLOCK_M1: tl.constexpr,
    MASKED: tl.constexpr,  # blocks that may hold rows >= N_CTX (and, with CAUSAL, queries before a key)
    CAUSAL: tl.constexpr,
):
    ### BEGIN SOLUTION
    for start_m in range(lo, hi, BLOCK_M1):
        offs_m = start_m + tl.arange(0, BLOCK_M1)
        in_seq = offs_m < N_CTX
        # Q^T straight from memory, by swapping the roles of the strides: (HEAD_DIM, BLOCK_M1)
        qT = tl.load(q_base + offs_d[:, None] * stride_qd + offs_m[None, :] * stride_qm,
                     mask=in_seq[None, :], other=0.0)
        lse2 = tl.load(lse2_base + offs_m, mask=in_seq, other=0.0)  # (BLOCK_M1,)
        # -- recompute P^T = exp(S^T - lse) from the scores, in base 2: (BLOCK_N1, BLOCK_M1)
        pT = tl.math.exp2(tl.dot(k, qT) * qk_scale - lse2[None, :])
        if MASKED:
            keep = in_seq[None, :]
            if CAUSAL:
                keep = keep & (offs_m[None, :] >= offs_n[:, None])  # query i sees key j only if j <= i
            pT = tl.where(keep, pT, 0.0)
        do = tl.load(do_base + offs_m[:, None] * stride_dom + offs_d[None, :] * stride_dod,
                     mask=in_seq[:, None], other=0.0)  # (BLOCK_M1, HEAD_DIM)
        # -- dV += P^T dO
        dv += tl.dot(pT.to(tl.float16), do)
        # -- dS^T = P^T * (dP^T - delta), with dP^T = V dO^T
        delta = tl.load(delta_base + offs_m, mask=in_seq, other=0.0)  # (BLOCK_M1,)
        dpT = tl.dot(v, tl.trans(do))  # (BLOCK_N1, BLOCK_M1)
        dsT = pT * (dpT - delta[None, :])
        # -- dK += dS^T Q (times sm_scale, once, after the walk)
        dk += tl.dot(dsT.to(tl.float16), tl.trans(qT))
    ### END SOLUTION
    return dk, dv


@triton.autotune(configs=DKDV_CONFIGS, key=["N_CTX", "HEAD_DIM", "CAUSAL"],
                 prune_configs_by={"early_config_prune": prune_configs})
@triton.jit
def _attn_bwd_dkdv(
    q_ptr, k_ptr, v_ptr, do_ptr,  # (B, H, N, D) float16, any strides
    dk_ptr, dv_ptr,  # outputs, (B, H, N, D) float16
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
    BLOCK_M1: tl.constexpr,  # query rows per step of the walk
    BLOCK_N1: tl.constexpr,  # key rows per program
    BLK_SLICE_FACTOR: tl.constexpr,  # the diagonal block is walked in thinner steps: BLOCK_M1 // BLK_SLICE_FACTOR
):
    tl.static_assert(BLOCK_N1 % BLOCK_M1 == 0)  # the walk past the diagonal starts on a query block boundary
    start_n = tl.program_id(0) * BLOCK_N1  # first key row of this program
    off_hz = tl.program_id(1)  # which (batch, head)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    q_base = q_ptr + off_z * stride_qz + off_h * stride_qh
    k_base = k_ptr + off_z * stride_kz + off_h * stride_kh
    v_base = v_ptr + off_z * stride_vz + off_h * stride_vh
    do_base = do_ptr + off_z * stride_doz + off_h * stride_doh
    lse2_base = lse2_ptr + off_hz.to(tl.int64) * N_CTX
    delta_base = delta_ptr + off_hz.to(tl.int64) * N_CTX
    qk_scale = sm_scale * LOG2E  # fold log2(e) into the scale

    offs_n = start_n + tl.arange(0, BLOCK_N1)
    offs_d = tl.arange(0, HEAD_DIM)
    # This program's keys and values stay on chip for the whole walk over the queries.
    ### BEGIN SOLUTION
    key_in_seq = offs_n < N_CTX
    k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                mask=key_in_seq[:, None], other=0.0)  # (BLOCK_N1, HEAD_DIM)
    v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                mask=key_in_seq[:, None], other=0.0)  # (BLOCK_N1, HEAD_DIM)
    dk = tl.zeros((BLOCK_N1, HEAD_DIM), tl.float32)
    dv = tl.zeros((BLOCK_N1, HEAD_DIM), tl.float32)
    ### END SOLUTION

    if CAUSAL:
        # Queries before start_n see none of these keys: never load them. Stage 1, on-band: the
        # query rows of the diagonal block, masked, in thinner steps.
        dk, dv = _attn_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, lse2_base, delta_base,
                                      stride_qm, stride_qd, stride_dom, stride_dod, offs_n, offs_d,
                                      start_n, tl.minimum(start_n + BLOCK_N1, N_CTX), N_CTX, qk_scale,
                                      BLOCK_M1=BLOCK_M1 // BLK_SLICE_FACTOR, MASKED=True, CAUSAL=True)
        lo = start_n + BLOCK_N1
    else:
        lo = 0
    # Stage 2, off-band: whole query blocks below the diagonal (all of them when not causal), no mask.
    hi = tl.maximum(lo, N_CTX - N_CTX % BLOCK_M1)
    dk, dv = _attn_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, lse2_base, delta_base,
                                  stride_qm, stride_qd, stride_dom, stride_dod, offs_n, offs_d,
                                  lo, hi, N_CTX, qk_scale,
                                  BLOCK_M1=BLOCK_M1, MASKED=False, CAUSAL=CAUSAL)
    # Stage 3: the partial last query block, if any and not already walked on the diagonal, masked.
    dk, dv = _attn_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, lse2_base, delta_base,
                                  stride_qm, stride_qd, stride_dom, stride_dod, offs_n, offs_d,
                                  hi, N_CTX, N_CTX, qk_scale,
                                  BLOCK_M1=BLOCK_M1, MASKED=True, CAUSAL=CAUSAL)

    ### BEGIN SOLUTION
    dk *= sm_scale  # dK = dS^T Q * sm_scale
    dk_base = dk_ptr + off_z * stride_dkz + off_h * stride_dkh
    dv_base = dv_ptr + off_z * stride_dvz + off_h * stride_dvh
    tl.store(dk_base + offs_n[:, None] * stride_dkn + offs_d[None, :] * stride_dkd,
             dk.to(dk_ptr.dtype.element_ty), mask=key_in_seq[:, None])
    tl.store(dv_base + offs_n[:, None] * stride_dvn + offs_d[None, :] * stride_dvd,
             dv.to(dv_ptr.dtype.element_ty), mask=key_in_seq[:, None])
    ### END SOLUTION


def flash_attention_v2_bwd_dkdv(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, do: torch.Tensor,
    causal: bool, sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(dk, dv) of o = softmax(q k^T * sm_scale) v, given o, its logsumexp lse and dL/do."""
    B, H, N, D = q.shape
    dk = torch.empty_like(k)
    dv = torch.empty_like(v)
    delta = torch.empty((B * H, N), dtype=torch.float32, device=q.device)
    lse2 = torch.empty((B * H, N), dtype=torch.float32, device=q.device)
    PRE_BLOCK = 128  # delta and lse2 of every query row, before the walk
    _attn_bwd_preprocess[(triton.cdiv(N, PRE_BLOCK), B * H)](
        o, do, lse, delta, lse2,
        *o.stride(), *do.stride(), *lse.stride(),
        H, N, BLOCK_M=PRE_BLOCK, HEAD_DIM=D,
    )
    ### BEGIN SOLUTION
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_N1"]), B * H)
    _attn_bwd_dkdv[grid](
        q, k, v, do, dk, dv, lse2, delta, sm_scale,
        *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dk.stride(), *dv.stride(),
        H, N_CTX=N, HEAD_DIM=D, CAUSAL=causal,
    )
    return dk, dv
    ### END SOLUTION
