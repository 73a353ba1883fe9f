"""Where a check's seconds go: the time marks of `CHECKS_PHASES=FILE python -m checks ...` as one table.

    CHECKS_PHASES=/tmp/p.log python3 -m checks 1 --solution; python -m bench phases /tmp/p.log

Each line: seconds since the first mark, the process (grader, or the grading process's role and mode), what.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def table(text: str) -> list[str]:
    marks = []
    for line in text.splitlines():
        stamp, pid, role, what = line.split(" ", 3)
        marks.append((float(stamp), pid, role, what))
    marks.sort()
    start = marks[0][0] if marks else 0.0
    return [f"{t - start:7.2f}  {role:<20} {pid:>7}  {what}" for t, pid, role, what in marks]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench phases", description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path, help="the file CHECKS_PHASES named")
    args = parser.parse_args(argv)
    print("\n".join(table(args.file.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
