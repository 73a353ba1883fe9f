"""`results.csv` and `meta.json` of a `make bench` run, without torch: what `make bench` (checks.instructor.bench)
records, one `Row` per size it timed, in a folder of its own under bench/results/ (`<date>-<gpu>-make-bench`, with
`-only-...` for a run of some puzzles). The benchmark writes and reads them back (`--render`); the notebooks' figures
(checks.authoring.figures) read the recorded run's (`recorded_run`).

The grader package imports nothing from bench/ (an import contract says so): the folder names are made here, and
bench/'s own tools (`python -m bench gpu-run`) take them from this module.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from checks.engine.timing import gbps, speed_ratio, tflops

RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results"  # one folder per run
RECORD_NAME = re.compile(r"\d{4}-\d{2}-\d{2}-[\w.-]+-make-bench(-[b-z])?")  # a whole `make bench` run, not --only
ANSWER_KEY = "answer key"  # the baseline of a variant's rows
CSV_COLUMNS = (  # results.csv: Row's fields and properties by name
    "puzzle slug variant series size x status key_ms baseline baseline_ms ratio metric key_rate baseline_rate "
    "roofline bytes flops check other_baselines call_ms"
).split()
HASHED = CSV_COLUMNS[: CSV_COLUMNS.index("other_baselines")]  # what a figure made from a row depends on
DIGITS = {"ratio": 4, "key_rate": 5, "baseline_rate": 5, "roofline": 3}  # significant digits of a number; else 6
_csv_cell = lambda value, digits=6: "" if value is None else value if isinstance(value, str) else f"{value:.{digits}g}"


@dataclass
class Row:
    """One size's result: the answer key and its baselines, or a variant and the answer key; ms, None if not timed."""

    puzzle: str
    slug: str
    series: str  # what varies besides the size: "fp32", "D=64 causal", "b transposed", ...
    size: str  # the size in words: "n=2^28", "4096x4096", "N=16384"
    x: float  # the size as a number, for the plots' x axis
    status: str = "ok"  # "ok", or what went wrong ("failed: out of memory", "not run: ...")
    key_ms: float | None = None  # the answer key's time, or the variant's in a variant's row
    baseline: str = ""  # the grader's baseline (puzzles.yaml bench.baseline); ANSWER_KEY in a variant's row
    baseline_ms: float | None = None
    bytes: float = 0.0
    flops: float = 0.0
    check: str = ""  # the answer key's output against the baseline's: "ok" or how they differ
    roofline: float | None = None  # the answer key's share of the roofline, 0..1
    others: dict[str, float] = field(default_factory=dict)  # the spec's other baselines: name -> ms
    variant: str = ""  # "" for the answer key; else the label of the variant timed in its place
    call_ms: float | None = None  # where key_ms is a CUDA graph's replay (bench.sweep.graphs): the call's without one

    ok = property(lambda self: self.status == "ok" and self.key_ms is not None)
    metric = property(lambda self: "TFLOPS" if self.flops else "GB/s")
    key_rate = property(lambda self: self.rate(self.key_ms))
    baseline_rate = property(lambda self: self.rate(self.baseline_ms))
    ratio = property(lambda self: self.ratio_to(None))
    other_baselines = property(lambda self: "; ".join(f"{name}={_csv_cell(ms)}" for name, ms in self.others.items()))

    def rate(self, ms: float | None) -> float | None:
        return None if not ms or ms <= 0 else tflops(self.flops, ms) if self.flops else gbps(self.bytes, ms)

    def ratio_to(self, baseline: str | None) -> float | None:
        """A baseline's time over the answer key's (above 1: the answer key is faster); None: the grader's."""
        ms = self.baseline_ms if baseline in (None, self.baseline) else self.others.get(baseline)
        return speed_ratio(ms, self.key_ms) if ms and self.key_ms else None


def csv_record(r: Row) -> dict[str, str]:
    """A row of results.csv but its last columns (what checks.authoring.figures hashes to know a figure is stale)."""
    return {column: _csv_cell(getattr(r, column), DIGITS.get(column, 6)) for column in HASHED}


def read_csv(path: Path) -> list[Row]:
    """Rows back from a results.csv; an empty or absent column (in a CSV older than it) leaves the field's default."""
    kinds = {f.name: float if "float" in str(f.type) else str for f in fields(Row)}
    kinds["others"] = lambda text: {k: float(ms) for k, _, ms in (p.partition("=") for p in text.split("; ") if p)}
    with open(path, newline="", encoding="utf-8") as f:
        records = [{**r, "others": r.get("other_baselines")} for r in csv.DictReader(f)]
    return [Row(**{k: kind(r[k]) for k, kind in kinds.items() if r.get(k)}) for r in records]


def write_data(rows: list[Row], meta: dict[str, Any], folder: Path) -> Path:
    """folder/results.csv and folder/meta.json: everything --render needs to redraw the plots and the report."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "results.csv", "w", newline="", encoding="utf-8") as f:
        rest = lambda r: [r.other_baselines, _csv_cell(r.call_ms)]  # the columns after HASHED
        csv.writer(f).writerows([CSV_COLUMNS] + [[*csv_record(r).values(), *rest(r)] for r in rows])
    (folder / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return folder / "results.csv"


def gpu_slug(name: str) -> str:
    """A GPU's name as a folder name's part: 'NVIDIA H100 80GB HBM3' -> 'h100', 'NVIDIA H200' -> 'h200'."""
    model = re.search(r"\b([A-Z]{1,3}\d{2,4}[A-Za-z]?)\b", name)
    if model:
        return model.group(1).lower()
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown-gpu"


def run_folder_name(date: str, gpu_name: str, what: str = "", taken: set[str] | frozenset[str] = frozenset()) -> str:
    """`<date>-<gpu>[-what]`, or the same with `-b`, `-c`, ... when that name is taken."""
    base = f"{date}-{gpu_slug(gpu_name)}" + (f"-{what}" if what else "")
    if base not in taken:
        return base
    for letter in "bcdefghijklmnopqrstuvwxyz":
        if f"{base}-{letter}" not in taken:
            return f"{base}-{letter}"
    raise ValueError(f"every name from {base} to {base}-z is taken")


def recorded_run(results: Path = RESULTS) -> Path:
    """The folder of the newest whole `make bench` run under `results` (the one the notebooks' figures draw)."""
    runs = sorted(p for p in results.glob("*") if RECORD_NAME.fullmatch(p.name) and (p / "results.csv").exists())
    if not runs:
        raise FileNotFoundError(f"no `make bench` run under {results} (a folder <date>-<gpu>-make-bench)")
    return runs[-1]


def shown(path: Path) -> str:
    """A path as the pages cite it: relative to the course root where it is inside it."""
    root = RESULTS.parent.parent
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
