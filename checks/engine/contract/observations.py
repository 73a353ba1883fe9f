"""What the replay process reports about one replayed case: observations, never a verdict.

The replay (`checks.engine.replay.replay_job`) performs the plan the learner's function recorded,
with the kernels taken from the submission's source, and reports what happened here as plain data; the grader re-derives
the inputs, computes the reference itself and applies the rules (`checks.engine.judging.rules.problem`). A case whose
recording failed (the learner's code raised, or its plan broke a rule) is reported as it was found.

`CaseObservation.from_dict` checks every field of a report against its annotation (`checks.typed_reader`, the one
reader of the course's files and messages), so a new field needs only its annotation here (and the replay code that
fills it in).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from checks.typed_reader import Mismatch, RecordError, build


@dataclass
class LaunchObs:
    """One Triton kernel launch."""

    kernel: str
    own: bool  # defined in the learner's own file
    blocks: dict[str, int] = field(default_factory=dict)  # BLOCK_* constants passed by keyword


@dataclass
class BufferObs:
    """One guarded buffer after the call: an input (compared with its snapshot) or an allocation."""

    label: str
    role: str  # "input" or "allocated"
    numel: int  # elements in the body (the tensor itself)
    element_size: int
    changed: int = 0  # inputs: elements (body or guards) that differ from the snapshot
    before: int = 0  # guard elements changed before the body
    after: int = 0  # guard elements changed after the body
    first_after: int = -1  # offset of the first changed element after the body
    after_spans: list[int] = field(default_factory=list)  # runs of changed offsets after it: [start, stop, ...]
    output: int | None = None  # index of the returned output whose storage this buffer is
    poisoned: int = 0  # allocations: elements of the body that still hold the poison (no kernel wrote them)


@dataclass
class CaseObservation:
    """Everything the grading process saw during one call (or the kernels-switched-off re-run)."""

    index: int
    seconds: float = 0.0
    raised: str = ""  # "" or "TypeError: ..." when the learner's code raised
    raised_where: list[str] = field(default_factory=list)  # the learner's own lines the exception passed
    stub: bool = False  # it raised the stub's NotImplementedError
    returned: str = ""  # "tensor", "tuple of 3", or the type name of what came back
    outputs_file: str = ""  # a torch.save'd list of the returned tensors (loaded with weights_only)
    launches: list[LaunchObs] = field(default_factory=list)
    buffers: list[BufferObs] = field(default_factory=list)
    access: dict[str, Any] | None = None  # the interpreter's access log (engine.access.log), or None on a GPU
    printed: str = ""  # what the learner's code printed during this call
    plan_problem: dict[str, Any] | None = None  # what the grader found wrong in the plan (checks.engine.judging.plans)
    kept_changed: list[str] = field(default_factory=list)  # tensors kept between calls that earlier calls changed
    fresh_outputs: bool = False  # also run from its kept tensors' first state (protocol.fresh_outputs_path)
    # (interpreter) a program loaded what another of its launch stored, ordered by an atomic in the interpreter's order
    ordered_by_atomics: bool = False
    reversed_outputs: bool = False  # also run with the programs last to first (protocol.reversed_outputs_path)
    # also run with the programs interleaved at their atomics (protocol.interleaved_outputs_path)
    interleaved_outputs: bool = False
    # the configs the autotuned launches ran: {"kernel": name, "config": {argument: value}} (replay.perform.ran_config)
    configs: list[dict[str, Any]] = field(default_factory=list)
    # (interpreter) the loads without `other=` whose masked-off lanes read poison, when the call's outputs hold NaN
    # that the same call with those lanes read as 0 does not: {"kernel", "function", "line", "lanes"}
    masked_poison: list[dict[str, Any]] = field(default_factory=list)
    # (interpreter, the first case) what the probe of the plan at the largest sizes found: offsets that wrap, addresses
    # outside every tensor, grids a GPU cannot launch (checks.engine.replay.overflow)
    overflow: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "observation") -> CaseObservation:
        """Rebuild an observation from JSON (`checks.typed_reader.build`); RecordError, a TypeError naming the field,
        when any field is unknown, missing or of the wrong type, or an offset after a buffer is negative."""
        obs = build(cls, data, where)
        for b, buf in enumerate(obs.buffers):
            if any(v < 0 for v in buf.after_spans):
                place, spans = f".buffers[{b}].after_spans", buf.after_spans
                raise RecordError(where, Mismatch("value", ("buffers", b, "after_spans"), place, spans, "offsets >= 0"))
        return obs
