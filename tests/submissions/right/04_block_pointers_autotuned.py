"""Right, another style: block pointers (tl.make_block_ptr) and @triton.autotune over several configs."""

import torch
import triton
import triton.language as tl

CONFIGS = [
    triton.Config({"BM": 16, "BN": 32, "BK": 64, "GM": 8}, num_warps=4, num_stages=3),
    triton.Config({"BM": 128, "BN": 128, "BK": 32, "GM": 8}, num_warps=8, num_stages=4),
    triton.Config({"BM": 64, "BN": 128, "BK": 64, "GM": 4}, num_warps=4, num_stages=4),
]


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def _mm_block_ptr(
    a_ptr, b_ptr, c_ptr, M, N, K,
    sam, sak, sbk, sbn, scm, scn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    n_m = tl.cdiv(M, BM)
    n_n = tl.cdiv(N, BN)
    # pids come in bands of GM tile-rows; inside a band, consecutive pids go down, then right
    band = pid // (GM * n_n)
    top = band * GM
    height = tl.minimum(n_m - top, GM)
    local = pid - band * GM * n_n
    tile_m = top + local % height
    tile_n = local // height

    a_blk = tl.make_block_ptr(a_ptr, shape=(M, K), strides=(sam, sak), offsets=(tile_m * BM, 0),
                              block_shape=(BM, BK), order=(1, 0))  # fmt: skip
    b_blk = tl.make_block_ptr(b_ptr, shape=(K, N), strides=(sbk, sbn), offsets=(0, tile_n * BN),
                              block_shape=(BK, BN), order=(1, 0))  # fmt: skip
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(tl.cdiv(K, BK)):
        a = tl.load(a_blk, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_blk, boundary_check=(0, 1), padding_option="zero")
        acc = tl.dot(a, b, acc)
        a_blk = tl.advance(a_blk, (0, BK))
        b_blk = tl.advance(b_blk, (BK, 0))
    c_blk = tl.make_block_ptr(c_ptr, shape=(M, N), strides=(scm, scn), offsets=(tile_m * BM, tile_n * BN),
                              block_shape=(BM, BN), order=(1, 0))  # fmt: skip
    tl.store(c_blk, acc.to(tl.float16), boundary_check=(0, 1))


def matmul_fast(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=torch.float16, device=a.device)

    def grid(meta):
        return (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)

    _mm_block_ptr[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return c
