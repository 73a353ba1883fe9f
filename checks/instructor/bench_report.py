"""What `make bench` writes from its rows (results.csv, meta.json, plots, BENCHMARKS.md): pure functions of the
rows and of the targets and plots puzzles.yaml declares, tested on made-up rows (tests/test_bench.py)."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checks.engine.timing import gbps, speed_ratio, tflops
from checks.registry import ROOT, load_puzzles

HAND_NOTES = ROOT / "bench" / "notes.md"  # what a person wrote about the last run, kept across re-runs
ANSWER_KEY = "answer key"  # the baseline of a variant's rows
CSV_COLUMNS = [
    "puzzle",
    "slug",
    "variant",
    "series",
    "size",
    "x",
    "status",
    "key_ms",
    "baseline",
    "baseline_ms",
    "ratio",
    "metric",
    "key_rate",
    "baseline_rate",
    "roofline",
    "bytes",
    "flops",
    "check",
    "other_baselines",
]
HEADER = [
    "#",
    "puzzle",
    "series",
    "size",
    "answer key ms",
    "baseline",
    "baseline ms",
    "ratio",
    "answer key rate",
    "baseline rate",
    "unit",
    "roofline",
    "other baselines",
    "status",
]
_num = lambda value, digits=4: "" if value is None else f"{value:.{digits}g}"  # a CSV cell


@dataclass
class Row:
    """One result: the answer key and its baselines at one size, or a variant (another way to write the puzzle's
    function, bench.sweep.variants) and the answer key as its baseline. Times in ms; None where not measured."""

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
        ratio = f">= {self.value:g}x {self.baseline or ''}".rstrip()
        return f">= {self.value:g} TFLOPS" if self.kind == "tflops" else ratio


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
    return {
        "puzzle": str(r.puzzle),
        "slug": r.slug,
        "variant": r.variant,
        "series": r.series,
        "size": r.size,
        "x": f"{r.x:g}",
        "status": r.status,
        "key_ms": _num(r.key_ms, 6),
        "baseline": r.baseline,
        "baseline_ms": _num(r.baseline_ms, 6),
        "ratio": _num(r.ratio),
        "metric": r.metric,
        "key_rate": _num(r.key_rate, 5),
        "baseline_rate": _num(r.baseline_rate, 5),
        "roofline": _num(r.roofline, 3),
        "bytes": f"{r.bytes:g}",
        "flops": f"{r.flops:g}",
        "check": r.check,
    }


def read_csv(path: Path) -> list[Row]:
    """Rows back from a results.csv (also one written before the variant or other_baselines columns)."""
    num = lambda text: float(text) if text else None
    with open(path, newline="", encoding="utf-8") as f:
        return [
            Row(
                r["puzzle"],
                r["slug"],
                r["series"],
                r["size"],
                float(r["x"]),
                r["status"],
                num(r["key_ms"]),
                r["baseline"],
                num(r["baseline_ms"]),
                float(r["bytes"]),
                float(r["flops"]),
                r["check"],
                num(r["roofline"]),
                {
                    k: float(ms)
                    for k, _, ms in (p.partition("=") for p in (r.get(CSV_COLUMNS[-1]) or "").split("; ") if p)
                },
                r.get("variant") or "",
            )
            for r in csv.DictReader(f)
        ]


def write_data(rows: list[Row], meta: dict[str, Any], out: Path) -> Path:
    """bench/results.csv and bench/meta.json: everything --render needs to redraw the plots and the report."""
    (out / "bench").mkdir(parents=True, exist_ok=True)
    with open(out / "bench" / "results.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for r in rows:
            others = "; ".join(f"{name}={_num(ms, 6)}" for name, ms in r.others.items())
            writer.writerow({**csv_record(r), CSV_COLUMNS[-1]: others})
    (out / "bench" / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return out / "bench" / "results.csv"


def cells(r: Row) -> list[str]:
    ms = lambda value: "-" if value is None else f"{value:.4f}"
    rate = lambda value: "-" if value is None else f"{value:.1f}" if value >= 10 else f"{value:.3g}"
    others = ", ".join(f"{name} {r.ratio_to(name):.2f}x" for name in r.others if r.ratio_to(name) is not None)
    return [
        str(r.puzzle),
        f"{r.slug}, variant: {r.variant}" if r.variant else r.slug,
        r.series,
        r.size,
        ms(r.key_ms),
        r.baseline or "-",
        ms(r.baseline_ms),
        "-" if r.ratio is None else f"{r.ratio:.2f}x",
        rate(r.key_rate),
        rate(r.baseline_rate),
        r.metric if r.bytes or r.flops else "-",
        "-" if r.roofline is None else f"{100 * r.roofline:.0f}%",
        others or "-",
        r.status if r.status != "ok" else (r.check or "ok"),
    ]


def markdown_report(rows: list[Row], meta: dict[str, Any], plots: list[str], targets: list[Target]) -> str:
    """BENCHMARKS.md: the machine, the targets (met or missed), every result, the hand notes, the plots."""
    lines = [
        "# Benchmarks",
        "",
        "The answer keys against their torch baselines, by `make bench` (sizes and targets "
        "from `puzzles.yaml`): medians of `triton.testing.do_bench` on fresh random inputs; ratios are the "
        "baseline's time over the answer key's (above 1: the answer key is faster); the roofline share compares "
        "with the copy bandwidth and matmul rate measured below. A row marked `variant` times another way to write "
        "the puzzle's function (`bench.sweep.variants`) in the answer key's columns, with the answer key as its "
        "baseline.",
        "",
        "| | |",
        "|---|---|",
    ]
    lines += [
        f"| {'GPU' if k == 'gpu' else k} | {meta[k]} |"
        for k in ("gpu", "date", "torch", "triton", "cuda", "python", "command")
        if meta.get(k)
    ]
    if peaks := meta.get("peaks"):
        lines += [
            f"| device-to-device copy | {peaks['copy_gbps']:.0f} GB/s (bytes read + written) |",
            f"| float16 torch.matmul {peaks['matmul_side']}^3 | {peaks['matmul_tflops']:.0f} TFLOPS |",
        ]
    table = lambda header, body: [
        "| " + " | ".join(cell.replace("|", "/") for cell in line) + " |"
        for line in [header, ["---"] * len(header), *body]
    ]
    judged = [[t.label, t.requirement, *evaluate(t, rows)] for t in targets]
    lines += ["", "## Targets", "", *table(["target", "requirement", "measured", "ratio", "met"], judged)]
    lines += ["", f"{sum(line[-1] == 'met' for line in judged)} of {len(judged)} targets met."]
    lines += ["", "## Results", "", *table(HEADER, [cells(r) for r in rows])]
    lines += ["", "## Notes", "", *[f"- {note}" for note in meta["notes"]]] if meta.get("notes") else []
    if HAND_NOTES.exists():
        lines += ["", "## Reading these figures", "", HAND_NOTES.read_text(encoding="utf-8").rstrip()]
    lines += ["", "## Plots", "", *[f"![{Path(p).stem.replace('_', ' ')}]({p})" for p in plots]] if plots else []
    return "\n".join(lines) + "\n"


def write_plots(rows: list[Row], folder: Path) -> list[Path]:
    """A PNG per plot (bench.sweep.plot), a panel per series; deletes those without rows; returns those written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written, groups = [], {}
    folder.mkdir(parents=True, exist_ok=True)
    for p in (p for p in load_puzzles() if p.sweep.get("plot")):
        groups.setdefault(p.sweep["plot"], []).append(p)
    for stem, group in groups.items():
        chosen = [r for r in rows if r.ok and r.puzzle in [p.number for p in group]]
        series = list(dict.fromkeys(r.series for r in chosen))
        if not chosen:
            (folder / f"{stem}.png").unlink(missing_ok=True)
            continue
        cols, high = min(len(series), 2), math.ceil(len(series) / 2)
        fig, axes = plt.subplots(high, cols, figsize=(6.4 * cols, 4.2 * high), squeeze=False, layout="tight")
        for ax, name in zip(axes.flat, series, strict=False):
            keys, bases = {}, {}  # label -> {x: rate}: solid, each answer key or variant; dashed, each baseline
            for r in sorted((r for r in chosen if r.series == name), key=lambda r: r.x):
                keys.setdefault(f"{r.puzzle}: {r.slug}" + (f", {r.variant}" if r.variant else ""), {})[r.x] = r.key_rate
                if r.variant:  # its baseline is the answer key: a line of its own already
                    continue
                for baseline, ms in {r.baseline: r.baseline_ms, **r.others}.items():
                    bases.setdefault(baseline, {}).setdefault(r.x, r.rate(ms) or math.nan)
            for style, lines in (("-o", keys), ("--x", bases)):
                for label, points in lines.items():
                    ax.plot(list(points), list(points.values()), style, label=label)
            ax.set(title=name, xlabel=group[0].sweep.get("x_label", "size"), ylabel=chosen[0].metric, ylim=(0, None))
            ax.set_xscale("log", base=2)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        for ax in list(axes.flat)[len(series) :]:
            ax.set_visible(False)
        fig.suptitle(" / ".join(p.title for p in group if p.number in {r.puzzle for r in chosen}))
        fig.savefig(folder / f"{stem}.png", dpi=110)
        plt.close(fig)
        written.append(folder / f"{stem}.png")
    return written


def write_outputs(rows: list[Row], meta: dict[str, Any], out: Path, targets: list[Target]) -> dict[str, Any]:
    """The plots and BENCHMARKS.md under `out`, beside the data write_data wrote; returns their paths."""
    plots, report = write_plots(rows, out / "bench"), out / "BENCHMARKS.md"
    report.write_text(markdown_report(rows, meta, [f"bench/{p.name}" for p in plots], targets), encoding="utf-8")
    return {"plots": plots, "markdown": report}
