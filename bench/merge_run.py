"""Merge the rows of a later `make bench --only ...` run into bench/results.csv, keeping what each row came from.

    python3 bench/merge_run.py RUN_FOLDER      # RUN_FOLDER holds that run's results.csv and meta.json

The rows of the puzzles the later run measured replace theirs in bench/results.csv; bench/meta.json keeps
the first run's description and lists the later run under `merged` (one entry per puzzle and variant, with
its GPU, date, versions and copy rate), which the notebooks' figure captions read; a note says which
puzzles came from which run. Then redraw with `python -m checks.instructor.bench --render .`.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_KEYS = ("gpu", "date", "torch", "triton", "cuda", "python", "peaks", "command")


def merge(run: Path, bench: Path = ROOT / "bench") -> list[str]:
    """Merge run/results.csv and run/meta.json into bench/; the puzzles merged."""
    with open(run / "results.csv", newline="", encoding="utf-8") as f:
        later = list(csv.DictReader(f))
    with open(bench / "results.csv", newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        columns, earlier = reader.fieldnames or [], list(reader)
    puzzles = sorted({row["puzzle"] for row in later}, key=lambda p: (len(p), p))
    kept = [row for row in earlier if row["puzzle"] not in puzzles]
    with open(bench / "results.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(kept + later)
    meta = json.loads((bench / "meta.json").read_text(encoding="utf-8"))
    later_meta = json.loads((run / "meta.json").read_text(encoding="utf-8"))
    described = {k: later_meta[k] for k in RUN_KEYS if k in later_meta}
    runs = [r for r in meta.get("merged", []) if r["puzzle"] not in puzzles]
    runs += [{"puzzle": p, "variant": v, **described} for p, v in sorted({(r["puzzle"], r["variant"]) for r in later})]
    meta["merged"] = runs
    note = f"puzzles {', '.join(puzzles)}: measured in a later run on the {described.get('gpu', '?')}, "
    note += f"{described.get('date', '?')} ({described.get('command', '?')})"
    meta["notes"] = [n for n in meta.get("notes", []) if not n.startswith(f"puzzles {', '.join(puzzles)}:")] + [note]
    meta["notes"] += [n for n in later_meta.get("notes", []) if n not in meta["notes"]]
    (bench / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return puzzles


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the later run's folder (results.csv, meta.json)")
    args = parser.parse_args(argv)
    print(f"Merged puzzles {', '.join(merge(args.run))} into {ROOT / 'bench' / 'results.csv'}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
