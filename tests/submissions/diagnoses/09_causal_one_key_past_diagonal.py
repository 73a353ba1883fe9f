"""Wrong: the causal mask lets one key past the diagonal in (keys_end = offs_m + 2), padding past the end included.
Graded with --earlier solutions/09a_flash_attention_v2_fwd_noncausal.py."""

# ruff: noqa: F821 (the names of step 9a's code, which the grader loads first: --earlier)

import torch
import triton
import triton.language as tl


@triton.autotune(configs=CONFIGS, key=["N_CTX", "HEAD_DIM"], prune_configs_by={"early_config_prune": prune_configs})
@triton.jit
def _attn_fwd_causal(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    lse_ptr,  # q, k, v, o: (B, H, N, D); lse: (B, H, N) contiguous
    sm_scale,
    stride_qz,
    stride_qh,
    stride_qm,
    stride_qk,
    stride_kz,
    stride_kh,
    stride_kn,
    stride_kk,
    stride_vz,
    stride_vh,
    stride_vn,
    stride_vk,
    stride_oz,
    stride_oh,
    stride_om,
    stride_ok,
    H,
    N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    tl.static_assert(BLOCK_M % BLOCK_N == 0)  # the diagonal starts on a K block boundary
    start_m = tl.program_id(0)  # which block of BLOCK_M query rows
    off_hz = tl.program_id(1)  # which (batch, head)
    off_z = off_hz // H
    off_h = off_hz % H
    q_base = q_ptr + off_z.to(tl.int64) * stride_qz + off_h.to(tl.int64) * stride_qh
    k_base = k_ptr + off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    v_base = v_ptr + off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh
    o_base = o_ptr + off_z.to(tl.int64) * stride_oz + off_h.to(tl.int64) * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_mask = offs_m < N_CTX
    q = tl.load(
        q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk, mask=row_mask[:, None], other=0.0
    )  # (BLOCK_M, HEAD_DIM)

    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)  # running max, base-2 units
    l_i = tl.zeros((BLOCK_M,), tl.float32)  # running sum of exp2(score - m_i)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)  # running sum of p @ v
    qk_scale = sm_scale * LOG2E  # fold log2(e) into the scale, once

    # stage 1, off-band: key blocks entirely left of the diagonal; every row sees every key, no mask
    diag = start_m * BLOCK_M
    keys_end = offs_m + 2  # query row i sees the keys 0..i + 1
    acc, l_i, m_i = _attn_fwd_inner(
        acc,
        l_i,
        m_i,
        q,
        k_base,
        v_base,
        stride_kn,
        stride_kk,
        stride_vn,
        stride_vk,
        offs_d,
        keys_end,
        0,
        diag,
        N_CTX,
        qk_scale,
        BLOCK_N=BLOCK_N,
        MASKED=False,
    )
    # stage 2, on-band: the key blocks the diagonal crosses, masked; the blocks right of it are skipped
    acc, l_i, m_i = _attn_fwd_inner(
        acc,
        l_i,
        m_i,
        q,
        k_base,
        v_base,
        stride_kn,
        stride_kk,
        stride_vn,
        stride_vk,
        offs_d,
        keys_end,
        diag,
        tl.minimum(diag + BLOCK_M, N_CTX),
        N_CTX,
        qk_scale,
        BLOCK_N=BLOCK_N,
        MASKED=True,
    )

    # epilogue: as in step 9a
    acc = acc / l_i[:, None]
    lse = (m_i + tl.math.log2(l_i)) * LN2
    tl.store(lse_ptr + off_hz * N_CTX + offs_m, lse, mask=row_mask)
    tl.store(
        o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok,
        acc.to(o_ptr.dtype.element_ty),
        mask=row_mask[:, None],
    )


def flash_attention_v2_fwd(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) of softmax(q k^T * sm_scale) v for (B, H, N, D) float16 q, k, v of any strides."""
    if not causal:
        return flash_attention_v2_fwd_noncausal(q, k, v, sm_scale)  # step 9a
    B, H, N, D = q.shape
    o = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, N), dtype=torch.float32, device=q.device)
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_M"]), B * H)
    _attn_fwd_causal[grid](
        q,
        k,
        v,
        o,
        lse,
        sm_scale,
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *o.stride(),
        H,
        N_CTX=N,
        HEAD_DIM=D,
    )
    return o, lse
