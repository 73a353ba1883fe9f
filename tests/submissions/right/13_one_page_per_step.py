"""Right, another style: each step loads one page number (a scalar) and walks that page, with exp instead of
exp2; splits of 8 pages, and a merge that reads seq_lens to know which splits ran."""

import torch
import triton
import triton.language as tl


@triton.jit
def _split(
    Q, KC, VC, TABLE, LENS, PO, PL, sm_scale, HKV, PAGES_PER_SPLIT, S,
    sq0, sq1, sq2, sk0, sk1, sk2, sk3, sv0, sv1, sv2, sv3, st0,
    G: tl.constexpr, BG: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr,
):  # fmt: skip
    s = tl.program_id(0)
    zh = tl.program_id(1)
    z = zh // HKV
    h = zh % HKV
    n = tl.load(LENS + z)
    first = s * PAGES_PER_SPLIT
    last = tl.minimum(first + PAGES_PER_SPLIT, tl.cdiv(n, PAGE))
    if first < last:
        rows = tl.arange(0, BG)
        offs_d = tl.arange(0, D)
        slots = tl.arange(0, PAGE)
        q = tl.load(Q + z * sq0 + (h * G + rows)[:, None] * sq1 + offs_d[None, :] * sq2,
                    mask=(rows < G)[:, None], other=0.0)  # fmt: skip
        m = tl.full((BG,), float("-inf"), tl.float32)
        total = tl.zeros((BG,), tl.float32)
        acc = tl.zeros((BG, D), tl.float32)
        for j in range(first, last):
            page = tl.load(TABLE + z * st0 + j).to(tl.int64)
            keep = j * PAGE + slots < n
            k = tl.load(KC + page * sk0 + slots[:, None] * sk1 + h * sk2 + offs_d[None, :] * sk3,
                        mask=keep[:, None], other=0.0)  # fmt: skip
            v = tl.load(VC + page * sv0 + slots[:, None] * sv1 + h * sv2 + offs_d[None, :] * sv3,
                        mask=keep[:, None], other=0.0)  # fmt: skip
            x = tl.where(keep[None, :], tl.dot(q, tl.trans(k)) * sm_scale, float("-inf"))
            new_m = tl.maximum(m, tl.max(x, 1))
            p = tl.exp(x - new_m[:, None])
            scale = tl.exp(m - new_m)
            acc = tl.dot(p.to(tl.float16), v, acc * scale[:, None])
            total = total * scale + tl.sum(p, 1)
            m = new_m
        head = z * HKV * G + h * G + rows
        tl.store(PO + (head[:, None] * S + s) * D + offs_d[None, :], acc / total[:, None], mask=(rows < G)[:, None])
        tl.store(PL + head * S + s, m + tl.log(total), mask=rows < G)


@triton.jit
def _combine(PO, PL, LENS, OUT, LSE, H, S, KEYS_PER_SPLIT, so0, so1, so2, D: tl.constexpr, S_POW2: tl.constexpr):
    bh = tl.program_id(0)
    ran = tl.cdiv(tl.load(LENS + bh // H), KEYS_PER_SPLIT)
    offs_s = tl.arange(0, S_POW2)
    offs_d = tl.arange(0, D)
    lse_s = tl.load(PL + bh * S + offs_s, mask=offs_s < ran, other=float("-inf"))
    o_s = tl.load(PO + (bh * S + offs_s[:, None]) * D + offs_d[None, :], mask=(offs_s < ran)[:, None], other=0.0)
    top = tl.max(lse_s, 0)
    w = tl.exp(lse_s - top)
    out = tl.sum(w[:, None] * o_s, 0) / tl.sum(w, 0)
    tl.store(OUT + (bh // H) * so0 + (bh % H) * so1 + offs_d * so2, out.to(OUT.dtype.element_ty))
    tl.store(LSE + bh, top + tl.log(tl.sum(w, 0)))


def paged_decoding(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    B, H_q, D = q.shape
    _, page, H_kv, _ = k_cache.shape
    G = H_q // H_kv
    per_split = 8
    splits = triton.cdiv(block_table.shape[1], per_split)
    part_o = torch.empty((B * H_q, splits, D), dtype=torch.float32, device=q.device)
    part_lse = torch.empty((B * H_q, splits), dtype=torch.float32, device=q.device)
    _split[(splits, B * H_kv)](q, k_cache, v_cache, block_table, seq_lens, part_o, part_lse, sm_scale, H_kv,
                               per_split, splits, *q.stride(), *k_cache.stride(), *v_cache.stride(),
                               block_table.stride(0), G=G, BG=max(16, triton.next_power_of_2(G)), D=D,
                               PAGE=page)  # fmt: skip
    o = torch.empty((B, H_q, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H_q), dtype=torch.float32, device=q.device)
    _combine[(B * H_q,)](part_o, part_lse, seq_lens, o, lse, H_q, splits, per_split * page, *o.stride(), D=D,
                         S_POW2=triton.next_power_of_2(splits))  # fmt: skip
    return o, lse
