"""`make solutions`: every answer key must pass, every known-wrong kernel must fail; one table.

On a GPU the answer keys are graded (and timed) one at a time, alone on the device; the
known-wrong kernels are then graded several at a time (`--jobs`), without timing. On a machine without a GPU the
grading processes are forked from one that imported torch and Triton once (`checks.engine.processes.forking`;
CHECKS_FORK_SERVER=0: each started afresh).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from checks import verdict as V
from checks.authoring.wrong import known_wrong, materialize, name_of
from checks.engine.grade import grade
from checks.engine.judging.rules import rulebook
from checks.engine.processes import forking
from checks.engine.processes.prestart import PARTS_ENV
from checks.instructor.tables import markdown_table, ms_cell
from checks.registry import Puzzle, exit_on_registry_error, load_puzzles, puzzle_id


@dataclass
class PuzzleOutcome:
    """One puzzle's line of the table: its answer key's verdict, and its known-wrong kernels rejected or not."""

    puzzle: Puzzle
    key: V.Verdict | None = None
    wrong_total: int = 0
    wrong_rejected: int = 0
    surprises: list[str] = field(default_factory=list)


def reasons() -> set[str]:
    """What may reject a known-wrong kernel: the rulebook's rules and outcomes, and the statuses."""
    return rulebook.reasons()


@dataclass(frozen=True)
class Expectation:
    """One acceptable reason for rejecting a known-wrong kernel: the rule that fires, and text its report holds."""

    rule: str
    text: str = ""


def expectations(path: Path) -> list[Expectation]:
    """The `expect:` line of a known-wrong kernel: `rule[: text]` alternatives separated by `||`.

    Alternatives exist because a GPU and the interpreter can first notice different symptoms of one bug.
    """
    match = re.search(r"^\s*expect:\s*(.+)$", path.read_text(encoding="utf-8"), re.MULTILINE)
    if not match:
        return []
    found = []
    for part in match.group(1).split("||"):
        rule, _, text = part.strip().partition(":")
        found.append(Expectation(rule.strip(), text.strip()))
    return found


def meets(verdict: V.Verdict, expected: list[Expectation]) -> bool:
    report = V.format_verdict(verdict).lower()
    return any(e.rule == verdict.rule and e.text.lower() in report for e in expected)


def check_wrong(puzzle: Puzzle, path: Path) -> str:
    """'' when the known-wrong kernel is rejected for its stated reason, else what went wrong."""
    expected = expectations(path)
    timeout = 30 if any(e.rule == V.TIMEOUT for e in expected) else None
    with tempfile.TemporaryDirectory(prefix="wrong-") as folder:
        graded = materialize(puzzle, path, Path(folder))
        verdict = grade(puzzle, graded, timeout=timeout, time_it=False, first_failure=True)
    if verdict.passed:
        return f"{name_of(path)} PASSED but must fail"
    if verdict.status in (V.INTERNAL, V.ENVIRONMENT):
        return f"{name_of(path)}: {verdict.summary}"
    if not expected:
        return f"{name_of(path)} has no 'expect:' line saying why it must fail"
    if not meets(verdict, expected):
        wanted = " || ".join(f"{e.rule}: {e.text}" for e in expected)
        return f"{name_of(path)} was rejected by '{verdict.rule}', not by '{wanted}': {verdict.summary}"
    return ""


NOT_HERE = "not graded here (needs a Hopper GPU)"  # a Hopper step (Gluon) on a machine without one


def graded_here(row: PuzzleOutcome) -> bool:
    """Whether the row's answer key was graded on this machine (not planned, not a Hopper step away from Hopper)."""
    return row.key is not None and row.key.status != V.NEEDS_HOPPER


HEADER = (
    "# | puzzle | answer key | cases | key ms | baseline | baseline ms | speed vs baseline | wrong kernels rejected"
)


def table(rows: list[PuzzleOutcome]) -> list[str]:
    body = []
    for row in rows:
        p, key = row.puzzle, row.key
        if key is None:
            body.append([p.number, p.slug, "planned", *["-"] * 6])
            continue
        if not graded_here(row):
            body.append([p.number, p.slug, NOT_HERE, *["-"] * 6])
            continue
        ms = key.timings.get("ms", {}) if key.timings else {}
        base_name = p.baseline
        ratio = key.timings.get("ratio_vs_baseline") if key.timings else None
        times = [ms_cell(ms.get("yours")), base_name, ms_cell(ms.get(base_name)), f"{ratio:.2f}x" if ratio else "-"]
        status = "pass" if key.passed else key.status.upper()
        body.append([p.number, p.slug, status, str(len(key.cases)), *times, f"{row.wrong_rejected}/{row.wrong_total}"])
    return markdown_table(HEADER.split(" | "), body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks.instructor.solutions", description=__doc__.splitlines()[0])
    parser.add_argument("--puzzle", type=puzzle_id, action="append", help="only these puzzles (repeatable)")
    parser.add_argument(
        "--jobs", type=int, default=min(8, os.cpu_count() or 2), help="known-wrong kernels graded at once"
    )
    parser.add_argument("--out", type=Path, help="also write the table and the device line to this markdown file")
    args = parser.parse_args(argv)
    os.environ.setdefault(forking.ENV, "1")  # on a CPU, grading processes forked from one that imported torch once
    rulebook.checked_registry()  # a broken registry stops here, before any grading
    start = time.monotonic()
    rows = [PuzzleOutcome(p) for p in load_puzzles() if not args.puzzle or p.number in args.puzzle]
    device = ""
    for row in rows:
        if not row.puzzle.ready:
            print(f"puzzle {row.puzzle.number:>3} {row.puzzle.slug}: planned, skipped", flush=True)
            continue
        row.key = grade(row.puzzle, solution=True)
        if row.key.status == V.NEEDS_HOPPER:  # its known-wrong kernels are not graded here either
            print(f"puzzle {row.puzzle.number:>3} {row.puzzle.slug}: {NOT_HERE}", flush=True)
            continue
        device = device or (row.key.device if row.key.mode else "")
        word = "passed" if row.key.passed else "FAILED"
        extra = " " + row.key.timings["summary"] if row.key.timings.get("summary") else ""
        print(
            f"puzzle {row.puzzle.number:>3} {row.puzzle.slug}: answer key {word} ({row.key.seconds:.1f} s){extra}",
            flush=True,
        )
        if not row.key.passed:
            row.surprises.append(f"answer key: {row.key.summary}")
    jobs = [(row, path) for row in rows if graded_here(row) for path in known_wrong(row.puzzle)]
    for row, _ in jobs:
        row.wrong_total += 1
    print(f"grading {len(jobs)} known-wrong kernels, {args.jobs} at a time ...", flush=True)
    if args.jobs > 1:  # several gradings at once keep the cores busy: one interpreter process each
        os.environ.setdefault(PARTS_ENV, "1")
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(check_wrong, row.puzzle, path): (row, path) for row, path in jobs}
        for done, future in enumerate(as_completed(futures), start=1):
            (row, path), problem = futures[future], future.result()
            if problem:
                row.surprises.append(problem)
            else:
                row.wrong_rejected += 1
            # one line each as it finishes: a run stopped by a time limit still shows what it graded
            word = f"NOT AS EXPECTED: {problem}" if problem else "rejected as expected"
            print(f"  [{done}/{len(jobs)}] {row.puzzle.number} {name_of(path)}: {word}", flush=True)
    lines = table(rows)
    print()
    print("\n".join(lines))
    surprises = [f"puzzle {row.puzzle.number}: {s}" for row in rows for s in row.surprises]
    for line in surprises:
        print("  " + line)
    ok = not surprises
    elapsed = time.monotonic() - start
    verdict = (
        "every answer key passed and every known-wrong kernel was rejected" if ok else f"{len(surprises)} problem(s)"
    )
    skipped = [row.puzzle.number for row in rows if row.key is not None and not graded_here(row)]
    if skipped:
        verdict = verdict.replace("every answer key passed", "every answer key graded here passed")
        verdict += f"; {', '.join(skipped)} not graded here: the Hopper track needs a Hopper GPU (an H100 or H200)"
    print(f"\n{'OK' if ok else 'NOT OK'}: {verdict} ({elapsed:.0f} s on {device or 'this machine'}).")
    if args.out:
        import torch
        import triton

        when = datetime.date.today().isoformat()
        head = f"`make solutions` on {device}, torch {torch.__version__}, triton {triton.__version__}, {when}:"
        args.out.write_text("\n".join([head, "", *lines, "", *surprises]) + "\n", encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    with exit_on_registry_error():
        sys.exit(main())
