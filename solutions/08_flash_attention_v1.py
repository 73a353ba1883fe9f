"""Puzzle 8 answer key: FlashAttention-1 forward, in the paper's loop order.

One program per (batch, head). Its outer loop walks the K/V blocks; for each one, the inner loop
walks every Q block, reads that block's output O_i, running sum l_i and running max m_i from global
memory, folds the new K/V block into them, and writes them back. O, l and m live in float32
buffers in global memory between steps; a last loop converts O to float16. Puzzle 9 swaps the loops.

Run the grader on it with `python -m checks 8 --solution`.
"""

import os

import torch
import triton
import triton.language as tl

# Tile sizes. The interpreter gets small tiles, so that its small test sizes still span several blocks.
BLOCK_M, BLOCK_N = (32, 16) if os.environ.get("TRITON_INTERPRET") == "1" else (64, 64)


@triton.jit
def _attn_fwd_v1(
    q_ptr, k_ptr, v_ptr, o_ptr,  # (B, H, N, D) float16, any strides
    acc_ptr, l_ptr, m_ptr,  # float32 state in global memory: O (B, H, N, D), l and m (B, H, N), all contiguous
    sm_scale,
    stride_qz, stride_qh, stride_qm, stride_qk,
    stride_kz, stride_kh, stride_kn, stride_kk,
    stride_vz, stride_vh, stride_vn, stride_vk,
    stride_oz, stride_oh, stride_om, stride_ok,
    H, N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,  # query rows per inner step
    BLOCK_N: tl.constexpr,  # key rows per outer step
):
    off_hz = tl.program_id(0)  # this program owns one (batch, head)
    off_z = off_hz // H
    off_h = off_hz % H
    q_base = q_ptr + off_z.to(tl.int64) * stride_qz + off_h.to(tl.int64) * stride_qh
    k_base = k_ptr + off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    v_base = v_ptr + off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh
    o_base = o_ptr + off_z.to(tl.int64) * stride_oz + off_h.to(tl.int64) * stride_oh
    acc_base = acc_ptr + off_hz.to(tl.int64) * N_CTX * HEAD_DIM  # contiguous: row n, column d at n * HEAD_DIM + d
    l_base = l_ptr + off_hz.to(tl.int64) * N_CTX
    m_base = m_ptr + off_hz.to(tl.int64) * N_CTX
    offs_d = tl.arange(0, HEAD_DIM)

    ### BEGIN SOLUTION
    # outer loop: one block of keys and values at a time, loaded once
    for start_n in range(0, N_CTX, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        key_mask = offs_n < N_CTX
        k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kk,
                    mask=key_mask[:, None], other=0.0)  # (BLOCK_N, HEAD_DIM)
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vk,
                    mask=key_mask[:, None], other=0.0)  # (BLOCK_N, HEAD_DIM)
        # inner loop: every block of queries, its state read from and written back to global memory
        for start_m in range(0, N_CTX, BLOCK_M):
            offs_m = start_m + tl.arange(0, BLOCK_M)
            row_mask = offs_m < N_CTX
            q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk,
                        mask=row_mask[:, None], other=0.0)  # (BLOCK_M, HEAD_DIM)
            acc_ptrs = acc_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
            o_i = tl.load(acc_ptrs, mask=row_mask[:, None], other=0.0)  # (BLOCK_M, HEAD_DIM) float32
            l_i = tl.load(l_base + offs_m, mask=row_mask, other=0.0)  # (BLOCK_M,)
            m_i = tl.load(m_base + offs_m, mask=row_mask, other=float("-inf"))  # (BLOCK_M,)

            s = tl.dot(q, tl.trans(k)) * sm_scale  # (BLOCK_M, BLOCK_N)
            s = tl.where(key_mask[None, :], s, float("-inf"))  # keys past N get no weight
            m_ij = tl.max(s, 1)  # this block's row max
            p = tl.exp(s - m_ij[:, None])
            l_ij = tl.sum(p, 1)

            m_new = tl.maximum(m_i, m_ij)
            alpha = tl.exp(m_i - m_new)  # moves the old state to the new max
            beta = tl.exp(m_ij - m_new)  # moves this block to the new max
            l_new = alpha * l_i + beta * l_ij
            pv = tl.dot(p.to(v.dtype), v)  # (BLOCK_M, HEAD_DIM), fp16 operands, fp32 result
            o_i = ((l_i * alpha)[:, None] * o_i + beta[:, None] * pv) / l_new[:, None]  # O_i stays normalised

            tl.store(acc_ptrs, o_i, mask=row_mask[:, None])
            tl.store(l_base + offs_m, l_new, mask=row_mask)
            tl.store(m_base + offs_m, m_new, mask=row_mask)
        # The next outer step reads back what this one wrote, possibly through other threads of the
        # program: wait until every store of this step is done.
        tl.debug_barrier()

    # epilogue: O is final; convert it to float16 into o
    for start_m in range(0, N_CTX, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        row_mask = offs_m < N_CTX
        o_i = tl.load(acc_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_mask[:, None])
        tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok,
                 o_i.to(o_ptr.dtype.element_ty), mask=row_mask[:, None])
    ### END SOLUTION


def flash_attention_v1(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float) -> torch.Tensor:
    """softmax(q k^T * sm_scale) v for (B, H, N, D) float16 q, k, v of any strides, FlashAttention-1 style."""
    ### BEGIN SOLUTION
    B, H, N, D = q.shape
    o = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)
    # the running state of FlashAttention-1, in global memory: O = 0, l = 0, m = -inf
    acc = torch.zeros((B, H, N, D), dtype=torch.float32, device=q.device)
    row_sum = torch.zeros((B, H, N), dtype=torch.float32, device=q.device)  # l
    row_max = torch.full((B, H, N), float("-inf"), dtype=torch.float32, device=q.device)  # m
    _attn_fwd_v1[(B * H,)](
        q, k, v, o, acc, row_sum, row_max, sm_scale,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        H, N, HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
    )
    return o
    ### END SOLUTION
