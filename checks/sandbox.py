"""Run one submission in a child process with a time limit, and turn whatever happens into a verdict."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from checks import verdict as V
from checks.registry import ROOT, Puzzle
from checks.source import SubmissionError, notebook_code

Progress = Callable[[dict[str, Any]], None]


def _read_events(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    try:
        with open(path, encoding="utf-8") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return [], offset
    complete = data[: data.rfind("\n") + 1]
    events = [json.loads(line) for line in complete.splitlines() if line.strip()]
    return events, offset + len(complete.encode("utf-8"))


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text[-limit:]


def prepare(
    puzzle: Puzzle, file: Path | None, solution: bool, workdir: Path, source: tuple[str, str] | None = None
) -> tuple[Path, dict[str, str]]:
    """The module file to grade, and how to name each of the learner's files in messages."""
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
        shown = target.relative_to(ROOT) if target.resolve().is_relative_to(ROOT) else target
        return module, {str(module): f"your graded cell in {shown}"}
    return target, {str(target.resolve()): target.name}


def run_child(job: dict[str, Any], timeout: float, workdir: Path, progress: Progress | None) -> V.Verdict:
    job_path, events_path, log_path = workdir / "job.json", workdir / "events.jsonl", workdir / "output.log"
    job_path.write_text(json.dumps(job), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONUNBUFFERED="1")
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "checks.child", str(job_path), str(events_path)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        offset, seen, final, timed_out = 0, [], None, False
        current: dict[str, Any] | None = None
        while True:
            done = proc.poll() is not None
            events, offset = _read_events(events_path, offset)
            for event in events:
                seen.append(event)
                if event["event"] == "case_start":
                    current = event
                if event["event"] == "verdict":
                    final = event
                if progress:
                    progress(event)
            if done:
                break
            if time.monotonic() - start > timeout:
                _kill(proc)
                timed_out = True
                break
            time.sleep(0.05)
    output = _tail(log_path)
    machine = next((e for e in seen if e["event"] == "machine"), {})
    cases = [V.CaseResult(**{k: v for k, v in e.items() if k != "event"}) for e in seen if e["event"] == "case"]
    if final is not None:
        data = {k: v for k, v in final.items() if k != "event"}
        verdict = V.Verdict.from_dict(data)
        if not verdict.passed:
            verdict.output = output
        return verdict
    base = dict(
        puzzle=job["puzzle"],
        mode=machine.get("mode", ""),
        device=machine.get("device", ""),
        seed=job["seed"],
        cases=cases,
        output=output,
        seconds=time.monotonic() - start,
    )
    where = (
        f" during case {current['index'] + 1}"
        if current
        else (" while loading your code" if machine else " while starting")
    )
    if timed_out:
        return V.Verdict(
            status=V.TIMEOUT,
            summary=(
                f"Your code ran past the {timeout:.0f} s time limit{where}: look for a loop whose bound never "
                "changes or is far too large (a `while` in a kernel, a grid of the wrong size); if it is only "
                "slow (autotuning many configs compiles each one), give it longer with --timeout "
                "(make check ARGS='--timeout 300')."
            ),
            **base,
        )
    code = proc.returncode
    how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
    failed = [c for c in cases if not c.passed]
    if failed:
        first = failed[0]
        summary = (
            f"The grading process died{where} ({how}), after {len(failed)} case(s) had already failed; "
            f"start with case {first.index + 1} ({first.description}): {first.problem}"
        )
    elif code >= 0:
        summary = (
            f"Your code ended the grading process{where} ({how}) before it could give a verdict: "
            "remove any exit(), sys.exit() or os._exit() call from your submission."
        )
    elif code == -signal.SIGKILL:
        summary = (
            f"The grading process was killed{where} (signal SIGKILL), most likely for using too much memory: "
            "check the sizes you allocate and your grid."
        )
    else:
        summary = (
            f"The grading process died{where} ({how}); this is usually an out-of-bounds load or store: "
            "check your masks, offsets and strides."
        )
    return V.Verdict(status=V.CRASHED, summary=summary, **base)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


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
) -> V.Verdict:
    """Grade one submission of one puzzle: a notebook's graded cell, a .py file, or the answer key.

    `source` is (module code, how to call it in messages), for code that is in no file yet.
    """
    if not puzzle.ready:
        return V.Verdict(
            puzzle.number,
            V.NOT_READY,
            (
                f"Puzzle {puzzle.number} ({puzzle.slug}) is listed but not written yet; the puzzle table "
                "in README.md shows which puzzles can be graded."
            ),
        )
    seed = random.randrange(1, 2**31) if seed is None else seed
    with tempfile.TemporaryDirectory(prefix="checks-") as tmp:
        workdir = Path(tmp)
        submission, names = prepare(puzzle, file, solution, workdir, source)
        job = {
            "puzzle": puzzle.number,
            "file": str(submission),
            "names": names,
            "seed": seed,
            "interpret": interpret,
            "time": time_it,
            "cases": cases,
            "solution_file": str(puzzle.solution),
            "artifacts": str(artifacts) if artifacts else None,
        }
        verdict = run_child(job, timeout or puzzle.timeout, workdir, progress)
        if verdict.mode != "gpu" or not verdict.passed:
            return verdict
        # The interpreter sees every load: out-of-bounds reads that happen to give right values on a
        # GPU, and the puzzles' rules on passes over memory. Same submission, the small CPU cases.
        if progress:
            progress({"event": "stage", "text": INTERPRETER_STAGE})
        job.update(interpret=True, time=False, cases=None, artifacts=None)
        return merge_interpreter_stage(verdict, run_child(job, timeout or puzzle.timeout, workdir, None))


INTERPRETER_STAGE = "  ... and once more in Triton's CPU interpreter, which sees every load (small cases)"


def merge_interpreter_stage(gpu: V.Verdict, cpu: V.Verdict) -> V.Verdict:
    """The GPU verdict, failed when the interpreter found a fault, annotated when it could not run."""
    if cpu.passed:
        gpu.details.append("Interpreter check: every load stayed inside its tensor and the puzzle's rules held.")
        return gpu
    if cpu.status == V.FAILED:
        gpu.status = V.FAILED
        gpu.summary = (
            f"Every GPU case matched, but in Triton's interpreter, where the grader sees every load: {cpu.summary}"
        )
        first = next((c for c in cpu.cases if not c.passed), None)
        if first is not None:
            gpu.details.append(f"Interpreter case {first.index + 1} ({first.description}): {first.problem}")
            gpu.details += first.details
        return gpu
    gpu.details.append(
        f"Interpreter check not done ({cpu.status}: {cpu.summary}); loads outside tensors and the puzzle's "
        "rules on passes were not checked."
    )
    return gpu
