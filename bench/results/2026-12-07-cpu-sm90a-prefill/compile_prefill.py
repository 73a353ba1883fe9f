"""Compile the prefill keys (14, 15) for sm_90a without a GPU: registers, spills, shared memory, wgmma count.

PYTHONPATH=DIR_OF_hopper_offline.py python compile_prefill.py KEY14.py KEY15.py
"""

import importlib.util
import sys

import torch
from hopper_offline import report
from triton.runtime.jit import mangle_type


def load(path):
    spec = importlib.util.spec_from_file_location(path.split("/")[-1][:-3].replace(".", "_"), path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def sig(fn, values, cx):
    names = [n for n in fn.arg_names if n not in cx]
    out = {n: mangle_type(v) for n, v in zip(names, values, strict=False)}
    out.update({n: "constexpr" for n in cx if not n.startswith("num_")})
    return out


f16 = torch.empty(4, dtype=torch.float16)
f32 = torch.empty(4, dtype=torch.float32)
i32 = torch.empty(4, dtype=torch.int32)
path14 = sys.argv[1] if len(sys.argv) > 1 else "solutions/14_varlen_attention.py"
path15 = sys.argv[2] if len(sys.argv) > 2 else "solutions/15_chunked_prefill.py"
m = load(path14)
names = (
    ["q_ptr", "k_ptr", "v_ptr", "cu_seqlens_ptr", "o_ptr", "lse_ptr", "qk_scale"] + [f"s{i}" for i in range(9)] + ["T"]
)
for D in (64, 128):
    BM, BN, w, st = m.launch_shape(D, torch.device("cuda"))
    cx = {"GROUP": 1, "HEAD_DIM": D, "BLOCK_M": BM, "BLOCK_N": BN, "CAUSAL": True}
    print("14", D, (BM, BN, w, st))
    report(
        m._varlen_attn_fwd,
        sig(m._varlen_attn_fwd, [f16, f16, f16, i32, f16, f32, 0.1] + [4096, 128, 1] * 3 + [32768], cx),
        cx,
        num_warps=w,
        num_stages=st,
    )
m = load(path15)
names = (
    [
        "q_ptr",
        "k_ptr",
        "v_ptr",
        "k_cache_ptr",
        "v_cache_ptr",
        "block_table_ptr",
        "cu_seqlens_ptr",
        "context_lens_ptr",
        "o_ptr",
        "lse_ptr",
        "qk_scale",
    ]
    + [f"s{i}" for i in range(9 + 8 + 1)]
    + ["T", "num_seqs"]
)
for D in (64, 128):
    BM, BN, w, st = m.launch_shape(D, torch.device("cuda"))
    cx = {"PAGE_SIZE": 16, "GROUP": 1, "HEAD_DIM": D, "BLOCK_M": BM, "BLOCK_N": BN}
    print("15", D, (BM, BN, w, st))
    vals = [f16] * 5 + [i32] * 3 + [f16, f32, 0.1] + [4096, 128, 1] * 3 + [65536, 4096, 128, 1] * 2 + [64, 32768, 16]
    report(m._chunked_prefill_fwd, sig(m._chunked_prefill_fwd, vals, cx), cx, num_warps=w, num_stages=st)
