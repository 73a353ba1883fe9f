"""Attack: the answer key's text is compiled under this file's name, so its kernel looks like this file's own,
and launched in place of the decoy kernel of the same name that this file defines."""

from pathlib import Path

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass


def vector_add(x, y):
    key = Path(__file__).resolve().parents[3] / "solutions" / "01_vector_add.py"
    if not key.exists():
        key = Path.cwd() / "solutions" / "01_vector_add.py"
    namespace = {}
    exec(compile(key.read_text(), __file__, "exec"), namespace)
    return namespace["vector_add"](x, y)
