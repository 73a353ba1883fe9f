"""Grade every submission under tests/submissions/tampering/ as a learner's check on this machine grades it (on a GPU:
the GPU stage and the interpreter stage beside it) and print one line each: the file, the verdict, the rule and
whether the attack was rejected for the reason the CPU tests name, for another (a GPU's sizes can lead another rule
to it first), or got through; exit status 1 if any attack got through.

Usage: `python -m bench tampering [NAME ...]` from the course folder.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from checks import verdict as V
from checks.engine.grade import grade
from checks.registry import get_puzzle
from tests.helpers import submission
from tests.test_integrity import SUBMISSIONS
from tests.test_replay import ATTACKS, GPU_ATTACKS

TAMPERING = Path(__file__).resolve().parent.parent / "tests" / "submissions" / "tampering"


# Attacks whose GPU run is itself wrong, so that on a GPU the values of the GPU stage may fail first: name -> (rule,
# words). An autotuner keeps the fastest config, and the fastest of ninth_config_skips_blocks is the one that skips.
ON_A_GPU_ALSO = {"ninth_config_skips_blocks": ("values", "elements are wrong")}


def expected() -> dict[str, tuple[str, str, str]]:
    """name -> (puzzle, the status or rule expected, words the report holds)."""
    found = {name: (str(number), status, "") for name, number, status in SUBMISSIONS}
    for table in (ATTACKS, GPU_ATTACKS):
        for name, (rule, words, *puzzle) in table.items():
            found[name] = (puzzle[0] if puzzle else "1", rule, words)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench tampering", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="submissions to grade, by name (default: every one)")
    names = parser.parse_args(argv).names
    table = expected()
    unknown = [name for name in names if name not in table]
    if unknown:
        parser.error(f"no tampering submission named {', '.join(unknown)}")
    bad = 0
    for name in names or sorted(table):
        number, want, words = table[name]
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:  # an edit file is written out there as name.py
            graded = submission(TAMPERING, name, Path(folder))
            verdict = grade(get_puzzle(number), graded, time_it=False, first_failure=True, timeout=120)
        report = V.format_verdict(verdict)
        got = verdict.rule if verdict.status == V.FAILED else verdict.status
        if verdict.passed:
            said, bad = "GOT THROUGH", bad + 1
        else:
            right = [(want, words), *([ON_A_GPU_ALSO[name]] if verdict.mode == "gpu" and name in ON_A_GPU_ALSO else [])]
            fits = any(got == rule and said_words in report for rule, said_words in right)
            said = "as expected" if fits else "rejected, for another reason"
        summary = verdict.summary.replace("\n", " ")[:300]
        print(f"{name}\t{number}\t{verdict.mode}\t{got}\t{said}\t{time.perf_counter() - start:.1f}s\t{summary}",
              flush=True)  # fmt: skip
    print(f"{len(names or table) - bad} of {len(names or table)} attacks rejected")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
