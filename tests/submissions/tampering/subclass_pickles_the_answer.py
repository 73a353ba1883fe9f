"""Attack: the returned tensor is a subclass whose pickle carries torch's answer, while the kernel wrote zeros."""

import torch
import triton
import triton.language as tl


class Answer(torch.Tensor):
    answer = None

    def __reduce_ex__(self, protocol):
        return self.answer.__reduce_ex__(protocol)


@triton.jit
def zero_kernel(out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + offsets, tl.zeros((BLOCK_SIZE,), tl.float32), mask=offsets < n_elements)


def vector_add(x, y):
    out = torch.empty_like(x)
    zero_kernel[(triton.cdiv(x.numel(), 1024),)](out, x.numel(), BLOCK_SIZE=1024)
    Answer.answer = (x + y).detach().clone()
    return out.as_subclass(Answer)
