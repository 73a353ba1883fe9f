"""Grade one submission: prepare its code, run the grading stage(s), and return the verdict.

On a GPU a passing submission is graded a second time in Triton's interpreter, which sees every
load. Each stage runs the learner's code in its own grading process (`checks.engine.grading_process.main`) and judges
what it reports here, in a process that never ran that code (`checks.engine.judging.stage`).
"""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as StageStillRunning
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from checks import verdict as V
from checks.engine.access.traffic import record_answer_key_log_ahead
from checks.engine.answer_key import kept_plan
from checks.engine.contract.protocol import Job
from checks.engine.hopper import GPU_ONLY, needs_hopper_verdict
from checks.engine.judging.configs import every_config, on_method_cases, on_the_gpus_configs
from checks.engine.judging.interpreter_parts import merge_parts, split_cases
from checks.engine.judging.rules import rulebook
from checks.engine.judging.stage import Stage, traffic_details
from checks.engine.phases import mark
from checks.engine.processes.landlock import unsealed_reason
from checks.engine.processes.prestart import part_count, part_workdir
from checks.engine.submission import EarlierSource, SubmissionError, earlier_step, notebook_code
from checks.registry import Puzzle, shown

Progress = Callable[[dict[str, Any]], None]


def prepare(
    puzzle: Puzzle,
    file: Path | None,
    solution: bool,
    workdir: Path,
    source: tuple[str, str] | None = None,
    earlier: EarlierSource | None = None,
) -> tuple[Path, dict[str, str], Path | None]:
    """The module file to grade, how to name each of the learner's files in messages, and the code of the
    step it builds on (None when the puzzle builds on none, or the submission defines everything itself)."""
    module, names = _submission(puzzle, file, solution, workdir, source)
    found = earlier_step(puzzle, module.read_text(encoding="utf-8"), workdir, earlier, solution)
    if found is None:
        return module, names, None
    path, label = found
    return module, {**names, str(path.resolve()): label}, path


def graded_module(puzzle: Puzzle, file: Path, workdir: Path) -> tuple[Path, dict[str, str]]:
    """The module a submission file is graded as (a notebook's graded cells, or the .py file), and how messages
    name it; without the step it builds on, which the grading itself adds."""
    return _submission(puzzle, file, False, workdir, None)


def _submission(
    puzzle: Puzzle, file: Path | None, solution: bool, workdir: Path, source: tuple[str, str] | None
) -> tuple[Path, dict[str, str]]:
    if source is not None:
        code, label = source
        module = workdir / f"{puzzle.stem}_graded_cell.py"
        module.write_text(code, encoding="utf-8")
        return module, {str(module): label}
    if solution:
        return puzzle.solution, {str(puzzle.solution): f"solutions/{puzzle.solution.name}"}
    target = file if file is not None else puzzle.notebook
    if not target.exists():
        raise SubmissionError(f"There is no file {target}; give the path of your .py file or notebook.")
    if target.suffix == ".ipynb":
        module = workdir / f"{puzzle.stem}_graded_cell.py"
        module.write_text(notebook_code(target, puzzle.number), encoding="utf-8")
        return module, {str(module): f"your graded cell in {shown(target)}"}
    return target, {str(target.resolve()): target.name}


def grade(
    puzzle: Puzzle,
    file: Path | None = None,
    *,
    solution: bool = False,
    timeout: float | None = None,
    seed: int | None = None,
    interpret: bool = False,
    time_it: bool = True,
    cases: list[int] | None = None,
    artifacts: Path | None = None,
    progress: Progress | None = None,
    source: tuple[str, str] | None = None,
    workdir: Path | None = None,
    first_failure: bool = False,
    earlier: EarlierSource | None = None,
    shown_as: str | None = None,
) -> V.Verdict:
    """Grade one submission of one puzzle: a notebook's graded cell, a .py file, or the answer key.

    `source` is (module code, how to call it in messages), for code that is in no file yet. `workdir` is
    an empty folder to work in (the one `prestart_for` started grading processes in), else a temporary one.
    `first_failure` stops at the first failing case: for known-wrong kernels, whose first failure is what counts.
    `earlier` is the learner's code of the step this puzzle builds on (a file, or code and its name), where the
    submission uses it; without it, the graded cells of that step's notebook (checks.engine.submission.earlier_step).
    `shown_as` is the file as the commands a verdict suggests should name it, when `file` is a private copy.
    A `seed` makes a debugging run: its data values come from the seed too (not from a secret), so the same seed
    gives the same inputs and the same verdict, which says it is a debugging run (and is not recorded as a grade).
    """
    rulebook.checked_registry()  # a broken registry stops every grade here, before any process starts
    if not puzzle.ready:
        return V.Verdict(
            puzzle.number,
            V.NOT_READY,
            (
                f"Puzzle {puzzle.number} ({puzzle.slug}) is listed but not written yet; the puzzle table "
                "in README.md shows which puzzles can be graded."
            ),
        )
    not_here = needs_hopper_verdict(puzzle, interpret)
    if not_here is not None:
        return not_here
    debugging = seed is not None
    seed = random.randrange(1, 2**31) if seed is None else seed
    gpu = not interpret and os.environ.get("TRITON_INTERPRET") != "1" and torch.cuda.is_available()
    if gpu:
        threading.Thread(target=warm_up_cuda, daemon=True).start()  # while the grading process starts
    with contextlib.nullcontext(str(workdir)) if workdir else tempfile.TemporaryDirectory(prefix="checks-") as tmp:
        workdir = Path(tmp)
        submission, names, before = prepare(puzzle, file, solution, workdir, source, earlier)
        after = str(before) if before else ""
        job = Job(puzzle.number, str(submission), names, seed, not gpu, cases=cases, debugging=debugging, earlier=after)
        limit = timeout or puzzle.timeout
        mode = "gpu" if gpu else "interpreter"
        shown_file = str(shown(file)) if file is not None and not solution else ""
        shown_file = shown_as if shown_as is not None else shown_file
        stage = Stage(puzzle, job, mode, workdir, time_it, artifacts, progress, first_failure, shown_file)
        if gpu and time_it and puzzle.timing_case is not None:  # recorded here once, beside this check; then kept
            stage.key_plan = kept_plan(puzzle)
        if not gpu:  # every config an autotuner may choose on a GPU is judged
            verdict = every_config(stage, stage.run(limit), limit)
        elif puzzle.needs_hopper:  # Gluon's kernels have no interpreter stage: the GPU stage alone, which says so
            verdict = stage.run(limit)
            verdict.details.append(GPU_ONLY)
        else:
            verdict = with_interpreter_stage(stage, workdir, limit, progress)
        verdict.unsealed = unsealed_reason()  # said plainly where the kernel could not seal the recording process
        return verdict


def with_interpreter_stage(gpu_stage: Stage, workdir: Path, limit: float, progress: Progress | None) -> V.Verdict:
    """Run the GPU stage and, beside it, the same submission on the small CPU cases in the interpreter.

    The interpreter sees every load: out-of-bounds reads that happen to give right values on a GPU,
    and the puzzles' rules on passes over memory. Its cases are shared by a few grading processes
    (`checks.engine.judging.interpreter_parts`), which are stopped if the GPU stage fails.
    """
    record_answer_key_log_ahead(gpu_stage.puzzle)  # what a passing verdict shows beside yours, ready by then
    params = [case.given() for case in gpu_stage.puzzle.cases.cpu]
    subsets = split_cases(len(params), part_count())
    parts = []
    for index, subset in enumerate(subsets):
        (folder := part_workdir(workdir, index)).mkdir(exist_ok=True)
        # recorded on the GPU as the GPU stage records (the same environment: the method judged here is the one the
        # GPU runs), replayed in the interpreter
        job = replace(gpu_stage.job, interpret=True, record_on_gpu=True, cases=subset if len(subsets) > 1 else None)
        part = Stage(
            gpu_stage.puzzle, job, "interpreter", folder, first_failure=gpu_stage.first_failure, file=gpu_stage.file
        )
        part.traffic_later = True  # added below once the GPU's verdict is in: the key's log is recorded meanwhile
        parts.append(part)

    def on_the_parts_tiles(cpu: V.Verdict) -> V.Verdict:
        """The parts' verdict, once the configs they ran are judged on cases sized from their tiles where the
        interpreter's cases are too small for them (beside the GPU stage, before it waits to time)."""
        if not cpu.passed:
            return cpu
        ran = [config for part in parts for config in part.configs_run]
        return on_method_cases(parts[0], parts[0].job, ran, limit) or cpu

    with ThreadPoolExecutor(max_workers=len(parts) + 1) as pool:
        runs = [pool.submit(part.run, limit) for part in parts]
        merged_parts = pool.submit(lambda: on_the_parts_tiles(merge_parts([run.result() for run in runs], params)))
        said: list[str] = []  # the progress lines already printed
        # once the GPU stage's cases are over: the configs it ran that the parts did not are judged too
        interpreted = GpusConfigs(merged_parts, gpu_stage, parts, limit)
        gpu_stage.before_timing = lambda: correct_in_the_interpreter(interpreted, progress, said)
        try:
            verdict = gpu_stage.run(limit)
        except BaseException:  # Ctrl-C: the interpreter stage's processes are stopped too, not waited for
            for part in parts:
                part.cancel()
            raise
        if not verdict.passed:
            # grading known-wrong kernels (first_failure), the cause is the point: wait for it as long as the limit
            wait = limit if gpu_stage.first_failure else None
            explained = explain_wrong_values(verdict, interpreted, wait) if worth_explaining(verdict) else None
            for part in parts:
                part.cancel()
            return explained or verdict
        if progress and INTERPRETER_STAGE not in said:
            progress({"event": "stage", "text": INTERPRETER_STAGE})
        merged = merge_interpreter_stage(verdict, interpreted.result())
        access = next((part.judge.first_access for part in parts if part.judge.first_access is not None), None)
        if merged.passed and interpreted.result().passed and access is not None:
            merged.details += traffic_details(gpu_stage.puzzle, access, "interpreter case 1")
        return merged


class GpusConfigs:
    """The interpreter stage's verdict as a future: the parts' merged verdict, then, once the GPU stage has run every
    case (asked for from the GPU stage's end: before its timing, or after its verdict), each config of an autotuned
    launch the GPU ran that the parts did not, judged in the interpreter (checks.engine.judging.configs)."""

    def __init__(self, merged: Future, gpu: Stage, parts: list[Stage], limit: float) -> None:
        self.merged, self.gpu, self.parts, self.limit = merged, gpu, parts, limit
        self.lock = threading.Lock()
        self.verdict: V.Verdict | None = None

    def result(self, timeout: float | None = None) -> V.Verdict:
        cpu = self.merged.result(timeout=timeout)
        if not cpu.passed or not self.gpu.all_passed():
            return cpu  # the parts' failure, or a GPU verdict that is not a pass: no more to judge
        with self.lock:
            if self.verdict is None:
                self.verdict = on_the_gpus_configs(self.gpu, self.parts, self.limit) or cpu
            return self.verdict


def correct_in_the_interpreter(interpreted: Any, progress: Progress | None, said: list[str]) -> bool:
    """Every GPU case passed and the GPU waits to time the submission: first the interpreter stage's verdict, said
    at once when it passed (the learner reads it while the timing runs); False, so nothing is timed, when it failed."""
    if progress:
        progress({"event": "stage", "text": INTERPRETER_STAGE})
        said.append(INTERPRETER_STAGE)
    cpu = interpreted.result()
    if not (cpu.passed or cpu.status in rulebook.INTERPRETER_STAGE_EXCUSED):
        return False
    mark("correctness said")
    if progress:
        progress({"event": "stage", "text": CORRECT_NOW_TIMING})
    return True


def warm_up_cuda() -> None:
    """Create the grader's CUDA context and cuBLAS handle while the grading process starts (it judges on the GPU)."""
    warnings.filterwarnings("ignore", message="Attempting to run cuBLAS, but there was no current CUDA context")
    try:
        a = torch.ones(16, 16, device="cuda")
        (a @ a).sum().item()
    except Exception:  # noqa: BLE001 - only a head start; the judge meets any real problem itself
        pass


INTERPRETER_STAGE = "  ... and once more in Triton's CPU interpreter, which sees every load (small cases)"
CORRECT_NOW_TIMING = "Correct on every case. Timing yours against the answer key and the baseline (a few seconds) ..."


def merge_interpreter_stage(gpu: V.Verdict, cpu: V.Verdict) -> V.Verdict:
    """The GPU verdict, failed unless the interpreter stage passed too (or could not run through no fault of the code).

    The interpreter stage is where loads and the puzzle's rules are checked, so a submission that
    raises, hangs or breaks a rule only there does not pass: it would otherwise dodge those rules.
    """
    if cpu.passed:
        gpu.details.append("Interpreter check: every load stayed inside its tensor and the puzzle's rules held.")
        return gpu
    if cpu.status in rulebook.INTERPRETER_STAGE_EXCUSED:
        gpu.details.append(
            f"Interpreter check not done ({cpu.status}: {cpu.summary}); loads outside tensors and the puzzle's "
            "rules were not checked."
        )
        return gpu
    return adopt(
        gpu,
        cpu,
        "Every GPU case matched, but in Triton's interpreter, where the grader sees every load and checks the "
        f"puzzle's rules: {cpu.summary}",
    )


EXPLAIN_WAIT_S = 30.0  # the longest a failed GPU verdict waits for the interpreter stage to say why


GPU_FAULTS = ("CUDA error", "illegal memory access", "AcceleratorError", "misaligned address")


def worth_explaining(gpu: V.Verdict) -> bool:
    """Whether a failed GPU verdict may have a cause the interpreter sees: wrong values, a crash, or an error the
    GPU raised (a memory fault); a Python error in the learner's code is its own explanation, given at once."""
    faulted = gpu.rule == rulebook.outcome("raised") and any(fault in gpu.summary for fault in GPU_FAULTS)
    return gpu.rule in rulebook.names(explained_by_interpreter=True) or gpu.status == V.CRASHED or faulted


def explain_wrong_values(gpu: V.Verdict, interpreted: Any, wait: float | None = None) -> V.Verdict | None:
    """Wrong values, an error or a crash on the GPU, traced to their cause when the interpreter stage (already
    under way) finds one.

    A load past the end of a row gives wrong values on a GPU (it reads whatever lies there), or an illegal
    memory access when it lands outside any allocation, and the interpreter names that load: its verdict is
    the more useful one. None when it finds no such cause in time.
    """
    try:
        cpu = interpreted.result(timeout=EXPLAIN_WAIT_S if wait is None else wait)
    except StageStillRunning:
        return None
    if cpu.passed:
        return None
    # the interpreter's rule names the cause, or its wrong values come with a cause only its access log shows
    # (the merge of the splits, in decoding) where the GPU's name none
    if cpu.rule not in rulebook.names(explains_gpu_values=True) and not (
        cpu.rule == gpu.rule
        and cpu.rule in rulebook.names(explained_by_interpreter=True)
        and diagnosed(cpu)
        and not diagnosed(gpu)
    ):
        return None
    lead = f"{gpu.summary.rstrip('.')}; Triton's interpreter, which sees every load, shows why: {cpu.summary}"
    return adopt(gpu, cpu, lead)


def diagnosed(verdict: V.Verdict) -> bool:
    """Whether the first failing case of a verdict says why its values are wrong, not only where (a pattern over
    batches or heads is where: the GPU sees it too, and it is no reason to keep the interpreter's why unsaid)."""
    return next((c.diagnosed for c in verdict.cases if not c.passed), False)


def adopt(gpu: V.Verdict, cpu: V.Verdict, summary: str) -> V.Verdict:
    """The GPU verdict, failed with the interpreter stage's rule, its first failing case added to the details."""
    gpu.status, gpu.rule, gpu.map_case, gpu.summary = cpu.status, cpu.rule, cpu.map_case, summary
    first = next((c for c in cpu.cases if not c.passed), None)
    if first is not None:
        gpu.details.append(f"Interpreter case {first.index + 1} ({first.description}): {first.problem}")
        gpu.details += first.details
    gpu.details += cpu.details
    return gpu
