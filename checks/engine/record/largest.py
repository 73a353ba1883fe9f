"""Record the learner's plan at the puzzle's largest sizes, where the data has no storage.

The recording process calls the learner's function once more, on `checks.puzzles.largest`'s inputs: float tensors
on torch's meta device (a shape, strides and a dtype: a KV cache of 2^32 elements costs nothing), the metadata real.
Nothing runs but the host code: its large allocations are meta tensors too, and its launches are written down as in
every case (`checks.engine.record.plan_recorder`). What it makes small from the metadata (a work list of (sequence,
block) pairs from cu_seqlens, say, made `device=q.device`) is made on the grading device instead, with its values, as
the plan carries such a tensor by value (`RealWhenSmall`; one past the 65536 elements a plan carries breaks a plan
rule there, and the probe is left out: `checks.engine.judging.largest`). The replay runs the programs at the ends of
that plan's grids (`checks.engine.replay.overflow`).
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
    recorded = record_plan(fn, module, inputs, names, global_names, around=around)
    if recorded.raised is not None:  # what the call raised at these sizes is what the probe reports
        text, where = explain(recorded.raised, names)
        return {"raised": text, "where": where}
    if recorded.too_long is not None:
        return {"raised": "too many operations", "where": [recorded.too_long] if recorded.too_long else []}
    return {"plan": recorded.plan}


MOVES = (torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.type_as)  # what sends a tensor to another device


class RealWhenSmall(TorchFunctionMode):
    """A tensor of at most SMALL elements that the host function makes on the meta device (its data's, where
    it asks for `q.device`) is made on `device` instead, with its values: a work list, a page count, a small scratch
    buffer. The large ones stay on the meta device, and so does what the grader's own code makes (the recorder's)."""

    def __init__(self, device: str, own_files: dict[str, str]) -> None:
        super().__init__()
        self.device = torch.device(device)
        self.own_files = own_files

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not (isinstance(out, torch.Tensor) and out.is_meta and out.numel() <= SMALL) or not self._learners():
            return out
        source = args[0] if args else None
        if func in MOVES:  # a real tensor sent to the data's device stays real
            if isinstance(source, torch.Tensor) and not source.is_meta:
                return source.to(dtype=out.dtype)
            return out
        try:  # a factory (torch.tensor, torch.arange, torch.empty, t.new_zeros, ...) asked for the meta device
            return func(*args, **{**kwargs, "device": self.device})
        except (TypeError, RuntimeError):  # not a factory: computed from meta tensors, it stays one
            return out

    def _learners(self) -> bool:
        """Whether the learner's code asked for the call: the first frame outside torch is in the learner's files."""
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith(TORCH):
            frame = frame.f_back
        return frame is not None and frame.f_code.co_filename in self.own_files


TORCH = str(Path(torch.__file__).parent)
