"""`python -m checks.bench [--quick] [--out DIR] [--only 4,9] [--budget S]`: the answer keys against torch.

On a CUDA GPU, times the answer key of every ready numbered puzzle (a lettered step such as 10a is
timed by its grader instead) against its torch baseline over a sweep of sizes (triton.testing.do_bench,
median, fresh random inputs) and writes

    DIR/bench/results.csv     one row per (puzzle, series, size)
    DIR/bench/meta.json       the GPU, versions, date and measured roofline of the run
    DIR/bench/*.png           GB/s or TFLOPS against size, answer keys beside their baselines
    DIR/BENCHMARKS.md         all of that, with the course's speed targets (met or missed)

DIR is the repository root unless --out says otherwise. Each puzzle runs in its own process with
a share of the time budget (default 480 s for the whole sweep), so that a size that runs out of
memory, faults or hangs becomes a failed row instead of ending the benchmark; the CSV is rewritten
after every puzzle. The sizes a target needs are measured first. Without a CUDA GPU it says so and
exits 1; `--smoke` runs the whole pipeline at tiny sizes (in the interpreter without a GPU), and
`--render DIR` redraws the plots and the report from a finished run's CSV.

The writers (`format_table`, `write_csv`, `write_plots`, `markdown_report`) are pure functions of
the rows, tested on fake rows without a GPU (tests/test_bench.py).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from checks.registry import ROOT, Puzzle, load_puzzles
from checks.source import load_module
from checks.timing import Peaks, gbps, roofline_share, speed_ratio, tflops

NO_GPU = "The benchmark needs a CUDA GPU, and this machine has none: run `make bench` on a machine with one."
DEFAULT_BUDGET_S = 480.0
DEVICE_TIMEOUT_S = 90.0
# The most seconds each puzzle's process may take; the overall budget may give it less.
CAPS_S = {1: 40, 2: 40, 3: 60, 4: 90, 5: 60, 6: 45, 7: 45, 8: 150, 9: 200, 10: 170}
RESERVE_S = 20.0  # kept back for every puzzle still to run, so that a slow one cannot starve the rest
ATTENTION_B, ATTENTION_H = 4, 32


# -- what to measure -------------------------------------------------------------------------------


@dataclass
class Point:
    """One measurement to take: a puzzle's answer key and its baseline at one size."""

    puzzle: int
    series: str  # what varies besides the size: "fp32", "D=64 causal", "b transposed", ...
    size: str  # the size in words: "n=2^28", "4096x4096", "N=16384"
    x: float  # the size as a number, for the plots' x axis
    params: dict[str, Any] = field(default_factory=dict)
    target: bool = False  # a course target needs it: measured first


@dataclass
class Row:
    """One result. Times in milliseconds; None where nothing was measured."""

    puzzle: int
    slug: str
    series: str
    size: str
    x: float
    status: str = "ok"  # "ok", or what went wrong ("failed: out of memory", "not run: ...")
    key_ms: float | None = None
    baseline: str = ""
    baseline_ms: float | None = None
    bytes: float = 0.0
    flops: float = 0.0
    check: str = ""  # the answer key's output against the baseline's: "ok" or how far apart
    roofline: float | None = None  # the answer key's share of the roofline, 0..1

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.key_ms is not None

    @property
    def metric(self) -> str:
        return "TFLOPS" if self.flops else "GB/s"

    def rate(self, ms: float | None) -> float | None:
        if ms is None or ms <= 0:
            return None
        return tflops(self.flops, ms) if self.flops else gbps(self.bytes, ms)

    @property
    def key_rate(self) -> float | None:
        return self.rate(self.key_ms)

    @property
    def baseline_rate(self) -> float | None:
        return self.rate(self.baseline_ms)

    @property
    def ratio(self) -> float | None:
        if self.key_ms is None or self.baseline_ms is None or self.key_ms <= 0:
            return None
        return speed_ratio(self.baseline_ms, self.key_ms)


def _pow2(n: int) -> str:
    return f"n=2^{int(math.log2(n))}" if n & (n - 1) == 0 else f"n={n}"


def attention_flops(B: int, H: int, N: int, D: int, causal: bool, backward: bool = False) -> float:
    """4*B*H*N^2*D for the two matmuls of a forward pass; half of it when causal, x2.5 for a backward."""
    flops = 4.0 * B * H * N * N * D
    if causal:
        flops /= 2
    if backward:
        flops *= 2.5
    return flops


def smoke_plan(number: int) -> list[Point]:
    """Tiny sizes that check the benchmark's plumbing (in the interpreter without a GPU); no target needs them."""
    if number == 1:
        return [Point(1, "fp32", "n=3000", 3000, {"n": 3000})]
    if number == 2:
        return [Point(2, layout, "40x40", 1600, {"side": 40, "transposed": layout != "contiguous"})
                for layout in ("contiguous", "b transposed")]
    if number in (3, 4):
        return [Point(number, "fp16", "40x40x40", 40, {"side": 40})]
    if number == 5:
        return [Point(5, dtype, "8x100", 100, {"M": 8, "N": 100, "dtype": dtype}) for dtype in ("fp32", "fp16")]
    if number in (6, 7):
        return [Point(number, "fp32", "4x5000", 5000, {"M": 4, "N": 5000, "dtype": "fp32"})]
    causals = {8: [False], 9: [False, True], 10: [True]}.get(number, [])
    return [Point(number, "D=32" + (" causal" if causal else ""), "N=100", 100,
                  {"B": 1, "H": 2, "N": 100, "D": 32, "causal": causal}) for causal in causals]


def plan(number: int, quick: bool = False, smoke: bool = False) -> list[Point]:
    """The sizes one puzzle is measured at, the target sizes first."""
    if smoke:
        return smoke_plan(number)
    points: list[Point] = []
    if number == 1:
        for n in [1 << 24, 1 << 28] if quick else [1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28]:
            points.append(Point(1, "fp32", _pow2(n), n, {"n": n}, target=n == 1 << 28))
    elif number == 2:
        for side in [4096, 8192] if quick else [1024, 2048, 4096, 8192]:
            points.append(Point(2, "contiguous", f"{side}x{side}", side * side, {"side": side, "transposed": False}))
        for side in [8192] if quick else [4096, 8192]:
            points.append(Point(2, "b transposed", f"{side}x{side}", side * side, {"side": side, "transposed": True}))
    elif number in (3, 4):
        for side in [1024, 4096] if quick else [512, 1024, 2048, 4096]:
            points.append(Point(number, "fp16", f"{side}x{side}x{side}", side, {"side": side}, target=side == 4096))
    elif number == 5:
        for dtype in ("fp32", "fp16"):
            for n in [1024, 4096, 16384] if quick else [512, 1024, 2048, 4096, 8192, 16384]:
                points.append(Point(5, dtype, f"4096x{n}", n, {"M": 4096, "N": n, "dtype": dtype}, target=n == 4096))
    elif number in (6, 7):
        shapes = [(4096, 32768), (64, 1 << 20)]
        if not quick:
            shapes = [(4096, 8192), (4096, 32768), (1024, 1 << 17), (64, 1 << 20)]
        for m, n in shapes:
            points.append(Point(number, "fp32", f"{m}x{n}", n, {"M": m, "N": n, "dtype": "fp32"},
                                target=(m, n) == (4096, 32768)))
    elif number in (8, 9, 10):
        sizes = [4096, 16384] if quick else [1024, 2048, 4096, 8192, 16384]
        causals = {8: [False], 9: [False, True], 10: [True]}[number]
        for d in (64, 128):
            for causal in causals:
                series = f"D={d}" + (" causal" if causal else "")
                for n in sizes:
                    params = {"B": ATTENTION_B, "H": ATTENTION_H, "N": n, "D": d, "causal": causal}
                    points.append(Point(number, series, f"N={n}", n, params, target=n == 16384 and number != 8))
    return sorted(points, key=lambda p: not p.target)  # stable: targets first, then the sweep in order


# -- the course's speed targets --------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    label: str
    puzzle: int
    series: str
    size: str
    kind: str  # "ratio": answer key / baseline speed; "tflops": the answer key's rate
    value: float

    @property
    def requirement(self) -> str:
        return f">= {self.value:g}x" if self.kind == "ratio" else f">= {self.value:g} TFLOPS"


TARGETS = [
    Target("vector add vs torch.add, 2^28 fp32", 1, "fp32", "n=2^28", "ratio", 0.95),
    Target("softmax vs torch.softmax, 4096x4096 fp32", 5, "fp32", "4096x4096", "ratio", 1.0),
    Target("softmax vs torch.softmax, 4096x4096 fp16", 5, "fp16", "4096x4096", "ratio", 1.0),
    Target("online softmax vs torch.softmax, 4096x32768 fp32", 7, "fp32", "4096x32768", "ratio", 1.0),
    Target("matmul_fast vs cuBLAS, 4096^3 fp16", 4, "fp16", "4096x4096x4096", "ratio", 0.9),
    Target("FA2 forward, N=16384, D=64", 9, "D=64", "N=16384", "tflops", 424),
    Target("FA2 forward causal, N=16384, D=64", 9, "D=64 causal", "N=16384", "tflops", 391),
    Target("FA2 forward vs SDPA flash, N=16384, D=64", 9, "D=64", "N=16384", "ratio", 1.3),
    Target("FA2 forward causal vs SDPA flash, N=16384, D=64", 9, "D=64 causal", "N=16384", "ratio", 1.3),
    Target("FA2 forward, N=16384, D=128", 9, "D=128", "N=16384", "tflops", 512),
    Target("FA2 forward causal, N=16384, D=128", 9, "D=128 causal", "N=16384", "tflops", 508),
    Target("FA2 backward causal vs SDPA flash, N=16384, D=64", 10, "D=64 causal", "N=16384", "ratio", 1.0),
    Target("FA2 backward causal vs SDPA flash, N=16384, D=128", 10, "D=128 causal", "N=16384", "ratio", 1.0),
]


def find_row(rows: list[Row], puzzle: int, series: str, size: str) -> Row | None:
    return next((r for r in rows if (r.puzzle, r.series, r.size) == (puzzle, series, size)), None)


def evaluate(target: Target, rows: list[Row]) -> tuple[str, str, str]:
    """(measured, ratio vs baseline, 'met' / 'missed' / 'not measured') for one target."""
    row = find_row(rows, target.puzzle, target.series, target.size)
    if row is None or not row.ok:
        return (row.status if row is not None else "-"), "-", "not measured"
    ratio = row.ratio
    ratio_text = f"{ratio:.2f}x {row.baseline}" if ratio is not None else "-"
    rate = row.key_rate
    measured = f"{rate:.1f} {row.metric}" if rate is not None else "-"
    value = ratio if target.kind == "ratio" else (rate if row.flops else None)
    if value is None:
        return measured, ratio_text, "not measured"
    return measured, ratio_text, "met" if value >= target.value else "missed"


# -- writers (pure functions of the rows) ----------------------------------------------------------

CSV_COLUMNS = ["puzzle", "slug", "series", "size", "x", "status", "key_ms", "baseline", "baseline_ms", "ratio",
               "metric", "key_rate", "baseline_rate", "roofline", "bytes", "flops", "check"]


def _num(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def csv_record(row: Row) -> dict[str, str]:
    return {
        "puzzle": str(row.puzzle), "slug": row.slug, "series": row.series, "size": row.size, "x": f"{row.x:g}",
        "status": row.status, "key_ms": _num(row.key_ms, 6), "baseline": row.baseline,
        "baseline_ms": _num(row.baseline_ms, 6), "ratio": _num(row.ratio), "metric": row.metric,
        "key_rate": _num(row.key_rate, 5), "baseline_rate": _num(row.baseline_rate, 5),
        "roofline": _num(row.roofline, 3), "bytes": f"{row.bytes:g}", "flops": f"{row.flops:g}", "check": row.check,
    }


def write_csv(rows: list[Row], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow(csv_record(row))
    return path


def _rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value >= 10 else f"{value:.3g}"


def _cells(row: Row) -> list[str]:
    key_rate, base_rate, ratio = row.key_rate, row.baseline_rate, row.ratio
    return [
        str(row.puzzle), row.slug, row.series, row.size,
        f"{row.key_ms:.4f}" if row.key_ms is not None else "-",
        row.baseline or "-",
        f"{row.baseline_ms:.4f}" if row.baseline_ms is not None else "-",
        f"{ratio:.2f}x" if ratio is not None else "-",
        _rate(key_rate),
        _rate(base_rate),
        row.metric if row.bytes or row.flops else "-",
        f"{100 * row.roofline:.0f}%" if row.roofline is not None else "-",
        row.status if row.status != "ok" else (row.check or "ok"),
    ]


TABLE_HEADER = ["#", "puzzle", "series", "size", "key ms", "baseline", "base ms", "ratio", "key", "base", "unit",
                "roofline", "status"]


def format_table(rows: list[Row]) -> str:
    """A fixed-width text table, one line per row."""
    body = [TABLE_HEADER] + [_cells(r) for r in rows]
    widths = [max(len(line[i]) for line in body) for i in range(len(TABLE_HEADER))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in body)


def _md_table(header: list[str], lines: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(cell.replace("|", "/") for cell in line) + " |" for line in lines]
    return out


# What a person wrote about the last run (kept across re-runs): which GPU, what was tried, what missed.
HAND_NOTES = Path(__file__).resolve().parent.parent / "bench" / "notes.md"


def markdown_report(rows: list[Row], meta: dict[str, Any], plots: list[str]) -> str:
    """BENCHMARKS.md: the machine, the targets (met or missed), every result, the plots."""
    lines = [
        "# Benchmarks",
        "",
        "The answer keys against their torch baselines, written by `make bench` (`python -m checks.bench`). "
        "Times are medians of `triton.testing.do_bench` on fresh random inputs; ratios are the baseline's time "
        "over the answer key's (above 1: the answer key is faster). The roofline share compares with the copy "
        "bandwidth and matmul rate measured below.",
        "",
        "| | |",
        "|---|---|",
    ]
    for name in ("gpu", "date", "torch", "triton", "cuda", "python", "command"):
        if meta.get(name):
            lines.append(f"| {name if name != 'gpu' else 'GPU'} | {meta[name]} |")
    peaks = meta.get("peaks")
    if peaks:
        lines.append(f"| device-to-device copy | {peaks['copy_gbps']:.0f} GB/s (bytes read + written) |")
        lines.append(f"| float16 torch.matmul {peaks['matmul_side']}^3 | {peaks['matmul_tflops']:.0f} TFLOPS |")
    lines += ["", "## Targets", ""]
    target_lines = []
    for t in TARGETS:
        measured, ratio, verdict = evaluate(t, rows)
        target_lines.append([t.label, t.requirement, measured, ratio, verdict])
    lines += _md_table(["target", "requirement", "measured", "ratio vs baseline", "met"], target_lines)
    met = sum(1 for line in target_lines if line[-1] == "met")
    lines += ["", f"{met} of {len(TARGETS)} targets met."]
    lines += ["", "## Results", ""]
    header = ["#", "puzzle", "series", "size", "answer key ms", "baseline", "baseline ms", "ratio",
              "answer key rate", "baseline rate", "unit", "roofline", "status"]
    lines += _md_table(header, [_cells(r) for r in rows])
    notes = meta.get("notes") or []
    if notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in notes]
    if HAND_NOTES.exists():
        lines += ["", "## Reading these figures", "", HAND_NOTES.read_text(encoding="utf-8").rstrip()]
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"![{Path(p).stem.replace('_', ' ')}]({p})" for p in plots]
    return "\n".join(lines) + "\n"


# The plots: file name, title, the puzzles drawn together, and whether each series gets its own panel.
PLOTS: list[tuple[str, str, tuple[int, ...], bool]] = [
    ("vector_add", "Vector add, float32", (1,), False),
    ("matrix_add", "Matrix add, float32", (2,), False),
    ("matmul", "Matmul, float16 (M = N = K)", (3, 4), False),
    ("softmax", "Softmax, 4096 rows", (5,), True),
    ("softmax_long_rows", "Softmax over long rows, float32", (6, 7), False),
    ("attention_fwd", "Attention forward, float16: FlashAttention-1 and -2 against SDPA", (8, 9), True),
    ("attention_bwd", "Attention backward, float16: FlashAttention-2 against SDPA", (10,), True),
]
X_LABELS = {1: "elements", 2: "elements (M x N)", 3: "M = N = K", 4: "M = N = K", 5: "row length N",
            6: "row length N", 7: "row length N", 8: "sequence length N", 9: "sequence length N",
            10: "sequence length N"}


def _series_key(series: str) -> tuple[int, int, str]:
    """Panels in reading order: D=64, D=64 causal, D=128, ...; fp32 before fp16; others by name."""
    if series.startswith("D="):
        d, _, rest = series[2:].partition(" ")
        return (0, int(d) if d.isdigit() else 0, rest)
    return (1, 0, "" if series in ("fp32", "contiguous") else series)


def write_plots(rows: list[Row], folder: Path, names: dict[int, str] | None = None) -> list[Path]:
    """One PNG per family of puzzles with measured rows; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = names or {}
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, title, puzzles, split in PLOTS:
        chosen = [r for r in rows if r.ok and r.puzzle in puzzles]
        if not chosen:
            continue
        if split:
            series = sorted({r.series for r in chosen}, key=_series_key)
            panels = [(name, [r for r in chosen if r.series == name]) for name in series]
        else:
            panels = [("", chosen)]
        cols = min(len(panels), 2)
        nrows = math.ceil(len(panels) / cols)
        fig, axes = plt.subplots(nrows, cols, figsize=(6.4 * cols, 4.2 * nrows), squeeze=False)
        for ax, (subtitle, panel_rows) in zip(axes.flat, panels, strict=False):
            _draw_panel(ax, panel_rows, names, puzzles)
            ax.set_title(subtitle or title, fontsize=10)
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        if split:
            fig.suptitle(title)
        fig.tight_layout()
        path = folder / f"{stem}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def _draw_panel(ax, rows: list[Row], names: dict[int, str], puzzles: tuple[int, ...]) -> None:
    """Rate against size: a solid line per answer key, a dashed one per baseline; one colour per series
    when the panel has several, else one per puzzle (the baselines in black)."""
    series = sorted({r.series for r in rows}, key=_series_key)
    lines: dict[str, tuple[dict[str, Any], list[tuple[float, float]]]] = {}
    for r in sorted(rows, key=lambda r: r.x):
        several = len(series) > 1
        suffix = f" ({r.series})" if several else ""
        colour = f"C{series.index(r.series)}" if several else f"C{puzzles.index(r.puzzle)}"
        marker = "os^"[puzzles.index(r.puzzle) % 3]
        key_style = {"color": colour, "linestyle": "-", "marker": marker}
        lines.setdefault(f"{r.puzzle}: {names.get(r.puzzle, r.slug)}{suffix}", (key_style, []))[1].append(
            (r.x, r.key_rate or float("nan")))
        if r.baseline_ms is not None:
            base_style = {"color": colour if several else "black", "linestyle": "--", "marker": "x"}
            points = lines.setdefault(f"{r.baseline}{suffix}", (base_style, []))[1]
            if all(x != r.x for x, _ in points):
                points.append((r.x, r.baseline_rate or float("nan")))
    for label, (style, points) in lines.items():
        ax.plot([p[0] for p in points], [p[1] for p in points], label=label, **style)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(X_LABELS.get(rows[0].puzzle, "size"))
    ax.set_ylabel(rows[0].metric)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)


def read_csv(path: Path) -> list[Row]:
    """Rows back from a results.csv that write_csv wrote."""
    def number(text: str) -> float | None:
        return float(text) if text else None

    with open(path, newline="", encoding="utf-8") as f:
        return [Row(int(r["puzzle"]), r["slug"], r["series"], r["size"], float(r["x"]), status=r["status"],
                    key_ms=number(r["key_ms"]), baseline=r["baseline"], baseline_ms=number(r["baseline_ms"]),
                    bytes=float(r["bytes"]), flops=float(r["flops"]), check=r["check"],
                    roofline=number(r["roofline"])) for r in csv.DictReader(f)]


def write_data(rows: list[Row], meta: dict[str, Any], out: Path) -> Path:
    """results.csv and meta.json: everything needed to redraw the plots and the report later (--render)."""
    folder = out / "bench"
    csv_path = write_csv(rows, folder / "results.csv")
    (folder / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return csv_path


def write_outputs(rows: list[Row], meta: dict[str, Any], out: Path) -> dict[str, Any]:
    """The CSV, the plots and BENCHMARKS.md under `out`; returns their paths."""
    folder = out / "bench"
    csv_path = write_data(rows, meta, out)
    names = {int(p.number): p.slug for p in numbered_puzzles()}
    meta = dict(meta, notes=list(meta.get("notes", [])))
    try:
        plots = write_plots(rows, folder, names)
    except ImportError:
        plots = []
        meta["notes"].append("matplotlib is not installed here, so there are no plots: run "
                             "`python -m checks.bench --render DIR` where it is, on the folder this run wrote")
    for stem, *_ in PLOTS:  # a plot this run did not redraw would disagree with the CSV beside it
        stale = folder / f"{stem}.png"
        if stale not in plots and stale.exists():
            stale.unlink()
    report = out / "BENCHMARKS.md"
    report.write_text(markdown_report(rows, meta, [f"bench/{p.name}" for p in plots]), encoding="utf-8")
    return {"csv": csv_path, "plots": plots, "markdown": report}


# -- measuring (in a child process, on the GPU) ----------------------------------------------------


@dataclass
class Setup:
    """How to time one point: the answer key's call, the baseline's, and the work they do."""

    key: Callable[[], Any]
    baseline: Callable[[], Any]
    baseline_name: str
    nbytes: float
    flops: float = 0.0
    tolerance: float = 1e-3  # largest |key - baseline| / max |baseline| still called "ok"
    context: Callable[[], Any] | None = None  # a context manager the baseline runs inside


def _sdpa_context(q, k, v, causal: bool, scale: float):
    """The flash backend of scaled_dot_product_attention when it runs on these inputs, else the default."""
    import contextlib

    import torch.nn.functional as F

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q[:, :, :128], k[:, :, :128], v[:, :, :128], is_causal=causal, scale=scale)
        return (lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)), "sdpa flash"
    except (ImportError, RuntimeError):
        return contextlib.nullcontext, "sdpa (flash backend unavailable)"


def make_setup(point: Point, keys: dict[int, Any], gen, device: str = "cuda") -> Setup:
    """Draw the inputs of one point and wrap the calls to time."""
    import torch
    import torch.nn.functional as F

    p, number = point.params, point.puzzle
    fn = keys[number]
    randn = lambda *shape, dtype=torch.float32: torch.randn(*shape, generator=gen, device=device, dtype=dtype)
    if number == 1:
        x, y = randn(p["n"]), randn(p["n"])
        return Setup(lambda: fn(x, y), lambda: torch.add(x, y), "torch.add", 12.0 * p["n"], tolerance=1e-6)
    if number == 2:
        side = p["side"]
        a = randn(side, side)
        b = randn(side, side).t() if p["transposed"] else randn(side, side)
        return Setup(lambda: fn(a, b), lambda: torch.add(a, b), "torch.add", 12.0 * side * side, tolerance=1e-6)
    if number in (3, 4):
        s = p["side"]
        a, b = randn(s, s, dtype=torch.float16), randn(s, s, dtype=torch.float16)
        return Setup(lambda: fn(a, b), lambda: torch.matmul(a, b), "torch.matmul", 6.0 * s * s, 2.0 * s**3,
                     tolerance=1e-2)
    if number in (5, 6, 7):
        dtype = torch.float16 if p["dtype"] == "fp16" else torch.float32
        x = randn(p["M"], p["N"], dtype=dtype)
        return Setup(lambda: fn(x), lambda: torch.softmax(x, dim=-1), "torch.softmax",
                     2.0 * x.numel() * x.element_size(), tolerance=1e-2 if dtype == torch.float16 else 1e-4)
    B, H, N, D, causal = p["B"], p["H"], p["N"], p["D"], p["causal"]
    q, k, v = (randn(B, H, N, D, dtype=torch.float16) for _ in range(3))
    scale = 1.0 / math.sqrt(D)
    context, name = _sdpa_context(q, k, v, causal, scale)
    nbytes = 4.0 * B * H * N * D * 2
    if number == 8:
        return Setup(lambda: fn(q, k, v, scale),
                     lambda: F.scaled_dot_product_attention(q, k, v, scale=scale), name, nbytes,
                     attention_flops(B, H, N, D, False), 2e-2, context)
    if number == 9:
        return Setup(lambda: fn(q, k, v, causal, scale)[0],
                     lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale), name, nbytes,
                     attention_flops(B, H, N, D, causal), 2e-2, context)
    o, lse = keys[9](q, k, v, causal, scale)
    do = randn(B, H, N, D, dtype=torch.float16)
    qr, kr, vr = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    with context():
        out = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal, scale=scale)
    return Setup(lambda: fn(q, k, v, o, lse, do, causal, scale),
                 lambda: torch.autograd.grad(out, (qr, kr, vr), do, retain_graph=True),
                 name, 2.0 * nbytes, attention_flops(B, H, N, D, causal, backward=True), 5e-2, context)


def compare_outputs(key_out: Any, base_out: Any, tolerance: float) -> str:
    """'ok' when every output is within tolerance x its largest magnitude of the baseline's."""
    mine = list(key_out) if isinstance(key_out, (tuple, list)) else [key_out]
    theirs = list(base_out) if isinstance(base_out, (tuple, list)) else [base_out]
    worst = 0.0
    for a, b in zip(mine, theirs, strict=False):
        if a.shape != b.shape:
            return f"shape {tuple(a.shape)}, baseline {tuple(b.shape)}"
        scale = float(b.float().abs().max().clamp_min(1e-30))
        err = float((a.float() - b.float()).abs().max()) / scale
        worst = max(worst, err if not math.isnan(err) else math.inf)
    return "ok" if worst <= tolerance else f"differs from baseline (max rel err {worst:.2g})"


def _cpu_ms(fn: Callable[[], Any], runs: int = 3) -> float:
    """Median wall-clock milliseconds of a few runs: the smoke test's stand-in for do_bench."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def measure(point: Point, keys: dict[int, Any], slug: str, warmup: int, rep: int, device: str = "cuda") -> Row:
    """Time one point: the answer key, then the baseline; any failure becomes the row's status."""
    import contextlib

    import torch

    from checks.timing import bench_ms

    timer = (lambda fn: bench_ms(fn, warmup, rep)) if device == "cuda" else _cpu_ms
    row = Row(point.puzzle, slug, point.series, point.size, point.x)
    gen = torch.Generator(device=device)
    gen.manual_seed(hash((point.puzzle, point.series, point.size)) % (1 << 31))
    setup = None
    try:
        setup = make_setup(point, keys, gen, device)
        row.baseline, row.bytes, row.flops = setup.baseline_name, setup.nbytes, setup.flops
        context = setup.context or contextlib.nullcontext
        key_out = setup.key()  # compiles and autotunes before the clock starts
        with context():
            base_out = setup.baseline()
        row.check = compare_outputs(key_out, base_out, setup.tolerance)
        del key_out, base_out
        row.key_ms = timer(setup.key)
        with context():
            row.baseline_ms = timer(setup.baseline)
    except torch.cuda.OutOfMemoryError:
        row.status = "failed: out of memory"
    except Exception as exc:  # noqa: BLE001 - any failure is a row, not the end of the benchmark
        text = " ".join(f"{type(exc).__name__}: {exc}".split())
        row.status = f"failed: {text[:160]}"
    finally:
        del setup
        if device == "cuda":
            torch.cuda.empty_cache()
    return row


def run_child(job: dict[str, Any]) -> int:
    """The child process: measure the device, or one puzzle's points, appending JSON lines to job['out']."""
    import torch

    out = open(job["out"], "a", encoding="utf-8")

    def emit(record: dict[str, Any]) -> None:
        out.write(json.dumps(record) + "\n")
        out.flush()

    device = job["device"]
    if job["kind"] == "device":
        import triton

        from checks.timing import measure_peaks

        meta = {
            "gpu": torch.cuda.get_device_name() if device == "cuda" else "CPU (Triton interpreter)",
            "torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda or "",
            "python": sys.version.split()[0],
        }
        if device == "cuda":
            try:
                meta["peaks"] = asdict(measure_peaks())
            except Exception as exc:  # noqa: BLE001
                meta["peaks_error"] = f"{type(exc).__name__}: {exc}"
        emit({"meta": meta})
        return 0
    keys = {number: getattr(load_module(Path(path), f"answer_key_{number}"), name)
            for number, (path, name) in ((int(k), v) for k, v in job["keys"].items())}
    number, slug = job["puzzle"], job["slug"]
    for data in job["points"]:
        point = Point(**data)
        row = measure(point, keys, slug, job["warmup"], job["rep"], device)
        emit({"row": asdict(row)})
        print(f"  {progress_line(row)}", flush=True)
        if device == "cuda" and row.status.startswith("failed") and not row.status.endswith("out of memory"):
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - the CUDA context is gone: the rest cannot run here
                print(f"  puzzle {number}: the CUDA context broke; its remaining sizes are not run", flush=True)
                return 3
    return 0


def progress_line(row: Row) -> str:
    if not row.ok:
        return f"{row.puzzle} {row.series} {row.size}: {row.status}"
    ratio = f"{row.ratio:.2f}x" if row.ratio is not None else "-"
    return (f"{row.puzzle} {row.series} {row.size}: {row.key_ms:.4f} ms ({row.key_rate:.1f} {row.metric}), "
            f"{row.baseline} {row.baseline_ms or 0:.4f} ms: {ratio} [{row.check}]")


# -- the parent: plans, runs one child per puzzle within the budget, writes the files ----------------


def _child_env(device: str) -> dict[str, str]:
    env = dict(os.environ)
    if device == "cuda":
        env.pop("TRITON_INTERPRET", None)  # the benchmark times compiled kernels, never the interpreter
    else:
        env["TRITON_INTERPRET"] = "1"  # --smoke without a GPU
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _spawn(job: dict[str, Any], workdir: Path, timeout: float) -> tuple[list[dict[str, Any]], str]:
    """Run one child; its JSON records and, when it did not finish cleanly, why."""
    out = workdir / f"records_{job.get('puzzle', 'device')}.jsonl"
    job = dict(job, out=str(out))
    job_path = workdir / f"job_{job.get('puzzle', 'device')}.json"
    job_path.write_text(json.dumps(job), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "checks.bench", "--child", str(job_path)], cwd=ROOT,
                            env=_child_env(job["device"]), start_new_session=True)
    problem = ""
    try:
        rc = proc.wait(timeout=max(timeout, 1.0))
        if rc != 0:
            problem = f"its process ended with exit status {rc}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        problem = f"its time share of {timeout:.0f} s ran out"
    except BaseException:  # Ctrl-C: take the child (its own session) down too
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    records = []
    if out.exists():
        for line in out.read_text(encoding="utf-8").splitlines():
            if line.strip():
                records.append(json.loads(line))
    return records, problem


def numbered_puzzles() -> list[Puzzle]:
    """The puzzles the sweep measures: the numbered ones (a lettered step has no sweep of its own)."""
    return [p for p in load_puzzles() if p.number.isdigit()]


def _skip_reason(puzzle: Puzzle, ready: dict[int, Puzzle]) -> str:
    if not puzzle.ready:
        return f"puzzle {puzzle.number} ({puzzle.slug}) is planned, not ready: skipped"
    if not puzzle.solution.exists():
        return f"puzzle {puzzle.number} ({puzzle.slug}): {puzzle.solution.relative_to(ROOT)} is missing: skipped"
    if puzzle.number == "10" and (9 not in ready or not ready[9].solution.exists()):
        return "puzzle 10 needs o and lse from puzzle 9's answer key, which is not ready: skipped"
    return ""


def _numbers(text: str) -> set[int]:
    try:
        return {int(x) for x in text.split(",") if x.strip()}
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of puzzle numbers") from None


def _fallback_meta(device: str) -> dict[str, Any]:
    """What the parent can say about the machine when the device measurement did not report."""
    import torch
    import triton

    gpu = torch.cuda.get_device_name() if device == "cuda" else "CPU (Triton interpreter)"
    return {"gpu": gpu, "torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda or "",
            "python": sys.version.split()[0]}


def sweep(puzzles: list[Puzzle], ready: dict[int, Puzzle], quick: bool, smoke: bool, budget: float,
          device: str, checkpoint: Callable[[list[Row], dict[str, Any]], Any] | None = None,
          ) -> tuple[list[Row], dict[str, Any]]:
    """Measure the device, then each puzzle in its own process; every planned point ends up as a row.

    `checkpoint(rows, meta)` is called after each puzzle, so that a run cut short keeps what it measured.
    """
    start = time.monotonic()
    warmup, rep = (5, 25) if quick else (10, 50)
    notes: list[str] = []
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench_") as tmp:
        workdir = Path(tmp)
        print("Measuring the device (copy bandwidth, float16 matmul)...", flush=True)
        records, problem = _spawn({"kind": "device", "device": device}, workdir, DEVICE_TIMEOUT_S)
        meta = next((r["meta"] for r in records if "meta" in r), None) or _fallback_meta(device)
        if device == "cuda" and (problem or "peaks" not in meta):
            notes.append(f"device measurement: {problem or meta.get('peaks_error', 'no result')}")
        runnable = []
        for p in puzzles:
            reason = _skip_reason(p, ready)
            if reason:
                print(reason, flush=True)
                notes.append(reason)
            else:
                runnable.append(p)
        for index, p in enumerate(runnable):
            number = int(p.number)
            points = plan(number, quick, smoke)
            left = budget - (time.monotonic() - start) - RESERVE_S * (len(runnable) - index - 1)
            share = min(CAPS_S.get(number, 60), left)
            print(f"Puzzle {p.number} ({p.slug}): {len(points)} sizes, at most {max(share, 0):.0f} s", flush=True)
            got: list[Row] = []
            problem = "the time budget was spent"
            peaks = Peaks(**meta["peaks"]) if meta.get("peaks") else None
            if share >= 5:
                keys = {number: (str(p.solution), p.name)}
                if number == 10:
                    keys[9] = (str(ready[9].solution), ready[9].name)
                job = {"kind": "puzzle", "device": device, "puzzle": number, "slug": p.slug, "keys": keys,
                       "points": [asdict(pt) for pt in points], "warmup": warmup, "rep": rep}
                records, problem = _spawn(job, workdir, share)
                got = [Row(**r["row"]) for r in records if "row" in r]
                problem = problem or "its process stopped early"
            for row in got:
                if row.ok and peaks is not None:
                    row.roofline = roofline_share(row.bytes, row.flops, row.key_ms, peaks)
            done = {(r.series, r.size) for r in got}
            missing = [Row(number, p.slug, pt.series, pt.size, pt.x, status=f"not run: {problem}")
                       for pt in points if (pt.series, pt.size) not in done]
            if missing:
                notes.append(f"puzzle {p.number}: {len(missing)} size(s) not run: {problem}")
            rows += sorted(got + missing, key=lambda r: (_series_key(r.series), r.x))
            if checkpoint is not None:
                checkpoint(rows, dict(meta, notes=notes))
    meta["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta["notes"] = notes
    return rows, meta


def report(rows: list[Row], meta: dict[str, Any], out: Path) -> None:
    """Print the table and the targets, and write every file under `out`."""
    print()
    print(format_table(rows))
    written = write_outputs(rows, meta, out)
    print()
    for t in TARGETS:
        measured, ratio, verdict = evaluate(t, rows)
        print(f"  {verdict:<12} {t.label}: {measured}, {ratio} (target {t.requirement})")
    print(f"\nWrote {written['csv']}, {len(written['plots'])} plot(s) and {written['markdown']}.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes (the target sizes and one more)")
    parser.add_argument("--out", type=Path, help="where bench/ and BENCHMARKS.md go (default: the repository)")
    parser.add_argument("--only", type=_numbers, help="comma-separated puzzle numbers (default: every ready puzzle)")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds for the whole sweep")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, on the CPU interpreter when there is no GPU: checks the plumbing only")
    parser.add_argument("--render", type=Path, metavar="DIR",
                        help="measure nothing: redraw the plots and BENCHMARKS.md from DIR/bench/results.csv")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        return run_child(json.loads(args.child.read_text(encoding="utf-8")))
    if args.render is not None:
        data = args.render / "bench"
        if not (data / "results.csv").exists():
            print(f"There is no {data / 'results.csv'}: give the folder a benchmark run wrote (its --out).",
                  file=sys.stderr)
            return 2
        meta_path = data / "meta.json"
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else {}
        report(read_csv(data / "results.csv"), meta, args.out or args.render)
        return 0

    import torch

    cuda = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    if not cuda and not args.smoke:
        print(NO_GPU, file=sys.stderr)
        return 1
    start = time.monotonic()
    out = args.out or ROOT
    flags = (" --quick" if args.quick else "") + (" --smoke" if args.smoke else "")
    if args.only:
        flags += " --only " + ",".join(str(n) for n in sorted(args.only))
    puzzles = [p for p in numbered_puzzles() if args.only is None or int(p.number) in args.only]
    ready = {int(p.number): p for p in numbered_puzzles() if p.ready}
    checkpoint = lambda rows, meta: write_data(rows, meta, out)
    rows, meta = sweep(puzzles, ready, args.quick, args.smoke, args.budget, "cuda" if cuda else "cpu", checkpoint)
    meta["command"] = f"python -m checks.bench{flags}"
    if args.smoke:
        meta["notes"].insert(0, "a --smoke run: tiny sizes that check the benchmark itself; its times mean nothing")
    meta["seconds"] = round(time.monotonic() - start)
    report(rows, meta, out)
    print(f"The benchmark took {meta['seconds']} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
