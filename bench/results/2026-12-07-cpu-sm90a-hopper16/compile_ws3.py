"""Compile ws3.py of this folder (or the file KEYFILE names) for sm_90a, one shape per argument:
D,causal,BLOCK_M,BLOCK_N,STAGES,REGS,MAXNREG."""

import glob
import os
import re
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

m = load(os.environ.get("KEYFILE", os.path.join(HERE, "ws3.py")))
for spec in specs:
    D, causal, BM, BN, ST, REGS, MAXN = (int(x) for x in spec.split(","))
    q = desc((4 * 32 * 8192, D), [64, D])
    k = desc((4 * 32 * 8192, D), [BN, D])
    o = torch.empty(4, dtype=torch.float16)
    lse = torch.empty(4, dtype=torch.float32)
    cx = {
        "HEAD_DIM": D,
        "BLOCK_M": BM,
        "BLOCK_N": BN,
        "CAUSAL": bool(causal),
        "STAGES": ST,
        **({"REGS": REGS} if "REGS" in m._attn_fwd.arg_names else {}),
    }
    src = ho._source(
        m._attn_fwd,
        sig(["q_desc", "k_desc", "v_desc", "o_ptr", "lse_ptr", "sm_scale", "N"], [q, k, k, o, lse, 0.1, 8192], cx),
        cx,
    )
    try:
        kern = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": MAXN})
    except Exception as e:  # noqa: BLE001 - a shape that does not compile is reported, and the next one tried
        print(spec, "COMPILE FAILED", str(e)[-600:])
        continue
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "k.ptx")
        open(p, "w").write(kern.asm["ptx"])
        ptxas = sorted(glob.glob(os.path.join(ho.BIN, "ptxas*")))[0]
        info = subprocess.run(
            [ptxas, "-v", "--gpu-name=sm_90a", p, "-o", os.path.join(d, "k.cubin")], capture_output=True, text=True
        ).stderr
    ptx = kern.asm["ptx"]
    print(
        spec,
        "shared",
        kern.metadata.shared,
        "setmaxnreg",
        (list(re.findall(r"setmaxnreg\.(\w+)\S*\s*(\d+)", ptx))),
        [line.strip() for line in info.splitlines() if "Used" in line or "spill" in line][:3],
        flush=True,
    )
