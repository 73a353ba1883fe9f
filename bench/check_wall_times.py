"""Wall time of `python -m checks N --solution` in a course checkout, with and without the warm grader.

For each puzzle: a run through the warm grader (CHECKS_WARM=1; it starts the grader and warms the caches), a
second run through it (what a learner at a terminal meets), then a run without it (CHECKS_WARM=0: a fresh
grader, compile cache and roofline already warm). Prints one line per run: checkout, puzzle, mode, seconds,
verdict. Usage: `python -m bench wall-times CHECKOUT N [N ...]` (the checkout whose grader is timed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path


def timed(root: Path, puzzle: str, warm: bool) -> tuple[float, str]:
    env = dict(os.environ, CHECKS_WARM="1" if warm else "0", CHECKS_PROGRESS_FILE=os.devnull)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "checks", puzzle, "--solution"], cwd=root, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    last = [line for line in done.stdout.splitlines() if line.split(":")[0].isupper() and ":" in line]
    return seconds, (last or ["?"])[-1][:400]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench wall-times", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="the course checkout whose grader is timed")
    parser.add_argument("puzzles", nargs="+", help="puzzle numbers")
    args = parser.parse_args(argv)
    root, puzzles = args.checkout.resolve(), args.puzzles
    for puzzle in puzzles:
        for mode, warm in (("warm, first", True), ("warm, second", True), ("no warm grader", False)):
            seconds, verdict = timed(root, puzzle, warm)
            print(f"{root.name or root}\t{puzzle}\t{mode}\t{seconds:.1f}\t{verdict}", flush=True)
    subprocess.run([sys.executable, "-m", "checks.warm", "stop"], cwd=root, capture_output=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
