"""Wall time of `python -m checks N --solution` for every puzzle, as a learner at a terminal meets it.

For each puzzle, through the warm grader (`checks.warm`; CHECKS_WARM=1, as at a terminal): a first run,
a second run right after it, and one after a pause of PAUSE_S seconds (a learner reads the verdict and edits:
the warm grader's next grading processes have started meanwhile); then a second run without it (CHECKS_WARM=0:
a fresh grader each time), and with --wrong a run of the puzzle's first known-wrong kernel after it was graded
once and a pause (how soon a failure is reported). Second runs have a warm Triton compile cache and the cached
roofline. Run from the repository root: `python -m bench latency [--wrong] [N ...]`.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from checks.authoring.wrong import known_wrong, materialize, name_of
from checks.registry import Puzzle, load_puzzles

ROOT = Path(__file__).resolve().parent.parent

PAUSE_S = 15.0


def timed(args: list[str], warm: bool) -> tuple[float, str]:
    """Seconds for one `python -m checks ARGS`, and the first word of its last line (PASSED, FAILED, ...)."""
    env = dict(os.environ, CHECKS_WARM="1" if warm else "0", CHECKS_PROGRESS_FILE=os.devnull)  # not a learner's
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "checks", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    verdicts = [line.split(":")[0] for line in done.stdout.splitlines() if re.match(r"[A-Z][A-Z ]+:", line)]
    return seconds, (verdicts or ["?"])[-1]


def wrong_run(puzzle: Puzzle, folder: Path) -> str:
    """'seconds verdict' of a second warm run of the puzzle's first known-wrong kernel ('-' if it has none)."""
    edits = known_wrong(puzzle)
    if not edits:
        return "-"
    args = [puzzle.number, "--file", str(materialize(puzzle, edits[0], folder))]
    timed(args, warm=True)
    time.sleep(PAUSE_S)
    seconds, verdict = timed(args, warm=True)
    return f"{seconds:.1f} ({name_of(edits[0])}: {verdict})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench latency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--wrong", action="store_true", help="also a known-wrong kernel's second run after a pause")
    parser.add_argument("puzzles", nargs="*", help="puzzle numbers (default: every puzzle)")
    args = parser.parse_args(argv)
    wrong, chosen = args.wrong, args.puzzles
    header = "| puzzle | first run (s) | second run (s) | after a pause (s) | no warm grader (s) | verdict |"
    header += " known-wrong kernel, after a pause (s) |" if wrong else ""
    print(header + "\n" + "|---" * (header.count("|") - 1) + "|", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for puzzle in [p for p in load_puzzles() if not chosen or p.number in chosen]:
            first, _ = timed([puzzle.number, "--solution"], warm=True)
            second, _ = timed([puzzle.number, "--solution"], warm=True)
            time.sleep(PAUSE_S)
            paused, verdict = timed([puzzle.number, "--solution"], warm=True)
            cold, _ = timed([puzzle.number, "--solution"], warm=False)
            line = f"| {puzzle.number} | {first:.1f} | {second:.1f} | {paused:.1f} | {cold:.1f} | {verdict} |"
            print(line + (f" {wrong_run(puzzle, Path(folder))} |" if wrong else ""), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
