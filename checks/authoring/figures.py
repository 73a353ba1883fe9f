"""The notebooks' figures of recorded GPU measurements, drawn by `make notebooks` from the recorded `make bench` run.

Each figure plots rows of that run's results.csv (`checks.bench_results.recorded_run`: the newest folder
bench/results/<date>-<gpu>-make-bench, written by `make bench` on a GPU) and is captioned
with the GPU, date and versions of its meta.json, so a learner without a GPU still sees what
the puzzles' methods are worth. A notebook source places one with a fence:

    ```{figure}
    fa1_vs_fa2
    ```

The PNGs go to `notebooks/figures/`, with `figures.json` beside them: for each figure, a hash of
what it is drawn from (its rows, the metadata, this file) and a hash of the PNG. `--check` compares
both without drawing, so a stale or hand-edited figure is caught; `make notebooks` redraws only the
figures whose inputs changed (PNG bytes can differ between matplotlib versions).

A diagram (`BENCH_DIAGRAMS`) is placed the same way; it is drawn by code here, not from measurements, except
for the numbers of a recorded run that its caption names (the memory hierarchy's measured copy rate).

A figure with no rows in the CSV yet is not drawn: its cell says so (`Figure.missing`) until a run
records them. Rows merged in from a later run (`meta.json`'s `merged`: a puzzle and variant, with
that run's GPU, date and versions) are captioned with that run when a figure draws only them.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from checks.authoring import diagrams
from checks.bench_results import Row, csv_record, read_csv, recorded_run, shown
from checks.registry import ROOT

try:
    RECORD = shown(recorded_run())  # the run the figures draw, as the captions cite it
except FileNotFoundError:
    RECORD = "bench/results"


@dataclass(frozen=True)
class Line:
    label: str
    puzzle: str
    series: str
    baseline: bool = False  # the row's baseline timing instead of the answer key's
    style: str = "-"
    variant: str = ""  # the rows of this variant (bench.sweep.variants) instead of the answer key's
    other: str = ""  # the timing of this other baseline of the rows (a name of the spec's baselines())


Panels = tuple[tuple[str, tuple[Line, ...]], ...]  # (panel title, its lines) for each panel


@dataclass(frozen=True)
class Figure:
    name: str
    title: str
    xlabel: str
    panels: Panels
    what: str  # the caption's first sentence
    copy_peak: bool = False  # draw the measured copy bandwidth as a horizontal line
    missing: str = (
        "No run of these measurements is recorded in `bench/results/` yet: `make bench` on a "
        "GPU records them, and `make notebooks` then draws them here."
    )  # the cell's text while the CSV has no rows for the figure
    summary: Callable[[list[Row]], str] | None = None  # a sentence under the caption, computed from the rows


def one_panel(*lines: Line) -> Panels:
    """A figure's single panel, untitled."""
    return (("", lines),)


def against_torch(series: str, keys: dict[str, str], torch_line: tuple[str, str]) -> Panels:
    """One untitled panel of one series: the answer keys (label -> puzzle), then torch's timing, dashed.

    `torch_line` is (label, puzzle): the baseline timing of that puzzle's rows.
    """
    label, puzzle = torch_line
    return one_panel(
        *(Line(key, number, series) for key, number in keys.items()), Line(label, puzzle, series, True, "--")
    )


def per_head_dim(title: str, lines: Callable[[str], tuple[Line, ...]]) -> Panels:
    """One panel for D = 64 and one for D = 128, titled `title` with {d} filled in.

    `lines(series)` gives a panel's lines for that D's series ("D=64").
    """
    return tuple((title.format(d=d), lines(f"D={d}")) for d in (64, 128))


def causal_and_not(puzzle: str, key: str, baseline: str) -> Callable[[str], tuple[Line, ...]]:
    """A panel's lines (`per_head_dim`'s `lines`) for the puzzle's answer key and its baseline, each not causal and
    causal: the key's solid, the baseline's dashed, and dotted where causal."""

    def lines(series: str) -> tuple[Line, ...]:
        causal = f"{series} causal"
        return (
            Line(f"{key}, not causal", puzzle, series),
            Line(f"{key}, causal", puzzle, causal),
            Line(f"{baseline}, not causal", puzzle, series, True, "--"),
            Line(f"{baseline}, causal", puzzle, causal, True, ":"),
        )

    return lines


TMA = "tensor descriptors"  # the label of the tensor-descriptor variants in puzzles.yaml


def _no_variant_run(what: str, puzzle: str) -> str:
    return (
        f"No run of {what} is recorded in `bench/results/` yet. `make bench` on a GPU times it beside the "
        f"answer key (puzzle {puzzle}'s `variants` in `puzzles.yaml`), and `make notebooks` then draws the result here."
    )


FIGURES = (
    Figure(
        "vector_add_bandwidth",
        "Vector add: bandwidth against length",
        "n (float32 elements)",
        against_torch("fp32", {"answer key (puzzle 1)": "1"}, ("torch.add", "1")),
        "Bytes moved per second (read x, read y, write out) against the vector length; the dotted line is "
        "the device-to-device copy rate measured on the same GPU.",
        copy_peak=True,
    ),
    Figure(
        "matmul_vs_cublas",
        "float16 matmul against cuBLAS",
        "M = N = K",
        against_torch(
            "fp16",
            {"puzzle 3 answer key (this puzzle)": "3", "puzzle 4 answer key (grouped order, autotuned)": "4"},
            ("torch.matmul (cuBLAS)", "3"),
        ),
        "TFLOPS (2·M·N·K floating-point operations per second) of square float16 products.",
    ),
    Figure(
        "matmul_launch_order",
        "Matmul: grouped launch order against row-major",
        "M = N = K",
        one_panel(
            Line("row-major order (the answer key, pid_m = pid // num_pid_n)", "4", "fp16", variant="row-major order"),
            Line("grouped order (the answer key)", "4", "fp16", True, "--", variant="row-major order"),
        ),
        "TFLOPS of puzzle 4's answer key and of the same kernel with one change, its tiles launched in row-major "
        "order; same tiles, same autotuned configs, and at each point the two ran one after the other on the "
        "same inputs.",
        missing=(
            "No run of the row-major launch order is recorded in `bench/results/` yet. `make bench` "
            "on a GPU times it beside the answer key (puzzle 4's `variants` in `puzzles.yaml`: the known-wrong kernel "
            "`row_major_order`), and `make notebooks` then draws the result here."
        ),
        summary=lambda rows: _versus_answer_key("row-major order", rows, x="M = N = K"),
    ),
    Figure(
        "matmul_tensor_descriptors",
        "Matmul: tensor descriptors (TMA) against pointer arithmetic",
        "M = N = K",
        one_panel(
            Line("tensor descriptors (solutions/variants/04_tensor_descriptors.py)", "4", "fp16", variant=TMA),
            Line("pointer arithmetic (the answer key)", "4", "fp16", True, "--", variant=TMA),
        ),
        "TFLOPS of puzzle 4's answer key and of the same grouped, autotuned kernel whose tiles of a and b are "
        "loaded (and c stored) through tensor descriptors; at each point the two ran one after the other on the "
        "same inputs.",
        missing=_no_variant_run("the tensor-descriptor matmul", "4"),
        summary=lambda rows: _versus_answer_key("the tensor-descriptor variant", rows, x="M = N = K"),
    ),
    Figure(
        "softmax_passes",
        "Softmax of long rows: three passes against two",
        "row length N (float32)",
        against_torch(
            "fp32", {"three passes (puzzle 6)": "6", "two passes, online (puzzle 7)": "7"}, ("torch.softmax", "7")
        ),
        "GB/s (one read and one write of the matrix per second) of a row-wise softmax whose rows do not fit "
        "one block; the rows are 4096 × 8192, 4096 × 32768, 1024 × 131072 and 64 × 1048576.",
    ),
    Figure(
        "fa1_vs_fa2",
        "Attention forward: FlashAttention-1 and -2 loop orders",
        "sequence length N",
        per_head_dim(
            "D = {d}, not causal",
            lambda series: (
                Line("FlashAttention-1 order (puzzle 8)", "8", series),
                Line("FlashAttention-2 order (puzzle 9)", "9", series),
                Line("torch SDPA (default backend)", "9", series, True, "--"),
            ),
        ),
        "TFLOPS (4·B·H·N²·D per second, B·H = 128) of the two answer keys and of PyTorch's "
        "scaled_dot_product_attention with its default backend, which on an H100 is cuDNN's attention.",
    ),
    Figure(
        "fa2_fwd_vs_sdpa",
        "FlashAttention-2 forward against torch SDPA",
        "sequence length N",
        per_head_dim("D = {d}", causal_and_not("9", "answer key", "SDPA (default backend)")),
        "TFLOPS of puzzle 9's answer key and of PyTorch's scaled_dot_product_attention with its default "
        "backend (4·B·H·N²·D operations, half of it when causal; B·H = 128).",
    ),
    Figure(
        "fa2_bwd_vs_sdpa",
        "FlashAttention-2 backward against torch SDPA's flash backend",
        "sequence length N",
        per_head_dim("D = {d}", causal_and_not("10", "answer key (puzzle 10)", "SDPA flash backward")),
        "TFLOPS of the backward pass, counted as 2.5 times the forward's operations (the usual convention: "
        "five N × N products against two) whatever the kernel really computes.",
    ),
    Figure(
        "unfused_vs_flash",
        "Attention forward: S and P through memory, or FlashAttention-2",
        "sequence length N",
        per_head_dim(
            "D = {d}, not causal",
            lambda series: (
                Line("FlashAttention-2 (puzzle 9's answer key)", "9", series),
                Line("torch, unfused: S and P written and read back", "9", series, True, "--", other="torch unfused"),
            ),
        ),
        "TFLOPS (4·B·H·N²·D per second, B·H = 128) of FlashAttention-2 and of the same attention in three torch "
        "calls, `torch.softmax((q @ k.T) * sm_scale) @ v`, which write the N × N matrices S and P to the GPU's "
        "memory in float16 and read them back. The unfused line stops where S and P would no longer fit in "
        "the memory the GPU had free: 2·B·H·N² float16 numbers, 32 GiB at N = 8192.",
        missing=(
            "No run of the unfused attention is recorded in `bench/results/` yet: `make bench` on a GPU times "
            "it (the `torch unfused` baseline of puzzle 9, not causal), and `make notebooks` then draws it here "
            "beside FlashAttention-2."
        ),
    ),
    Figure(
        "fa2_fwd_tensor_descriptors",
        "FlashAttention-2 forward: tensor descriptors (TMA) against pointer arithmetic",
        "sequence length N",
        per_head_dim(
            "D = {d}, not causal",
            lambda series: (
                Line("tensor descriptors (solutions/variants/09_tensor_descriptors.py)", "9", series, variant=TMA),
                Line("pointer arithmetic (the answer key)", "9", series, True, "--", variant=TMA),
            ),
        ),
        "TFLOPS of puzzle 9's answer key and of the same kernel whose tiles of Q, K, V and O travel through "
        "tensor descriptors; at each point the two ran one after the other on the same inputs.",
        missing=_no_variant_run("the tensor-descriptor forward", "9"),
        summary=lambda rows: _versus_answer_key("the tensor-descriptor variant", rows),
    ),
    Figure(
        "fa2_bwd_atomic_dq",
        "FlashAttention-2 backward: dQ by atomic adds against a second kernel (causal)",
        "sequence length N",
        per_head_dim(
            "D = {d}, causal",
            lambda series: (
                Line("atomic dQ (solutions/variants/10_atomic_dq.py)", "10", f"{series} causal", variant="atomic dQ"),
                Line("answer key (two kernels)", "10", f"{series} causal", True, "--", variant="atomic dQ"),
            ),
        ),
        "TFLOPS of the atomic-dQ variant (one kernel over key blocks, 5 tile products per tile) and of the answer "
        "key (a dK/dV kernel and a dQ kernel, 7), both counted as five N × N products, so the higher line is the "
        "faster kernel; at each point the two ran one after the other on the same inputs.",
        missing=_no_variant_run("the atomic-dQ variant", "10"),
        summary=lambda rows: _versus_answer_key("the atomic-dQ variant", rows),
    ),
    *(
        Figure(
            name,
            title,
            "keys per head N",
            tuple(
                (
                    f"batch {batch}, {heads}",
                    (
                        Line("answer key", puzzle, f"B={batch} H={heads}"),
                        Line(torch_label, puzzle, f"B={batch} H={heads}", True, "--"),
                    ),
                )
                for batch in (1, 16)
            ),
            f"GB/s of K and V read (each key and value once, in float16; D = 128) by the answer key and by {what}; "
            "the dotted line is the device-to-device copy rate measured on the same GPU. The other baselines of the "
            "same run (each SDPA backend that takes the shape, FlexAttention compiled) are in `bench/results/` "
            "and `BENCHMARKS.md`.",
            copy_peak=True,
        )
        for name, title, puzzle, heads, torch_label, what in (
            (
                "decoding_vs_sdpa",
                "Flash decoding against SDPA",
                "11",
                "32",
                "SDPA (default backend)",
                "`scaled_dot_product_attention` with its default backend",
            ),
            (
                "gqa_decoding_vs_sdpa",
                "Grouped-query decoding against SDPA",
                "12",
                "32:8",
                "SDPA, enable_gqa=True",
                "`scaled_dot_product_attention(..., enable_gqa=True)` with its default backend",
            ),
            (
                "paged_decoding_vs_gather",
                "Paged decoding against gathering the pages",
                "13",
                "32:8",
                "gather the pages, then SDPA",
                "the naive way: copy every sequence's pages into one tensor, then SDPA",
            ),
        )
    ),
)

FOLDER = ROOT / "notebooks" / "figures"
MANIFEST = "figures.json"


@dataclass(frozen=True)
class BenchDiagram:
    """A picture drawn by code whose caption quotes the recorded run (its meta.json): `draw(path, meta)` writes
    its PNG; `caption(meta)` is the text under it. The puzzles' own diagrams are `checks.authoring.diagrams.Diagram`."""

    name: str
    title: str
    draw: Callable[[Path, dict], None]
    caption: Callable[[dict], str]


def _draw_memory_hierarchy(path: Path, meta: dict) -> None:
    """An H100's memory: HBM and L2 shared by every SM; per SM, shared memory and registers, sliced per program."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, Rectangle

    fig, ax = plt.subplots(figsize=(10, 6.4))
    ax.set(xlim=(0, 10), ylim=(0, 6.4))
    ax.axis("off")

    def box(x, y, w, h, colour, text="", size=9, weight="normal"):
        ax.add_patch(Rectangle((x, y), w, h, facecolor=colour, edgecolor="black", linewidth=1))
        if text:
            ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, weight=weight)

    copy = round(meta.get("peaks", {}).get("copy_gbps", 0.0))
    box(0.2, 0.2, 9.6, 1.1, "#d9e8f5", "", 9)
    ax.text(5.0, 0.95, "HBM (global memory): every tensor lives here", ha="center", fontsize=10, weight="bold")
    ax.text(
        5.0,
        0.45,
        f"80 GB, about 3.35 TB/s (datasheet); a copy measured {copy} GB/s · reached with tl.load / tl.store",
        ha="center",
        fontsize=9,
    )
    box(0.2, 1.7, 9.6, 0.8, "#e4f2dc", "", 9)
    ax.text(5.0, 2.2, "L2 cache, about 50 MB, shared by all SMs", ha="center", fontsize=10, weight="bold")
    ax.text(
        5.0, 1.85, "loads of the same data by programs running at the same time can hit here", ha="center", fontsize=8.5
    )
    for k, x in enumerate((0.2, 3.4)):
        box(x, 2.9, 2.9, 3.1, "#f7f7f7")
        ax.text(x + 1.45, 5.75, f"SM {k}", ha="center", fontsize=10, weight="bold")
        for j, name in enumerate(("program A", "program B") if k == 0 else ("program C", "program D")):
            px = x + 0.15 + j * 1.35
            box(px, 4.25, 1.25, 1.2, "#fde9c9", f"{name}\nregisters", 8)
            box(px, 3.05, 1.25, 1.05, "#f9d1c7", f"{name}\nshared mem.\nslice", 8)
    ax.text(8.0, 5.55, "… 132 SMs on an H100", ha="center", fontsize=10, weight="bold")
    ax.text(
        8.0,
        4.25,
        "per SM (datasheet):\nregisters: 64K × 32 bit = 256 KB\nshared memory: up to 228 KB\n\n"
        "each program gets its own slice of both;\nno program sees another's.\ntl.dot's operands pass through\n"
        "shared memory (the compiler does it)",
        ha="center",
        va="center",
        fontsize=8.5,
    )
    for x in (1.65, 4.85):
        ax.add_patch(FancyArrowPatch((x, 2.5), (x, 2.9), arrowstyle="<->", mutation_scale=12))
        ax.add_patch(FancyArrowPatch((x, 1.3), (x, 1.7), arrowstyle="<->", mutation_scale=12))
    ax.text(9.9, 6.15, "small and fast ↑   large and slow ↓", ha="right", fontsize=9, style="italic")
    ax.set_title("Where a Triton kernel's data lives (NVIDIA H100 SXM)", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)


def _memory_hierarchy_caption(meta: dict) -> str:
    m = _meta_keys(meta)
    return (
        "The memory of an NVIDIA H100 SXM, from registers (per program, fastest) to HBM (every tensor). "
        "Sizes and the 3.35 TB/s are rough datasheet figures; the copy rate of "
        f"{m['copy_gbps']} GB/s (bytes read and written per second) was measured by `make bench` on an "
        f"{m['gpu']}, {m['date']} (`{RECORD}/meta.json`)."
    )


BENCH_DIAGRAMS = (
    BenchDiagram("memory_hierarchy", "Memory hierarchy", _draw_memory_hierarchy, _memory_hierarchy_caption),
)


def _bench() -> tuple[list[Row], dict]:
    folder = recorded_run()
    return read_csv(folder / "results.csv"), json.loads((folder / "meta.json").read_text(encoding="utf-8"))


def _rows(figure: Figure, rows: list[Row]) -> list[Row]:
    wanted = {(line.puzzle, line.variant, line.series) for _, lines in figure.panels for line in lines}
    return [r for r in rows if (r.puzzle, r.variant, r.series) in wanted and r.ok]


def _rate(row: Row, line: Line) -> float | None:
    """What a line draws of a row: an other baseline's rate, the baseline's, or the answer key's (or variant's)."""
    return row.rate(row.others.get(line.other)) if line.other else row.baseline_rate if line.baseline else row.key_rate


def _run(rows: list[Row], meta: dict) -> dict:
    """The metadata of the run the rows were measured in: a run merged in later when every row is one of its."""
    runs = _runs(rows, meta)
    return runs[0] if len(runs) == 1 else meta


def _runs(rows: list[Row], meta: dict) -> list[dict]:
    """The metadata of each run the rows were measured in, in the order met: the run merged in later for its
    puzzle and variant, the first run for the rest."""
    merged = meta.get("merged", [])
    runs: list[dict] = []
    for r in rows:
        run = next((m for m in merged if (r.puzzle, r.variant) == (m["puzzle"], m["variant"])), meta)
        if not any(run is seen for seen in runs):
            runs.append(run)
    return runs or [meta]


def _provenance(rows: list[Row], meta: dict) -> dict:
    """`_meta_keys` of the rows' run; for rows of several runs, each GPU and version once and the dates' span."""
    keys = [_meta_keys(run) for run in _runs(rows, meta)]
    said = {k: " and ".join(dict.fromkeys(str(m[k]) for m in keys)) for k in ("gpu", "torch", "triton", "cuda")}
    dates = sorted({str(m["date"]) for m in keys})
    said["date"] = dates[0] if len(dates) == 1 else f"in {len(keys)} runs from {dates[0]} to {dates[-1]}"
    return said


def _meta_keys(meta: dict) -> dict:
    keys = {k: meta.get(k, "?") for k in ("gpu", "date", "torch", "triton", "cuda")}
    keys["copy_gbps"] = round(meta.get("peaks", {}).get("copy_gbps", 0.0))
    return keys


def _versus_answer_key(name: str, rows: list[Row], x: str = "N") -> str:
    """'At N = 16384, the time of <name> was 1.05x the answer key's with D=64 causal and ...', from variant rows
    (their baseline is the answer key, timed beside them); `x` names the plots' axis."""
    timed = [r for r in rows if r.ratio]
    if not timed:
        return ""
    largest = max(r.x for r in timed)
    first, *rest = [(f"{1 / r.ratio:.2f}x", r.series) for r in timed if r.x == largest]
    said = " and ".join([f"{first[0]} the answer key's with {first[1]}", *(f"{t} with {s}" for t, s in rest)])
    times = [1 / r.ratio for r in timed]
    return (
        f"At {x} = {largest:g}, the time of {name} was {said} (below 1: {name} is faster); over all the recorded "
        f"sizes it ranges from {min(times):.2f}x to {max(times):.2f}x of the answer key's."
    )


def caption(figure: Figure, meta: dict, rows: list[Row] | None = None) -> str:
    m = _provenance(_rows(figure, rows or []), meta)
    return (
        f"{figure.what} Recorded by `make bench` on an {m['gpu']}, {m['date']}, with torch {m['torch']}, "
        f"Triton {m['triton']} and CUDA {m['cuda']} (data: `{RECORD}/results.csv`)."
    )


def markdown(name: str) -> str:
    """The markdown cell that shows one figure, with its caption; or says that no run of it is recorded yet.

    A diagram (`BENCH_DIAGRAMS` here, `checks.authoring.diagrams` for the puzzles' own) is shown the same way, always.
    """
    if (own := diagrams.by_name(name)) is not None:
        return diagrams.markdown(own)
    rows, meta = _bench()
    for diagram in BENCH_DIAGRAMS:
        if diagram.name == name:
            return f"![{diagram.title}](figures/{name}.png)\n\n*{diagram.caption(meta)}*"
    figure = _figure(name)
    chosen = _rows(figure, rows)
    if not _complete(figure, rows):
        return f"*{figure.missing}*"
    text = f"![{figure.title}](figures/{name}.png)\n\n*{caption(figure, meta, rows)}*"
    return text + (f"\n\n{figure.summary(chosen)}" if figure.summary else "")


def _figure(name: str) -> Figure:
    for figure in FIGURES:
        if figure.name == name:
            return figure
    names = ", ".join(f.name for f in (*FIGURES, *BENCH_DIAGRAMS, *diagrams.DIAGRAMS))
    raise ValueError(f"no figure named {name!r}; the figures are {names}")


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def source_hash(figure: Figure, rows: list[Row], meta: dict) -> str:
    """What a figure is drawn from: its rows, the metadata of its caption, and this file's code."""
    payload = json.dumps(
        {
            "rows": [csv_record(r) for r in _rows(figure, rows)],
            "meta": [_meta_keys(run) for run in _runs(_rows(figure, rows), meta)],  # every run its caption names
            "code": Path(__file__).read_text(encoding="utf-8"),
        },
        sort_keys=True,
    )
    return _sha(payload.encode())


def diagram_hash(diagram: BenchDiagram, meta: dict) -> str:
    """What a diagram is drawn from: the run its caption names, and this file's code."""
    payload = json.dumps(
        {"name": diagram.name, "meta": _meta_keys(meta), "code": Path(__file__).read_text(encoding="utf-8")},
        sort_keys=True,
    )
    return _sha(payload.encode())


def _pictures(rows: list[Row], meta: dict) -> list[tuple[str, str, Callable[[Path], None]]]:
    """(name, source hash, draw into a path) of every picture to draw: the figures with rows, and the diagrams."""
    found: list[tuple[str, str, Callable[[Path], None]]] = [
        (f.name, source_hash(f, rows, meta), lambda path, f=f: draw(f, rows, meta, path)) for f in _drawn(rows)
    ]
    found += [(d.name, diagram_hash(d, meta), lambda path, d=d: d.draw(path, meta)) for d in BENCH_DIAGRAMS]
    puzzles_own = _sha(diagrams.source_text())  # drawn from the answer keys and the graded cases
    found += [(d.name, puzzles_own, lambda path, d=d: d.draw(path)) for d in diagrams.DIAGRAMS]
    return found


def line_colours(figure: Figure) -> dict[str, str]:
    """One colour per line label for the whole figure, so that a series has the same colour in every panel."""
    colours: dict[str, str] = {}
    for _, lines in figure.panels:
        for line in lines:
            colours.setdefault(line.label, f"C{len(colours)}")
    return colours


def draw(figure: Figure, rows: list[Row], meta: dict, path: Path) -> None:
    """A figure's PNG, its panels two to a row; `make bench` draws its plots with it too."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = _rows(figure, rows)
    cols, high = min(len(figure.panels), 2), math.ceil(len(figure.panels) / 2)  # two panels a row at most
    fig, axes = plt.subplots(high, cols, figsize=(6.2 * cols, 4.3 * high), squeeze=False)
    for ax in axes.flat[len(figure.panels) :]:
        ax.set_visible(False)
    colours = line_colours(figure)
    for ax, (title, lines) in zip(axes.flat, figure.panels, strict=False):
        for line in lines:
            points = sorted(
                (r.x, _rate(r, line))
                for r in chosen
                if (r.puzzle, r.variant, r.series) == (line.puzzle, line.variant, line.series) and _rate(r, line)
            )
            if points:
                ax.plot(
                    [x for x, _ in points],
                    [y for _, y in points],
                    line.style,
                    marker="o",
                    markersize=3,
                    color=colours[line.label],
                    label=line.label,
                )
        if figure.copy_peak:
            peak = _meta_keys(_run(chosen, meta))["copy_gbps"]
            ax.axhline(peak, color="grey", linestyle=":", label="measured copy rate")
        metric = chosen[0].metric if chosen else ""
        ax.set(xlabel=figure.xlabel, ylabel=metric, title=title)
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    m = _provenance(chosen, meta)
    fig.suptitle(f"{figure.title}\n{m['gpu']}, {m['date']}, torch {m['torch']}, Triton {m['triton']}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)


def _manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _drawn(rows: list[Row]) -> list[Figure]:
    """The figures the CSV has something for on every line: the others are not drawn."""
    return [f for f in FIGURES if _complete(f, rows)]


def _complete(figure: Figure, rows: list[Row]) -> bool:
    chosen = _rows(figure, rows)
    return all(
        any(
            (r.puzzle, r.variant, r.series) == (line.puzzle, line.variant, line.series) and _rate(r, line)
            for r in chosen
        )
        for _, lines in figure.panels
        for line in lines
    )


def stale(folder: Path = FOLDER) -> list[str]:
    """The figures that are missing, hand-edited, or older than what they are drawn from (nothing is drawn)."""
    rows, meta = _bench()
    recorded = _manifest(folder)
    found = []
    pictures = _pictures(rows, meta)
    for name, source, _ in pictures:
        png = folder / f"{name}.png"
        entry = recorded.get(name, {})
        if not png.exists() or entry.get("png") != _sha(png.read_bytes()) or entry.get("source") != source:
            found.append(_shown(png))
    known = {f"{name}.png" for name, _, _ in pictures}
    found += [_shown(p) for p in sorted(folder.glob("*.png")) if p.name not in known]
    if set(recorded) - {name for name, _, _ in pictures}:
        found.append(_shown(folder / MANIFEST))
    return found


def write(folder: Path = FOLDER) -> list[str]:
    """Redraw the stale figures, delete unknown ones and those without rows, rewrite the manifest."""
    rows, meta = _bench()
    recorded = _manifest(folder)
    changed = []
    manifest = {}
    pictures = _pictures(rows, meta)
    for name, source, draw_into in pictures:
        png = folder / f"{name}.png"
        entry = recorded.get(name, {})
        if not png.exists() or entry.get("png") != _sha(png.read_bytes()) or entry.get("source") != source:
            draw_into(png)
            changed.append(_shown(png))
        manifest[name] = {"source": source, "png": _sha(png.read_bytes())}
    known = {f"{name}.png" for name, _, _ in pictures}
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
