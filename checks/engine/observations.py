"""What the replay process reports about one replayed case: observations, never a verdict.

The replay (`checks.engine.grading_process.main`, role replay) performs the plan the learner's function recorded,
with the kernels taken from the submission's source, and reports what happened here as plain data; the grader re-derives
the inputs, computes the reference itself and applies the rules (`checks.engine.rules.problem`). A case whose
recording failed (the learner's code raised, or its plan broke a rule) is reported as it was found.

`CaseObservation.from_dict` checks every field of a report against its annotation, so a new field needs only its
annotation here (and the replay code that fills it in).
"""

from __future__ import annotations

import functools
import types
import typing
from dataclasses import asdict, dataclass, field, fields
from typing import Any


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseObservation:
        """Rebuild an observation from JSON; TypeError when any field has the wrong type."""
        data = dict(data)
        data["launches"] = [_checked(LaunchObs(**x)) for x in data.get("launches", [])]
        data["buffers"] = [_checked(BufferObs(**x)) for x in data.get("buffers", [])]
        obs = _checked(cls(**data))
        if not all(isinstance(line, str) for line in obs.raised_where):
            raise TypeError("raised_where holds something other than text")
        spans = [v for buf in obs.buffers for v in buf.after_spans]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in spans):
            raise TypeError("after_spans holds something other than offsets")
        if obs.access is not None and not isinstance(obs.access, dict):
            raise TypeError("access is not a mapping")
        return obs


def _allowed(annotation: Any) -> tuple[type, ...]:
    """The classes a value of this annotation may be: its union's members, a generic's origin (list[int] is a
    list; what it holds is checked where it matters), an int where a float is asked for."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return tuple(cls for member in typing.get_args(annotation) for cls in _allowed(member))
    if annotation is Any:
        return (object,)
    if annotation is float:
        return (int, float)
    if annotation is type(None) or annotation is None:
        return (type(None),)
    origin = typing.get_origin(annotation)
    return (origin if origin is not None else annotation,)


@functools.cache
def _field_types(cls: type) -> dict[str, tuple[type, ...]]:
    """Each field of a record class, and the classes its value may be (from the annotations)."""
    hints = typing.get_type_hints(cls)
    return {f.name: _allowed(hints[f.name]) for f in fields(cls)}


def _checked(record: Any) -> Any:
    """The record itself, after checking every field against its annotation (bool is not an int here)."""
    allowed_by_field = _field_types(type(record))
    for f in fields(record):
        value = getattr(record, f.name)
        allowed = allowed_by_field[f.name]
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise TypeError(f"{type(record).__name__}.{f.name} is a {type(value).__name__}")
    return record
