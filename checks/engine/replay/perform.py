"""Perform a plan: allocate its tensors, make its copies and fills, launch its kernels, return its outputs.

Allocations go into the grader's guarded arena (`checks.memory`): an `empty` is poisoned, so an element
no kernel wrote is seen, and a store past a tensor lands in a guard. Views are rebuilt from the plan's offsets,
shapes and strides, and must stay inside their storage. Where an autotuner would choose among configs, a GPU times
each once, as Triton's autotuner does, and keeps the fastest for the rest of the process; the interpreter cannot time
them, and runs the one it is told to (`Tuning`: the one the GPU stage ran, or each distinct one in turn). The
autotuner's `reset_to_zero` and `restore_value` act where Triton 3.6's autotuner acts on them
(triton/runtime/autotuner.py), and nowhere else: around each benchmarked run of a config (zeroed before, put back
after), and once more, zeroed, after the benchmarking, before the real launch. Triton benchmarks only on the first call
of each key of a kernel with several configs; a kernel with one config, or a key already tuned, launches on whatever its
arguments hold, so a buffer it leaves to `reset_to_zero` then holds what `torch.empty` left there (poison here). With
`TRITON_CACHE_AUTOTUNING` a key tuned in an earlier process is not benchmarked either; the replay follows Triton's
default, which keeps no such cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from checks.engine.contract.plan import PlanError, distinct_alternatives
from checks.engine.replay.descriptors import build_descriptor
from checks.engine.timing import quiet_gpu
from checks.memory import Arena, poisonable, span

# (the kernel object, sizes of its scalar arguments) -> the config the GPU found fastest; by the object, not its name,
# so a kernel of the submission never chooses for a kernel of the answer key that has its name
_chosen: dict[tuple, int] = {}
# the autotuner keys (`tuning_key`) whose configs Triton's autotuner has benchmarked in this process
_benchmarked: set[tuple] = set()
RESET_BYTE = 0xFF  # what a timed call's `torch.empty` memory holds when it starts (NaN in floats, -1 in integers)


class Performer:
    """One replay of one plan on one case's inputs."""

    def __init__(self, plan: dict[str, Any], kernels: dict[str, Any], inputs: dict[str, Any], arena: Arena | None,
                 device: str, interpret: bool, on_copy: Any = None, kept: KeptState | None = None,
                 fill_empty: bool = False, tuning: Tuning | None = None) -> None:  # fmt: skip
        """`on_copy(source, copy)`: told of each copy the plan makes (a copy of an input is read as that input).
        `kept`: the tensors kept between calls, as the calls replayed before this one left them (None: each call
        starts from the values recorded). `fill_empty`: fill each `torch.empty` allocation made without the arena with
        RESET_BYTE (a timed call: nothing an earlier call left in reused memory reaches it). `tuning`: which config of
        an autotuned launch the interpreter runs (`interpreted_choice`)."""
        self.plan, self.kernels, self.device, self.interpret = plan, kernels, device, interpret
        self.tuning = tuning or Tuning()
        self.configs_run: list[dict[str, Any]] = []  # the autotuned launches' configs this call ran (`ran_config`)
        self.fill_empty = fill_empty
        self.on_copy = on_copy
        self.arena = arena
        self.kept = kept
        self.kept_changed: list[str] = []  # kept tensors whose first launch here found them changed by earlier calls
        self._unchecked: list[dict[str, Any]] = []  # kept tensors not yet compared with their first values
        self.storages: dict[str, tuple[torch.Tensor, int]] = {}  # id -> (a tensor over the storage, base byte offset)
        for name, t in inputs.items():
            if isinstance(t, torch.Tensor):
                self.storages[f"input:{name}"] = (t, t.storage_offset() * t.element_size())

    def tensor(self, ref: dict[str, Any]) -> torch.Tensor:
        """The view a reference names, checked to lie inside its storage."""
        dtype = getattr(torch, ref["dtype"])
        shape, strides = tuple(ref["shape"]), tuple(ref["strides"])
        if ref["storage"] not in self.storages:
            raise PlanError(f"a tensor of a storage the plan never made ({ref['storage']})")
        base, base_bytes = self.storages[ref["storage"]]
        size = torch.empty((), dtype=dtype).element_size()
        start = base_bytes + ref["offset"]
        if start % size:
            raise PlanError("a view that does not start on an element of its dtype")
        if any(s == 0 for s in shape):
            return torch.empty(shape, dtype=dtype, device=base.device)
        lowest = start + size * sum((n - 1) * st for n, st in zip(shape, strides, strict=True) if st < 0)
        highest = start + size * sum((n - 1) * st for n, st in zip(shape, strides, strict=True) if st > 0)
        if lowest < 0 or highest + size > base.untyped_storage().nbytes():
            raise PlanError(f"a {shape} view that reaches outside the tensor it views")
        view = torch.empty(0, dtype=dtype, device=base.device)
        view.set_(base.untyped_storage(), start // size, shape, strides)
        return view

    def value(self, value: dict[str, Any]) -> Any:
        import triton.language as tl

        ((kind, body),) = value.items()
        if kind == "tensor":
            return self.tensor(body)
        if kind == "scalar":
            return body
        if kind == "tuple":
            return tuple(self.value(v) for v in body)
        if kind == "dtype":
            return {str(getattr(tl, n)): getattr(tl, n) for n in dir(tl) if isinstance(getattr(tl, n), tl.dtype)}[body]
        if kind == "descriptor":  # a Gluon tensor descriptor, rebuilt over this replay's tensor
            return build_descriptor(body, self.tensor)
        if kind == "kernel":
            if body not in self.kernels:
                raise PlanError(f"the kernel `{body}`, which is not in your code")
            return self.kernels[body]
        raise PlanError(f"an argument the replay cannot pass ({kind}: {body})")

    def run(self) -> list[Any]:
        for op in self.plan["ops"]:
            getattr(self, "_" + op["op"])(op)
        return [self.value(v) if "host" not in v else None for v in self.plan["returned"]]

    def _alloc(self, op: dict[str, Any]) -> None:
        dtype = getattr(torch, op["dtype"])
        recorded = op.get("device", "cuda")
        device = self.device if recorded == "cuda" else recorded  # the GPU's, the CPU's, or a wrong one (meta)
        empty = op["fill"] == "empty"
        guarded = self.arena is not None and device == self.device and poisonable(dtype) and op["numel"] > 0
        shape, strides = tuple(op.get("shape", [op["numel"]])), tuple(op.get("strides", [1]))
        if guarded and span(shape, strides) == op["numel"] and all(s >= 0 for s in strides):
            # the allocation as the learner made it (its shape names rows and columns in the access log)
            t = self.arena.adopt(torch.empty_strided(shape, strides, dtype=dtype, device=device), poison=empty)
        elif guarded:
            t = self.arena.adopt(torch.empty(op["numel"], dtype=dtype, device=device), poison=empty)
            self.arena.buffers[-1].label = _label(shape, op["dtype"])
        else:
            t = torch.empty(op["numel"], dtype=dtype, device=device)
            if empty and self.fill_empty:
                fill_reset(t)
        if not empty:
            t.fill_(op["fill"])
        self.storages[op["id"]] = (t, t.storage_offset() * t.element_size())

    def _const(self, op: dict[str, Any]) -> None:
        dtype = getattr(torch, op["dtype"])
        recorded = op.get("device", "cuda")
        device = self.device if recorded == "cuda" else recorded  # a host tensor stays on the host, as it was
        if op.get("kept"):  # with no state given, this call's own: the values recorded
            self.kept = self.kept or KeptState()
            t = self.kept.take(op, dtype, device)
            self._unchecked.append(op)
        else:
            t = torch.tensor(op["values"], dtype=dtype, device=device)
        self.storages[op["id"]] = (t, 0)

    def _fill(self, op: dict[str, Any]) -> None:
        self.tensor(op["dst"]).fill_(op["value"])

    def _copy(self, op: dict[str, Any]) -> None:
        source, copy = self.tensor(op["src"]), self.tensor(op["dst"])
        copy.copy_(source)
        if self.on_copy is not None:
            self.on_copy(source, copy)

    def _host_write(self, op: dict[str, Any]) -> None:
        return None  # what the host computed is not replayed: the outputs show it

    def _launch(self, op: dict[str, Any]) -> None:
        for kept in self._unchecked:  # what this call's kernels first see of a kept tensor (after any host fill)
            if self.kept is not None and self.kept.changed(kept["id"]):
                where = f", first used at {kept['where']}" if kept.get("where") else ""
                numel = self.kept.tensors[kept["id"]][0].numel()
                self.kept_changed.append(f"a ({numel},) {kept['dtype']} tensor{where}")
        self._unchecked.clear()
        if op["kernel"] not in self.kernels:
            raise PlanError(f"the kernel `{op['kernel']}`, which is not in your code")
        kernel = self.kernels[op["kernel"]]
        alternatives = op["alternatives"]
        benchmarks = self._benchmarks(op, kernel)
        if len(alternatives) == 1:
            choice = 0
        else:
            choice = interpreted_choice(op, self.tuning) if self.interpret else self._fastest(op, kernel)
        if "config" in alternatives[choice]:  # an autotuned launch: the config it ran is reported
            ran = ran_config(op["kernel"], alternatives[choice])
            if ran not in self.configs_run:
                self.configs_run.append(ran)
        if benchmarks:  # the autotuner's last act after its benchmarking: the `reset_to_zero` arguments zeroed
            self._reset_to_zero(alternatives[choice], op)
        self._run(kernel, alternatives[choice], op)

    def _run(self, kernel: Any, alternative: dict[str, Any], op: dict[str, Any]) -> None:
        launch(kernel, alternative, {name: self.value(v) for name, v in alternative["args"].items()})

    @staticmethod
    def _benchmarks(op: dict[str, Any], kernel: Any) -> bool:
        """Whether Triton's autotuner benchmarks this launch's configs (and so runs its `reset_to_zero`): its kernel
        holds several configs and this is the first call of its key in this process."""
        if not op.get("benchmarks"):
            return False
        key = tuning_key(op, kernel)
        if key in _benchmarked:
            return False
        _benchmarked.add(key)
        return True

    def _reset_to_zero(self, alternative: dict[str, Any], op: dict[str, Any]) -> dict[str, torch.Tensor]:
        """Zero the tensors the autotuner's `reset_to_zero` names, as its hook does; the arguments of `alternative`."""
        args = {name: self.value(v) for name, v in alternative["args"].items()}
        for name in op.get("reset_to_zero", []):
            if isinstance(args.get(name), torch.Tensor):
                args[name].zero_()
        return args

    def _trial(self, kernel: Any, alternative: dict[str, Any], op: dict[str, Any]) -> None:
        """One benchmarked run of a config, as Triton's autotuner makes it: the `reset_to_zero` arguments zeroed and
        the `restore_value` ones copied before the run, and put back after it."""
        args = self._reset_to_zero(alternative, op)
        saved = {n: args[n].clone() for n in op.get("restore_value", []) if isinstance(args.get(n), torch.Tensor)}
        try:
            launch(kernel, alternative, args)
        finally:
            for name, values in saved.items():
                args[name].copy_(values)

    def _fastest(self, op: dict[str, Any], kernel: Any) -> int:
        """The config Triton's autotuner would keep: each timed once here, the fastest remembered per sizes."""
        first = op["alternatives"][0]
        # the choice is an index into the alternatives: a pruning that left others is its own
        key = (len(op["alternatives"]), *tuning_key(op, kernel))
        if key in _chosen:
            return _chosen[key]
        restore = [self.value(first["args"][n]) for n in op.get("restore_value", []) if n in first["args"]]
        saved = [t.clone() for t in restore if isinstance(t, torch.Tensor)]
        with quiet_gpu(timing=True):  # no grading process makes its CUDA context meanwhile
            times = [self._time(kernel, alternative, op, restore, saved) for alternative in op["alternatives"]]
        _chosen[key] = min(range(len(times)), key=times.__getitem__)
        return _chosen[key]

    def _time(self, kernel: Any, alternative: dict[str, Any], op: dict[str, Any], restore: list, saved: list) -> float:
        """One config's time (do_bench's median; infinite for one that does not compile, with too much shared memory
        say), the arguments it overwrites put back after it."""
        import triton.testing

        try:
            run = lambda: self._trial(kernel, alternative, op)
            ms = float(triton.testing.do_bench(run, warmup=5, rep=25, return_mode="median"))
        except Exception:  # noqa: BLE001 - a config that does not compile is not chosen
            ms = float("inf")
        for t, s in zip(restore, saved, strict=False):
            t.copy_(s)
        return ms


@dataclass
class Tuning:
    """Which config of an autotuned launch the interpreter runs (it cannot time them): for a kernel the GPU stage
    reported (`chosen`: kernel -> the config values it ran, `ran_config`), the alternative with those values where
    the plan has one; else the `alternative`-th of the launch's distinct configs (the last where it has fewer)."""

    alternative: int = 0
    chosen: dict[str, dict[str, Any]] = field(default_factory=dict)


def interpreted_choice(op: dict[str, Any], tuning: Tuning) -> int:
    """The alternative of an autotuned launch the interpreter runs (see `Tuning`)."""
    alternatives = op["alternatives"]
    chosen = tuning.chosen.get(op["kernel"])
    if chosen:
        for index, alternative in enumerate(alternatives):
            if ran_config(op["kernel"], alternative)["config"] == chosen:
                return index
    distinct = distinct_alternatives(op)
    return distinct[min(tuning.alternative, len(distinct) - 1)]


def ran_config(kernel: str, alternative: dict[str, Any]) -> dict[str, Any]:
    """{"kernel", "config"}: the values an alternative's config gives the kernel's arguments, read from the arguments
    the launch passes (the config names only which arguments are the config's)."""
    args = alternative["args"]
    config = {name: args[name]["scalar"] for name in alternative.get("config", {}) if "scalar" in args.get(name, {})}
    return {"kernel": kernel, "config": config}


def launch(kernel: Any, alternative: dict[str, Any], args: dict[str, Any]) -> None:
    """Launch one alternative with its arguments and options as one mapping: a Gluon kernel may take a launch option
    as a parameter of its own (num_warps: gl.constexpr)."""
    kernel[tuple(alternative["grid"])](**{**args, **alternative["options"]})


def tuning_key(op: dict[str, Any], kernel: Any) -> tuple:
    """The key Triton's autotuner tunes a launch under: the values of its `key` arguments and every argument's dtype,
    for this kernel object (equal to itself alone: Triton's kernels compare by identity)."""
    first = op["alternatives"][0]
    named = op.get("tuning_key") or [k for k, v in first["args"].items() if "scalar" in v]
    return (
        kernel,
        tuple((k, str(first["args"][k])) for k in named if k in first["args"]),
        tuple(str(v["tensor"].get("dtype")) for v in first["args"].values() if "tensor" in v),
    )


class KeptState:
    """The tensors a submission keeps between calls (made at import, or by an earlier call), as the calls replayed
    so far in this process left them: the first call that uses one gets the values the recording saw, and every
    later call what the calls before it left there, as in the learner's own process."""

    def __init__(self) -> None:
        self.tensors: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}  # name -> (the tensor, its first values)

    def take(self, op: dict[str, Any], dtype: torch.dtype, device: str) -> torch.Tensor:
        """The kept tensor `op` names: as the calls before left it, or made from the recorded values."""
        held = self.tensors.get(op["id"])
        numel = len(op["values"]) if "values" in op else int(op["numel"])
        if held is None or held[0].dtype != dtype or held[0].numel() != numel:
            if "values" in op:
                t = torch.tensor(op["values"], dtype=dtype, device=device)
            else:
                t = torch.full((numel,), op["fill"], dtype=dtype, device=device)
            self.tensors[op["id"]] = (t, t.clone())
            return t
        return held[0]

    def changed(self, name: str) -> bool:
        """Whether the kept tensor `name` differs from its first values (bit for bit)."""
        t, first = self.tensors[name]
        return not torch.equal(bits_of(t), bits_of(first))


def bits_of(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes (NaN equals NaN, -0.0 differs from 0.0)."""
    return t.contiguous().view(torch.uint8)


def _label(shape: tuple[int, ...], dtype: str) -> str:
    return f"a {tuple(shape)} {dtype} tensor you allocated"


class TimedReplay:
    """A plan performed for the clock (the submission's at the timing size, or the answer key's), so that every
    timed call starts from the same memory: no call can find what an earlier one left there (a flag that says
    "done", a result) and skip its work. Called, it fills its `torch.empty` allocations with RESET_BYTE as it makes
    them; the call a CUDA graph captures (`capture`) fills nothing, and `reset()` fills that graph's allocations
    before each timed replay, outside the clock. `returned`: what the last call returned (for a graph, the memory
    its replays write)."""

    def __init__(
        self, plan: dict[str, Any] | None, kernels: dict[str, Any], parameters: list[str], device: str
    ) -> None:
        self.plan, self.kernels, self.parameters, self.device = plan, kernels, parameters, device
        self.last: Performer | None = None
        self.returned: Any = None

    def __call__(self, *args: Any) -> Any:
        return self.perform(args, fill=True)

    def capture(self, *args: Any) -> Any:
        return self.perform(args, fill=False)

    def perform(self, args: tuple, fill: bool) -> Any:
        assert self.plan is not None
        inputs = dict(zip(self.parameters, args, strict=True))
        self.last = Performer(self.plan, self.kernels, inputs, None, self.device, False, fill_empty=fill)
        self.returned = returned_as(self.plan, self.last.run())
        return self.returned

    def reset(self) -> None:
        """Fill the last call's `torch.empty` allocations (a captured graph's) as a called replay's are filled."""
        assert self.plan is not None and self.last is not None
        for op in self.plan["ops"]:
            if op["op"] == "alloc" and op["fill"] == "empty" and op["id"] in self.last.storages:
                fill_reset(self.last.storages[op["id"]][0])


def fill_reset(t: torch.Tensor) -> None:
    """Every byte of an allocation (a contiguous tensor over its whole storage) to RESET_BYTE."""
    t.view(torch.uint8).fill_(RESET_BYTE)


def returned_as(plan: dict[str, Any], outputs: list[Any]) -> Any:
    """The outputs as the learner's function returned them: one tensor, or a tuple."""
    return outputs[0] if plan.get("kind") == "tensor" and len(outputs) == 1 else tuple(outputs)
