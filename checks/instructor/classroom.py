"""`make grade DIR=...` (`python -m checks.instructor.classroom DIR [--out DIR2] [--timeout S]`): grade a class.

Instructors collect one file per learner per puzzle, a `.py` file or a notebook, named so that
both the learner and the puzzle are clear. Either naming works, and they can be mixed:

    DIR/<learner>/<NN>_anything.py        a folder per learner; the file name starts with the
    DIR/<learner>/<NN>_anything.ipynb     puzzle number (01_vector_add.py, 3-matmul.ipynb, 7.py, 10a_dx.py)
    DIR/<learner>_<NN>.py                 flat: the learner's name, then _ or -, then the puzzle
    DIR/<learner>_<NN>.ipynb              number and nothing else (alice_01.py, bob-smith-3.ipynb, carl_10b.py)

A lettered step is named like a puzzle: `10a_anything.py` is step 10a, `10_anything.py` puzzle 10.

A notebook is graded by its cell marked '# Puzzle N: your code', as `make check` does. A puzzle
that builds on an earlier step (9 on 9a, 10 on 10b) is graded with the same learner's file for that
step, where the submission uses its names (`make check ARGS="--earlier FILE"`). Names
that do not fit (no puzzle number, a puzzle that does not exist, folders inside learner
folders) are listed as warnings and skipped; files that are not .py or .ipynb, and hidden
files and folders (.ipynb_checkpoints, __pycache__), are ignored.

Every submission is graded in grading processes of its own with a time limit (120 s unless the
puzzle or --timeout says otherwise), exactly as `make check` grades it, so one that crashes,
hangs or cheats gets that verdict and the run goes on. On a machine without a GPU each one is forked from a
process that imported torch and Triton once (`checks.engine.processes.forking`; CHECKS_FORK_SERVER=0: started
afresh each time, seconds more each). Every file is read before any is graded,
and each is graded from a private folder that holds only its own copy: nothing a submission's code
writes can change what another learner is graded on, and the learners' folder is never graded in
place. `--jobs N` grades N at once, on a GPU too: speed is timed in interleaved rounds, and a timing
the other jobs made noisy gives no speed verdict (`checks.engine.timing`) rather than a wrong one.
`--shard I/N` grades one slice of the class and `--merge PART...` combines the slices
(`checks.instructor.shards`; `make grade-slurm` runs them on a Slurm cluster).

The results go to OUT/grades.csv (learner, puzzle, status, summary, seconds, file) and
OUT/grades.xml (JUnit: a testsuite per puzzle, a testcase per submission; a failure element when
its answers were wrong, an error element when it raised, crashed, ran out of time, or its grading
process was tampered with or ended before reporting; a skipped element for a Hopper step, status 'needs-hopper',
where there is no Hopper GPU: not graded here), OUT being build/grades unless --out says
otherwise. Each verdict that is not a pass is also printed with its summary as it comes.
Learners' progress files are not touched.

Exit status: 0 when the reports were written, whatever the learners' verdicts; 2 for a usage
error (no such folder, no submission in it).
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from checks import verdict as V
from checks.engine.grade import grade, graded_module
from checks.engine.judging.rules import rulebook
from checks.engine.processes import forking
from checks.engine.processes.landlock import unsealed_reason
from checks.engine.processes.prestart import PARTS_ENV
from checks.engine.submission import SubmissionError
from checks.instructor.class_records import NOT_GRADED, Copy, Notice, Result, Submission
from checks.registry import ROOT, Puzzle, UnknownPuzzle, exit_on_registry_error, get_puzzle, puzzle_id, shown

SUFFIXES = (".py", ".ipynb")
DEFAULT_OUT = ROOT / "build" / "grades"
_IN_FOLDER = re.compile(r"^(\d+[a-z]?)(?:[_\-. ].*)?$", re.IGNORECASE)  # 01_vector_add, 3-matmul, 7, 10a_dx
_FLAT = re.compile(r"^(.*\S)[_\-](\d+[a-z]?)$", re.IGNORECASE)  # alice_01, bob-smith-3, carl_10b
# JUnit's two kinds of not passing: a failure is a wrong answer; an error is a run that gave none.
ERRORS = (V.ERROR, V.TIMEOUT, V.CRASHED, V.TAMPERED, V.INTERNAL, V.ENVIRONMENT, NOT_GRADED)
NAMING = (
    "Name submissions DIR/<learner>/<NN>_anything.py (or .ipynb), or DIR/<learner>_<NN>.py (or .ipynb), "
    "where NN is the puzzle number (10a for a lettered step)."
)


def _hidden(name: str) -> bool:
    return name.startswith((".", "__"))


def _puzzle(number: str, path: Path, root: Path, warnings: list[Notice]) -> Puzzle | None:
    try:
        return get_puzzle(number)
    except UnknownPuzzle:
        warnings.append(Notice("name", f"{path.relative_to(root)}: there is no puzzle {puzzle_id(number)}; skipped."))
        return None


def find_submissions(root: Path) -> tuple[list[Submission], list[Notice]]:
    """The submissions under root, in order, and a notice for each name that does not fit and each second file."""
    found: list[Submission] = []
    warnings: list[Notice] = []
    for entry in sorted(root.iterdir()):
        if _hidden(entry.name):
            continue
        if entry.is_dir():
            found += _in_folder(entry, root, warnings)
        elif entry.is_file() and entry.suffix in SUFFIXES:
            found += _flat(entry, root, warnings)
    warnings += _doubled(found, root)
    found.sort(key=lambda s: (s.puzzle.order, s.learner, str(s.path)))
    steps = {(s.learner, s.puzzle.number): s.path for s in found}
    for s in found:  # a puzzle that builds on a step is graded with the same learner's file for that step
        s.earlier = steps.get((s.learner, s.puzzle.builds_on or ""))
    return found, warnings


def _in_folder(folder: Path, root: Path, warnings: list[Notice]) -> list[Submission]:
    """`<learner>/<NN>_anything.py`: the files in one learner's folder."""
    found = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(root)
        if any(_hidden(part) for part in rel.parts) or path.suffix not in SUFFIXES or not path.is_file():
            continue
        match = _IN_FOLDER.match(path.stem)
        if len(rel.parts) != 2:
            why = f"submissions go directly in the learner's folder ({folder.name}/), not deeper"
        elif not match:
            why = f"the file name does not start with a puzzle number (e.g. 01_vector_add{path.suffix})"
        else:
            puzzle = _puzzle(match.group(1), path, root, warnings)
            found += [Submission(folder.name, puzzle, path)] if puzzle else []
            continue
        warnings.append(Notice("name", f"{rel}: {why}; skipped."))
    return found


def _flat(path: Path, root: Path, warnings: list[Notice]) -> list[Submission]:
    """`<learner>_<NN>.py` directly in the folder."""
    match = _FLAT.match(path.stem)
    if not match:
        example = f"e.g. alice_01{path.suffix} or alice/01_vector_add{path.suffix}"
        why = f"the name does not say the learner and the puzzle ({example})"
        warnings.append(Notice("name", f"{path.name}: {why}; skipped."))
        return []
    puzzle = _puzzle(match.group(2), path, root, warnings)
    return [Submission(match.group(1), puzzle, path)] if puzzle else []


def _doubled(found: list[Submission], root: Path) -> list[Notice]:
    """A notice for each second file of one learner for one puzzle (both are graded)."""
    notices, seen = [], {}
    for s in found:
        key = (s.learner, s.puzzle.number)
        if key in seen:
            notices.append(
                Notice(
                    "doubled",
                    f"{s.path.relative_to(root)}: {s.learner} has another submission for puzzle {s.puzzle.number} "
                    f"({seen[key].relative_to(root)}); both are graded.",
                )
            )
        else:
            seen[key] = s.path
    return notices


def take_copy(submission: Submission) -> Copy:
    """Read one submission now: the bytes of a .py file, or the module made of a notebook's graded cell."""
    try:
        earlier = submission.earlier.read_bytes() if submission.earlier is not None else None
        if submission.path.suffix != ".ipynb":
            return Copy(data=submission.path.read_bytes(), earlier=earlier)
        with tempfile.TemporaryDirectory(prefix="checks-notebook-") as tmp:
            module, names = graded_module(submission.puzzle, submission.path, Path(tmp))
            return Copy(source=(module.read_text(encoding="utf-8"), names[str(module)]), earlier=earlier)
    except SubmissionError as exc:
        return Copy(error=str(exc))
    except OSError as exc:
        return Copy(error=f"Could not read {submission.path} ({exc}); check the file and grade again.")


def take_copies(submissions: list[Submission]) -> None:
    """Read every submission before any is graded, so that nothing one submission's code writes, anywhere,
    can change what another is graded on; each is then graded from a private folder of its own."""
    for s in submissions:
        if s.copy is None:
            s.copy = take_copy(s)


def _graded(submission: Submission, timeout: float | None) -> V.Verdict:
    """Grade the submission's copy in a fresh folder that holds nothing else, removed afterwards."""
    copy = submission.copy or take_copy(submission)
    if copy.error is not None:
        raise SubmissionError(copy.error)
    named = str(shown(submission.path))  # suggested commands name the learner's file, not the private copy
    with tempfile.TemporaryDirectory(prefix="checks-submission-") as tmp:
        earlier = None
        if copy.earlier is not None and submission.earlier is not None:  # the earlier step's file, copied too
            (earlier := Path(tmp) / "earlier" / submission.earlier.name).parent.mkdir()
            earlier.write_bytes(copy.earlier)
        if copy.source is not None:
            return grade(
                submission.puzzle, source=copy.source, timeout=timeout, progress=None, earlier=earlier, shown_as=named
            )
        private = Path(tmp) / submission.path.name  # the same name, so messages name the file as the learner does
        private.write_bytes(copy.data)
        return grade(submission.puzzle, private, timeout=timeout, progress=None, earlier=earlier, shown_as=named)


def grade_one(submission: Submission, timeout: float | None) -> Result:
    """One submission's verdict; whatever goes wrong becomes a result, never an exception."""
    start = time.monotonic()
    unsealed = unsealed_reason()
    try:
        verdict = _graded(submission, timeout)
        status, summary = verdict.status, verdict.summary
        failed = [c for c in verdict.cases if not c.passed]
        details = []
        if failed:
            first = failed[0]
            details = [f"case {first.index + 1} ({first.description}): {first.problem}", *first.details]
        details += verdict.details
        if verdict.output and not verdict.passed:
            details += ["What the submission printed (last lines):", *verdict.output.rstrip().splitlines()[-15:]]
    except SubmissionError as exc:
        status, summary, details = V.ERROR, str(exc), []
    except Exception as exc:  # noqa: BLE001 - a grader bug must not stop the class
        status, details = V.INTERNAL, []
        summary = f"The grader failed on this submission ({type(exc).__name__}: {exc})."
    return Result(submission, status, summary, time.monotonic() - start, details, unsealed)


def grade_all(submissions: list[Submission], root: Path, timeout: float | None, jobs: int = 1) -> list[Result]:
    """Grade every submission (`jobs` at a time), printing a line as each one finishes; results in order."""
    take_copies(submissions)
    width = len(str(len(submissions)))
    done = 0

    def report(r: Result) -> None:
        nonlocal done
        done += 1
        s = r.submission
        print(
            f"[{done:>{width}}/{len(submissions)}] puzzle {s.puzzle.number}, {s.learner} "
            f"({s.path.relative_to(root)}): {r.status} ({r.seconds:.1f} s)",
            flush=True,
        )
        if not r.passed:
            print(f"    {terminal_summary(r, timeout)}", flush=True)

    if jobs == 1:
        results = []
        for s in submissions:
            results.append(grade_one(s, timeout))
            report(results[-1])
        return results
    os.environ.setdefault(PARTS_ENV, "1")  # several gradings at once keep the cores busy: one interpreter process each
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # each grading runs in grading processes of its own
        futures = [pool.submit(grade_one, s, timeout) for s in submissions]
        for future in as_completed(futures):
            report(future.result())
        return [f.result() for f in futures]


def write_csv(results: list[Result], path: Path, root: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["learner", "puzzle", "status", "summary", "seconds", "file", "sealed"])
        for r in results:
            s = r.submission
            writer.writerow(
                [
                    s.learner,
                    s.puzzle.number,
                    r.status,
                    r.summary,
                    f"{r.seconds:.1f}",
                    s.path.relative_to(root).as_posix(),
                    "no: " + r.unsealed if r.unsealed else "yes",  # by the kernel (checks.engine.processes.landlock)
                ]
            )


def write_junit(results: list[Result], path: Path, root: Path) -> None:
    """JUnit XML: a testsuite per puzzle, a testcase per submission, a failure when it did not pass."""
    suites = ET.Element("testsuites", name="triton-puzzles")
    by_puzzle: dict[str, list[Result]] = {}
    for r in results:
        by_puzzle.setdefault(r.submission.puzzle.number, []).append(r)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
    for group in sorted(by_puzzle.values(), key=lambda g: g[0].submission.puzzle.order):
        puzzle = group[0].submission.puzzle
        suite = ET.SubElement(suites, "testsuite", name=f"puzzle {puzzle.label} {puzzle.slug}")
        counts = {"tests": len(group), "failures": 0, "errors": 0, "skipped": 0, "time": sum(r.seconds for r in group)}
        for r in group:
            s = r.submission
            case = ET.SubElement(
                suite,
                "testcase",
                name=s.learner,
                classname=f"puzzle{puzzle.stem}",
                file=s.path.relative_to(root).as_posix(),
                time=f"{r.seconds:.3f}",
            )
            if r.passed:
                continue
            if r.status in (V.NOT_READY, V.NEEDS_HOPPER):  # not graded here: neither a failure nor an error
                ET.SubElement(case, "skipped", message=r.summary)
                counts["skipped"] += 1
            elif r.status in ERRORS:  # no answer to judge: it raised, crashed, hung or was not graded
                ET.SubElement(case, "error", message=r.summary, type=r.status).text = "\n".join(r.details)
                counts["errors"] += 1
            else:
                ET.SubElement(case, "failure", message=r.summary, type=r.status).text = "\n".join(r.details)
                counts["failures"] += 1
        for key, value in counts.items():
            suite.set(key, f"{value:.3f}" if key == "time" else str(value))
            totals[key] += value
    for key, value in totals.items():
        suites.set(key, f"{value:.3f}" if key == "time" else str(int(value)))
    ET.indent(suites)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: {message}\n")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(
        prog="python -m checks.instructor.classroom", description="Grade a folder of submissions. " + NAMING
    )
    parser.add_argument("dir", type=Path, help="the folder of submissions")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="where to write grades.csv and grades.xml (default: build/grades)"
    )
    parser.add_argument("--timeout", type=float, help="seconds per submission (default: the puzzle's, 120)")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="submissions graded at once (default 1); on a GPU a timing others made noisy gives no speed verdict",
    )
    parser.add_argument(
        "--shard",
        metavar="I/N",
        help="grade only the I-th of N slices of the class (balanced by expected time) and write its part report",
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="PART",
        help="combine the parts of --shard runs (their --out folders, one per shard) into the class's reports",
    )
    args = parser.parse_args(argv)
    rulebook.checked_registry()  # a broken registry stops here, before any grading
    root: Path = args.dir
    if not root.is_dir():
        print(
            f"There is no folder {root}: give the folder of submissions, e.g. make grade DIR=submissions/.",
            file=sys.stderr,
        )
        return 2
    if args.jobs < 1:
        print("--jobs must be 1 or more.", file=sys.stderr)
        return 2
    if args.timeout is not None and args.timeout <= 0:
        print("--timeout must be a positive number of seconds.", file=sys.stderr)
        return 2
    if args.shard and args.merge:
        print("Give --shard (grade one slice) or --merge (combine the slices), not both.", file=sys.stderr)
        return 2
    from checks.instructor import shards  # it builds on this module's results and reports

    try:
        shard = shards.parse_shard(args.shard) if args.shard else None
    except shards.ShardError as exc:
        print(exc, file=sys.stderr)
        return 2
    submissions, warnings = find_submissions(root)
    if args.merge:
        try:
            results, warnings, missing, count = shards.merge(args.merge, root, (submissions, warnings))
        except shards.ShardError as exc:
            print(exc, file=sys.stderr)
            return 2
        for index in missing:
            print(f"Shard {index}/{count} never finished: its submissions are listed as not graded.")
        for w in warnings:
            print(f"warning: {w.text}")
        return write_reports(results, warnings, root, args.out, args.timeout)
    for w in warnings:
        print(f"warning: {w.text}")
    if not submissions:
        print(f"No submissions found in {root}. {NAMING}", file=sys.stderr)
        return 2
    learners = len({s.learner for s in submissions})
    os.environ.setdefault(forking.ENV, "1")  # on a CPU, grading processes forked from one that imported torch once
    if shard is None:
        print(f"Grading {len(submissions)} submissions from {learners} learners in {root}.")
        results = grade_all(submissions, root, args.timeout, args.jobs)
        return write_reports(results, warnings, root, args.out, args.timeout)
    index, count = shard
    plan = shards.assign(submissions, root, count)
    mine = [s for s, k in zip(submissions, plan, strict=True) if k == index]
    print(
        f"Grading shard {index}/{count}: {len(mine)} of the {len(submissions)} submissions from {learners} learners "
        f"in {root}."
    )
    results = grade_all(mine, root, args.timeout, args.jobs) if mine else []
    code = write_reports(results, [], root, args.out, args.timeout)
    part = shards.write_part(args.out, index, count, submissions, plan, warnings, results, root)
    print(f"Part report for the merge: {part}")
    return code


def write_reports(results: list[Result], warnings: list[Notice], root: Path, out: Path, timeout: float | None) -> int:
    """OUT/grades.csv and OUT/grades.xml, then the closing lines on the terminal."""
    out.mkdir(parents=True, exist_ok=True)
    csv_path, xml_path = out / "grades.csv", out / "grades.xml"
    write_csv(results, csv_path, root)
    write_junit(results, xml_path, root)
    print()
    for line in class_summary(results, warnings, root, timeout):
        print(line)
    print(f"Reports: {csv_path} and {xml_path}")
    return 0


def limit_of(result: Result, timeout: float | None) -> float:
    return timeout if timeout is not None else result.submission.puzzle.timeout


def terminal_summary(result: Result, timeout: float | None) -> str:
    """The one line under a result that did not pass; a timeout gets the instructor's version."""
    if result.status == V.TIMEOUT:
        return (
            f"ran past the {limit_of(result, timeout):g} s time limit (an endless loop, or just slow); "
            "the summary at the end says how to allow longer."
        )
    return result.summary


def class_summary(results: list[Result], warnings: list[Notice], root: Path, timeout: float | None) -> list[str]:
    """The closing lines: how many passed, and what the instructor may want to do about the rest."""
    lines = [f"{sum(r.passed for r in results)} of {len(results)} submissions passed."]
    tampered = [r for r in results if r.status == V.TAMPERED]
    if tampered:
        lines.append(
            f"{len(tampered)} submission(s) were not graded because their grading process was tampered with "
            "or ended before reporting (status 'tampered'; the reason is in their rows of the reports): "
            "read those files before trusting any result for them."
        )
    hopper = [r for r in results if r.status == V.NEEDS_HOPPER]
    if hopper:
        steps = ", ".join(sorted({r.submission.puzzle.number for r in hopper}))
        lines.append(
            f"{len(hopper)} submission(s) of the Hopper track ({steps}) were not graded here (status "
            f"'{V.NEEDS_HOPPER}'): they need a Hopper GPU (an H100 or H200), since Triton's interpreter cannot run "
            f"Gluon; grade them again on a machine with one, e.g. make grade DIR={root}."
        )
    lost = [r for r in results if r.status == NOT_GRADED]
    if lost:
        lines.append(
            f"{len(lost)} submission(s) were not graded because their shard never finished (each says which): "
            "grade that shard again with --shard I/N, then merge again."
        )
    slow = [r for r in results if r.status == V.TIMEOUT]
    if slow:
        longest = max(limit_of(r, timeout) for r in slow)
        longer = f"--timeout {max(300, 2 * longest):g}"
        lines.append(
            f"{len(slow)} submission(s) ran past the {longest:g} s time limit: if they are only slow, "
            f'grade again with more time, e.g. make grade DIR={root} ARGS="{longer}".'
        )
    names = [w for w in warnings if w.kind == "name"]
    doubled = [w for w in warnings if w.kind == "doubled"]
    if names:
        lines.append(
            f"{len(names)} file(s) skipped because their names do not fit (listed above as warnings): "
            f"rename them and grade again. {NAMING}"
        )
    if doubled:
        lines.append(
            f"{len(doubled)} submission(s) doubled: the learner has another file for the same puzzle "
            "(listed above as warnings); every file was graded and has its own row in the reports, "
            "so remove the extra ones and grade again if only one should count."
        )
    return lines


if __name__ == "__main__":
    with exit_on_registry_error():
        raise SystemExit(main())
