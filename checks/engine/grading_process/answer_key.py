"""The answer key, timed the way the submission is: its plan, recorded here (the key is the grader's own code),
performed with its kernels taken from its source, so that both sides of a speed ratio are replays."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def replayed_answer_key(puzzle: Any, parameters: list[str], device: str, workdir: Path) -> Callable[..., Any]:
    """A function of the puzzle's inputs that replays the answer key's plan (recorded on its first call)."""
    from checks.engine.grading_process.case_runner import returned_kind
    from checks.engine.grading_process.plan_recorder import PlanRecorder, launches_recorded, recorded_globals
    from checks.engine.kernel_source import extract
    from checks.engine.replay.kernels import build
    from checks.engine.replay.perform import Performer, returned_as
    from checks.engine.submission import earlier_answer_key, load_module
    from checks.registry import shown

    module = load_module(puzzle.solution, "answer_key")
    key = getattr(module, puzzle.name)
    step = earlier_answer_key(puzzle.solution)
    paths = ([step] if step else []) + [puzzle.solution]
    source = extract([(str(p.resolve()), str(shown(p)), p.read_text(encoding="utf-8")) for p in paths])
    state: dict[str, Any] = {}

    def replayed(*args: Any) -> Any:
        inputs = dict(zip(parameters, args, strict=True))
        if "plan" not in state:  # a plan depends on shapes only: the first call's serves every later one
            recorder = PlanRecorder(inputs, {})
            with recorder, launches_recorded(recorder):
                returned = key(*args)
            state["plan"] = recorder.plan(
                returned, returned_kind(returned), recorded_globals(module, source.global_names)
            )
            folder = workdir / "answer_key_kernels"
            folder.mkdir(exist_ok=True)
            state["kernels"], _ = build(source, state["plan"]["globals"], folder)
        plan = state["plan"]
        return returned_as(plan, Performer(plan, state["kernels"], inputs, None, device, False).run())

    return replayed
