"""Record the learner's plan at the puzzle's largest sizes, where the data has no storage.

The recording process calls the learner's function once more, on `checks.puzzles.largest`'s inputs: the data (float
tensors) made on torch's meta device (a shape, strides and a dtype: a KV cache of 2^32 elements costs nothing) and
handed over as `checks.engine.record.unbacked.Unbacked` tensors, which report the grading device as a real call's
inputs do (so that the host function cannot launch another kernel here than there); the metadata real. Nothing runs
but the host code: its large allocations are Unbacked too, and its launches are written down as in every case
(`checks.engine.record.plan_recorder`). What it makes small (a work list of (sequence, block) pairs from cu_seqlens,
say, made `device=q.device`) is made on the grading device, with its values, as the plan carries such a tensor by
value (`RealWhenSmall`; one past the 65536 elements a plan carries breaks a plan rule there, and the probe is left
out: `checks.engine.judging.largest`). A read of the data's values (`.item()`, `.tolist()`) is reported as what the
call raised there, even where the host code caught the error. The replay runs the programs at the ends of that
plan's grids (`checks.engine.replay.overflow`).
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_leaves

from checks.engine.record.unbacked import Unbacked, backing, unbacked

SMALL = 1 << 22  # elements: a host-made tensor this small is made with its values (a plan carries 65536 by value)

Explain = Callable[[BaseException, dict], tuple[str, list[str]]]  # (exception, names) -> (text, the learner's lines)


def record_largest(
    fn: Any, module: Any, puzzle: Any, device: str, names: dict, global_names: list[str], explain: Explain
) -> dict[str, Any]:
    """{"plan": the plan at the largest sizes} or {"raised": what the call raised, "where": its lines, as `explain`
    words them}; {} for a puzzle without largest sizes."""
    from checks.engine.record.recorded_call import record_plan
    from checks.puzzles.largest import largest_inputs

    inputs = largest_inputs(puzzle, device)
    if inputs is None:
        return {}
    around = [contextlib.redirect_stdout(io.StringIO()), RealWhenSmall(device, names)]
    recorded = record_plan(fn, module, unbacked(inputs, device), names, global_names, around=around)
    raised = Unbacked.reads[0] if Unbacked.reads else recorded.raised  # a read of the data's values, even if caught
    if raised is not None:  # what the call raised at these sizes is what the probe reports
        text, where = explain(raised, names)
        return {"raised": text, "where": where}
    if recorded.too_long is not None:
        return {"raised": "too many operations", "where": [recorded.too_long] if recorded.too_long else []}
    return {"plan": recorded.plan}


class RealWhenSmall(TorchFunctionMode):
    """What the host function makes is made as the real call would make it, without storage only where it is large:
    a tensor of more than SMALL elements it makes from nothing (`torch.empty(shape, device=q.device)`) is an Unbacked
    one on the device it asked for, and one of at most SMALL elements it makes from the data (`q.new_zeros(B)`,
    `torch.empty_like(lse)`) is made on `device` with its values: a work list, a page count, a small scratch buffer.
    What the grader's own code makes (the recorder's) is left alone."""

    def __init__(self, device: str, own_files: dict[str, str]) -> None:
        super().__init__()
        self.device = torch.empty(0, device=device).device  # as a real tensor names it: cuda:0, not cuda
        self.own_files = own_files

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if not self._learners() or func in MOVES:  # a move: the tensor's own (to its own device, itself)
            return func(*args, **kwargs)
        if "device" in kwargs or not any(isinstance(a, Unbacked) for a in tree_leaves((args, kwargs))):
            return self._made(func, args, kwargs)
        out = func(*args, **kwargs)
        if not (isinstance(out, Unbacked) and out.numel() <= SMALL):
            return out
        try:  # a factory (torch.empty_like, t.new_zeros, ...) of the data's device: made there, for real
            return func(*args, **{**kwargs, "device": self.device})
        except (TypeError, RuntimeError):  # not a factory: computed from the data, it stays without values
            return out

    def _made(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """A call that names a device, or takes no data: a factory whose tensor would be large is made on the meta
        device (a trial the recorder does not see first, for its size), and given back as an Unbacked one on the
        device it asked for; anything else is made as asked."""
        asked = kwargs.get("device")
        if asked is not None and torch.device(asked).type == "meta":
            return func(*args, **kwargs)
        on_meta = {**kwargs, "device": "meta"}
        try:
            with _disable_current_modes():
                trial = func(*args, **on_meta)
        except Exception:  # noqa: BLE001 - not a factory (no `device` to give it), or one that fails: as it is
            return func(*args, **kwargs)
        if not (isinstance(trial, torch.Tensor) and backing(trial).is_meta and trial.numel() > SMALL):
            return func(*args, **kwargs)
        device = torch.device(asked) if asked is not None else torch.get_default_device()
        if device.type == self.device.type and device.index is None:
            device = self.device
        return Unbacked(backing(func(*args, **on_meta)), device)  # made again, where the recorder sees it

    def _learners(self) -> bool:
        """Whether the learner's code asked for the call: the first frame outside torch is in the learner's files."""
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith(TORCH):
            frame = frame.f_back
        return frame is not None and frame.f_code.co_filename in self.own_files


MOVES = (torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.cpu, torch.Tensor.type_as)  # what sends a tensor elsewhere
TORCH = str(Path(torch.__file__).parent)
