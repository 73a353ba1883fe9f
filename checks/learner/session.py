"""One check of one puzzle as a learner runs it, at a terminal (`python -m checks N`, `checks.cli`) or in a
notebook (`check(N)`, `checks.learner.notebook`).

`check_session` grades the submission in grading processes started ahead (`grade_ahead`), draws the failure's
picture while the files the grading left are still there, and records the verdict for `make progress`; it
prints nothing after the grading's own progress lines, and gives back what each caller prints in its own way
(`Checked`): the report, the picture and its sentence, and the sentence that says where a recorded verdict
came from.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checks import verdict as V
from checks.engine.processes.prestart import check_folder, prestart_spare
from checks.learner import progress
from checks.registry import Puzzle, load_puzzles, shown


@dataclass
class Checked:
    """What one check gives its caller to print."""

    verdict: V.Verdict
    title: str  # the puzzle's, for the report
    had_picture: bool = False  # the failure came with a picture's data: wrong or unwritten output values
    picture: Path | None = None  # the PNG drawn from it, where one was asked for and could be drawn
    picture_note: str = ""  # where that PNG is, or why there is none (`checks.learner.picture.draw_verdict`)
    recorded: str = ""  # where the verdict was recorded from a file other than the puzzle's notebook, that file

    def report(self, notebook: bool = False, learners: bool = True) -> str:
        """The verdict as the learner reads it; after a pass of the learner's own code (`learners`) that was not a
        debugging run, what comes next, said the way of a terminal or of a `notebook`."""
        text = V.format_verdict(self.verdict, self.title, cases_shown=bool(self.verdict.mode))
        if self.verdict.passed and learners and not self.verdict.debugging:
            text += "\n" + what_next(self.verdict.puzzle, notebook, self.verdict.file)
        return text


def what_next(number: int | str, notebook: bool = False, file: str = "") -> str:
    """The sentence after a pass: the next puzzle in the course's order, and how to open and check it."""
    ready = [p for p in load_puzzles() if p.ready]
    at = next((i for i, p in enumerate(ready) if str(p.number) == str(number)), len(ready) - 1)
    if at + 1 >= len(ready):
        entries = progress.load()["puzzles"]
        left = [p for p in ready if not entries.get(progress.puzzle_id(p.number), {}).get("first_passed")]
        if not left:
            return "That was the last puzzle of the course, and you have passed every one: `make progress` lists them."
        return (
            f"That was the last puzzle of the course; {len(left)} of {len(ready)} {V.agree(len(left), 'is', 'are')} "
            "not passed yet "
            f"({', '.join(str(p.number) for p in left)}): next, puzzle {left[0].number} ({left[0].title}); "
            "`make progress` shows each one's last verdict."
        )
    step = ready[at + 1]
    if notebook:
        how = f"open {step.notebook.name} and, once your code runs, call check({step.literal}) there"
    else:
        again = f"make check PUZZLE={step.number}" + (" FILE=your_file.py" if file else "")
        how = f"open {shown(step.notebook)}, then `{again}`"
    if step.needs_hopper:
        how += " on a machine with a Hopper GPU (an H100 or H200)"
    return f"Next: puzzle {step.number} ({step.title}): {how}."


def grade_ahead(puzzle: Puzzle, interpret: bool = False, spare: bool = False, **options: Any) -> V.Verdict:
    """`grade` (with `options`), in grading processes started before this process imports torch: a warm grader's
    or a notebook's spare ones, else started now (seconds sooner either way). With `spare`, the next check's
    are started afterwards (a notebook's kernel, where they import torch and Triton before that check)."""
    try:
        # a Hopper step starts no grading processes ahead: away from a Hopper GPU it is not graded at all
        with check_folder(interpret, start=puzzle.ready and not puzzle.needs_hopper) as workdir:
            from checks.engine.grade import grade  # imports torch, as the grading processes started above do

            return grade(puzzle, interpret=interpret, workdir=workdir, **options)
    finally:
        if spare:
            prestart_spare(interpret=interpret)


def check_session(
    puzzle: Puzzle,
    *,
    interpret: bool = False,
    spare: bool = False,
    picture: Path | None = None,
    record_as: str | None = "",
    again: str = "",
    **options: Any,
) -> Checked:
    """Grade `puzzle` (`grade_ahead`, `options` for `checks.engine.grade.grade`), then:

    - every command the verdict suggests repeats `earlier` when it is a file;
    - with `picture`, the failure's picture is drawn to that PNG (before the grading's files go);
    - unless `record_as` is None, the verdict is recorded for `make progress` as from `record_as` ('' for the
      puzzle's notebook); from another file, `recorded` says so, and ends with `again`: how to record the
      notebook's verdict again.
    """
    with tempfile.TemporaryDirectory(prefix="checks-picture-") as pictures:
        verdict = grade_ahead(puzzle, interpret=interpret, spare=spare, artifacts=Path(pictures), **options)
        V.repeat_seed(verdict)  # a debugging run's commands repeat its seed
        earlier = options.get("earlier")
        if isinstance(earlier, Path):  # every command the verdict suggests repeats it
            V.repeat_earlier(verdict, str(shown(earlier)))
        checked = Checked(verdict, puzzle.title, had_picture=bool(verdict.picture_data))
        if picture is not None:
            from checks.learner.picture import draw_verdict

            checked.picture, checked.picture_note = draw_verdict(verdict, picture)
        verdict.picture_data = ""  # the error map lived in a temporary folder; a PNG is what stays
    if record_as is not None and progress.keeps_pass(verdict):
        checked.recorded = (
            f"Not recorded in `make progress`: this check graded no case, so puzzle {puzzle.number}'s recorded pass "
            "stays."
        )
    elif record_as is not None and progress.record(verdict, source=record_as) and record_as:
        checked.recorded = (
            f"Recorded in `make progress` as puzzle {puzzle.number}'s last verdict, from {record_as} "
            f"(not {puzzle.notebook.name}); {again}"
        )
    return checked
