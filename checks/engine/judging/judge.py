"""The grader's side of a graded call: re-derive the inputs and the reference, apply the rules.

This runs in the grader's own process, which never loads the learner's code. It trusts nothing
the grading process says about correctness: the values come from the returned tensors (loaded with
`weights_only`, so a file cannot run code), compared with a reference computed here.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch

from checks import verdict as V
from checks.engine.access.log import AccessLog
from checks.engine.contract.observations import CaseObservation
from checks.engine.contract.protocol import (
    Tampered,
    Timings,
    access_path,
    fresh_outputs_path,
    interleaved_outputs_path,
    outputs_path,
    reversed_outputs_path,
    timing_outputs_path,
)
from checks.engine.inputs import draw
from checks.engine.judging.rules.problem import CaseContext, Problem
from checks.engine.judging.rules.rulebook import first_problem
from checks.engine.judging.wording import triton_error_gloss
from checks.memory import describe_tensor
from checks.puzzles import spec_module
from checks.registry import Case, Puzzle

# case parameters that the description of the inputs already shows (shapes, layouts, flags)
_SHOWN = {"shape", "n", "M", "N", "K", "B", "H", "D", "layout", "layout_a", "layout_b", "causal", "sm_scale", "dtype"}


def describe_inputs(inputs: dict[str, Any]) -> str:
    parts = []
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor):
            parts.append(describe_tensor(name, value))
        elif isinstance(value, float):
            parts.append(f"{name}={value:.4g}")
        else:
            parts.append(f"{name}={value}")
    return ", ".join(parts)


def describe_case(case: Case, inputs: dict[str, Any]) -> str:
    """The inputs, plus what is special about this case's values (scale, fill, ...)."""
    extras = ", ".join(f"{k}={v}" for k, v in case.given().items() if k not in _SHOWN and k != "note")
    text = describe_inputs(inputs)
    if extras:
        text += f" [{extras}]"
    if case.note:
        text += f" ({case.note})"
    return text


def _load_saved(path: Path) -> Any:
    """What the replay saved to `path` with torch.save (loaded with weights_only, so a file cannot run code here);
    a report whose file cannot be read is broken (the replay ran none of the learner's host code, and nothing the
    learner started was alive while it ran)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise Tampered(f"the returned tensors could not be read ({exc})") from exc
    try:
        return torch.load(io.BytesIO(data), weights_only=True)
    except Exception as exc:  # an unreadable file is a broken report, whatever the reason
        raise Tampered(f"the returned tensors could not be read ({type(exc).__name__})") from exc


def _tensors_or_none(outputs: Any) -> bool:
    return isinstance(outputs, list) and all(o is None or isinstance(o, torch.Tensor) for o in outputs)


def load_outputs(path: Path) -> list[Any]:
    """The tensors a replayed case returned, as the replay saved them; anything else is a broken report."""
    outputs = _load_saved(path)
    if not _tensors_or_none(outputs):
        raise Tampered("the returned values were not saved as tensors")
    return outputs


def load_timing_outputs(workdir: Path, timings: Timings) -> tuple[list[Any], list[Any]] | None:
    """The submission's and the answer key's outputs at the timing size, from the file the grader names; None when
    the replay saved none (the key did not run)."""
    if timings.outputs_file is None:
        return None
    saved = _load_saved(timing_outputs_path(workdir))
    if not (
        isinstance(saved, dict) and set(saved) == {"yours", "answer key"} and all(map(_tensors_or_none, saved.values()))
    ):
        raise Tampered("the outputs at the timing size were not saved as tensors")
    return saved["yours"], saved["answer key"]


def load_access(path: Path, output_names: list[str]) -> dict[str, Any]:
    """The access log of one replayed case, with the returned buffers named as the puzzle names its outputs."""
    try:
        data = path.read_bytes()
        log = AccessLog.from_dict(torch.load(io.BytesIO(data), weights_only=True))
    except Exception as exc:  # an unreadable log is a broken report, whatever the reason
        raise Tampered(f"the access log could not be read ({type(exc).__name__})") from exc
    for region in log.regions:
        label = str(region.get("name", ""))
        if label.startswith("output ") and label[7:].isdigit() and int(label[7:]) < len(output_names):
            region["name"] = output_names[int(label[7:])]
    return log.to_dict()


class Judge:
    """Judges the observations of one grading process for one puzzle."""

    def __init__(self, puzzle: Puzzle, seed: int, mode: str, workdir: Path, artifacts: Path | None = None) -> None:
        self.puzzle = puzzle
        self.spec = spec_module(puzzle)
        self.seed = seed
        self.device = "cuda" if mode == "gpu" else "cpu"
        self.cases = puzzle.cases.on(gpu=mode == "gpu")
        self.workdir = workdir
        self.artifacts = artifacts
        self.picture = ""
        self.first_access: dict[str, Any] | None = None  # case 1's access log, for the traffic report
        self.data_seed = 0  # the replay's secret data seed (the stage sets it): case i's values come from it + i

    def context(self, obs: CaseObservation) -> tuple[CaseContext, str]:
        case = self.cases[obs.index]
        _, inputs = draw(self.spec, case, self.seed, obs.index, self.device, self.data_seed + obs.index)
        expected = self.spec.reference(inputs)
        outputs: list[Any] = []
        if not obs.raised and not obs.plan_problem:  # a plan the grader refused was never replayed
            outputs = load_outputs(outputs_path(self.workdir, obs.index))
        fresh = load_outputs(fresh_outputs_path(self.workdir, obs.index)) if obs.fresh_outputs and outputs else None
        backwards = (
            load_outputs(reversed_outputs_path(self.workdir, obs.index)) if obs.reversed_outputs and outputs else None
        )
        interleaved = (
            load_outputs(interleaved_outputs_path(self.workdir, obs.index))
            if obs.interleaved_outputs and outputs
            else None
        )
        if obs.access is not None:
            obs.access = load_access(access_path(self.workdir, obs.index), [e.name for e in expected])
            if obs.index == 0:
                self.first_access = obs.access
        ctx = CaseContext(
            self.puzzle, case, inputs, expected, outputs, obs, fresh_outputs=fresh, reversed_outputs=backwards,
            interleaved_outputs=interleaved,
        )  # fmt: skip
        return ctx, describe_case(case, inputs)

    def case_result(self, obs: CaseObservation) -> V.CaseResult:
        """The verdict on one observed call."""
        ctx, description = self.context(obs)
        result = V.CaseResult(obs.index, description, passed=False, seconds=obs.seconds, printed=obs.printed)
        if obs.stub:
            result.problem = f"Your code still raises {obs.raised}."
            result.raised = result.stub = True
            return result
        if obs.raised:
            result.problem, result.raised = f"Your code raised {obs.raised}", True
            result.details = [*obs.raised_where, *triton_error_gloss(obs.raised)]
            return result
        problem = first_problem(ctx)
        if problem is None:
            result.passed = True
            return result
        result.problem, result.details, result.rule = problem.message, problem.details, problem.rule
        result.cause, result.diagnosed = problem.cause, problem.diagnosed
        result.fits, result.degenerate, result.stated = problem.fits, problem.degenerate, problem.stated
        self.save_picture(problem, description)
        return result

    def save_picture(self, problem: Problem, description: str) -> None:
        if self.artifacts is None or self.picture or problem.picture is None:  # only the first picture is kept
            return
        path = self.artifacts / f"puzzle{self.puzzle.stem}_errors.pt"
        torch.save({**problem.picture, "case": description}, path)
        self.picture = str(path)
