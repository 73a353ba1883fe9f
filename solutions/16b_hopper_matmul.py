"""Puzzle 16b answer key: a persistent matmul with TMA loads and asynchronous warpgroup MMA (Hopper).

One program per SM walks output tiles in grouped order (as puzzle 4). For each tile, TMA loads A and B tiles into a
ring of STAGES shared-memory slots, each completing on its own mbarrier; `warpgroup_mma` multiplies straight from
shared memory and runs asynchronously, so one product is in flight while the next tiles arrive. The float32
accumulator lives in registers; the finished tile goes out through shared memory and a TMA store, which overlaps
the next tile's first loads.
"""

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor


@gluon.jit
def _matmul_kernel(a_desc, b_desc, c_desc, M, N, K, GROUP_M: gl.constexpr, STAGES: gl.constexpr,
                   num_warps: gl.constexpr):
    ### BEGIN SOLUTION
    BLOCK_M: gl.constexpr = c_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    # the accumulator's layout: warpgroups stacked along M, each wgmma 16 x BLOCK_N x 16
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BLOCK_N, 16])

    a_tiles = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BLOCK_M, BLOCK_K], a_desc.layout)
    b_tiles = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BLOCK_K, BLOCK_N], b_desc.layout)
    c_tile = gl.allocate_shared_memory(c_desc.dtype, [BLOCK_M, BLOCK_N], c_desc.layout)
    loaded = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(loaded.index(s), count=1)

    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    tile_bytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    issued = 0  # loads issued and tiles consumed by this program so far, over all its output tiles: slot and phase
    consumed = 0

    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        # -- grouped launch order (puzzle 4): GROUP_M tile-rows share the columns of B while they are in L2
        group = tile // (GROUP_M * num_pid_n)
        first_m = group * GROUP_M
        group_size = min(num_pid_m - first_m, GROUP_M)
        off_m = (first_m + (tile % group_size)) * BLOCK_M
        off_n = ((tile % (GROUP_M * num_pid_n)) // group_size) * BLOCK_N

        # -- prologue: STAGES - 2 loads ahead (one slot stays with the product in flight)
        for k in gl.static_range(STAGES - 2):
            slot = issued % STAGES
            present = k < k_tiles
            mbarrier.expect(loaded.index(slot), tile_bytes, pred=present)
            tma.async_copy_global_to_shared(a_desc, [off_m, k * BLOCK_K], loaded.index(slot), a_tiles.index(slot),
                                            pred=present)
            tma.async_copy_global_to_shared(b_desc, [k * BLOCK_K, off_n], loaded.index(slot), b_tiles.index(slot),
                                            pred=present)
            issued += present.to(gl.int32)

        acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=acc_layout)
        for k in range(k_tiles):
            # -- the load STAGES - 2 tiles ahead goes into the slot of the product two steps back, now finished
            ahead = k + STAGES - 2
            present = ahead < k_tiles
            slot = issued % STAGES
            mbarrier.expect(loaded.index(slot), tile_bytes, pred=present)
            tma.async_copy_global_to_shared(a_desc, [off_m, ahead * BLOCK_K], loaded.index(slot),
                                            a_tiles.index(slot), pred=present)
            tma.async_copy_global_to_shared(b_desc, [ahead * BLOCK_K, off_n], loaded.index(slot),
                                            b_tiles.index(slot), pred=present)
            issued += present.to(gl.int32)

            # -- wait for tile k, start its product, and let at most one product run behind it
            slot = consumed % STAGES
            mbarrier.wait(loaded.index(slot), (consumed // STAGES) & 1)
            acc = warpgroup_mma(a_tiles.index(slot), b_tiles.index(slot), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            consumed += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))

        # -- the tile goes out by TMA; the previous tile's store must have left c_tile first
        tma.store_wait(pendings=0)
        c_tile.store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [off_m, off_n], c_tile)

    tma.store_wait(pendings=0)
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(loaded.index(s))
    ### END SOLUTION


def hopper_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M = 128, 256, 64, 3, 8
    a_desc = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K],
                                          gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], gl.float16))
    b_desc = TensorDescriptor.from_tensor(b, [BLOCK_K, BLOCK_N],
                                          gl.NVMMASharedLayout.get_default_for([BLOCK_K, BLOCK_N], gl.float16))
    c_desc = TensorDescriptor.from_tensor(c, [BLOCK_M, BLOCK_N],
                                          gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_N], gl.float16))
    num_sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    ### BEGIN SOLUTION
    grid = (min(num_sms, triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)),)
    _matmul_kernel[grid](a_desc, b_desc, c_desc, M, N, K, GROUP_M, STAGES, num_warps=8)
    ### END SOLUTION
    return c
