"""Merge the rows of a later `make bench --only ...` run into the recorded run's results.csv, keeping their origin.

    python -m bench merge-run RUN_FOLDER [--variant NAME]  # RUN_FOLDER holds that run's results.csv and meta.json

The recorded run is `checks.bench_results.recorded_run()` (the newest bench/results/<date>-<gpu>-make-bench; --into
names another). The rows of the puzzles the later run measured replace theirs in its results.csv; its meta.json keeps
the first run's description and lists the later run under `merged` (one entry per puzzle and variant, with
its GPU, date, versions and copy rate), which the notebooks' figure captions read; a note says which
puzzles came from which run. With --variant, only that variant's rows are merged (each row holds the
variant's time and the answer key's, timed side by side), and the answer keys' rows stay. Then redraw with
`python -m checks.instructor.bench --render RECORDED_RUN_FOLDER`. The recorded run's record.json (bench.records)
gets its figures read again from the merged results.csv.
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import sys
from pathlib import Path

from bench.records import refresh_figures
from checks.bench_results import recorded_run, shown

RUN_KEYS = ("gpu", "date", "torch", "triton", "cuda", "python", "peaks", "command")


def merge(run: Path, bench: Path | None = None, variant: str | None = None) -> list[str]:
    """Merge run/results.csv and run/meta.json into the folder `bench` (default: the recorded run; only `variant`'s
    rows, when given); the puzzles merged."""
    bench = bench or recorded_run()
    with open(run / "results.csv", newline="", encoding="utf-8") as f:
        later = [row for row in csv.DictReader(f) if variant is None or row["variant"] == variant]
    with open(bench / "results.csv", newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        columns, earlier = reader.fieldnames or [], list(reader)
    puzzles = sorted({row["puzzle"] for row in later}, key=lambda p: (len(p), p))

    def replaced(puzzle: str, of_variant: str) -> bool:
        return puzzle in puzzles and (variant is None or of_variant == variant)

    gone = [i for i, row in enumerate(earlier) if replaced(row["puzzle"], row["variant"])]
    at = gone[0] if gone else len(earlier)  # the later rows take the place of those they replace
    kept = [row for row in earlier if not replaced(row["puzzle"], row["variant"])]
    with open(bench / "results.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(kept[:at] + later + kept[at:])
    meta = json.loads((bench / "meta.json").read_text(encoding="utf-8"))
    later_meta = json.loads((run / "meta.json").read_text(encoding="utf-8"))
    described = {k: later_meta[k] for k in RUN_KEYS if k in later_meta}
    runs = [r for r in meta.get("merged", []) if not replaced(r["puzzle"], r["variant"])]
    runs += [{"puzzle": p, "variant": v, **described} for p, v in sorted({(r["puzzle"], r["variant"]) for r in later})]
    meta["merged"] = runs
    what = f"puzzle{'s' if len(puzzles) > 1 else ''} {', '.join(puzzles)}" + (f" ({variant})" if variant else "")
    note = f"{what}: measured in a later run on the {described.get('gpu', '?')}, "
    note += f"{described.get('date', '?')} ({described.get('command', '?')})"
    meta["notes"] = [n for n in meta.get("notes", []) if not n.startswith(f"{what}:")] + [note]
    if variant is None:  # the later run's own notes speak of all its rows
        meta["notes"] += [n for n in later_meta.get("notes", []) if n not in meta["notes"]]
    (bench / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return puzzles


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench merge-run", description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the later run's folder (results.csv, meta.json)")
    parser.add_argument("--variant", help="merge only this variant's rows (say, 'tensor descriptors')")
    parser.add_argument("--into", type=Path, help="the run folder merged into (default: the recorded run)")
    args = parser.parse_args(argv)
    into = args.into or recorded_run()
    merged = merge(args.run, into, variant=args.variant)
    print(f"Merged puzzles {', '.join(merged)} into {shown(into / 'results.csv')}.")
    refresh_figures(into, shlex.join(["python", "-m", "bench", "merge-run", *(sys.argv[1:] if argv is None else argv)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
