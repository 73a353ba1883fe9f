"""Grade an answer key as a submission several times at once on one GPU, and report the speed ratios.

With interleaved timing rounds, an answer key graded as a submission should measure about 1.0x the
answer key whatever else runs on the GPU; with several gradings at once the spread grows and the grader
may decline a speed verdict. This runs the same grading alone, then `--jobs` of them at once, and writes
a table of each grading's ratio to the answer key and to the baseline, and the spread of its rounds:

    python -m bench shared-gpu --puzzle 4 --jobs 4 --out /tmp/shared
    python -m bench shared-gpu --puzzle 9 --earlier solutions/09a_flash_attention_v2_fwd_noncausal.py
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def grading_command(puzzle: str, earlier: str | None) -> list[str]:
    command = [sys.executable, "-m", "checks", puzzle, "--solution", "--json"]
    if earlier:
        command += ["--earlier", earlier]
    return command


def run_together(command: list[str], jobs: int) -> list[dict]:
    """Start `jobs` copies of the grading at once and return each one's verdict (as JSON data)."""
    started = [
        subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(jobs)
    ]
    verdicts = []
    for process in started:
        out, err = process.communicate()
        try:
            verdicts.append(json.loads(out))
        except json.JSONDecodeError:
            verdicts.append({"status": "unreadable", "summary": (out + err)[-400:], "timings": {}})
    return verdicts


def row(label: str, verdict: dict) -> str:
    timing = verdict.get("timings") or {}
    spread = timing.get("spread") or {}

    def ratio(key: str) -> str:
        value = timing.get(key)
        return f"{value:.3f}x" if isinstance(value, (int, float)) else "-"

    spreads = ", ".join(f"{name} +-{100 * value:.0f}%" for name, value in spread.items()) or "-"
    noisy = "yes" if timing.get("noisy") else "no"
    return (
        f"| {label} | {verdict.get('status')} | {ratio('ratio_vs_answer_key')} | {ratio('ratio_vs_baseline')} "
        f"| {spreads} | {noisy} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench shared-gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--puzzle", default="4")
    parser.add_argument("--earlier", default=None, help="the earlier step's file, for a puzzle that builds on one")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None, help="folder for shared-gpu.md and the verdicts")
    args = parser.parse_args(argv)
    command = grading_command(args.puzzle, args.earlier)
    lines = [
        f"Puzzle {args.puzzle}'s answer key graded as a submission: alone, then {args.jobs} at once on one GPU.",
        "",
        "| grading | status | yours / answer key | yours / baseline | spread of the rounds | no speed verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    begun = time.perf_counter()
    alone = run_together(command, 1)
    together = run_together(command, args.jobs)
    lines.append(row("alone", alone[0]))
    lines += [row(f"{i + 1} of {args.jobs} at once", v) for i, v in enumerate(together)]
    lines.append("")
    lines.append(f"({time.perf_counter() - begun:.0f} s in all)")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"shared-gpu-{args.puzzle}.md").write_text(text + "\n")
        (args.out / f"shared-gpu-{args.puzzle}.json").write_text(json.dumps([*alone, *together], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
