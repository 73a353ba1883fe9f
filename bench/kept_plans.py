"""Each answer key's plan at its timing size, recorded as the grader records it to keep (checks.engine.answer_key),
twice on fresh inputs: whether it may be kept (it reads no input's values), whether the two recordings are one plan,
and how long one takes. On a GPU the recorder sees every read of an input's values (they must come off the device
through torch); `tests/test_kept_between_checks.py` checks the same on a CPU at the small cases. Usage:
`python -m bench kept-plans [N ...] [--record FOLDER/kept-plans.tsv]` (every puzzle with a timing case when none is
given); one TSV line per puzzle; --record writes them to that file too and adds them to its run folder's record.json
(bench.records).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from bench.figures import kept_plans, reader_of
from bench.records import record_table
from checks.engine.answer_key import key_plan_here
from checks.registry import get_puzzle, load_puzzles


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench kept-plans", description=__doc__.split("\n\n")[0])
    parser.add_argument("puzzles", nargs="*", help="puzzle numbers (default: every puzzle with a timing case)")
    parser.add_argument("--device", default="cuda", help="where the inputs go (default: cuda)")
    parser.add_argument("--record", type=Path, metavar="FILE", help="write the lines to FILE (a kept-plans*.tsv in a "
                        "run folder) too, and add them to the folder's record.json")  # fmt: skip
    args, args_given = parser.parse_args(argv), sys.argv[1:] if argv is None else argv
    if args.record and reader_of(args.record) is not kept_plans:
        parser.error(f"--record {args.record}: name the file kept-plans*.tsv, so that it is read back")
    puzzles = [get_puzzle(n) for n in args.puzzles] or [p for p in load_puzzles() if p.ready and p.timing_case]
    lines = ["puzzle\ttiming case\tkept\tsame plan on two draws\tfirst s\tsecond s\tplan bytes"]
    print(lines[0])
    differ = 0
    for puzzle in puzzles:
        seconds, plans = [], []
        for _ in range(2):
            start = time.perf_counter()
            plans.append(key_plan_here(puzzle, args.device))
            seconds.append(time.perf_counter() - start)
        same = plans[0] == plans[1]
        differ += not same
        size = len(json.dumps(plans[0])) if plans[0] else 0
        case = json.dumps(puzzle.timing_case.given(), sort_keys=True)
        timed = f"{seconds[0]:.3f}\t{seconds[1]:.3f}"
        lines.append(f"{puzzle.number}\t{case}\t{plans[0] is not None}\t{same}\t{timed}\t{size}")
        print(lines[-1], flush=True)
    if args.record:
        record_table(args.record, "\n".join(lines), shlex.join(["python", "-m", "bench", "kept-plans", *args_given]))
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
