"""Your progress: the last verdict of each puzzle, and how many hints you have seen.

`make progress` (`python -m checks.learner.progress`) prints the table. The grader records a verdict
each time you check a puzzle (`make check`, `python -m checks N`, or `check(N)` in a notebook);
`make hint` remembers how many hints it has shown. Everything lives in one small JSON file,
`.progress.json` at the course root (git-ignored, never committed). A missing or unreadable
file is never fatal: the grader starts a fresh one and says so once.

The file can be moved with the environment variable CHECKS_PROGRESS_FILE. Under pytest (when
PYTEST_CURRENT_TEST is set and CHECKS_PROGRESS_FILE is not) nothing is written to disk, so
running the course's tests never changes your progress.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from checks import verdict as V
from checks.registry import ROOT, load_puzzles, puzzle_id

DEFAULT_FILE = ROOT / ".progress.json"
ENV_FILE = "CHECKS_PROGRESS_FILE"
VERSION = 1
# The verdicts worth remembering: those about the learner's code, not about the machine or the course.
RECORDED = (V.PASSED, V.FAILED, V.ERROR, V.TIMEOUT, V.CRASHED)
NOT_STARTED = "not started"  # recorded instead of "error" when the code graded is still the stub
NEEDS_HOPPER = "needs a Hopper GPU"  # a Hopper step (Gluon) with no verdict yet: graded on an H100 or H200 only

_memory: dict[str, Any] = {}  # the store when there is no file (under pytest)
_warned: set[tuple[str, str]] = set()  # (file, kind of problem) already reported in this process


def progress_file() -> Path | None:
    """Where progress is kept, or None when it is kept only in memory (under pytest)."""
    override = os.environ.get(ENV_FILE)
    if override:
        return Path(override)
    if os.environ.get("PYTEST_CURRENT_TEST"):
        return None
    return DEFAULT_FILE


def _fresh() -> dict[str, Any]:
    return {"version": VERSION, "puzzles": {}}


def _say_once(path: Path, kind: str, message: str) -> None:
    if (str(path), kind) not in _warned:
        _warned.add((str(path), kind))
        print(message, file=sys.stderr)


def load(path: Path | None = None) -> dict[str, Any]:
    """The stored progress; a fresh record when the file is missing or cannot be read."""
    path = path if path is not None else progress_file()
    if path is None:
        return copy.deepcopy(_memory) if _memory else _fresh()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return _fresh()
    except OSError as exc:
        _say_once(path, "read", f"Could not read your progress file {path} ({exc.strerror}); starting a fresh one.")
        return _fresh()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("puzzles"), dict):
        _say_once(
            path,
            "read",
            f"Your progress file {path} is damaged (not the JSON the grader writes); "
            "starting a fresh one, so earlier verdicts and hint counts are forgotten.",
        )
        return _fresh()
    data["puzzles"] = {k: v for k, v in data["puzzles"].items() if isinstance(v, dict)}
    return data


def save(data: dict[str, Any], path: Path | None = None) -> bool:
    """Write progress atomically (a temporary file, then os.replace); False when it could not be written."""
    path = path if path is not None else progress_file()
    if path is None:
        _memory.clear()
        _memory.update(copy.deepcopy(data))
        return True
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return True
    except OSError as exc:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        _say_once(path, "save", f"Could not save your progress to {path} ({exc.strerror}); grading is not affected.")
        return False


def entry(data: dict[str, Any], number: int | str) -> dict[str, Any]:
    """The record of one puzzle inside loaded progress (created empty when missing)."""
    return data["puzzles"].setdefault(puzzle_id(number), {})


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def record(verdict: V.Verdict, path: Path | None = None, source: str = "") -> bool:
    """Remember a verdict: status, when, mode, device, and the best GPU speed ratio so far.

    `source` names the file graded when it was not the puzzle's notebook (`--file answer.py`);
    `make progress` shows it beside the verdict, so a check of another file is never mistaken
    for the notebook's. Verdicts that say nothing about the learner's code (not-ready,
    environment, internal, tampered) are not recorded, nor is a debugging run (`--seed`), whose data values the
    learner can know; nor is a check that graded nothing (`could_not_grade`) where a pass is recorded. Returns
    whether the verdict was recorded.
    """
    if verdict.status not in RECORDED or verdict.debugging:
        return False
    data = load(path)
    e = entry(data, verdict.puzzle)
    if could_not_grade(verdict) and e.get("status") == V.PASSED:
        return False  # a check that graded nothing never takes the place of a recorded pass
    e.update(
        status=NOT_STARTED if verdict.rule == "stub" else verdict.status,
        time=now(),
        mode=verdict.mode,
        device=verdict.device,
        summary=verdict.summary[:300],
        source=source,
    )
    ratio = verdict.timings.get("ratio_vs_baseline") if verdict.timings else None
    if isinstance(ratio, (int, float)) and ratio > 0:
        e["last_ratio"] = float(ratio)
        best = e.get("best_ratio")
        e["best_ratio"] = max(float(ratio), float(best) if isinstance(best, (int, float)) else 0.0)
    if verdict.passed and not e.get("first_passed"):
        e["first_passed"] = e["time"]
    return save(data, path)


def could_not_grade(verdict: V.Verdict) -> bool:
    """Whether a check graded no case of the code: it ended before (the step it builds on still the stub, code that
    does not load, a missing name)."""
    return verdict.status == V.ERROR and not verdict.cases


def keeps_pass(verdict: V.Verdict, path: Path | None = None) -> bool:
    """Whether `record` leaves this puzzle's recorded pass in place because the check could not grade the code."""
    if not could_not_grade(verdict) or verdict.debugging:
        return False
    return load(path)["puzzles"].get(puzzle_id(verdict.puzzle), {}).get("status") == V.PASSED


def hints_shown(number: int | str, path: Path | None = None) -> int:
    value = load(path)["puzzles"].get(puzzle_id(number), {}).get("hints_shown", 0)
    return value if isinstance(value, int) and value >= 0 else 0


def set_hints_shown(number: int | str, count: int, path: Path | None = None) -> bool:
    data = load(path)
    entry(data, number)["hints_shown"] = count
    return save(data, path)


def _when(stamp: str | None) -> str:
    if not stamp:
        return "-"
    try:
        return datetime.fromisoformat(stamp).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return "-"


def table(data: dict[str, Any]) -> list[str]:
    """The rows of `make progress`: every puzzle, with its last verdict (and which file, when not the notebook)."""
    header = ("#", "puzzle", "your last verdict", "when", "best GPU ratio", "hints")
    rows = []
    for p in load_puzzles():
        e = data["puzzles"].get(str(p.number), {})
        last = str(e.get("status", NEEDS_HOPPER if p.needs_hopper else "-" if p.ready else "(no notebook yet)"))
        if last != V.PASSED and e.get("first_passed"):
            last += " (passed before)"
        if e.get("status") and e.get("mode") == "interpreter":
            last += ", CPU"
        if e.get("status") and e.get("source"):
            last += f", from {e['source']}"
        ratio = e.get("best_ratio")
        ratio_text = f"{ratio:.2f}x" if isinstance(ratio, (int, float)) else "-"
        hints = f"{e.get('hints_shown', 0)}/{len(p.hints)}" if p.hints else "-"
        rows.append((str(p.number), p.title, last, _when(e.get("time")), ratio_text, hints))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [line(header), line(tuple("-" * w for w in widths)), *[line(r) for r in rows]]


def next_step(data: dict[str, Any]) -> str:
    """One sentence: what to do next."""
    ready = [p for p in load_puzzles() if p.ready]
    passed = [p for p in ready if data["puzzles"].get(p.number, {}).get("first_passed")]
    todo = [p for p in ready if p not in passed]
    head = f"{len(passed)} of {len(ready)} puzzles passed."
    if not todo:
        return head + " Every puzzle is done; on a GPU, `make check PUZZLE=N` again records your speed."
    p = todo[0]
    where = " on a machine with a Hopper GPU (an H100 or H200)" if p.needs_hopper else ""
    check = f"`make check PUZZLE={p.number}`{where}"
    return head + f" Next: puzzle {p.number} ({p.title}) in {p.notebook.name}, then {check}."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks.learner.progress", description="Print your progress.")
    parser.add_argument("--file", type=Path, help=f"the progress file (default: {DEFAULT_FILE.name} at the root)")
    args = parser.parse_args(argv)
    path = args.file if args.file is not None else progress_file()
    data = load(path)
    print("\n".join(table(data)))
    print()
    print(next_step(data))
    if any(e.get("source") for e in data["puzzles"].values() if e.get("status")):
        print(
            "A verdict 'from FILE' came from `make check FILE=...`, not from the puzzle's notebook; "
            "`make check PUZZLE=N` without FILE grades the notebook and records its verdict instead."
        )
    if path is not None and not path.exists():
        print(f"(No verdicts recorded yet: they are kept in {path.name} once you check a puzzle.)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
