"""Wall time of `python -m checks N --solution` for every puzzle, twice in a row, as a markdown table.

The second run has a warm Triton compile cache and the cached roofline: it is the feedback a
learner waits for while iterating on a GPU. Run from the repository root: `python3 bench/latency.py [N ...]`
(every puzzle, or the ones named).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from checks.registry import load_puzzles  # noqa: E402 - after the path is set


def timed(number: str) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "checks", number, "--solution"], cwd=ROOT, capture_output=True,
                          text=True)  # fmt: skip
    last = (done.stdout.strip().splitlines() or ["?"])[-1]
    return time.perf_counter() - start, last.split(":")[0]


def main() -> int:
    print("| puzzle | first run (s) | second run (s) | verdict |\n|---|---|---|---|", flush=True)
    for puzzle in [p for p in load_puzzles() if not sys.argv[1:] or p.number in sys.argv[1:]]:
        first, _ = timed(puzzle.number)
        second, verdict = timed(puzzle.number)
        print(f"| {puzzle.number} | {first:.1f} | {second:.1f} | {verdict} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
