"""The answer key, timed the way the submission is: its plan recorded with the recording room's recorder, in the
replay process (the key is the grader's own code), and performed by the replay room with its kernels taken from its
source, so that both sides of a speed ratio are replays. It stands beside both rooms, which never import each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checks.engine.replay.perform import TimedReplay


class AnswerKeyReplay(TimedReplay):
    """The answer key as a `TimedReplay`: its plan recorded on its first call (a plan depends on shapes only, so
    the first call's serves every later one), its kernels taken from its source."""

    def __init__(self, puzzle: Any, parameters: list[str], device: str, workdir: Path) -> None:
        from checks.engine.contract.kernel_source import extract
        from checks.engine.submission import earlier_answer_key, load_module
        from checks.registry import shown

        super().__init__(None, {}, parameters, device)
        self.module = load_module(puzzle.solution, "answer_key")
        self.key = getattr(self.module, puzzle.name)
        step = earlier_answer_key(puzzle.solution)
        paths = ([step] if step else []) + [puzzle.solution]
        self.source = extract([(str(p.resolve()), str(shown(p)), p.read_text(encoding="utf-8")) for p in paths])
        self.workdir = workdir

    def perform(self, args: tuple, fill: bool) -> Any:
        if self.plan is None:
            from checks.engine.contract.plan import returned_kind
            from checks.engine.record.plan_recorder import (
                PlanRecorder,
                launches_recorded,
                recorded_globals,
            )
            from checks.engine.replay.kernels import build

            recorder = PlanRecorder(dict(zip(self.parameters, args, strict=True)), {})
            with recorder, launches_recorded(recorder):
                returned = self.key(*args)
            self.plan = recorder.plan(
                returned, returned_kind(returned), recorded_globals(self.module, self.source.global_names)
            )
            folder = self.workdir / "answer_key_kernels"
            folder.mkdir(exist_ok=True)
            self.kernels, _ = build(self.source, self.plan["globals"], folder)
        return super().perform(args, fill)


def replayed_answer_key(puzzle: Any, parameters: list[str], device: str, workdir: Path) -> AnswerKeyReplay:
    """A function of the puzzle's inputs that replays the answer key's plan (recorded on its first call)."""
    return AnswerKeyReplay(puzzle, parameters, device, workdir)
