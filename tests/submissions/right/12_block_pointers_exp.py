"""Right, another style: block pointers (tl.make_block_ptr) for K and V, exp instead of exp2, key blocks of 32,
a fixed number of splits (up to 8, at least 64 keys each), and the group padded to 16 rows."""

import torch
import triton
import triton.language as tl


@triton.jit
def _split(
    Q, K, V, PO, PL, sm_scale, HKV, N, SPLIT, S,
    sq0, sq1, sq2, sk0, sk1, sk2, sk3, sv0, sv1, sv2, sv3,
    G: tl.constexpr, BG: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    s = tl.program_id(0)
    zh = tl.program_id(1).to(tl.int64)  # offsets past 2^31 elements
    z = zh // HKV
    h = zh % HKV
    rows = tl.arange(0, BG)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + z * sq0 + (h * G + rows)[:, None] * sq1 + offs_d[None, :] * sq2,
                mask=(rows < G)[:, None], other=0.0)  # fmt: skip
    lo = s * SPLIT
    hi = tl.minimum(lo + SPLIT, N)
    k_blocks = tl.make_block_ptr(K + z * sk0 + h * sk1, shape=(N, D), strides=(sk2, sk3), offsets=(lo, 0),
                                 block_shape=(BLOCK_N, D), order=(1, 0))  # fmt: skip
    v_blocks = tl.make_block_ptr(V + z * sv0 + h * sv1, shape=(N, D), strides=(sv2, sv3), offsets=(lo, 0),
                                 block_shape=(BLOCK_N, D), order=(1, 0))  # fmt: skip
    m = tl.full((BG,), float("-inf"), tl.float32)
    total = tl.zeros((BG,), tl.float32)
    acc = tl.zeros((BG, D), tl.float32)
    for start in range(lo, hi, BLOCK_N):
        keep = (start + tl.arange(0, BLOCK_N)) < hi
        k = tl.load(k_blocks, boundary_check=(0,), padding_option="zero")
        x = tl.where(keep[None, :], tl.dot(q, tl.trans(k)) * sm_scale, float("-inf"))
        new_m = tl.maximum(m, tl.max(x, 1))
        p = tl.exp(x - new_m[:, None])
        scale = tl.exp(m - new_m)
        v = tl.load(v_blocks, boundary_check=(0,), padding_option="zero")
        v = tl.where(keep[:, None], v, 0.0)  # keys of the next split, inside N, weigh 0 here
        acc = tl.dot(p.to(tl.float16), v, acc * scale[:, None])
        total = total * scale + tl.sum(p, 1)
        m = new_m
        k_blocks = tl.advance(k_blocks, (BLOCK_N, 0))
        v_blocks = tl.advance(v_blocks, (BLOCK_N, 0))
    head = z * HKV * G + h * G + rows
    tl.store(PO + (head[:, None] * S + s) * D + offs_d[None, :], acc / total[:, None], mask=(rows < G)[:, None])
    tl.store(PL + head * S + s, m + tl.log(total), mask=rows < G)


@triton.jit
def _combine(PO, PL, OUT, LSE, H, S, so0, so1, so2, D: tl.constexpr, S_POW2: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)  # offsets past 2^31 elements
    offs_s = tl.arange(0, S_POW2)
    offs_d = tl.arange(0, D)
    lse_s = tl.load(PL + bh * S + offs_s, mask=offs_s < S, other=float("-inf"))
    o_s = tl.load(PO + (bh * S + offs_s[:, None]) * D + offs_d[None, :], mask=(offs_s < S)[:, None], other=0.0)
    top = tl.max(lse_s, 0)
    w = tl.exp(lse_s - top)
    out = tl.sum(w[:, None] * o_s, 0) / tl.sum(w, 0)
    tl.store(OUT + (bh // H) * so0 + (bh % H) * so1 + offs_d * so2, out.to(OUT.dtype.element_ty))
    tl.store(LSE + bh, top + tl.log(tl.sum(w, 0)))


def gqa_decoding(q, k, v, sm_scale):
    B, H_kv, N, D = k.shape
    H_q = q.shape[1]
    G = H_q // H_kv
    splits = max(1, min(8, N // 64))
    split = triton.cdiv(triton.cdiv(N, splits), 32) * 32
    splits = triton.cdiv(N, split)
    part_o = torch.empty((B * H_q, splits, D), dtype=torch.float32, device=q.device)
    part_lse = torch.empty((B * H_q, splits), dtype=torch.float32, device=q.device)
    _split[(splits, B * H_kv)](q, k, v, part_o, part_lse, sm_scale, H_kv, N, split, splits,
                               *q.stride(), *k.stride(), *v.stride(),
                               G=G, BG=max(16, triton.next_power_of_2(G)), D=D, BLOCK_N=32)  # fmt: skip
    o = torch.empty((B, H_q, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H_q), dtype=torch.float32, device=q.device)
    _combine[(B * H_q,)](part_o, part_lse, o, lse, H_q, splits, *o.stride(), D=D, S_POW2=triton.next_power_of_2(splits))
    return o, lse
