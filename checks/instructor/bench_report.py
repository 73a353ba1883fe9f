"""What `make bench` records and reports, without torch: rows, results.csv and meta.json, verdicts, BENCHMARKS.md."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from checks.engine.judging.timing import gbps, speed_ratio, tflops
from checks.instructor.tables import markdown_table, ms_cell
from checks.registry import ROOT

HAND_NOTES = ROOT / "bench" / "notes.md"  # what a person wrote about the last run, kept across re-runs
ANSWER_KEY = "answer key"  # the baseline of a variant's rows
CSV_COLUMNS = (  # results.csv: Row's fields and properties by name
    "puzzle slug variant series size x status key_ms baseline baseline_ms ratio metric key_rate baseline_rate "
    "roofline bytes flops check other_baselines"
).split()
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


@dataclass(frozen=True)
class Target:
    label: str
    puzzle: str
    series: str
    size: str
    kind: str  # "ratio": a baseline's time over the answer key's; "tflops": the answer key's rate
    value: float
    baseline: str | None = None  # what a ratio is against; None: the grader's baseline

    @property
    def requirement(self) -> str:
        return f">= {self.value:g}" + (" TFLOPS" if self.kind == "tflops" else f"x {self.baseline or ''}".rstrip())


def evaluate(target: Target, rows: list[Row]) -> tuple[str, str, str]:
    """(measured, ratio vs baseline, 'met' / 'missed' / 'not measured') for one target (of an answer key)."""
    wanted = (target.puzzle, "", target.series, target.size)
    row = next((r for r in rows if (r.puzzle, r.variant, r.series, r.size) == wanted), None)
    if row is None or not row.ok:
        return (row.status if row is not None else "-"), "-", "not measured"
    ratio, measured = row.ratio_to(target.baseline), f"{row.key_rate:.1f} {row.metric}"
    ratio_text = f"{ratio:.2f}x {target.baseline or row.baseline}" if ratio is not None else "-"
    value = ratio if target.kind == "ratio" else (row.key_rate if row.flops else None)
    return measured, ratio_text, "not measured" if value is None else "met" if value >= target.value else "missed"


def csv_record(r: Row) -> dict[str, str]:
    """A row of results.csv but its last column (what checks.authoring.figures hashes to know a figure is stale)."""
    return {column: _csv_cell(getattr(r, column), DIGITS.get(column, 6)) for column in CSV_COLUMNS[:-1]}


def read_csv(path: Path) -> list[Row]:
    """Rows back from a results.csv; an empty or absent column (in a CSV older than it) leaves the field's default."""
    kinds = {f.name: float if "float" in str(f.type) else str for f in fields(Row)}
    kinds["others"] = lambda text: {k: float(ms) for k, _, ms in (p.partition("=") for p in text.split("; ") if p)}
    with open(path, newline="", encoding="utf-8") as f:
        records = [{**r, "others": r.get("other_baselines")} for r in csv.DictReader(f)]
    return [Row(**{k: kind(r[k]) for k, kind in kinds.items() if r.get(k)}) for r in records]


def write_data(rows: list[Row], meta: dict[str, Any], out: Path) -> Path:
    """bench/results.csv and bench/meta.json: everything --render needs to redraw the plots and the report."""
    (out / "bench").mkdir(parents=True, exist_ok=True)
    with open(out / "bench" / "results.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([CSV_COLUMNS] + [[*csv_record(r).values(), r.other_baselines] for r in rows])
    (out / "bench" / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return out / "bench" / "results.csv"


_rate = lambda value: "-" if value is None else f"{value:.1f}" if value >= 10 else f"{value:.3g}"
RESULTS = {  # BENCHMARKS.md's table of results: a column's header -> its cell (a function of the row)
    "#": lambda r: str(r.puzzle),
    "puzzle": lambda r: f"{r.slug}, variant: {r.variant}" if r.variant else r.slug,
    "series": lambda r: r.series,
    "size": lambda r: r.size,
    "answer key ms": lambda r: ms_cell(r.key_ms),
    "baseline": lambda r: r.baseline or "-",
    "baseline ms": lambda r: ms_cell(r.baseline_ms),
    "ratio": lambda r: "-" if r.ratio is None else f"{r.ratio:.2f}x",
    "answer key rate": lambda r: _rate(r.key_rate),
    "baseline rate": lambda r: _rate(r.baseline_rate),
    "unit": lambda r: r.metric if r.bytes or r.flops else "-",
    "roofline": lambda r: "-" if r.roofline is None else f"{100 * r.roofline:.0f}%",
    "other baselines": lambda r: ", ".join(f"{k} {r.ratio_to(k):.2f}x" for k in r.others if r.ratio_to(k)) or "-",
    "status": lambda r: r.status if r.status != "ok" else (r.check or "ok"),
}
INTRO = (
    "The answer keys against their torch baselines, by `make bench` (sizes and targets from `puzzles.yaml`): medians "
    "of `triton.testing.do_bench` on fresh random inputs; ratios are the baseline's time over the answer key's "
    "(above 1: the answer key is faster); the roofline share compares with the copy bandwidth and matmul rate "
    "measured below. A row marked `variant` times another way to write the puzzle's function "
    "(`bench.sweep.variants`) in the answer key's columns, with the answer key as its baseline."
)


def markdown_report(rows: list[Row], meta: dict[str, Any], plots: list[str], targets: list[Target]) -> str:
    """BENCHMARKS.md: the machine, the targets (met or missed), every result, the hand notes, the plots."""
    lines = ["# Benchmarks", "", INTRO, "", "| | |", "|---|---|"]
    keys = ("gpu", "date", "torch", "triton", "cuda", "python", "command")
    lines += [f"| {'GPU' if k == 'gpu' else k} | {meta[k]} |" for k in keys if meta.get(k)]
    if peaks := meta.get("peaks"):
        lines.append(f"| device-to-device copy | {peaks['copy_gbps']:.0f} GB/s (bytes read + written) |")
        lines.append(f"| float16 torch.matmul {peaks['matmul_side']}^3 | {peaks['matmul_tflops']:.0f} TFLOPS |")
    judged = [[t.label, t.requirement, *evaluate(t, rows)] for t in targets]
    lines += ["", "## Targets", "", *markdown_table(["target", "requirement", "measured", "ratio", "met"], judged)]
    lines += ["", f"{sum(line[-1] == 'met' for line in judged)} of {len(judged)} targets met."]
    lines += ["", "## Results", "", *markdown_table(list(RESULTS), [[c(r) for c in RESULTS.values()] for r in rows])]
    lines += ["", "## Notes", "", *[f"- {note}" for note in meta["notes"]]] if meta.get("notes") else []
    if HAND_NOTES.exists():
        lines += ["", "## Reading these figures", "", HAND_NOTES.read_text(encoding="utf-8").rstrip()]
    lines += ["", "## Plots", "", *[f"![{Path(p).stem.replace('_', ' ')}]({p})" for p in plots]] if plots else []
    return "\n".join(lines) + "\n"
