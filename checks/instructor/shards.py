"""A class cut into shards, graded apart (one GPU each) and merged into the reports `make grade` writes.

`python -m checks.instructor.classroom DIR --shard I/N` grades the I-th of N slices of DIR's
submissions and writes that slice's reports, plus `part.json` (every result with its details, and
the whole plan), into its --out folder. `... DIR --merge PART... --out OUT` reads the parts and
writes OUT/grades.csv and OUT/grades.xml exactly as `make grade DIR` would have (same rows, same
order, same totals); a shard whose part is missing never finished, and its submissions are listed
as not graded, with the command that grades that shard alone.

The plan: submissions are laid on a ring in the order of a hash of their path under DIR, and the
ring is cut into N arcs of equal expected grading time (an attention puzzle weighs more). So the
slices are disjoint and the same on every machine, each shard's expected time is within one
submission of the mean, and a file added to the folder moves at most a few submissions on each cut
(a re-run of one shard after a late file still grades almost the same slice; the merge goes by the
plan written in the parts, not by the folder as it is later).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from checks.instructor.class_records import NOT_GRADED, Notice, Result, Submission
from checks.registry import get_puzzle

PART = "part.json"
FORMAT = 1
# Expected seconds to grade one submission on a GPU: on an H100 the answer keys of puzzles 1-7 took
# 11-15 s, of the attention puzzles 8-10 17-28 s (bench/results/check-latency-gpu.md).
ATTENTION_SECONDS = 25.0
OTHER_SECONDS = 13.0
_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class ShardError(ValueError):
    """A shard or a set of parts that cannot be used, with what to do instead."""


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` as (I, N), 1 <= I <= N."""
    match = _SHARD.match(text)
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise ShardError(f"--shard takes I/N with 1 <= I <= N (e.g. --shard 2/8), not {text!r}.")
    return int(match.group(1)), int(match.group(2))


def expected_seconds(submission: Submission) -> float:
    return ATTENTION_SECONDS if "attention" in submission.puzzle.slug else OTHER_SECONDS


def relative(submission: Submission, root: Path) -> str:
    return submission.path.relative_to(root).as_posix()


def _ring_position(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big")


def assign(submissions: list[Submission], root: Path, count: int) -> list[int]:
    """The shard (1..count) of each submission: the ring of path hashes cut into arcs of equal expected time."""
    ring = sorted(range(len(submissions)), key=lambda i: (_ring_position(relative(submissions[i], root)), i))
    total = sum(expected_seconds(s) for s in submissions) or 1.0
    shards = [0] * len(submissions)
    before = 0.0
    for i in ring:
        weight = expected_seconds(submissions[i])
        middle = before + weight / 2  # a submission belongs to the arc its middle falls in
        shards[i] = min(count, int(middle * count / total) + 1)
        before += weight
    return shards


@dataclass
class Part:
    """One shard's report as the merge reads it."""

    shard: int
    count: int
    plan: list[dict[str, str | int]]  # every submission in report order: file, learner, puzzle, shard
    warnings: list[Notice]
    results: dict[str, Result]  # by file under DIR


def write_part(
    out: Path,
    shard: int,
    count: int,
    submissions: list[Submission],
    shards: list[int],
    warnings: list[Notice],
    results: list[Result],
    root: Path,
) -> Path:
    """OUT/part.json: the plan, the folder's warnings and this shard's results; written whole or not at all."""
    data = {
        "format": FORMAT,
        "shard": shard,
        "count": count,
        "plan": [
            {"file": relative(s, root), "learner": s.learner, "puzzle": s.puzzle.number, "shard": k}
            for s, k in zip(submissions, shards, strict=True)
        ],
        "warnings": [{"kind": w.kind, "text": w.text} for w in warnings],
        "results": [
            {
                "file": relative(r.submission, root),
                "status": r.status,
                "summary": r.summary,
                "seconds": r.seconds,
                "details": r.details,
                "unsealed": r.unsealed,
            }
            for r in results
        ],
    }
    path = out / PART
    unfinished = out / f".{PART}.{os.getpid()}"
    unfinished.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(unfinished, path)  # a shard cut short leaves no part.json: the merge reports it as never finished
    return path


def read_part(place: Path, root: Path) -> Part | None:
    """The part in a folder (or the part.json given); None when it is missing, i.e. the shard never finished."""
    path = place / PART if place.is_dir() or not place.suffix else place
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ShardError(f"{path} is not a shard's report ({exc}); grade that shard again.") from exc
    if data.get("format") != FORMAT:
        raise ShardError(f"{path} was written by another version of the grader; grade that shard again.")
    plan = data["plan"]
    by_file = {entry["file"]: entry for entry in plan}
    results = {}
    for row in data["results"]:
        entry = by_file[row["file"]]
        submission = Submission(entry["learner"], get_puzzle(entry["puzzle"]), root / entry["file"])
        results[row["file"]] = Result(
            submission, row["status"], row["summary"], row["seconds"], row["details"], row.get("unsealed", "")
        )
    warnings = [Notice(w["kind"], w["text"]) for w in data["warnings"]]
    return Part(data["shard"], data["count"], plan, warnings, results)


def plan_of(submissions: list[Submission], root: Path, count: int) -> list[dict[str, str | int]]:
    return [
        {"file": relative(s, root), "learner": s.learner, "puzzle": s.puzzle.number, "shard": k}
        for s, k in zip(submissions, assign(submissions, root, count), strict=True)
    ]


def merge(
    places: list[Path], root: Path, fallback: tuple[list[Submission], list[Notice]] | None = None
) -> tuple[list[Result], list[Notice], list[int], int]:
    """The class's results in report order, the folder's warnings, the shards that never finished, and N.

    The plan comes from the parts (all must share it); when none finished, from the folder as it is now
    (`fallback`: its submissions and warnings), cut into as many shards as parts were given.
    """
    parts = [part for place in places if (part := read_part(place, root)) is not None]
    if parts:
        first = parts[0]
        for part in parts[1:]:
            if part.plan != first.plan or part.count != first.count:
                raise ShardError(
                    f"The parts of shard {first.shard}/{first.count} and {part.shard}/{part.count} were cut from "
                    "different folders or a different number of shards; merge parts of one run only."
                )
        plan, warnings, count = first.plan, first.warnings, first.count
    else:
        if fallback is None:
            raise ShardError("No shard finished, and there is no folder to list the submissions from.")
        submissions, warnings = fallback
        count = len(places)
        plan = plan_of(submissions, root, count)
    done: dict[str, Result] = {}
    for part in parts:
        done.update(part.results)
    finished = {part.shard for part in parts}
    missing = sorted(set(range(1, count + 1)) - finished)
    results = []
    for entry in plan:
        file = str(entry["file"])
        if file in done:
            results.append(done[file])
            continue
        shard = int(entry["shard"])
        submission = Submission(str(entry["learner"]), get_puzzle(str(entry["puzzle"])), root / file)
        summary = (
            f"Not graded: shard {shard}/{count}, which holds this submission, never finished; grade that shard "
            f"again with --shard {shard}/{count}, then merge again."
        )
        results.append(Result(submission, NOT_GRADED, summary, 0.0))
    return results, warnings, missing, count
