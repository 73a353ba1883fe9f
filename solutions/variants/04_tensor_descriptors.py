"""Puzzle 4, going further: the grouped, autotuned matmul with tensor descriptors (TMA on Hopper).

Not a puzzle: `make bench` times it beside the answer key (solutions/04_matmul_fast.py), as the
`variants` of puzzle 4's bench entry in puzzles.yaml, and notebook 4 explains the result.

The launch order and the walk along K are the answer key's. The tiles of a and b arrive another way:
each program describes a and b once with `tl.make_tensor_descriptor(base, shape, strides, block_shape)`
and loads a tile by its top-left corner, `desc_a.load([row, k])`. On a Hopper GPU that is one request
to the Tensor Memory Accelerator (TMA), which copies the tile into shared memory with no per-element
address arithmetic; rows and columns past the edges come back as zeros, so the loads need no mask,
and the store of c through a descriptor drops what lies past the edges.

Descriptors need the last dimension contiguous and rows that start on 16 bytes: other layouts, and
rows of a length that is not a multiple of 8, are copied first into zero-padded buffers. Triton keeps a
descriptor made in a kernel in a scratch buffer it gets from `triton.set_allocator` (set below).
"""

import os

import torch
import triton
import triton.language as tl


def matmul_configs() -> list[triton.Config]:
    """The tile shapes the autotuner tries (one in the interpreter, which cannot time them)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_SIZE_M": 2}, num_stages=1)]
    return [
        triton.Config({"BLOCK_M": BM, "BLOCK_N": BN, "BLOCK_K": BK, "GROUP_SIZE_M": 8}, num_warps=w, num_stages=s)
        for BM, BN, BK, w, s in [(128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 256, 64, 8, 4),
                                 (128, 128, 64, 8, 4), (128, 128, 64, 4, 4), (64, 64, 64, 4, 4)]
    ]


def prune_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Products smaller than 2048^3 take one mid-sized tile: tuning them would cost more than it saves."""
    args = {**named_args, **kwargs}
    if len(configs) == 1 or args["M"] * args["N"] * args["K"] >= 2048**3:
        return configs
    return [configs[-1]]


@triton.autotune(configs=matmul_configs(), key=["M", "N", "K"], prune_configs_by={"early_config_prune": prune_configs})
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_bk, stride_cm,  # the row strides; each last dimension is contiguous
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    desc_a = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
    desc_b = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N])
    desc_c = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, BLOCK_N])

    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = desc_a.load([pid_m * BLOCK_M, k * BLOCK_K])  # past the edges: zeros, which add nothing
        b = desc_b.load([k * BLOCK_K, pid_n * BLOCK_N])
        accumulator = tl.dot(a, b, accumulator)
    desc_c.store([pid_m * BLOCK_M, pid_n * BLOCK_N], accumulator.to(tl.float16))


def _scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    """Memory for the descriptors a kernel makes (Triton asks for it at each launch)."""
    return torch.empty(size, dtype=torch.int8, device="cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda")


def _tma_ready(t: torch.Tensor) -> torch.Tensor:
    """t itself when a descriptor can describe it (last dimension contiguous, rows on 16 bytes), else a copy
    whose rows are padded with zeros to a multiple of 8 float16 (zeros add nothing to the products)."""
    if t.stride(-1) == 1 and t.stride(0) % 8 == 0 and t.data_ptr() % 16 == 0:
        return t
    rows, cols = t.shape
    padded = torch.zeros((rows, cols + (-cols) % 8), dtype=t.dtype, device=t.device)
    padded[:, :cols] = t
    return padded


def matmul_fast(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b for float16 a (M, K) and b (K, N); float16 (M, N) result."""
    assert a.shape[1] == b.shape[0], f"cannot multiply {tuple(a.shape)} by {tuple(b.shape)}"
    triton.set_allocator(_scratch)
    M, K = a.shape
    N = b.shape[1]
    a, b = _tma_ready(a), _tma_ready(b)  # a padded copy keeps K columns of data; b's padding lies past N
    c = torch.empty((M, N + (-N) % 8), device=a.device, dtype=torch.float16)  # rows on 16 bytes too
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0))
    return c if c.shape[1] == N else c[:, :N].contiguous()
