"""The answer key's one home in the engine: read (`parameters_of`, `key_files`, `key_source`), kept (`kept_plan`) and
replayed (`replayed_answer_key`) here. It is timed the way the submission is: its plan recorded with the recording
room's recorder and performed by the replay room with its kernels taken from its source, so that both sides of a speed
ratio are replays. It stands beside both rooms, which never import each other: the replay process's entry
(`checks.engine.grading_process.main`) hands this module to the replay's job (`checks.engine.replay.replay_job`).

The key's plan at the timing size does not change from one check of a puzzle to the next on one machine, so the
grader's own process records it once (`kept_plan`) and keeps it: a check's replay job carries it, and the replay
performs it without running any of the key's Python. Kept there, it is out of reach of every submission by
construction: the learner's host code runs only in a sealed recording process and the replay runs only kernels,
while the kept plan lives in a process that never runs either. A plan that read its inputs' values (and so might
differ on the next check's fresh inputs) is not kept: the replay records the key on its own inputs, as it always
could.
"""

from __future__ import annotations

import ast
import hashlib
import json
import threading
from concurrent import futures
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checks.engine.contract.kernel_source import parse_python
from checks.engine.phases import mark
from checks.engine.replay.perform import TimedReplay

if TYPE_CHECKING:
    from checks.engine.record.recorded_call import RecordedCall


def parameters_of(puzzle: Any) -> list[str]:
    """The names of the graded function's parameters, read from the answer key's source (never run for this)."""
    for node in ast.walk(parse_python(puzzle.solution.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef) and node.name == puzzle.name:
            return [a.arg for a in node.args.args]
    raise LookupError(f"the answer key defines no {puzzle.name}")


def key_files(puzzle: Any) -> list[Path]:
    """The answer key's files: the key of the step it builds on first, then its own."""
    from checks.engine.submission import earlier_answer_key

    step = earlier_answer_key(puzzle.solution)
    return ([step] if step else []) + [puzzle.solution]


def key_source(puzzle: Any) -> Any:
    """The key's kernels, read from its source text as a submission's are (`KernelSource`)."""
    from checks.engine.contract.kernel_source import extract
    from checks.registry import shown

    return extract([(str(p.resolve()), str(shown(p)), p.read_text(encoding="utf-8")) for p in key_files(puzzle)])


def record_key_plan(
    puzzle: Any, module: Any, source: Any, inputs: dict[str, Any], this_thread_only: bool = False
) -> RecordedCall:
    """The key's call on `inputs` (by parameter name), recorded (`checks.engine.record.recorded_call.RecordedCall`:
    its `read_inputs` says whether the plan depends on the inputs' values). No kernel runs."""
    from checks.engine.record.recorded_call import record_plan

    key = getattr(module, puzzle.name)
    return record_plan(key, module, inputs, {}, source.global_names, this_thread_only=this_thread_only)


class AnswerKeyReplay(TimedReplay):
    """The answer key as a `TimedReplay`. With `kept` (the grader's kept plan: `kept_plan`), that plan and its kernels'
    source, and no Python of the key runs here; without it, the key's plan recorded here on its first call (a plan
    that depends on shapes alone serves every later call), its kernels taken from its source."""

    def __init__(
        self, puzzle: Any, parameters: list[str], device: str, workdir: Path, kept: dict[str, Any] | None = None
    ) -> None:
        from checks.engine.contract.kernel_source import KernelSource

        super().__init__(None, {}, parameters, device)
        self.puzzle, self.workdir = puzzle, workdir
        self.module: Any = None
        if kept is not None:
            self.plan, self.source = kept["plan"], KernelSource.from_dict(kept["kernel_source"])
            self.build()
        else:
            from checks.engine.submission import load_module

            self.module = load_module(puzzle.solution, "answer_key")
            self.source = key_source(puzzle)

    def build(self) -> None:
        from checks.engine.replay.kernels import build

        folder = self.workdir / "answer_key_kernels"
        folder.mkdir(exist_ok=True)
        self.kernels, _ = build(self.source, self.plan["globals"], folder)

    def perform(self, args: tuple, fill: bool) -> Any:
        if self.plan is None:
            inputs = dict(zip(self.parameters, args, strict=True))
            self.plan = record_key_plan(self.puzzle, self.module, self.source, inputs).complete()
            self.build()
        return super().perform(args, fill)


def replayed_answer_key(
    puzzle: Any, parameters: list[str], device: str, workdir: Path, kept: dict[str, Any] | None = None
) -> AnswerKeyReplay:
    """A function of the puzzle's inputs that replays the answer key's plan (the kept one, else recorded on its first
    call)."""
    return AnswerKeyReplay(puzzle, parameters, device, workdir, kept)


# -- the grader's kept plans -----------------------------------------------------------------------------------------

SETTLE_S = 30.0  # the longest a check waits, before its timing, for a key's plan still recording in the grader
_kept: dict[tuple, Future] = {}  # what a kept plan is for (`kept_for`) -> the plan, once recorded; in the grader only
_kept_lock = threading.Lock()
_recording_lock = threading.Lock()  # one key's plan recorded at a time (each patches Triton's launch for its thread)


def kept_for(puzzle: Any, device: str) -> tuple:
    """What a kept plan depends on: the puzzle, its timing size, the key's source text, the device it runs on."""
    texts = hashlib.sha256()
    for path in key_files(puzzle):
        texts.update(path.read_bytes())
    # the device as this process names it: one process runs on one GPU from start to end
    return (puzzle.number, json.dumps(puzzle.timing_case.given(), sort_keys=True), texts.hexdigest(), device)


class KeptPlan:
    """A check's handle on the kept plan of its puzzle's answer key (`kept_plan`)."""

    def __init__(self, found: Future) -> None:
        self.found = found

    def ready(self) -> dict[str, Any] | None:
        """The kept plan, {"plan", "kernel_source"}, if it is recorded by now; None if not yet, if it failed, or if it
        cannot be kept: then the replay records the key's plan itself."""
        if not self.found.done() or self.found.exception() is not None:
            return None
        return self.found.result()

    def settle(self, timeout: float = SETTLE_S) -> None:
        """Wait for a recording still under way (the grader's process uses the GPU for nothing while a submission is
        timed), at most `timeout` seconds."""
        futures.wait([self.found], timeout=timeout)


def kept_plan(puzzle: Any, device: str = "cuda") -> KeptPlan:
    """The answer key's plan at the timing size, recorded in this process (the grader's) the first time a check of
    the puzzle asks and kept for every later one. The recording runs in a thread of its own, beside the check; a
    check takes the plan only if it is ready (`KeptPlan.ready`)."""
    found: Future = Future()
    with _kept_lock:
        identity = kept_for(puzzle, device)
        held = _kept.get(identity)
        if held is not None and not (held.done() and held.exception() is not None):
            return KeptPlan(held)
        _kept[identity] = found
    threading.Thread(target=_record_into, args=(found, puzzle, device), daemon=True, name="key-plan").start()
    return KeptPlan(found)


def _record_into(found: Future, puzzle: Any, device: str) -> None:
    try:
        found.set_result(key_plan_here(puzzle, device))
    except BaseException as exc:  # noqa: BLE001 - a check without a kept plan records the key in its replay
        found.set_exception(exc)


def key_plan_here(puzzle: Any, device: str, case: Any = None) -> dict[str, Any] | None:
    """Record the key's plan at the timing size (or `case`) in this process, on inputs drawn as the replay draws them;
    None when the plan read its inputs' values (it might differ on other inputs) or asked for too much."""
    import torch

    from checks.engine.submission import load_module
    from checks.memory import Arena
    from checks.puzzles import spec_module

    with _recording_lock:
        source = key_source(puzzle)
        module = load_module(puzzle.solution, f"kept_answer_key_{puzzle.stem}")
        generator = torch.Generator(device=device)
        generator.seed()
        made = spec_module(puzzle).make_inputs(case or puzzle.timing_case, Arena(device, generator))
        inputs = dict(zip(parameters_of(puzzle), made.values(), strict=True))
        del made
        try:
            recorded = record_key_plan(puzzle, module, source, inputs, this_thread_only=True)
            if recorded.raised is not None:
                raise recorded.raised
        finally:
            del inputs
            if device == "cuda":
                torch.cuda.empty_cache()  # the inputs' memory back to the GPU, for the replay
        mark("answer key's plan recorded in the grader")
        if recorded.read_inputs or recorded.too_long is not None:
            return None
        # as plain data, the form it travels in (the recorder's lists are its own kinds)
        return json.loads(json.dumps({"plan": recorded.plan, "kernel_source": source.to_dict()}))


def forget_kept_plans() -> None:
    """Drop every kept plan (the tests start from none)."""
    with _kept_lock:
        _kept.clear()
