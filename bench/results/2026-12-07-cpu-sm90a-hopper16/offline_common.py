"""What the compile scripts of this folder share: loading a module from a path, a TMA descriptor over a CPU tensor, a
kernel signature for triton.compile."""

import importlib.util

import torch
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.runtime.jit import mangle_type


def load(path):
    spec = importlib.util.spec_from_file_location(path.split("/")[-1][:-3], path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def desc(shape, block, dtype=torch.float16):
    x = torch.empty(shape, dtype=dtype)
    gdt = gl.float16 if dtype == torch.float16 else gl.float32
    return TensorDescriptor.from_tensor(x, block, gl.NVMMASharedLayout.get_default_for(block, gdt))


def sig(names, values, constexprs):
    out = {}
    for n, v in zip(names, values, strict=True):
        out[n] = "constexpr" if n in constexprs else mangle_type(v)
    for n in constexprs:
        out[n] = "constexpr"
    return out
