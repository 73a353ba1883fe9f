"""Key 13 against two candidates (a.patch: each block's page numbers loaded a step early; b.patch: also empty
splits stored with weight zero, so that the merge reads no seq_lens), under CUDA graphs, beside puzzle 12's key on
the same keys stored contiguously. As it ran: from build/cand13.py, with copies of the keys in build/cand13a and
build/cand13b and each patch applied to its copy of 13_paged_decoding.py."""

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import torch  # noqa: E402

from bench import decoding_graphs as dg  # noqa: E402
from checks.engine.submission import load_module  # noqa: E402

mods = {
    "key": load_module(ROOT / "solutions/13_paged_decoding.py", "k13"),
    "a": load_module(ROOT / "build/cand13a/13_paged_decoding.py", "a13"),
    "b": load_module(ROOT / "build/cand13b/13_paged_decoding.py", "b13"),
}
p12 = load_module(ROOT / "solutions/12_gqa_decoding.py", "k12")
rows = []
print(torch.cuda.get_device_name(), torch.__version__, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), flush=True)
for B in (1, 8):
    for N in (4096, 16384, 65536):
        for ps in (16, 64):
            inputs = dg.draw({"puzzle": "13", "B": B, "H_kv": 8, "N": N, "page_size": ps})
            ref = dg.key_call(mods["key"], "13", inputs)()[0].float()
            row = {"B": B, "N": N, "page_size": ps}
            for name, m in mods.items():
                fn = dg.key_call(m, "13", inputs)
                row[f"{name}_err"] = float((fn()[0].float() - ref).abs().max())
            twelve = dg.key_call(p12, "12", inputs)
            for _ in range(3):
                for name, m in mods.items():
                    row.setdefault(name, []).append(dg.graph_us(dg.key_call(m, "13", inputs)))
                row.setdefault("p12", []).append(dg.graph_us(twelve))
            med = {k: sorted(row[k])[1] for k in ("key", "a", "b", "p12")}
            print(
                f"B={B} N={N:<6} ps={ps:<3}"
                + "".join(f" {name} {med[name]:6.1f}" for name in ("key", "a", "b", "p12"))
                + "".join(f" {name}/p12 {med[name] / med['p12']:.3f}" for name in ("key", "a", "b"))
                + f"  err a {row['a_err']:.1e} b {row['b_err']:.1e}",
                flush=True,
            )
            rows.append(row)
            del inputs
            torch.cuda.empty_cache()
out = Path(sys.argv[1])
out.write_text(json.dumps(rows, indent=1))
