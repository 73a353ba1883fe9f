"""A small class for the sharded and Slurm grading tests: puzzles 1 and 5, right, wrong, crashing, tampering,
and a submission that tries to overwrite the other learners' files."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from checks import verdict as V
from checks.authoring.wrong import source_of
from checks.instructor import classroom
from checks.registry import ROOT, get_puzzle
from tests.helpers import submission_text

CRASHES = """
import os


def softmax(x):
    os._exit(3)
"""

# Overwrites every other learner's file it can reach from its own folder, then answers wrongly.
OVERWRITES_OTHERS = """
from pathlib import Path

HERE = Path(__file__).resolve()
WRONG = "def vector_add(x, y):\\n    return x\\n\\n\\ndef softmax(x):\\n    return x\\n"
for folder in (HERE.parent, HERE.parent.parent):
    for learner in ("alice", "bob", "carol", "ivan"):
        for path in [*folder.glob(learner + "/*.py"), *folder.glob(learner + "_*.py")]:
            path.write_text(WRONG, encoding="utf-8")


def vector_add(x, y):
    return x
"""


def small_class() -> dict[str, tuple[str, str]]:
    """path under DIR -> (source, status `make grade` gives it)."""
    wrong = ROOT / "solutions" / "wrong" / "01_vector_add" / "grid_rounds_down.edit.yaml"
    tampering = submission_text(ROOT / "tests" / "submissions" / "tampering", "appends_verdict")
    return {
        "alice/01_vector_add.py": ((ROOT / "solutions" / "01_vector_add.py").read_text(encoding="utf-8"), V.PASSED),
        "alice/05_softmax.py": ((ROOT / "solutions" / "05_softmax.py").read_text(encoding="utf-8"), V.PASSED),
        "bob/1-add.py": (source_of(get_puzzle(1), wrong), V.FAILED),
        "carol_05.py": (CRASHES, V.CRASHED),
        "ivan/01.py": (tampering, V.TAMPERED),
        "mallory/01_vector_add.py": (OVERWRITES_OTHERS, V.FAILED),
    }


def write_small_class(root: Path) -> dict[str, str]:
    """Write the class into root; path under root -> expected status."""
    expected = {}
    for name, (source, status) in small_class().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(source, encoding="utf-8")
        expected[name] = status
    return expected


def make_class(root: Path, learners: range, puzzles: tuple[str, ...]) -> None:
    """A class of placeholder files, learner000/<N>_answer.py, for tests that do not really grade."""
    for i in learners:
        for number in puzzles:
            path = root / f"learner{i:03d}" / f"{number}_answer.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x = 1\n", encoding="utf-8")


STAND_IN = (V.PASSED, V.FAILED, V.CRASHED, V.TAMPERED, V.TIMEOUT)


def stand_in_grade_one(submission: classroom.Submission, timeout: float | None) -> classroom.Result:
    """In place of classroom.grade_one: a verdict fixed by the learner's number, a time fixed by the file's name."""
    status = STAND_IN[int(submission.learner.removeprefix("learner")) % len(STAND_IN)]
    seconds = 1.0 + len(submission.path.name) / 10
    details = [] if status == V.PASSED else [f"case 1 of {submission.path.name}: wrong", "a <detail> & more"]
    return classroom.Result(submission, status, f"{status} for {submission.learner}", seconds, details)


def run(argv: list[str]) -> tuple[int, str]:
    """classroom.main(argv): its exit status and what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = classroom.main(argv)
    return code, printed.getvalue()
