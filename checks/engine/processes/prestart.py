"""Grading processes started ahead of their check: they import torch and Triton while the grader does.

`prestart_for` starts the processes a check will use before the grader imports torch; a warm grader or a
notebook keeps the next check's waiting (`prestart_spare`: on a GPU machine started as a check takes its own, on a
CPU once a check is over); `checks.engine.processes.run` takes them over.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from checks.engine.contract.protocol import RECORD, REPLAY
from checks.engine.processes.spawn import GradingProcessHandle, kill, start_grading_process, started

# Grading processes started before the grader imported torch, by (workdir, interpret, role).
_prestarted: dict[tuple[str, bool, str], GradingProcessHandle] = {}


def prestart(workdir: Path, interpret: bool, record_on_gpu: bool = False) -> None:
    """Start the grading processes for `workdir` now, the recording one and the replay one: they import torch and
    Triton while the grader does the same, then wait for their token and job (the replay's comes only once the
    recording process is gone). A `GradingProcess` for the same workdir, mode and role takes each over.
    `record_on_gpu`: the interpreter stage beside a GPU stage, whose recording process is started as the GPU's."""
    workdir.mkdir(parents=True, exist_ok=True)
    for role in (RECORD, REPLAY):
        _prestarted[(str(workdir), interpret, role)] = start_grading_process(
            workdir, interpret, preload=True, role=role, record_on_gpu=record_on_gpu
        )


def discard_prestarted() -> None:
    """Stop every prestarted grading process that no stage took over (say, the submission could not be read), but
    the spare's: those wait for the next check."""
    for key in [key for key in _prestarted if not _of_spare(key[0])]:
        kill(_prestarted.pop(key))


def _of_spare(workdir: str) -> bool:
    """Whether `workdir` is the spare's folder, or a part's folder in it."""
    return bool(_spare) and Path(workdir).is_relative_to(_spare[0][0])


def likely_gpu(interpret: bool) -> bool:
    """Whether this check will grade on a GPU, guessed before torch is imported (`grade` decides)."""
    if interpret or os.environ.get("TRITON_INTERPRET") == "1" or os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        return False
    return Path("/dev/nvidiactl").exists() or Path("/dev/nvidia0").exists()


def prestart_for(workdir: Path, interpret: bool) -> None:
    """Start the grading processes `grade(..., workdir=workdir)` will use, before the grader imports torch.

    Both import torch and Triton while the grader does, which takes seconds on a GPU machine. A guess
    that turns out wrong costs nothing: `grade` starts the process it needs, and `discard_prestarted`
    stops the rest.
    """
    if likely_gpu(interpret):
        prestart(workdir, interpret=False)
        for part in range(part_count()):
            prestart(part_workdir(workdir, part), interpret=True, record_on_gpu=True)
    else:
        prestart(workdir, interpret=True)


_spare: list[tuple[Path, bool]] = []  # (workdir, interpret) a warm grader prestarted for its next check


def prestart_spare(interpret: bool) -> None:
    """Start the grading processes of the next check now, in a fresh folder (a warm grader or a notebook, between
    checks); a spare of this mode already under way is kept."""
    if _spare and _spare[0][1] == interpret:
        return
    drop_spare()  # of the other mode
    workdir = Path(tempfile.mkdtemp(prefix="checks-"))
    _spare[:] = [(workdir, interpret)]
    prestart_for(workdir, interpret)


def drop_spare() -> None:
    """Stop the spare grading processes and remove their folder."""
    for key in [key for key in _prestarted if _of_spare(key[0])]:
        kill(_prestarted.pop(key))
    while _spare:
        shutil.rmtree(_spare.pop()[0], ignore_errors=True)


@atexit.register
def leave() -> None:
    """Stop the spare and every other prestarted grading process (a notebook's kernel or a warm grader leaving)."""
    drop_spare()
    discard_prestarted()


def spare_ahead(interpret: bool) -> bool:
    """Whether the next check's spare starts as a check begins (a GPU machine), not once it is over."""
    return likely_gpu(interpret)


def take_spare(interpret: bool) -> Path | None:
    """The folder `prestart_spare` started grading processes in, when they are of this mode; else None.

    On a GPU machine the next check's spare starts at once, as this check begins: its processes import torch and make
    their CUDA contexts (about 4 s) on cores this check leaves idle, so that a check started right after this one
    finds them ready. On a CPU they start once the check is over (the warm grader's `between_checks`, a notebook's
    check), not on the cores the interpreter stage runs on."""
    if _spare and _spare[0][1] == interpret:
        workdir = _spare.pop()[0]
        if spare_ahead(interpret):
            prestart_spare(interpret)
        return workdir
    if _spare:  # of the other mode: of no use to this check
        drop_spare()
    return None


@contextlib.contextmanager
def check_folder(interpret: bool, start: bool) -> Iterator[Path]:
    """A folder for one check with its grading processes under way: the spare one if it is of this mode, else a
    fresh one (its processes prestarted when `start`); afterwards, the processes no stage took over are stopped
    and the folder removed."""
    workdir = take_spare(interpret)
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix="checks-"))
        if start:
            prestart_for(workdir, interpret)
    try:
        yield workdir
    finally:
        discard_prestarted()
        shutil.rmtree(workdir, ignore_errors=True)


PARTS_ENV = "CHECKS_INTERPRETER_PARTS"  # how many processes share the interpreter stage on a GPU machine
# At most 2: with the lean interpreter (checks.engine.lean_interpreter) two parts give the verdict line of 1, 9 and 11
# as soon as three did (1.1-1.7 s after the command on an H200), and the next check's six processes start in 3-4 s
# where eight took 4-5 s: a check right after another one waits less for them
# (bench/results/2026-11-29-h200-spare-ahead/README.md).
MAX_PARTS, CORES_PER_PART = 2, 4


def part_count() -> int:
    """Grading processes for the interpreter stage beside a GPU stage: one per 4 cores, at most 2, unless
    $CHECKS_INTERPRETER_PARTS says (the instructors' tools, which grade several submissions at once, set 1)."""
    chosen = os.environ.get(PARTS_ENV, "")
    if chosen.isdigit() and int(chosen) > 0:
        return int(chosen)
    return max(1, min(MAX_PARTS, (os.cpu_count() or 1) // CORES_PER_PART))


def part_workdir(workdir: Path, part: int) -> Path:
    """Where part `part` of the interpreter stage works (part 0 where the whole stage used to)."""
    return workdir / ("interpreter" if part == 0 else f"interpreter-{part}")


def take_prestarted(workdir: Path, interpret: bool, role: str = RECORD) -> GradingProcessHandle | None:
    """The process prestarted for `workdir` in this mode and role, if it is still waiting for its job."""
    proc = _prestarted.pop((str(workdir), interpret, role), None)
    if proc is not None and proc.poll() is not None:  # it ended before its job came: start a fresh one
        proc.wait()
        return None
    return proc


def stop_all() -> None:
    """Stop every grading process this process started that is still running (a warm grader, once a check
    is over or its terminal went away), prestarted ones included, but the spare's: they wait for the next check."""
    spare = {key: proc for key, proc in _prestarted.items() if _of_spare(key[0])}
    _prestarted.clear()
    _prestarted.update(spare)
    kept = [proc for proc in started if proc in spare.values()]
    while started:
        if (proc := started.pop()) not in kept and proc.poll() is None:
            kill(proc)
    started.extend(kept)
