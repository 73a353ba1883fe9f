"""Puzzle 16 answer key: FlashAttention forward on Hopper, in Gluon, warp-specialised.

One program owns BLOCK_M = 128 query rows of one (batch, head). Its warps split into three partitions
(`gl.warp_specialize`), each running its own code:

    producer     1 warp, few registers: TMA loads of Q (once) and of K and V blocks into a ring of STAGES slots
    consumer 0   a warpgroup (4 warps): query rows 0-63 of the tile
    consumer 1   a warpgroup (4 warps): query rows 64-127

They talk through mbarriers in shared memory: a slot's `k_ready` / `v_ready` complete when TMA has written it;
its `kv_empty` completes when both consumers are done with it, and only then does the producer load it again.
Each consumer runs FlashAttention-2's loop with its two products asynchronous: the scores S_j = Q K_j^T and the
product P_{j-1} V_{j-1} are in flight together, and the softmax of S_j runs while P_{j-1} V_{j-1} is still on the
tensor cores (FlashAttention-3's intra-warpgroup pipelining). With two consumers on one SM, the warp scheduler runs
one consumer's products while the other does its softmax. The register budget follows the roles: the producer gets
24 registers per thread, each consumer 240.

Measured on an H100 against SDPA's cuDNN backend and tutorial 06: bench/results/2026-12-06-h100-hopper/.
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
def _attn_step(j, p, m_i, l_i, acc, q_tile, k_tiles, v_tiles, k_ready, v_ready, kv_empty, offs_m, N, qk_scale,
               ROWS: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, MASKED: gl.constexpr,
               CAUSAL: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr, p_layout: gl.constexpr):
    ### BEGIN SOLUTION
    slot = j % STAGES
    prev = (j - 1) % STAGES
    # -- S_j = Q K_j^T and O += P_{j-1} V_{j-1}, both in flight
    mbarrier.wait(k_ready.index(slot), (j // STAGES) & 1)
    s = warpgroup_mma(q_tile, k_tiles.index(slot).permute((1, 0)), gl.zeros([ROWS, BLOCK_N], gl.float32, s_layout),
                      use_acc=False, is_async=True)
    mbarrier.wait(v_ready.index(prev), ((j - 1) // STAGES) & 1)
    acc = warpgroup_mma(gl.convert_layout(p.to(gl.float16), p_layout), v_tiles.index(prev), acc, is_async=True)
    # -- the softmax of S_j while P_{j-1} V_{j-1} runs (the scale folded into exp2's argument: one FMA each)
    s = warpgroup_mma_wait(num_outstanding=1, deps=(s,))
    if MASKED:
        s = _masked(s, j, offs_m, N, BLOCK_N, CAUSAL, s_layout)
    m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
    alpha = gl.exp2(m_i - m_new)
    p = gl.exp2(s * qk_scale - m_new[:, None])
    l_i = l_i * alpha + gl.sum(p, 1)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    mbarrier.arrive(kv_empty.index(prev), count=1)  # this consumer is done with K_{j-1} and V_{j-1}
    acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
    return p, m_new, l_i, acc
    ### END SOLUTION


@gluon.jit
def _consumer(first, q_tile, q_ready, o_ptr, lse_ptr, sm_scale, N, row0, n_blocks, n_unmasked, k_tiles, v_tiles,
              k_ready, v_ready, kv_empty, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
              STAGES: gl.constexpr, CAUSAL: gl.constexpr):
    ROWS: gl.constexpr = BLOCK_M // 2
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    offs_m = first + gl.arange(0, ROWS, layout=gl.SliceLayout(1, s_layout))
    qk_scale = sm_scale * 1.4426950408889634  # exp(x) = exp2(x * log2 e)

    # -- block 0: scores, then the first softmax step
    mbarrier.wait(q_ready, 0)
    mbarrier.wait(k_ready.index(0), 0)
    s = warpgroup_mma(q_tile, k_tiles.index(0).permute((1, 0)), gl.zeros([ROWS, BLOCK_N], gl.float32, s_layout),
                      use_acc=False)
    s = _masked(s, 0, offs_m, N, BLOCK_N, CAUSAL, s_layout)
    m_i = gl.max(s, 1) * qk_scale
    p = gl.exp2(s * qk_scale - m_i[:, None])
    l_i = gl.sum(p, 1)
    acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, o_layout)

    # -- key blocks wholly before the diagonal and before N need no mask; the rest do
    for j in range(1, n_unmasked):
        p, m_i, l_i, acc = _attn_step(j, p, m_i, l_i, acc, q_tile, k_tiles, v_tiles, k_ready, v_ready, kv_empty,
                                      offs_m, N, qk_scale, ROWS, BLOCK_N, STAGES, False, CAUSAL, s_layout, o_layout,
                                      p_layout)
    for j in range(gl.maximum(n_unmasked, 1), n_blocks):
        p, m_i, l_i, acc = _attn_step(j, p, m_i, l_i, acc, q_tile, k_tiles, v_tiles, k_ready, v_ready, kv_empty,
                                      offs_m, N, qk_scale, ROWS, BLOCK_N, STAGES, True, CAUSAL, s_layout, o_layout,
                                      p_layout)

    # -- the last block's product, then normalise
    last = (n_blocks - 1) % STAGES
    mbarrier.wait(v_ready.index(last), ((n_blocks - 1) // STAGES) & 1)
    acc = warpgroup_mma(gl.convert_layout(p.to(gl.float16), p_layout), v_tiles.index(last), acc)
    acc = acc / gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))[:, None]

    # -- o and lse: rows past N belong to the next head, so these stores are masked
    rows_o = first + gl.arange(0, ROWS, layout=gl.SliceLayout(1, o_layout))
    cols_o = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
    o_offs = (row0 + rows_o).to(gl.int64)[:, None] * HEAD_DIM + cols_o[None, :]
    gl.store(o_ptr + o_offs, acc.to(gl.float16), mask=rows_o[:, None] < N)
    lse = (m_i + gl.log2(l_i)) * 0.6931471805599453  # back to the natural log
    gl.store(lse_ptr + (row0 + offs_m).to(gl.int64), lse, mask=offs_m < N)


# The three partitions take the same arguments (gl.warp_specialize asks it of the workers); each uses its share.
@gluon.jit
def _first_consumer(o_ptr, lse_ptr, sm_scale, N, start_m, row0, n_blocks, n_unmasked, q_tiles, k_tiles, v_tiles,
                    q_ready, k_ready, v_ready, kv_empty, q_desc, k_desc, v_desc, HEAD_DIM: gl.constexpr,
                    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr):
    _consumer(start_m, q_tiles.index(0), q_ready.index(0), o_ptr, lse_ptr, sm_scale, N, row0, n_blocks, n_unmasked,
              k_tiles, v_tiles, k_ready, v_ready, kv_empty, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES, CAUSAL)


@gluon.jit
def _second_consumer(o_ptr, lse_ptr, sm_scale, N, start_m, row0, n_blocks, n_unmasked, q_tiles, k_tiles, v_tiles,
                     q_ready, k_ready, v_ready, kv_empty, q_desc, k_desc, v_desc, HEAD_DIM: gl.constexpr,
                     BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr):
    _consumer(start_m + BLOCK_M // 2, q_tiles.index(1), q_ready.index(1), o_ptr, lse_ptr, sm_scale, N, row0,
              n_blocks, n_unmasked, k_tiles, v_tiles, k_ready, v_ready, kv_empty, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES,
              CAUSAL)


@gluon.jit
def _producer(o_ptr, lse_ptr, sm_scale, N, start_m, row0, n_blocks, n_unmasked, q_tiles, k_tiles, v_tiles, q_ready,
              k_ready, v_ready, kv_empty, q_desc, k_desc, v_desc, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
              BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr):
    ### BEGIN SOLUTION
    ROWS: gl.constexpr = BLOCK_M // 2
    for half in gl.static_range(2):
        mbarrier.expect(q_ready.index(half), q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [row0 + start_m + half * ROWS, 0], q_ready.index(half),
                                        q_tiles.index(half))
    for j in range(n_blocks):
        slot = j % STAGES
        # a slot is free once both consumers arrived on kv_empty (a fresh barrier counts as free: phase 1 done)
        mbarrier.wait(kv_empty.index(slot), ((j // STAGES) & 1) ^ 1)
        mbarrier.expect(k_ready.index(slot), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [row0 + j * BLOCK_N, 0], k_ready.index(slot), k_tiles.index(slot))
        mbarrier.expect(v_ready.index(slot), v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(v_desc, [row0 + j * BLOCK_N, 0], v_ready.index(slot), v_tiles.index(slot))
    ### END SOLUTION


@gluon.jit
def _attn_fwd(q_desc, k_desc, v_desc, o_ptr, lse_ptr, sm_scale, N, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
              BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr):
    ROWS: gl.constexpr = BLOCK_M // 2
    start_m = gl.program_id(0) * BLOCK_M
    row0 = gl.program_id(1) * N  # this head's first row in the (B*H*N, D) views
    q_tiles = gl.allocate_shared_memory(q_desc.dtype, [2, ROWS, HEAD_DIM], q_desc.layout)
    k_tiles = gl.allocate_shared_memory(k_desc.dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_tiles = gl.allocate_shared_memory(v_desc.dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ### BEGIN SOLUTION
    for half in gl.static_range(2):
        mbarrier.init(q_ready.index(half), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(s), count=1)
        mbarrier.init(v_ready.index(s), count=1)
        mbarrier.init(kv_empty.index(s), count=2)  # one arrival from each consumer
    ### END SOLUTION

    if CAUSAL:
        hi = gl.minimum(N, start_m + BLOCK_M)  # key blocks wholly after the tile's last query row are skipped
        n_unmasked = gl.minimum(N // BLOCK_N, start_m // BLOCK_N)
    else:
        hi = N
        n_unmasked = N // BLOCK_N
    n_blocks = gl.cdiv(hi, BLOCK_N)

    ### BEGIN SOLUTION
    gl.warp_specialize([
        (_first_consumer, (o_ptr, lse_ptr, sm_scale, N, start_m, row0, n_blocks, n_unmasked, q_tiles, k_tiles,
                           v_tiles, q_ready, k_ready, v_ready, kv_empty, q_desc, k_desc, v_desc, HEAD_DIM, BLOCK_M,
                           BLOCK_N, STAGES, CAUSAL)),
        (_second_consumer, (o_ptr, lse_ptr, sm_scale, N, start_m, row0, n_blocks, n_unmasked, q_tiles, k_tiles,
                            v_tiles, q_ready, k_ready, v_ready, kv_empty, q_desc, k_desc, v_desc, HEAD_DIM, BLOCK_M,
                            BLOCK_N, STAGES, CAUSAL)),
        (_producer, (o_ptr, lse_ptr, sm_scale, N, start_m, row0, n_blocks, n_unmasked, q_tiles, k_tiles, v_tiles,
                     q_ready, k_ready, v_ready, kv_empty, q_desc, k_desc, v_desc, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES,
                     CAUSAL)),
    ], [4, 1], [240, 24])  # warps and registers per thread of the workers: the second consumer, the producer
    ### END SOLUTION


def hopper_attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float):
    B, H, N, D = q.shape
    o = torch.empty_like(q)
    lse = torch.empty((B, H, N), device=q.device, dtype=torch.float32)
    BLOCK_M, BLOCK_N = 128, 128
    # three K/V slots where they fit (224 KiB at D = 128); at D = 64 causal, two measured faster
    STAGES = 2 if (D == 64 and causal) else 3
    q_desc = TensorDescriptor.from_tensor(q.view(B * H * N, D), [BLOCK_M // 2, D],
                                          gl.NVMMASharedLayout.get_default_for([BLOCK_M // 2, D], gl.float16))
    kv_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_N, D], gl.float16)
    k_desc = TensorDescriptor.from_tensor(k.view(B * H * N, D), [BLOCK_N, D], kv_layout)
    v_desc = TensorDescriptor.from_tensor(v.view(B * H * N, D), [BLOCK_N, D], kv_layout)
    ### BEGIN SOLUTION
    grid = (triton.cdiv(N, BLOCK_M), B * H)
    # 9 warps (4 + 4 + 1, the producer's warpgroup counted whole) at 168 registers each at launch: the warpgroups
    # then trade registers (setmaxnreg) to 240 / 240 / 24
    _attn_fwd[grid](q_desc, k_desc, v_desc, o, lse, sm_scale, N, HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                    CAUSAL=causal, STAGES=STAGES, num_warps=4, maxnreg=168)
    ### END SOLUTION
    return o, lse
