"""Record a launch plan while the learner's host function runs (`checks.engine.contract.plan` says what a plan holds).

No kernel runs here: a launch is written down (its kernel, its grid for every config an autotuner would try,
every argument) and skipped. A `TorchDispatchMode` sees every torch operation on the way: allocations become
plan tensors, layout and dtype copies and fills become plan operations, and anything else makes a tensor
"computed on the host", which a kernel may receive only when it was computed from no data (a page count from
`seq_lens`, say), and then by value. The plan is the learner's claim; the replay makes it true or not.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import linecache
import sys
import threading
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from checks.engine.contract.plan import CONST_LIMIT, DTYPES, LAUNCH_OPTIONS, OPS_LIMIT
from checks.engine.patching import kernel_classes, replaced
from checks.engine.record.descriptors import descriptor_value, is_descriptor

_FILLS = {
    "empty": "empty", "empty_like": "empty", "empty_strided": "empty", "empty_permuted": "empty",
    "new_empty": "empty", "new_empty_strided": "empty", "zeros": 0, "zeros_like": 0, "new_zeros": 0,
    "ones": 1, "ones_like": 1, "new_ones": 1, "full": "arg1", "full_like": "arg1", "new_full": "arg2",
    "scalar_tensor": "arg0",
}  # fmt: skip
_COPIES = ("clone", "_to_copy", "lift_fresh_copy", "contiguous")
_NO_DATA = ("_local_scalar_dense", "lift_fresh", "detach", "alias", "is_nonzero", "sym_size", "sym_stride")
_TO_PYTHON = ("_local_scalar_dense", "is_nonzero")  # a tensor's value handed to Python (`.item()`, `bool(t)`)


# A tensor that a call uses but neither made nor was given is kept between calls (made at import, or by an earlier
# call): one name per storage for the whole recording process, so that the replay carries its state from call to call.
_KEPT_NAMES: dict[tuple[int, int], str] = {}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class PlanTooLong(Exception):
    """A call that asked for more than OPS_LIMIT operations: one launch per element, say."""


TOO_LONG = (
    f"your function asked the GPU for more than {OPS_LIMIT} operations in one call (kernel launches, "
    "allocations, copies), which is not graded: launch one kernel whose grid covers the whole output instead of a "
    "launch per element or per row"
)


class _Ops(list):
    """The plan's operations, refusing the one past OPS_LIMIT (the recorder keeps where that was asked for)."""

    def __init__(self, recorder: PlanRecorder) -> None:
        super().__init__()
        self.recorder = recorder

    def append(self, op: dict[str, Any]) -> None:
        if len(self) >= OPS_LIMIT:
            if self.recorder.too_long is None:
                self.recorder.too_long = self.recorder.where()
            raise PlanTooLong(TOO_LONG)
        super().append(op)


class PlanRecorder(TorchDispatchMode):
    """The plan of one call: enter it, call the learner's function inside `launches_recorded()`, then `plan()`."""

    def __init__(self, inputs: dict[str, Any], own_files: dict[str, str]) -> None:
        """`own_files`: the learner's files (resolved paths) and how messages name them."""
        super().__init__()
        self.own_files = own_files
        self.ops: list[dict[str, Any]] = _Ops(self)
        self.too_long: str | None = None  # where the call asked past OPS_LIMIT ("" if not in the learner's files)
        self.storages: dict[int, dict[str, Any]] = {}  # storage address -> what it is
        self._count = 0
        self._autotuning: dict[str, Any] | None = None
        self._busy = False
        self.fresh: set[int] = set()  # storages made in this call from numpy or Python values (and their copies)
        self.from_inputs: set[int] = set()  # storages holding an input's values (the inputs, copies of them)
        # where the call read an input's values on the host: a plan that depends on the data, not on shapes alone
        self.read_inputs: list[str] = []
        for name, t in inputs.items():
            if isinstance(t, torch.Tensor):
                data = t.dtype.is_floating_point  # integer inputs are metadata (a page table); floats are data
                self.storages[_address(t)] = {
                    "id": f"input:{name}",
                    "base": t.data_ptr(),
                    "kind": "input",
                    "data": data,
                }
                self.from_inputs.add(_address(t))

    # -- torch operations --------------------------------------------------------------------------------------
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """No: torch would wrap `__torch_dispatch__` to keep torch.compile out of it, which imports torch._dynamo
        (a second or two) the first time a recorder runs; nothing is compiled while a plan is recorded."""
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not self._busy:
            self._busy = True
            try:
                self._note(func, args, kwargs, out)
            finally:
                self._busy = False
        return out

    def _new_id(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def _note(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        name = func.overloadpacket.__name__
        if name == "lift_fresh" and isinstance(out, torch.Tensor):  # torch.tensor, torch.as_tensor, from_numpy
            self.fresh.add(_address(out))
        if name in _TO_PYTHON and self._reads_inputs(args):
            self.read_inputs.append(f"aten.{name}")
        if name in _NO_DATA:
            return
        if name in _FILLS and isinstance(out, torch.Tensor):
            fill = _FILLS[name]
            if isinstance(fill, str) and fill.startswith("arg"):
                value = args[int(fill[3])] if len(args) > int(fill[3]) else kwargs.get("fill_value", 0)
                fill = value.item() if isinstance(value, torch.Tensor) else value
            self._alloc(out, fill)
            return
        tensors_in = [a for a in _flat(args) + _flat(list(kwargs.values())) if isinstance(a, torch.Tensor)]
        for t in tensors_in:  # a tensor kept between calls, written here first: into the plan before the write
            unseen = _address(t) not in self.storages and _address(t) not in self.fresh
            if unseen and _writes(func) and _is_written(func, t, args, kwargs):
                self._kept(t)
        if isinstance(out, torch.Tensor) and any(_address(out) == _address(t) for t in tensors_in):
            if name not in ("copy_", "fill_", "zero_"):
                if _writes(func):
                    self._host_write(out, f"aten.{name}")
                return  # a view, or an in-place op handled below
        if name in _COPIES and isinstance(out, torch.Tensor) and args and isinstance(args[0], torch.Tensor):
            self._carried(args[0], out, name)
            if self._known(args[0]):
                self._alloc(out, "empty")
                self.ops.append({"op": "copy", "dst": self.ref(out), "src": self.ref(args[0])})
            elif _address(args[0]) not in self.storages:
                self.fresh.add(_address(out))  # a copy of a tensor made outside torch (`.to(device)`): the same
                return
            else:
                self._host(out, f"aten.{name}", self._data(args[0]))
            return
        if name == "copy_" and len(args) >= 2:
            dst, src = args[0], args[1]
            if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor):
                self._carried(src, dst, name)
            if not self._known(dst):
                return
            if isinstance(src, torch.Tensor) and self._known(src):
                self.ops.append({"op": "copy", "dst": self.ref(dst), "src": self.ref(src)})
            else:
                value = self.value(src) if isinstance(src, torch.Tensor) else {"scalar": None}
                if "tensor" in value:  # a small tensor made from no data: carried by value
                    self.ops.append({"op": "copy", "dst": self.ref(dst), "src": value["tensor"]})
                else:
                    self._host_write(dst, f"a copy of {value.get('host', {}).get('what', 'a host tensor')}")
            return
        if name in ("fill_", "zero_") and args and self._known(args[0]):
            value = 0 if name == "zero_" else args[1]
            if isinstance(value, torch.Tensor):
                value = value.item()
            self.ops.append({"op": "fill", "dst": self.ref(args[0]), "value": value})
            return
        if self._reads_inputs(tensors_in):  # computed from an input's values (on the host, or by torch)
            self.read_inputs.append(f"aten.{name}")
            self.from_inputs |= {_address(r) for r in _flat([out]) if isinstance(r, torch.Tensor)}
        data = any(self._data(t) for t in tensors_in)
        for t in tensors_in:
            if _writes(func) and self._known(t) and _is_written(func, t, args, kwargs):
                self._host_write(t, f"aten.{name}")
        for result in _flat([out]):
            if isinstance(result, torch.Tensor) and not any(_address(result) == _address(t) for t in tensors_in):
                self._host(result, f"aten.{name}", data)

    def _reads_inputs(self, args: Any) -> bool:
        return any(isinstance(t, torch.Tensor) and _address(t) in self.from_inputs for t in _flat(list(args)))

    def _carried(self, source: torch.Tensor, copy: torch.Tensor, name: str) -> None:
        """A copy of an input's values holds them too; one that takes them off the GPU to the host reads them."""
        if _address(source) not in self.from_inputs:
            return
        self.from_inputs.add(_address(copy))
        if copy.device.type == "cpu" and source.device.type != "cpu":
            self.read_inputs.append(f"aten.{name} to the host")

    def _alloc(self, t: torch.Tensor, fill: Any) -> None:
        if dtype_name(t.dtype) not in DTYPES:
            self._host(t, f"a {dtype_name(t.dtype)} allocation", False)
            return
        ident = self._new_id("a")
        self.storages[_address(t)] = {
            "id": ident,
            "base": t.untyped_storage().data_ptr(),
            "kind": "alloc",
            "data": True,
        }
        self.ops.append(
            {
                "op": "alloc",
                "id": ident,
                "dtype": dtype_name(t.dtype),
                "numel": t.untyped_storage().nbytes() // max(t.element_size(), 1),
                "shape": list(t.shape),
                "strides": list(t.stride()),
                "device": t.device.type,
                "fill": fill if fill == "empty" else float(fill) if not isinstance(fill, bool) else int(fill),
            }
        )

    def _host(self, t: torch.Tensor, what: str, data: bool) -> None:
        self.storages[_address(t)] = {"kind": "host", "what": what, "where": self.where(), "data": data}

    def _host_write(self, t: torch.Tensor, what: str) -> None:
        self.ops.append({"op": "host_write", "dst": self.ref(t), "what": what, "where": self.where()})

    def _known(self, t: Any) -> bool:
        entry = self.storages.get(_address(t)) if isinstance(t, torch.Tensor) else None
        return entry is not None and entry["kind"] != "host"

    def _data(self, t: torch.Tensor) -> bool:
        entry = self.storages.get(_address(t))
        return True if entry is None else bool(entry["data"])

    def where(self) -> str:
        """The learner's innermost line on the stack: 'file, line N'."""
        frame = sys._getframe(1)
        while frame is not None:
            label = self.own_files.get(frame.f_code.co_filename)
            if label:
                line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
                return f"{label}, line {frame.f_lineno}: {line}"
            frame = frame.f_back
        return ""

    # -- values ------------------------------------------------------------------------------------------------
    def ref(self, t: torch.Tensor) -> dict[str, Any]:
        entry = self.storages[_address(t)]
        return {
            "storage": entry["id"],
            "dtype": dtype_name(t.dtype),
            "offset": t.data_ptr() - entry["base"] if t.numel() else 0,
            "shape": list(t.shape),
            "strides": list(t.stride()),
        }

    def value(self, v: Any) -> dict[str, Any]:
        """A launch argument or a returned value, as the plan holds it."""
        import triton
        import triton.language as tl

        if isinstance(v, torch.Tensor):
            if dtype_name(v.dtype) not in DTYPES:
                return {"unsupported": f"a {dtype_name(v.dtype)} tensor"}
            entry = self.storages.get(_address(v))
            if entry is not None and entry["kind"] != "host":
                return {"tensor": self.ref(v)}
            if entry is None and _address(v) not in self.fresh:
                return self._kept(v)
            foreign = entry is None  # made from numpy or Python values: by value, and the two draws must agree
            if foreign:
                entry = {
                    "what": "a tensor made outside torch (from numpy or Python values)",
                    "where": "",
                    "data": False,
                }
            if entry["data"] or (v.numel() > CONST_LIMIT and not foreign):
                return {"host": {"what": entry["what"], "where": entry["where"]}}
            ident = self._new_id("c")
            const = {"op": "const", "id": ident, "dtype": dtype_name(v.dtype), "where": self.where()}
            const["device"] = v.device.type  # a CPU tensor passed to a GPU kernel fails in the replay as it would
            flat = v.detach().contiguous().cpu().flatten()
            if v.numel() > CONST_LIMIT:  # too large to carry: its digest, so that the two draws can be compared
                digest = hashlib.sha256(flat.view(torch.uint8).numpy().tobytes()).hexdigest()  # any dtype's bytes
                const.update(numel=v.numel(), digest=digest)
            else:
                const["values"] = flat.tolist()
            self.ops.append(const)
            strides = list(torch.empty(v.shape, device="meta").stride())
            return {
                "tensor": {
                    "storage": ident,
                    "dtype": dtype_name(v.dtype),
                    "offset": 0,
                    "shape": list(v.shape),
                    "strides": strides,
                }
            }
        if isinstance(v, tl.constexpr):
            return self.value(v.value)
        if v is None or isinstance(v, (bool, int, float, str)):
            return {"scalar": v}
        if isinstance(v, tl.dtype):
            return {"dtype": str(v)}
        if isinstance(v, torch.dtype):
            return {"scalar": dtype_name(v)}
        if isinstance(v, (tuple, list)):
            return {"tuple": [self.value(x) for x in v]}
        if isinstance(v, triton.runtime.jit.KernelInterface) and hasattr(v, "fn"):
            return {"kernel": v.fn.__name__}
        if is_descriptor(v):  # Gluon's TMA descriptor over a plan tensor (the Hopper track)
            return descriptor_value(v, self.value)
        try:
            import numpy as np

            if isinstance(v, np.generic):
                return {"scalar": v.item()}
        except ImportError:
            pass
        return {"unsupported": type(v).__name__}

    def _kept(self, v: torch.Tensor) -> dict[str, Any]:
        """A tensor this call neither made nor was given: kept between calls. The plan carries its whole storage
        by value once per call, under a name that stays the same from call to call (the replay keeps its state
        between the calls it replays, as the learner's process would); every use in the call is a view of it."""
        storage = v.untyped_storage()
        size = v.element_size()
        key = (storage.data_ptr(), storage.nbytes())
        ident = _KEPT_NAMES.setdefault(key, f"kept{len(_KEPT_NAMES) + 1}")
        numel = storage.nbytes() // size
        whole = torch.empty(0, dtype=v.dtype, device=v.device).set_(storage, 0, (numel,), (1,))
        const = {"op": "const", "id": ident, "kept": True, "dtype": dtype_name(v.dtype), "where": self.where()}
        const["device"] = v.device.type
        flat = whole.detach().cpu()
        if numel > CONST_LIMIT and numel and bool((flat == flat[0]).all()):  # one value throughout: carried so
            const.update(numel=numel, fill=flat[0].item())
        elif numel > CONST_LIMIT:  # too large to carry: its digest (the plan rules refuse it, saying how large)
            const.update(numel=numel, digest=hashlib.sha256(flat.view(torch.uint8).numpy().tobytes()).hexdigest())
        else:
            const["values"] = flat.tolist()
        self.ops.append(const)
        self.storages[_address(v)] = {"id": ident, "base": storage.data_ptr(), "kind": "kept", "data": False}
        return {"tensor": self.ref(v)}

    # -- launches ----------------------------------------------------------------------------------------------
    def launch(self, kernel: Any, args: tuple, kwargs: dict, grid: Any) -> None:
        fn = _base_fn(kernel)
        signature = inspect.signature(fn)
        kernel_kwargs = {k: v for k, v in kwargs.items() if k in signature.parameters}
        options = {k: v for k, v in kwargs.items() if k in LAUNCH_OPTIONS and v is not None}
        bound = signature.bind(*args, **kernel_kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        if callable(grid):
            grid = grid(arguments)
        if not isinstance(grid, (tuple, list)):
            grid = (grid,)
        self._busy = True  # the recorder's own torch calls (a constant's values) are not the learner's
        try:
            alternative = {
                "grid": [int(g) for g in grid],
                "args": {k: self.value(v) for k, v in arguments.items()},
                "options": {k: (int(v) if not isinstance(v, bool) else v) for k, v in options.items()},
            }
        finally:
            self._busy = False
        if self._autotuning is not None:
            self._autotuning["alternatives"].append(alternative)
            return
        self.ops.append({"op": "launch", "kernel": fn.__name__, "where": self.where(), "alternatives": [alternative]})

    def autotuned(self, tuner: Any, args: tuple, kwargs: dict) -> None:
        tuner.nargs = dict(zip(tuner.arg_names, args, strict=False))
        try:
            configs = tuner.prune_configs(kwargs) if len(tuner.configs) > 1 else tuner.configs[:1]
            group = {
                "op": "launch",
                "kernel": _base_fn(tuner).__name__,
                "where": self.where(),
                "alternatives": [],
                "reset_to_zero": list(tuner.reset_to_zero),
                "restore_value": list(tuner.restore_value),
                "tuning_key": [str(name) for name in getattr(tuner, "keys", [])],
                "benchmarks": _benchmarks(tuner),
            }
            hooks = tuner.user_defined_pre_hook or getattr(tuner, "user_defined_post_hook", False)
            if hooks or any(c.pre_hook for c in configs):
                group["host_hook"] = True
            self._autotuning = group
            for config in configs:
                tuner.fn.run(*args, **kwargs, **config.all_kwargs())
                if group["alternatives"]:  # the config's own values name it (the GPU's choice, told to the interpreter)
                    group["alternatives"][-1]["config"] = config_values(config)
        finally:
            self._autotuning = None
            tuner.nargs = None
        self.ops.append(group)

    def plan(self, returned: Any, kind: str, globals_: dict[str, Any]) -> dict[str, Any]:
        from checks.engine.contract.plan import as_outputs

        outputs = as_outputs(returned)
        self._busy = True
        values = [self.value(v) for v in outputs]
        return {"ops": self.ops, "returned": values, "kind": kind, "globals": globals_}


def config_values(config: Any) -> dict[str, Any]:
    """An autotuner config as the plan names it: its kernel arguments, then its launch settings (num_warps, ...)."""
    values = {str(k): v for k, v in config.kwargs.items() if v is None or isinstance(v, (bool, int, float, str))}
    for name in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
        if isinstance(getattr(config, name, None), int):
            values[name] = getattr(config, name)
    return values


def _benchmarks(tuner: Any) -> bool:
    """Whether Triton's autotuner benchmarks this kernel's configs on the first call of each key (its hooks, and
    `reset_to_zero`, run only then): it does when it holds more than one config, however many its pruning leaves."""
    return len(tuner.configs) > 1


def _base_fn(kernel: Any) -> Any:
    while not hasattr(kernel, "__code__") and hasattr(kernel, "fn"):
        kernel = kernel.fn
    return kernel


def _address(t: torch.Tensor) -> int:
    """Which storage a tensor views: its address; a meta tensor's (the largest sizes, `checks.engine.record.largest`)
    has none, and is told apart by its storage object's."""
    try:
        storage = t.untyped_storage()
        return storage._cdata if t.is_meta else storage.data_ptr()
    except (RuntimeError, NotImplementedError):
        return id(t)


def _flat(items: list | tuple) -> list[Any]:
    found = []
    for item in items:
        if isinstance(item, (list, tuple)):
            found += _flat(item)
        else:
            found.append(item)
    return found


def _writes(func: Any) -> bool:
    return any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


def _is_written(func: Any, t: torch.Tensor, args: tuple, kwargs: dict) -> bool:
    for i, argument in enumerate(func._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = kwargs.get(argument.name, args[i] if i < len(args) else None)
        if isinstance(value, torch.Tensor) and _address(value) == _address(t):
            return True
    return False


@contextlib.contextmanager
def launches_recorded(recorder: PlanRecorder, this_thread_only: bool = False) -> Iterator[None]:
    """Every Triton launch inside the block is written into the plan instead of run. With `this_thread_only`, only
    this thread's: another thread's launch runs as usual (the grader's process records the answer key's plan in a
    thread of its own); in a recording process every thread's launch is written down, none runs."""
    from triton.runtime.autotuner import Autotuner

    owner = threading.get_ident()

    def elsewhere() -> bool:
        return this_thread_only and threading.get_ident() != owner

    def recording(original: Any) -> Any:
        def run(self: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
            if elsewhere():
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            if not warmup:
                recorder.launch(self, args, kwargs, grid)
            return None

        return run

    def tuning(original: Any) -> Any:
        def tuned(self: Any, *args: Any, **kwargs: Any) -> Any:
            if elsewhere():
                return original(self, *args, **kwargs)
            recorder.autotuned(self, args, kwargs)
            return None

        return tuned

    classes = kernel_classes()
    with replaced([*((cls, "run", recording(cls.run)) for cls in classes), (Autotuner, "run", tuning(Autotuner.run))]):
        yield


def warm_up() -> None:
    """Record one allocation, so that what torch imports the first time a dispatch mode runs (torch._dynamo, two
    seconds on a CPU) is imported by a process waiting for its job, not while a check waits for it."""
    with PlanRecorder({}, {}):
        torch.empty(1)


def recorded_globals(module: Any, names: list[str]) -> dict[str, Any]:
    """The module-level values the kernels read (numbers, strings, dtypes, constexprs of them), as plan values."""
    import triton.language as tl

    found: dict[str, Any] = {}
    for name in names:
        value = vars(module).get(name)
        if isinstance(value, tl.constexpr) and (
            value.value is None or isinstance(value.value, (bool, int, float, str))
        ):
            found[name] = {"constexpr": value.value}
        elif isinstance(value, tl.dtype):
            found[name] = {"dtype": str(value)}
        elif value is None or isinstance(value, (bool, int, float, str)):
            if name in vars(module):
                found[name] = {"scalar": value}
    return found
