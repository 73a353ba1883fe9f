"""`python -m checks N [--file F] [--solution] [--json]`: grade one puzzle.

Exit status: 0 passed, 1 failed (or not gradeable), 2 usage error, a broken puzzles.yaml, or a Hopper step (16a, 16b,
16) checked where there is no Hopper GPU.

The verdict of a learner's submission is recorded in the progress file (`make progress`, see `checks.learner.progress`),
marked with the file's name when it is not the puzzle's notebook; runs of the course's own files under solutions/ are
not (the report says so). With --picture [PATH] a failure with wrong or unwritten values is also drawn to PATH, by
default build/pictures/NN_slug.png (see `checks.learner.picture`); without it, such a failure says how to get one.
Grading, the picture and the progress record are `checks.learner.session.check_session`'s, as for a notebook's check(N).
Every command a report suggests repeats the inputs this check used: FILE, --earlier and the seed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from checks import verdict as V
from checks.engine.submission import SubmissionError, check_submission_kind
from checks.learner.session import check_session
from checks.make_notes import make_note
from checks.registry import ROOT, UnknownPuzzle, get_puzzle, load_puzzles, shown

PICTURE = Path("build") / "pictures"  # --picture without a path: build/pictures/<the puzzle's stem>.png


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with one clear line, as argparse does, plus usage
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: {message}\n")


def parser() -> argparse.ArgumentParser:
    numbers = ", ".join(p.number for p in load_puzzles())
    p = _Parser(prog="python -m checks", description="Grade one puzzle of the Triton course.")
    p.add_argument("puzzle", help=f"the puzzle number ({numbers})")
    p.add_argument("--file", type=Path, help="grade this .py file or notebook instead of notebooks/NN_*.ipynb")
    p.add_argument("--solution", action="store_true", help="grade the bundled answer key")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.add_argument("--timeout", type=float, help="seconds for the whole submission (default: the puzzle's, 120)")
    p.add_argument(
        "--seed",
        type=int,
        help="a debugging run: the shapes of an earlier run (its report gives the seed), and data values drawn "
        "from the seed too, so the same seed gives the same report; not recorded in `make progress` (without "
        "--seed the data values are drawn afresh each run, where your code cannot see them)",
    )
    p.add_argument("--interpret", action="store_true", help="use Triton's CPU interpreter even on a GPU")
    p.add_argument("--no-time", action="store_true", help="on a GPU, skip the timing")
    p.add_argument(
        "--picture",
        type=Path,
        nargs="?",
        const=PICTURE,
        help="on failure, save a picture of where the output is wrong (default: build/pictures/NN_slug.png)",
    )
    p.add_argument(
        "--case",
        type=int,
        help="grade only case K, numbered as a report numbers them (as `make map` takes it); a check of one case is "
        "not recorded in `make progress`",
    )
    p.add_argument(
        "--earlier",
        type=Path,
        help="for a puzzle that builds on an earlier step (9 on 9a, 10 on 10b): your code of that step, a .py file or "
        "notebook (default: that step's notebook, used only where your code needs it)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    from checks.engine.phases import mark

    mark("grader started")
    code = _main(argv)
    mark("verdict given")
    note = make_note(code)
    if note:
        sys.stdout.flush()  # the verdict first; make's own line follows on stderr, as this note does
        print(note, file=sys.stderr)
    return code


def _main(argv: list[str] | None = None) -> int:
    from checks.engine.judging.rules import rulebook

    args = parser().parse_args(argv)
    rulebook.checked_registry()  # a broken registry: RegistryError, which `python -m checks` reports in one line
    try:
        puzzle = get_puzzle(args.puzzle)
    except UnknownPuzzle as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.file is not None and args.solution:
        print("Give either --file or --solution, not both.", file=sys.stderr)
        return 2
    try:
        for given in (args.file, args.earlier):
            if given is not None:
                check_submission_kind(given)
    except SubmissionError as exc:
        print(exc, file=sys.stderr)
        return 2
    learners = _is_learners(args)
    if args.case is not None:
        count = max(len(puzzle.cases.cpu), len(puzzle.cases.gpu))
        if not 1 <= args.case <= count:
            print(f"Puzzle {puzzle.number} has cases 1 to {count}: give --case a number among them.", file=sys.stderr)
            return 2
    picture = None
    if args.picture:
        picture = args.picture if args.picture != PICTURE else ROOT / PICTURE / f"{puzzle.stem}.png"
    try:
        checked = check_session(
            puzzle,
            interpret=args.interpret,
            picture=picture,
            record_as=_origin(args, puzzle.notebook) if learners and args.case is None else None,
            again=f"`make check PUZZLE={puzzle.number}` without FILE records the notebook's again.",
            file=args.file,
            solution=args.solution,
            timeout=args.timeout,
            seed=args.seed,
            time_it=not args.no_time,
            progress=None if args.json else V.progress_printer(puzzle.number, puzzle.title),
            earlier=args.earlier,
            cases=None if args.case is None else [args.case - 1],
        )
    except SubmissionError as exc:
        print(exc, file=sys.stderr)
        return 2
    verdict = checked.verdict
    V.repeat_case(verdict, args.case)
    note = checked.picture_note if args.picture else picture_advice(verdict, puzzle.stem) if checked.had_picture else ""
    if args.file is not None and not learners:
        note += ("\n" if note else "") + (
            f"Not recorded in `make progress`: {shown(args.file)} is one of the course's own files under solutions/; "
            "grade your own copy (FILE=your_file.py) to record a verdict."
        )
    if args.case is not None and learners:
        note += ("\n" if note else "") + (
            f"Not recorded in `make progress`: only case {args.case} was graded; check without --case to grade "
            "every case."
        )
    if checked.recorded:
        note += ("\n" if note else "") + checked.recorded
    print(verdict.to_json() if args.json else checked.report(learners=learners))
    if note:
        print(note, file=sys.stderr if args.json else sys.stdout)
    if verdict.status == V.NEEDS_HOPPER:  # nothing was graded: this machine cannot run the step's kernels
        return 2
    return 0 if verdict.passed else 1


def picture_advice(verdict: V.Verdict, stem: str) -> str:
    """The sentence that tells a terminal user how to see the failure's picture: where the output is wrong, or
    which elements past a tensor's end a kernel wrote."""
    from checks.engine.judging.rules import rulebook
    from checks.engine.judging.rules.pictures import ERROR_MAP

    flags = (f"--seed {verdict.seed} " if verdict.seed is not None else "") + "--picture"
    command = V.make_command("check", verdict.puzzle, verdict.file, flags, verdict.earlier)
    failed = [rulebook.picture_of(case.rule) for case in verdict.cases if not case.passed]
    picture = next((p for p in failed if p is not None and p.from_problem), ERROR_MAP)  # the one the judge saved
    return f"To see {picture.shows}, check again with {flags} ({command}) and open {PICTURE / stem}.png."


def _origin(args: argparse.Namespace, notebook: Path) -> str:
    """'' when the learner's notebook was graded, else the name of the file that was."""
    if args.file is None or args.file.resolve() == notebook.resolve():
        return ""
    return args.file.name


def _is_learners(args: argparse.Namespace) -> bool:
    """Whether this run graded the learner's own work (progress is recorded only for that)."""
    if args.solution:
        return False
    if args.file is None:
        return True
    return not args.file.resolve().is_relative_to(ROOT / "solutions")  # the course's own answer keys and wrong kernels
