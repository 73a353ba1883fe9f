"""`make hint PUZZLE=N` (`python -m checks.learner.hints N`): one more hint each time you ask.

Each puzzle keeps two or three hints in `puzzles.yaml`, from a nudge to nearly the whole idea
(never the code itself). Every call reveals the next one and repeats those you have already
seen; how many you have seen is kept in the progress file (see `checks.learner.progress`), so the
terminal and `hint(N)` in a notebook share the count. `--reset` starts a puzzle's hints over. After the last
hint, the way to look further is the terminal's (`make map PUZZLE=N`) or the notebook's (`show(N)`), where the
hints were asked for.

Exit status: 0, or 2 for an unknown puzzle.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from checks.learner import progress
from checks.registry import UnknownPuzzle, get_puzzle

TERMINAL, NOTEBOOK = "terminal", "notebook"  # where the hints are shown: `make hint`, or hint(N)
MAP_COMMAND = {TERMINAL: "`make map PUZZLE={number}`", NOTEBOOK: "`show({literal})` in the notebook"}
STILL_STUCK = (
    "Still stuck? Run {map} after a check: it draws which program read and wrote what, beside the answer key's. "
    "The Debugging section of the reference page (notebooks/reference.ipynb) shows how to print inside a kernel "
    "and what Triton's common error messages mean."
)

# a Hopper step has no access map (Triton's interpreter, which records it, cannot run Gluon)
STILL_STUCK_HOPPER = (
    "Still stuck? Re-read the lesson's picture of who waits on which barrier, then check again with a --seed from "
    "the last report: the same shapes and values each time, so one change at a time shows what it does."
)


def reveal(number: int | str, path: Path | None = None, where: str = TERMINAL) -> list[str]:
    """Reveal one more hint of a puzzle (never more than it has) and return the lines to print, for a terminal
    or a notebook (`where`: which way to draw an access map the last lines point to).

    Raises UnknownPuzzle for a number the registry does not list.
    """
    puzzle = get_puzzle(number)
    number = puzzle.number
    total = len(puzzle.hints)
    if total == 0:
        return [
            f"Puzzle {number} ({puzzle.title}) has no hints yet: re-read its notebook, whose "
            "explanation and spec come before the cell you fill in."
        ]
    before = min(progress.hints_shown(number, path), total)
    shown = min(before + 1, total)
    if shown != before:
        progress.set_hints_shown(number, shown, path)
    lines = [f"Puzzle {number} ({puzzle.title}):"]
    for i in range(shown):
        lines.append(f"  Hint {i + 1} of {total}: {puzzle.hints[i]}")
    if before == total:
        lines.append(f"You have now seen all {total} hints for this puzzle; there are no more.")
    elif shown == total:
        lines.append("That was the last hint.")
    else:
        lines.append(f"Ask again for hint {shown + 1} of {total} if you are still stuck.")
    if shown == total and puzzle.needs_hopper:
        lines.append(STILL_STUCK_HOPPER)
    elif shown == total:
        drawn = MAP_COMMAND[where].format(number=number, literal=puzzle.literal)
        lines.append(STILL_STUCK.format(map=drawn))
    return lines


def reset(number: int | str, path: Path | None = None) -> str:
    puzzle = get_puzzle(number)
    number = puzzle.number
    progress.set_hints_shown(number, 0, path)
    return f"Puzzle {number} ({puzzle.title}): hints start over; the next call shows hint 1."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m checks.learner.hints", description="Show the next hint for a puzzle."
    )
    parser.add_argument("puzzle", help="the puzzle number (7, 10a, ...)")
    parser.add_argument("--reset", action="store_true", help="forget how many hints you have seen for this puzzle")
    args = parser.parse_args(argv)
    try:
        lines = [reset(args.puzzle)] if args.reset else reveal(args.puzzle)
    except UnknownPuzzle as exc:
        print(exc, file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
