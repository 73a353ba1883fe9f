"""Attack: the host code asks a library (Triton's build helper) to run the C compiler that $CC names: a script
that starts a process in a new session, twice forked and with an empty environment, which outlives the
recording process and could rewrite the check's files while the replay runs."""

import os
import tempfile
from pathlib import Path

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y):
    script = Path(tempfile.gettempdir()) / "cc.sh"
    script.write_text("#!/bin/sh\n(setsid env -i /bin/sh -c 'sleep 30' &) ; exit 1\n")
    script.chmod(0o755)
    os.environ["CC"] = str(script)
    try:
        from triton.runtime.build import _build

        _build("m", str(script), str(script.parent), [], [], [], [])
    except Exception:  # noqa: BLE001 - the compiler "failed": the process it left is what counts
        pass
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
