"""The notebooks' figures of recorded GPU measurements, drawn by `make notebooks` from `bench/`.

Each figure plots rows of `bench/results.csv` (written by `make bench` on a GPU) and is captioned
with the GPU, date and versions of `bench/meta.json`, so a learner without a GPU still sees what
the puzzles' methods are worth. A notebook source places one with a fence:

    ```{figure}
    fa1_vs_fa2
    ```

The PNGs go to `notebooks/figures/`, with `figures.json` beside them: for each figure, a hash of
what it is drawn from (its rows, the metadata, this file) and a hash of the PNG. `--check` compares
both without drawing, so a stale or hand-edited figure is caught; `make notebooks` redraws only the
figures whose inputs changed (PNG bytes can differ between matplotlib versions).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from checks.instructor.bench import Row, csv_record, read_csv
from checks.registry import ROOT


@dataclass(frozen=True)
class Line:
    label: str
    puzzle: str
    series: str
    baseline: bool = False  # the row's baseline timing instead of the answer key's
    style: str = "-"


@dataclass(frozen=True)
class Figure:
    name: str
    title: str
    xlabel: str
    panels: tuple[tuple[str, tuple[Line, ...]], ...]  # (panel title, its lines)
    what: str  # the caption's first sentence
    copy_peak: bool = False  # draw the measured copy bandwidth as a horizontal line


FIGURES = (
    Figure(
        "vector_add_bandwidth",
        "Vector add: bandwidth against length",
        "n (float32 elements)",
        (("", (Line("answer key (puzzle 1)", "1", "fp32"), Line("torch.add", "1", "fp32", True, "--"))),),
        "Bytes moved per second (read x, read y, write out) against the vector length; the dotted line is "
        "the device-to-device copy rate measured on the same GPU.",
        copy_peak=True,
    ),
    Figure(
        "matmul_vs_cublas",
        "float16 matmul against cuBLAS",
        "M = N = K",
        (
            (
                "",
                (
                    Line("puzzle 3 answer key (this puzzle)", "3", "fp16"),
                    Line("puzzle 4 answer key (grouped order, autotuned)", "4", "fp16"),
                    Line("torch.matmul (cuBLAS)", "3", "fp16", True, "--"),
                ),
            ),
        ),
        "TFLOPS (2·M·N·K floating-point operations per second) of square float16 products.",
    ),
    Figure(
        "softmax_passes",
        "Softmax of long rows: three passes against two",
        "row length N (float32)",
        (
            (
                "",
                (
                    Line("three passes (puzzle 6)", "6", "fp32"),
                    Line("two passes, online (puzzle 7)", "7", "fp32"),
                    Line("torch.softmax", "7", "fp32", True, "--"),
                ),
            ),
        ),
        "GB/s (one read and one write of the matrix per second) of a row-wise softmax whose rows do not fit "
        "one block; the rows are 4096 × 8192, 4096 × 32768, 1024 × 131072 and 64 × 1048576.",
    ),
    Figure(
        "fa1_vs_fa2",
        "Attention forward: FlashAttention-1 and -2 loop orders",
        "sequence length N",
        tuple(
            (
                f"D = {d}, not causal",
                (
                    Line("FlashAttention-1 order (puzzle 8)", "8", f"D={d}"),
                    Line("FlashAttention-2 order (puzzle 9)", "9", f"D={d}"),
                    Line("torch SDPA (default backend)", "9", f"D={d}", True, "--"),
                ),
            )
            for d in (64, 128)
        ),
        "TFLOPS (4·B·H·N²·D per second, B·H = 128) of the two answer keys and of PyTorch's FlashAttention.",
    ),
    Figure(
        "fa2_fwd_vs_sdpa",
        "FlashAttention-2 forward against torch SDPA",
        "sequence length N",
        tuple(
            (
                f"D = {d}",
                (
                    Line("answer key, not causal", "9", f"D={d}"),
                    Line("answer key, causal", "9", f"D={d} causal"),
                    Line("SDPA (default backend), not causal", "9", f"D={d}", True, "--"),
                    Line("SDPA (default backend), causal", "9", f"D={d} causal", True, ":"),
                ),
            )
            for d in (64, 128)
        ),
        "TFLOPS of puzzle 9's answer key and of PyTorch's scaled_dot_product_attention with its default backend "
        "backend (4·B·H·N²·D operations, half of it when causal; B·H = 128).",
    ),
    Figure(
        "fa2_bwd_vs_sdpa",
        "FlashAttention-2 backward against torch SDPA (causal)",
        "sequence length N",
        tuple(
            (
                f"D = {d}, causal",
                (
                    Line("answer key (puzzle 10)", "10", f"D={d} causal"),
                    Line("SDPA backward (default backend)", "10", f"D={d} causal", True, "--"),
                ),
            )
            for d in (64, 128)
        ),
        "TFLOPS of the backward pass, counted as 2.5 times the forward's operations (the usual convention: "
        "five N × N products against two) whatever the kernel really computes; only causal runs were recorded.",
    ),
)

FOLDER = ROOT / "notebooks" / "figures"
MANIFEST = "figures.json"


def _bench() -> tuple[list[Row], dict]:
    folder = ROOT / "bench"
    return read_csv(folder / "results.csv"), json.loads((folder / "meta.json").read_text(encoding="utf-8"))


def _rows(figure: Figure, rows: list[Row]) -> list[Row]:
    wanted = {(line.puzzle, line.series) for _, lines in figure.panels for line in lines}
    return [r for r in rows if (r.puzzle, r.series) in wanted and r.ok]


def _meta_keys(meta: dict) -> dict:
    keys = {k: meta.get(k, "?") for k in ("gpu", "date", "torch", "triton", "cuda")}
    keys["copy_gbps"] = round(meta.get("peaks", {}).get("copy_gbps", 0.0))
    return keys


def caption(figure: Figure, meta: dict) -> str:
    m = _meta_keys(meta)
    return (
        f"{figure.what} Recorded by `make bench` on an {m['gpu']}, {m['date']}, with torch {m['torch']}, "
        f"Triton {m['triton']} and CUDA {m['cuda']} (data: `bench/results.csv`)."
    )


def markdown(name: str) -> str:
    """The markdown cell that shows one figure, with its caption."""
    figure = _figure(name)
    _, meta = _bench()
    return f"![{figure.title}](figures/{name}.png)\n\n*{caption(figure, meta)}*"


def _figure(name: str) -> Figure:
    for figure in FIGURES:
        if figure.name == name:
            return figure
    raise ValueError(f"no figure named {name!r}; the figures are {', '.join(f.name for f in FIGURES)}")


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def source_hash(figure: Figure, rows: list[Row], meta: dict) -> str:
    """What a figure is drawn from: its rows, the metadata of its caption, and this file's code."""
    payload = json.dumps(
        {
            "rows": [csv_record(r) for r in _rows(figure, rows)],
            "meta": _meta_keys(meta),
            "code": Path(__file__).read_text(encoding="utf-8"),
        },
        sort_keys=True,
    )
    return _sha(payload.encode())


def draw(figure: Figure, rows: list[Row], meta: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = _rows(figure, rows)
    fig, axes = plt.subplots(1, len(figure.panels), figsize=(6.2 * len(figure.panels), 4.3), squeeze=False)
    for ax, (title, lines) in zip(axes.flat, figure.panels, strict=True):
        for colour, line in enumerate(lines):
            points = sorted(
                (r.x, r.baseline_rate if line.baseline else r.key_rate)
                for r in chosen
                if (r.puzzle, r.series) == (line.puzzle, line.series)
            )
            if points:
                ax.plot(
                    [x for x, _ in points],
                    [y for _, y in points],
                    line.style,
                    marker="o",
                    markersize=3,
                    color=f"C{colour}",
                    label=line.label,
                )
        if figure.copy_peak:
            ax.axhline(_meta_keys(meta)["copy_gbps"], color="grey", linestyle=":", label="measured copy rate")
        metric = chosen[0].metric if chosen else ""
        ax.set(xlabel=figure.xlabel, ylabel=metric, title=title)
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    m = _meta_keys(meta)
    fig.suptitle(f"{figure.title}\n{m['gpu']}, {m['date']}, torch {m['torch']}, Triton {m['triton']}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)


def _manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def stale(folder: Path = FOLDER) -> list[str]:
    """The figures that are missing, hand-edited, or older than what they are drawn from (nothing is drawn)."""
    rows, meta = _bench()
    recorded = _manifest(folder)
    found = []
    for figure in FIGURES:
        png = folder / f"{figure.name}.png"
        entry = recorded.get(figure.name, {})
        if (
            not png.exists()
            or entry.get("png") != _sha(png.read_bytes())
            or entry.get("source") != source_hash(figure, rows, meta)
        ):
            found.append(_shown(png))
    known = {f"{f.name}.png" for f in FIGURES}
    found += [_shown(p) for p in sorted(folder.glob("*.png")) if p.name not in known]
    if set(recorded) - {f.name for f in FIGURES}:
        found.append(_shown(folder / MANIFEST))
    return found


def write(folder: Path = FOLDER) -> list[str]:
    """Redraw the stale figures, delete unknown ones, rewrite the manifest; returns what changed."""
    rows, meta = _bench()
    recorded = _manifest(folder)
    changed = []
    manifest = {}
    for figure in FIGURES:
        png = folder / f"{figure.name}.png"
        source = source_hash(figure, rows, meta)
        entry = recorded.get(figure.name, {})
        if not png.exists() or entry.get("png") != _sha(png.read_bytes()) or entry.get("source") != source:
            draw(figure, rows, meta, png)
            changed.append(_shown(png))
        manifest[figure.name] = {"source": source, "png": _sha(png.read_bytes())}
    known = {f"{f.name}.png" for f in FIGURES}
    for extra in folder.glob("*.png"):
        if extra.name not in known:
            extra.unlink()
            changed.append(_shown(extra))
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    path = folder / MANIFEST
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
        changed.append(_shown(path))
    return changed
