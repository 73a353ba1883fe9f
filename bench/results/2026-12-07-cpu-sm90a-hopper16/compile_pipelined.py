"""Compile the pipelined variant (or PIPE) for sm_90a at shapes D,causal,BM,BN,STAGES,WARPS."""

import os
import subprocess
import sys
import tempfile

import hopper_offline as ho
import torch
import triton
from offline_common import desc, load, sig
from triton.backends.compiler import GPUTarget

# hopper_offline: ../../../../shared/tools on PYTHONPATH; offline_common: this folder (the script's own)
HERE = os.path.dirname(os.path.abspath(__file__))


specs = sys.argv[1:]
sys.argv = sys.argv[:1]

m = load(
    os.environ.get("PIPE", os.path.join(HERE, "..", "..", "..", "solutions", "variants", "16_software_pipelined.py"))
)
for spec in specs:
    D, causal, BM, BN, ST, W = (int(x) for x in spec.split(","))
    q = desc((4 * 32 * 8192, D), [BM, D])
    k = desc((4 * 32 * 8192, D), [BN, D])
    o = torch.empty(4, dtype=torch.float16)
    lse = torch.empty(4, dtype=torch.float32)
    cx = {"HEAD_DIM": D, "BLOCK_M": BM, "BLOCK_N": BN, "CAUSAL": bool(causal), "STAGES": ST, "num_warps": W}
    src = ho._source(
        m._attn_fwd,
        sig(["q_desc", "k_desc", "v_desc", "o_ptr", "lse_ptr", "sm_scale", "N"], [q, k, k, o, lse, 0.1, 8192], cx),
        cx,
    )
    kern = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": W})
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "k.ptx")
        open(p, "w").write(kern.asm["ptx"])
        info = subprocess.run(
            [os.path.join(ho.BIN, "ptxas"), "-v", "--gpu-name=sm_90a", p, "-o", os.path.join(d, "k.cubin")],
            capture_output=True,
            text=True,
        ).stderr
    regs = int(info.split("Used ")[1].split(" registers")[0])
    spill = [line.strip() for line in info.splitlines() if "spill" in line][0]
    ctas = min(227 * 1024 // max(kern.metadata.shared, 1), 65536 // (regs * 32 * W))
    print(spec, "shared", kern.metadata.shared, "regs", regs, spill, "CTAs/SM", ctas, flush=True)
