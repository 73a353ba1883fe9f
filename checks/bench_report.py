"""What `make bench` writes from its rows: results.csv, meta.json, BENCHMARKS.md and the plots.

Every writer is a pure function of the rows (and of the targets and plots the registry declares),
tested on made-up rows without a GPU (tests/test_bench.py); `checks.figures` reads the CSV too.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checks.registry import ROOT, Puzzle, load_puzzles
from checks.timing import gbps, speed_ratio, tflops

# What a person wrote about the last run (kept across re-runs): which GPU, what was tried, what missed.
HAND_NOTES = ROOT / "bench" / "notes.md"
CSV_COLUMNS = ["puzzle", "slug", "series", "size", "x", "status", "key_ms", "baseline", "baseline_ms", "ratio",
               "metric", "key_rate", "baseline_rate", "roofline", "bytes", "flops", "check"]
OTHERS = "other_baselines"  # a last CSV column: "name=ms; name=ms"
HEADER = ["#", "puzzle", "series", "size", "answer key ms", "baseline", "baseline ms", "ratio", "answer key rate",
          "baseline rate", "unit", "roofline", "other baselines", "status"]


@dataclass
class Row:
    """One result: the answer key and its baselines at one size. Times in ms; None where nothing was measured."""

    puzzle: int | str
    slug: str
    series: str  # what varies besides the size: "fp32", "D=64 causal", "b transposed", ...
    size: str  # the size in words: "n=2^28", "4096x4096", "N=16384"
    x: float  # the size as a number, for the plots' x axis
    status: str = "ok"  # "ok", or what went wrong ("failed: out of memory", "not run: ...")
    key_ms: float | None = None
    baseline: str = ""  # the grader's baseline (puzzles.yaml bench.baseline)
    baseline_ms: float | None = None
    bytes: float = 0.0
    flops: float = 0.0
    check: str = ""  # the answer key's output against the baseline's: "ok" or how they differ
    roofline: float | None = None  # the answer key's share of the roofline, 0..1
    others: dict[str, float] = field(default_factory=dict)  # the spec's other baselines: name -> ms

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

    def ratio_to(self, baseline: str | None = None) -> float | None:
        """The baseline's time over the answer key's (above 1: the answer key is faster)."""
        ms = self.baseline_ms if baseline in (None, self.baseline) else self.others.get(baseline)
        return speed_ratio(ms, self.key_ms) if ms is not None and self.key_ms else None

    @property
    def ratio(self) -> float | None:
        return self.ratio_to()


@dataclass(frozen=True)
class Target:
    label: str
    puzzle: int | str
    series: str
    size: str
    kind: str  # "ratio": baseline time / answer key time; "tflops": the answer key's rate
    value: float
    baseline: str | None = None  # the baseline a ratio is against; None: the row's own

    @property
    def requirement(self) -> str:
        if self.kind == "tflops":
            return f">= {self.value:g} TFLOPS"
        return f">= {self.value:g}x" + (f" {self.baseline}" if self.baseline else "")


def evaluate(target: Target, rows: list[Row]) -> tuple[str, str, str]:
    """(measured, ratio vs baseline, 'met' / 'missed' / 'not measured') for one target."""
    row = next((r for r in rows if (r.puzzle, r.series, r.size) == (target.puzzle, target.series, target.size)), None)
    if row is None or not row.ok:
        return (row.status if row is not None else "-"), "-", "not measured"
    ratio, rate = row.ratio_to(target.baseline), row.key_rate
    ratio_text = f"{ratio:.2f}x {target.baseline or row.baseline}" if ratio is not None else "-"
    value = ratio if target.kind == "ratio" else (rate if row.flops else None)
    if value is None:
        return f"{rate:.1f} {row.metric}", ratio_text, "not measured"
    return f"{rate:.1f} {row.metric}", ratio_text, "met" if value >= target.value else "missed"


def _num(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def csv_record(row: Row) -> dict[str, str]:
    """The CSV's columns but the last (what checks.figures hashes to know when a figure is stale)."""
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
        writer = csv.DictWriter(f, fieldnames=[*CSV_COLUMNS, OTHERS])
        writer.writeheader()
        for r in rows:
            writer.writerow({**csv_record(r), OTHERS: "; ".join(f"{k}={_num(ms, 6)}" for k, ms in r.others.items())})
    return path


def read_csv(path: Path) -> list[Row]:
    """Rows back from a results.csv (also one written before the other_baselines column)."""
    def number(text: str) -> float | None:
        return float(text) if text else None

    with open(path, newline="", encoding="utf-8") as f:
        return [Row(int(r["puzzle"]) if r["puzzle"].isdigit() else r["puzzle"], r["slug"], r["series"], r["size"],
                    float(r["x"]), r["status"], number(r["key_ms"]), r["baseline"], number(r["baseline_ms"]),
                    float(r["bytes"]), float(r["flops"]), r["check"], number(r["roofline"]),
                    {k: float(ms) for k, _, ms in (p.partition("=") for p in (r.get(OTHERS) or "").split("; ") if p)})
                for r in csv.DictReader(f)]


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}" if value >= 10 else f"{value:.3g}"


def _cells(r: Row) -> list[str]:
    ms = lambda value: f"{value:.4f}" if value is not None else "-"  # noqa: E731
    others = ", ".join(f"{name} {r.ratio_to(name):.2f}x" for name in r.others if r.ratio_to(name) is not None)
    return [str(r.puzzle), r.slug, r.series, r.size, ms(r.key_ms), r.baseline or "-", ms(r.baseline_ms),
            f"{r.ratio:.2f}x" if r.ratio is not None else "-", _rate(r.key_rate), _rate(r.baseline_rate),
            r.metric if r.bytes or r.flops else "-", f"{100 * r.roofline:.0f}%" if r.roofline is not None else "-",
            others or "-", r.status if r.status != "ok" else (r.check or "ok")]


def format_table(rows: list[Row]) -> str:
    """A fixed-width text table, one line per row."""
    body = [HEADER] + [_cells(r) for r in rows]
    widths = [max(len(line[i]) for line in body) for i in range(len(HEADER))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in body)


def _md_table(header: list[str], lines: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return out + ["| " + " | ".join(cell.replace("|", "/") for cell in line) + " |" for line in lines]


def markdown_report(rows: list[Row], meta: dict[str, Any], plots: list[str], targets: list[Target]) -> str:
    """BENCHMARKS.md: the machine, the targets (met or missed), every result, the hand notes, the plots."""
    lines = ["# Benchmarks", "", "The answer keys against their torch baselines, written by `make bench` "
             "(`python -m checks.bench`, sizes and targets from `puzzles.yaml`). Times are medians of "
             "`triton.testing.do_bench` on fresh random inputs; ratios are the baseline's time over the answer "
             "key's (above 1: the answer key is faster). The roofline share compares with the copy bandwidth "
             "and matmul rate measured below.", "", "| | |", "|---|---|"]
    lines += [f"| {'GPU' if k == 'gpu' else k} | {meta[k]} |" for k in
              ("gpu", "date", "torch", "triton", "cuda", "python", "command") if meta.get(k)]
    if meta.get("peaks"):
        peaks = meta["peaks"]
        lines.append(f"| device-to-device copy | {peaks['copy_gbps']:.0f} GB/s (bytes read + written) |")
        lines.append(f"| float16 torch.matmul {peaks['matmul_side']}^3 | {peaks['matmul_tflops']:.0f} TFLOPS |")
    judged = [[t.label, t.requirement, *evaluate(t, rows)] for t in targets]
    lines += ["", "## Targets", "", *_md_table(["target", "requirement", "measured", "ratio", "met"], judged)]
    lines += ["", f"{sum(line[-1] == 'met' for line in judged)} of {len(judged)} targets met."]
    lines += ["", "## Results", "", *_md_table(HEADER, [_cells(r) for r in rows])]
    if meta.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {note}" for note in meta["notes"]]
    if HAND_NOTES.exists():
        lines += ["", "## Reading these figures", "", HAND_NOTES.read_text(encoding="utf-8").rstrip()]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{Path(p).stem.replace('_', ' ')}]({p})" for p in plots]
    return "\n".join(lines) + "\n"


def plot_groups(puzzles: tuple[Puzzle, ...] | list[Puzzle]) -> dict[str, list[Puzzle]]:
    """Plot file stem -> the puzzles drawn in it (puzzles.yaml bench.sweep.plot), in course order."""
    groups: dict[str, list[Puzzle]] = {}
    for p in puzzles:
        if p.sweep.get("plot"):
            groups.setdefault(p.sweep["plot"], []).append(p)
    return groups


def write_plots(rows: list[Row], folder: Path, puzzles: tuple[Puzzle, ...] | None = None) -> list[Path]:
    """One PNG per plot with measured rows, a panel per series; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, group in plot_groups(puzzles or load_puzzles()).items():
        chosen = [r for r in rows if r.ok and r.puzzle in [p.number for p in group]]
        series = list(dict.fromkeys(r.series for r in chosen))
        if not chosen:
            continue
        cols = min(len(series), 2)
        fig, axes = plt.subplots(math.ceil(len(series) / cols), cols, figsize=(6.4 * cols, 4.2 * math.ceil(
            len(series) / cols)), squeeze=False)
        for ax, name in zip(axes.flat, series, strict=False):
            _draw_panel(ax, [r for r in chosen if r.series == name], group)
            ax.set_title(name, fontsize=10)
        for ax in list(axes.flat)[len(series):]:
            ax.set_visible(False)
        fig.suptitle(" / ".join(p.title for p in group if any(r.puzzle == p.number for r in chosen)))
        fig.tight_layout()
        fig.savefig(folder / f"{stem}.png", dpi=110)
        plt.close(fig)
        written.append(folder / f"{stem}.png")
    return written


def _draw_panel(ax: Any, rows: list[Row], group: list[Puzzle]) -> None:
    """Rate against size: a solid line per answer key, a dashed one per baseline (the grader's in black)."""
    numbers = [p.number for p in group]
    lines: dict[str, tuple[dict[str, Any], dict[float, float]]] = {}
    for r in sorted(rows, key=lambda r: r.x):
        i = numbers.index(r.puzzle)
        lines.setdefault(f"{r.puzzle}: {r.slug}", ({"color": f"C{i}", "marker": "os^"[i % 3]}, {}))[1][r.x] = (
            r.key_rate or math.nan)
        for j, (name, ms) in enumerate({r.baseline: r.baseline_ms, **r.others}.items()):
            style = {"color": f"C{len(numbers) + j - 1}" if j else "black", "linestyle": "--", "marker": "x"}
            lines.setdefault(name, (style, {}))[1].setdefault(r.x, r.rate(ms) or math.nan)
    for label, (style, points) in lines.items():
        ax.plot(list(points), list(points.values()), label=label, **style)
    ax.set(xlabel=group[0].sweep.get("x_label", "size"), ylabel=rows[0].metric)
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)


def write_data(rows: list[Row], meta: dict[str, Any], out: Path) -> Path:
    """results.csv and meta.json: everything needed to redraw the plots and the report later (--render)."""
    csv_path = write_csv(rows, out / "bench" / "results.csv")
    (out / "bench" / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return csv_path


def write_outputs(rows: list[Row], meta: dict[str, Any], out: Path, targets: list[Target]) -> dict[str, Any]:
    """The CSV, the plots and BENCHMARKS.md under `out`; returns their paths."""
    folder, meta = out / "bench", dict(meta, notes=list(meta.get("notes", [])))
    csv_path = write_data(rows, meta, out)
    try:
        plots = write_plots(rows, folder)
    except ImportError:
        plots = []
        meta["notes"].append("matplotlib is not installed here, so there are no plots: run "
                             "`python -m checks.bench --render DIR` where it is, on the folder this run wrote")
    for stem in plot_groups(load_puzzles()):  # a plot this run did not redraw would disagree with the CSV
        if folder / f"{stem}.png" not in plots and (folder / f"{stem}.png").exists():
            (folder / f"{stem}.png").unlink()
    report = out / "BENCHMARKS.md"
    report.write_text(markdown_report(rows, meta, [f"bench/{p.name}" for p in plots], targets), encoding="utf-8")
    return {"csv": csv_path, "plots": plots, "markdown": report}
