"""Puzzle 16, the step before warp specialisation: FlashAttention forward on Hopper in Gluon, software-pipelined.

Not the answer key (solutions/16_hopper_attention_fwd.py splits the same loop over a TMA producer warp and two
consumer warpgroups): lesson 16 times it beside the key to measure what warp specialisation adds.

One program owns BLOCK_M query rows of one (batch, head), 64 rows to each warpgroup of its warps. K and V blocks
arrive by TMA into a ring of STAGES slots, each half with its own mbarrier, so the scores S = Q K^T of block j can start
before V_j has landed. In the loop, the product P_{j-1} V_{j-1} runs on the tensor cores while the warps compute the
softmax of S_j: the two asynchronous wgmma groups are waited for in the order they were issued. The same warps also
issue the loads, each as soon as its slot is free: K's at the start of a step (the last step waited for the scores
that read it), V's as soon as its product is done.
"""

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor


@gluon.jit
def _masked(s, j, offs_m, N, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, s_layout: gl.constexpr):
    # keys past N (the next head's rows, or TMA's zeros) and, when causal, keys after the query: -inf
    offs_n = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    valid = offs_n[None, :] < N
    if CAUSAL:
        valid = valid & (offs_n[None, :] <= offs_m[:, None])
    return gl.where(valid, s, float("-inf"))


@gluon.jit
def _attn_step(j, p, m_i, l_i, acc, q_tile, k_tiles, v_tiles, k_bars, v_bars, k_desc, v_desc, row0, n_blocks,
               offs_m, N, qk_scale, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
               MASKED: gl.constexpr, CAUSAL: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr,
               p_layout: gl.constexpr):
    slot = j % STAGES
    prev = (j - 1) % STAGES
    ahead = j - 1 + STAGES  # the block that takes over block j - 1's slots
    present = ahead < n_blocks
    # -- K_{j-1} was read by S_{j-1}, which the last step waited for: its slot's next block goes now
    mbarrier.expect(k_bars.index(prev), k_desc.block_type.nbytes, pred=present)
    tma.async_copy_global_to_shared(k_desc, [row0 + ahead * BLOCK_N, 0], k_bars.index(prev), k_tiles.index(prev),
                                    pred=present)
    # -- S_j = Q K_j^T and O += P_{j-1} V_{j-1}, both in flight
    mbarrier.wait(k_bars.index(slot), (j // STAGES) & 1)
    s = warpgroup_mma(q_tile, k_tiles.index(slot).permute((1, 0)),
                      gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout), use_acc=False, is_async=True)
    mbarrier.wait(v_bars.index(prev), ((j - 1) // STAGES) & 1)
    acc = warpgroup_mma(gl.convert_layout(p.to(gl.float16), p_layout), v_tiles.index(prev), acc, is_async=True)
    # -- the softmax of S_j while P_{j-1} V_{j-1} runs (scores scaled inside exp2's argument: one FMA each)
    s = warpgroup_mma_wait(num_outstanding=1, deps=(s,))
    if MASKED:
        s = _masked(s, j, offs_m, N, BLOCK_N, CAUSAL, s_layout)
    m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
    alpha = gl.exp2(m_i - m_new)
    p = gl.exp2(s * qk_scale - m_new[:, None])
    l_i = l_i * alpha + gl.sum(p, 1)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    # -- P_{j-1} V_{j-1} is done: V_{j-1}'s slot takes its next block too
    mbarrier.expect(v_bars.index(prev), v_desc.block_type.nbytes, pred=present)
    tma.async_copy_global_to_shared(v_desc, [row0 + ahead * BLOCK_N, 0], v_bars.index(prev), v_tiles.index(prev),
                                    pred=present)
    acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
    return p, m_new, l_i, acc


@gluon.jit
def _attn_fwd(q_desc, k_desc, v_desc, o_ptr, lse_ptr, sm_scale, N,
              HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr,
              STAGES: gl.constexpr, num_warps: gl.constexpr):
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    gl.static_assert(STAGES >= 2, "the ring needs two slots: block j's keys land while block j - 1's values are read")

    start_m = gl.program_id(0) * BLOCK_M
    bh = gl.program_id(1)
    row0 = bh * N  # this head's first row in the (B*H*N, D) views

    q_tile = gl.allocate_shared_memory(q_desc.dtype, [BLOCK_M, HEAD_DIM], q_desc.layout)
    k_tiles = gl.allocate_shared_memory(k_desc.dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_tiles = gl.allocate_shared_memory(v_desc.dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(k_bars.index(s), count=1)
        mbarrier.init(v_bars.index(s), count=1)

    if CAUSAL:
        hi = gl.minimum(N, start_m + BLOCK_M)  # key blocks wholly after the last query row are skipped
    else:
        hi = N
    n_blocks = gl.cdiv(hi, BLOCK_N)

    # -- Q once, and the first STAGES key/value blocks
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [row0 + start_m, 0], q_bar, q_tile)
    for i in gl.static_range(STAGES):
        present = i < n_blocks
        mbarrier.expect(k_bars.index(i), k_desc.block_type.nbytes, pred=present)
        tma.async_copy_global_to_shared(k_desc, [row0 + i * BLOCK_N, 0], k_bars.index(i), k_tiles.index(i),
                                        pred=present)
        mbarrier.expect(v_bars.index(i), v_desc.block_type.nbytes, pred=present)
        tma.async_copy_global_to_shared(v_desc, [row0 + i * BLOCK_N, 0], v_bars.index(i), v_tiles.index(i),
                                        pred=present)

    qk_scale = sm_scale * 1.4426950408889634  # exp(x) = exp2(x * log2 e)
    offs_m = start_m + gl.arange(0, BLOCK_M, layout=row_s)

    # -- block 0: scores, then the first softmax step
    mbarrier.wait(q_bar, 0)
    mbarrier.wait(k_bars.index(0), 0)
    s = warpgroup_mma(q_tile, k_tiles.index(0).permute((1, 0)),
                      gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout), use_acc=False)
    s = _masked(s, 0, offs_m, N, BLOCK_N, CAUSAL, s_layout)
    m_i = gl.max(s, 1) * qk_scale
    p = gl.exp2(s * qk_scale - m_i[:, None])
    l_i = gl.sum(p, 1)
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)

    # -- key blocks wholly before the diagonal and before N need no mask; the rest do
    if CAUSAL:
        n_unmasked = gl.minimum(N // BLOCK_N, start_m // BLOCK_N)
    else:
        n_unmasked = N // BLOCK_N
    for j in range(1, n_unmasked):
        p, m_i, l_i, acc = _attn_step(j, p, m_i, l_i, acc, q_tile, k_tiles, v_tiles, k_bars, v_bars, k_desc, v_desc,
                                      row0, n_blocks, offs_m, N, qk_scale, BLOCK_M, BLOCK_N, STAGES, False, CAUSAL,
                                      s_layout, o_layout, p_layout)
    for j in range(gl.maximum(n_unmasked, 1), n_blocks):
        p, m_i, l_i, acc = _attn_step(j, p, m_i, l_i, acc, q_tile, k_tiles, v_tiles, k_bars, v_bars, k_desc, v_desc,
                                      row0, n_blocks, offs_m, N, qk_scale, BLOCK_M, BLOCK_N, STAGES, True, CAUSAL,
                                      s_layout, o_layout, p_layout)

    # -- the last block's product, then normalise
    last = (n_blocks - 1) % STAGES
    mbarrier.wait(v_bars.index(last), ((n_blocks - 1) // STAGES) & 1)
    acc = warpgroup_mma(gl.convert_layout(p.to(gl.float16), p_layout), v_tiles.index(last), acc)
    acc = acc / gl.convert_layout(l_i, row_o)[:, None]

    mbarrier.invalidate(q_bar)
    for s_ in gl.static_range(STAGES):
        mbarrier.invalidate(k_bars.index(s_))
        mbarrier.invalidate(v_bars.index(s_))

    # -- o and lse: rows past N belong to the next head, so these stores are masked
    rows_o = start_m + gl.arange(0, BLOCK_M, layout=row_o)
    cols_o = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
    o_offs = (row0 + rows_o).to(gl.int64)[:, None] * HEAD_DIM + cols_o[None, :]
    gl.store(o_ptr + o_offs, acc.to(gl.float16), mask=rows_o[:, None] < N)
    lse = (m_i + gl.log2(l_i)) * 0.6931471805599453  # back to the natural log
    gl.store(lse_ptr + (row0 + offs_m).to(gl.int64), lse, mask=offs_m < N)


def hopper_attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float):
    B, H, N, D = q.shape
    o = torch.empty_like(q)
    lse = torch.empty((B, H, N), device=q.device, dtype=torch.float32)
    # D = 128: 64 x 64 tiles on one warpgroup, 3 stages (115 KB of shared memory), so two programs share an SM and
    # one's softmax runs while the other's products do; D = 64: 128 x 128 tiles on two warpgroups, 3 stages
    # (launch shapes timed in bench/results/2026-12-07-h100-c/)
    BLOCK_M, BLOCK_N, STAGES, num_warps = (64, 64, 3, 4) if D == 128 else (64, 128, 3, 4)
    q_desc = TensorDescriptor.from_tensor(q.view(B * H * N, D), [BLOCK_M, D],
                                          gl.NVMMASharedLayout.get_default_for([BLOCK_M, D], gl.float16))
    kv_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_N, D], gl.float16)
    k_desc = TensorDescriptor.from_tensor(k.view(B * H * N, D), [BLOCK_N, D], kv_layout)
    v_desc = TensorDescriptor.from_tensor(v.view(B * H * N, D), [BLOCK_N, D], kv_layout)
    grid = (triton.cdiv(N, BLOCK_M), B * H)
    _attn_fwd[grid](q_desc, k_desc, v_desc, o, lse, sm_scale, N, HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                    CAUSAL=causal, STAGES=STAGES, num_warps=num_warps)
    return o, lse
