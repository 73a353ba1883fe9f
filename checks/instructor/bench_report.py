"""What `make bench` reports, without torch: the targets met or missed and BENCHMARKS.md, from the rows of
`checks.bench_results`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checks.bench_results import Row
from checks.instructor.tables import markdown_table, ms_cell

HAND_NOTES = "notes.md"  # what a person wrote about a run, in the run's folder beside its results.csv


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
    "answer key ms, no graph": lambda r: ms_cell(r.call_ms) if r.call_ms else "-",
    "other baselines": lambda r: ", ".join(f"{k} {r.ratio_to(k):.2f}x" for k in r.others if r.ratio_to(k)) or "-",
    "status": lambda r: r.status if r.status != "ok" else (r.check or "ok"),
}
INTRO = (
    "The answer keys against their torch baselines, by `make bench` (sizes and targets from `puzzles.yaml`): medians "
    "of `triton.testing.do_bench` on fresh random inputs; ratios are the baseline's time over the answer key's "
    "(above 1: the answer key is faster); the roofline share compares with the copy bandwidth and matmul rate "
    "measured below. A row marked `variant` times another way to write the puzzle's function "
    "(`bench.sweep.variants`) in the answer key's columns, with the answer key as its baseline. Where a puzzle's sweep "
    "says `graphs: true` (decoding, 11-13), each call is timed as the replay of a CUDA graph, as serving engines run "
    "decoding and as the grader times, and the answer key's time without a graph is given beside it, by the same "
    "`do_bench`. That column is not the host's time per Python call: `do_bench` flushes the L2 cache before each "
    "timed call and does not wait between them, so the host queues the next call while the GPU flushes, and its "
    "time per call shows only where it exceeds the flush and the kernels together (`bench/tuning.md` records the "
    "host time of a call)."
)


def markdown_report(
    rows: list[Row], meta: dict[str, Any], plots: list[str], targets: list[Target], notes: Path | None = None
) -> str:
    """BENCHMARKS.md: the machine, the targets (met or missed), every result, the hand notes (`notes`), the plots."""
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
    if notes is not None and notes.exists():
        lines += ["", "## Reading these figures", "", notes.read_text(encoding="utf-8").rstrip()]
    lines += ["", "## Plots", "", *[f"![{Path(p).stem.replace('_', ' ')}]({p})" for p in plots]] if plots else []
    return "\n".join(lines) + "\n"
