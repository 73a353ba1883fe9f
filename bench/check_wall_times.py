"""Wall time of `python -m checks N --solution` in a course checkout, with and without the warm grader.

For each puzzle: a run through the warm grader (CHECKS_WARM=1; it starts the grader and warms the caches), a
second run right after it, a third after a pause of PAUSE_S seconds ($CHECKS_BENCH_PAUSE_S, else 15: a learner
reads the verdict and edits, and the warm grader's next grading processes start meanwhile), then a run without it
(CHECKS_WARM=0: a fresh grader, compile cache and roofline already warm). Prints one line per run: checkout,
puzzle, run, seconds to the full report, seconds to the correctness verdict (the line that says every case is
correct, printed before the timing; the full report where there is none), and the verdict. Usage:
`python -m bench wall-times CHECKOUT N [N ...] [--record FOLDER/wall-NAME.tsv]` (the checkout whose grader is timed;
--record writes the lines to that file too and adds them to its run folder's record.json, bench.records).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from bench.figures import reader_of, wall_times
from bench.records import record_table
from checks.engine.grade import CORRECT_NOW_TIMING

PAUSE_S = float(os.environ.get("CHECKS_BENCH_PAUSE_S", "15"))
RUNS = (("warm, first", True, 0.0), ("warm, second", True, 0.0), ("warm, after a pause", True, PAUSE_S),
        ("no warm grader", False, 0.0))  # fmt: skip


def timed(root: Path, puzzle: str, warm: bool) -> tuple[float, float, str]:
    """(seconds to the full report, seconds to the correctness verdict, the verdict's line)."""
    env = dict(os.environ, CHECKS_WARM="1" if warm else "0", CHECKS_PROGRESS_FILE=os.devnull)
    start = time.perf_counter()
    verdict_at = None
    lines: list[str] = []
    with subprocess.Popen(
        [sys.executable, "-m", "checks", puzzle, "--solution"], cwd=root, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
    ) as check:  # fmt: skip
        for line in check.stdout or ():
            if verdict_at is None and line.rstrip("\n") == CORRECT_NOW_TIMING:
                verdict_at = time.perf_counter() - start
            lines.append(line.rstrip("\n"))
    seconds = time.perf_counter() - start
    last = [line for line in lines if line.split(":")[0].isupper() and ":" in line]
    return seconds, seconds if verdict_at is None else verdict_at, (last or ["?"])[-1][:400]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench wall-times", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="the course checkout whose grader is timed")
    parser.add_argument("puzzles", nargs="+", help="puzzle numbers")
    parser.add_argument("--record", type=Path, metavar="FILE", help="write the lines to FILE (a *wall*.tsv in a run "
                        "folder) too, and add them to the folder's record.json")  # fmt: skip
    args, args_given = parser.parse_args(argv), sys.argv[1:] if argv is None else argv
    if args.record and reader_of(args.record) is not wall_times:
        parser.error(f"--record {args.record}: name the file *wall*.tsv (say wall-after.tsv), so that it is read back")
    root, puzzles = args.checkout.resolve(), args.puzzles
    lines = ["checkout\tpuzzle\trun\treport s\tverdict s\tverdict"]
    print(lines[0], flush=True)
    for puzzle in puzzles:
        for mode, warm, pause in RUNS:
            time.sleep(pause)
            seconds, verdict_seconds, verdict = timed(root, puzzle, warm)
            lines.append(f"{root.name or root}\t{puzzle}\t{mode}\t{seconds:.1f}\t{verdict_seconds:.1f}\t{verdict}")
            print(lines[-1], flush=True)
    subprocess.run([sys.executable, "-m", "checks.warm", "stop"], cwd=root, capture_output=True)
    if args.record:
        record_table(args.record, "\n".join(lines), shlex.join(["python", "-m", "bench", "wall-times", *args_given]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
