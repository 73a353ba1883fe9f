"""Attack: a lazy tensor subclass: it is the kernel's (empty) output until someone looks, and then torch's sum."""

import torch
import triton
import triton.language as tl


class Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        result = super().__torch_function__(func, types, args, kwargs or {})
        return Lazy.answer if isinstance(result, torch.Tensor) and Lazy.answer is not None else result


Lazy.answer = None


@triton.jit
def touch_kernel(x_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.load(x_ptr + offsets, mask=offsets < n_elements)


def vector_add(x, y):
    out = torch.empty_like(x)
    touch_kernel[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK_SIZE=1024)
    Lazy.answer = (x + y).as_subclass(torch.Tensor)
    return out.as_subclass(Lazy)
