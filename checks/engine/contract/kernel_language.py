"""The kernel language: every name a kernel body may use, as one table of data.

A kernel's names resolve, statically and before anything runs (`checks.engine.contract.kernel_source`), to a parameter
or local, one of the submission's own `@triton.jit` functions, a module-level number, string or dtype recorded in
the plan, one of `BUILTINS`, or an entry of `LANGUAGE`: a path inside `triton.language` (`load`, `math.exp2`)
and what it is. An attribute of a value (a tensor, a block pointer, a dtype) must be one of `ATTRIBUTES`.
Everything else is outside the language, whatever it would reach: the table says what is allowed, not what is
forbidden. The reference page's list of `tl` functions (notebooks/src/reference.md) is checked against it.

A `@gluon.jit` kernel (the Hopper track, 16a, 16b, 16) resolves against a table of its own, `GLUON`: paths inside
`triton.experimental.gluon.language` (`arange`, `nvidia.hopper.mbarrier.wait`), exactly the names those steps' answer
keys and their variants use, and `GLUON_ATTRIBUTES` beside `ATTRIBUTES` (a descriptor's block type, a shared
buffer's `.index`). A Triton kernel cannot reach Gluon's names, nor a Gluon kernel triton.language's.
"""

from __future__ import annotations

FUNCTION, DTYPE, TYPE, CONSTANT = "function", "dtype", "type", "constant"

_FUNCTIONS = """
abs advance arange argmax argmin associative_scan assume atomic_add atomic_and atomic_cas atomic_max atomic_min
atomic_or atomic_xchg atomic_xor broadcast broadcast_to cast cat cdiv ceil clamp cos cumprod cumsum debug_barrier
device_assert device_print div_rn dot dot_scaled erf exp exp2 expand_dims fdiv flip floor fma full gather histogram
interleave join load load_tensor_descriptor log log2 make_block_ptr make_tensor_descriptor max max_constancy
max_contiguous maximum min minimum multiple_of num_programs permute program_id rand randint randn range ravel reduce
reshape rsqrt sigmoid sin softmax sort split sqrt sqrt_rn static_assert static_print static_range store
store_tensor_descriptor sum swizzle2d topk trans umulhi view where xor_sum zeros zeros_like
math.abs math.ceil math.cos math.div_rn math.erf math.exp math.exp2 math.fdiv math.floor math.fma math.log
math.log2 math.rsqrt math.sin math.sqrt math.sqrt_rn math.umulhi
"""
_DTYPES = """
bfloat16 float16 float32 float64 float8e4b15 float8e4b8 float8e4nv float8e5 float8e5b16 int1 int8 int16 int32 int64
uint8 uint16 uint32 uint64
"""
_TYPES = "constexpr tensor"  # annotations (BLOCK: tl.constexpr) and isinstance
_CONSTANTS = "PropagateNan.ALL PropagateNan.NONE TRITON_MAX_TENSOR_NUMEL"

LANGUAGE: dict[str, str] = {
    **{name: FUNCTION for name in _FUNCTIONS.split()},
    **{name: DTYPE for name in _DTYPES.split()},
    **{name: TYPE for name in _TYPES.split()},
    **{name: CONSTANT for name in _CONSTANTS.split()},
}

# Attributes of a value a kernel holds (a tensor's methods, a dtype's element type, a descriptor's load), by name.
ATTRIBUTES = frozenset(
    """
T abs advance argmax argmin associative_scan atomic_add atomic_and atomic_cas atomic_max atomic_min atomic_or
atomic_xchg atomic_xor broadcast_to cast cdiv ceil cos cumprod cumsum erf exp exp2 expand_dims flip floor gather
histogram load log log2 logical_and logical_or max min permute ravel reduce reduce_or reshape rsqrt sigmoid sin
softmax sort split sqrt sqrt_rn store sum to trans view xor_sum
dtype shape numel element_ty primitive_bitwidth value
""".split()
)

# Builtins a kernel may name: what Triton's compiler handles itself.
BUILTINS = frozenset(
    {"range", "min", "max", "len", "int", "float", "bool", "print", "abs", "zip", "enumerate", "isinstance",
     "tuple", "True", "False", "None"}
)  # fmt: skip

# Calls whose positional arguments may be strings (a message); any call's keyword may be one (cache_modifier=...)
MESSAGE_CALLS = frozenset({"print", "static_print", "device_print", "static_assert", "device_assert"})
FLOAT_WORDS = frozenset({"inf", "-inf", "+inf", "nan"})  # float("-inf")


def lookup(path: str) -> str | None:
    """What `path` (relative to triton.language: "load", "math.exp2") is in the language, or None."""
    return LANGUAGE.get(path)


# -- Gluon (triton.experimental.gluon.language), for @gluon.jit kernels: the names the Hopper track's keys use
GLUON_ROOT = "triton.experimental.gluon.language"
_GLUON_FUNCTIONS = """
allocate_shared_memory arange cdiv convert_layout exp2 log2 max maximum minimum num_programs program_id static_assert
static_range store sum warp_specialize where zeros
nvidia.hopper.fence_async_shared nvidia.hopper.warpgroup_mma nvidia.hopper.warpgroup_mma_wait
nvidia.hopper.mbarrier.arrive nvidia.hopper.mbarrier.expect nvidia.hopper.mbarrier.init
nvidia.hopper.mbarrier.invalidate nvidia.hopper.mbarrier.wait
nvidia.hopper.tma.async_copy_global_to_shared nvidia.hopper.tma.async_copy_shared_to_global nvidia.hopper.tma.store_wait
"""
# layouts are classes a kernel constructs, as a call (gl.SliceLayout(1, parent)) whose value is a constexpr
_GLUON_LAYOUTS = "DotOperandLayout NVMMADistributedLayout SliceLayout nvidia.hopper.mbarrier.MBarrierLayout"
_GLUON_DTYPES = "float16 float32 int32 int64"

GLUON: dict[str, str] = {
    **{name: FUNCTION for name in _GLUON_FUNCTIONS.split()},
    **{name: FUNCTION for name in _GLUON_LAYOUTS.split()},
    **{name: DTYPE for name in _GLUON_DTYPES.split()},
    "constexpr": TYPE,
}

# Attributes of Gluon values: a tensor descriptor's block type and its byte count and shared layout, a shared-memory
# buffer's slot (`.index(s)`) and its load (beside ATTRIBUTES' `.permute`, `.store`, `.load`, `.dtype`, `.shape`).
GLUON_ATTRIBUTES = frozenset("block_type nbytes layout index".split())


def lookup_gluon(path: str) -> str | None:
    """What `path` (relative to triton.experimental.gluon.language: "arange", "nvidia.hopper.mbarrier.wait") is in
    the Gluon table, or None."""
    return GLUON.get(path)
