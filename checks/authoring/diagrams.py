"""The notebooks' diagrams: pictures drawn from the answer keys and the graded cases, not from measurements.

`checks.authoring.figures` keeps them beside its figures of GPU measurements, in `notebooks/figures/`,
with the same manifest (a hash of this file's code and of the PNG), and a notebook source places one
with the same fence:

    ```{figure}
    decoding_split
    ```

Each diagram is a function that draws one PNG; what it shows is computed here from the course's own
code (the answer key's choice of splits, the grader's page tables), so it cannot drift from them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checks.registry import ROOT


@dataclass(frozen=True)
class Diagram:
    name: str
    title: str
    what: str  # the caption
    draw: Callable[[Path], None]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata={"Software": None})
    _pyplot().close(fig)


def _answer_key(number: int) -> Any:
    from checks.engine.submission import load_module
    from checks.registry import get_puzzle

    return load_module(get_puzzle(number).solution, f"diagram_key_{number}")


def draw_split(path: Path) -> None:
    """Puzzle 11's first CPU case: which program of the split kernel reads each key block of each head."""
    import torch
    from matplotlib.colors import ListedColormap

    plt = _pyplot()
    b, h, n = 2, 2, 300
    block_n, split_size = _answer_key(11).launch_shape(n, b * h, torch.device("cpu"))
    splits = -(-n // split_size)
    blocks = -(-n // block_n)
    fig, ax = plt.subplots(figsize=(9.5, 2.8))
    image = [[(j * block_n) // split_size for j in range(blocks)] for _ in range(b * h)]
    ax.imshow(image, cmap=ListedColormap([plt.get_cmap("tab10")(s) for s in range(splits)]), aspect="auto",
              extent=(0, n, b * h, 0))  # fmt: skip
    for row in range(b * h):
        for s in range(splits):
            lo, hi = s * split_size, min(n, (s + 1) * split_size)
            ax.text((lo + hi) / 2, row + 0.5, f"program ({s}, {row})", ha="center", va="center", fontsize=7,
                    color="white")  # fmt: skip
        for j in range(1, blocks):
            ax.axvline(j * block_n, color="white", linewidth=0.3)
    ax.set_yticks([r + 0.5 for r in range(b * h)], [f"head {r} (b={r // h}, h={r % h})" for r in range(b * h)])
    ax.set_xlabel(f"key j (blocks of BLOCK_N = {block_n}; splits of {split_size} keys)")
    ax.set_title(f"Split-KV on B·H = {b * h} heads of N = {n} keys: grid ({splits}, {b * h}); program (s, bh) reads "
                 f"split s of head bh,\nstores its (o_s, lse_s), and one merge program per head combines the "
                 f"{splits} partial results", fontsize=9)  # fmt: skip
    _save(fig, path)


def draw_group(path: Path) -> None:
    """Puzzle 12: G query heads share a kv head; as the rows of one tl.dot, padded to 16."""
    from matplotlib.patches import Rectangle

    plt = _pyplot()
    group, block_g, block_n, d = 4, 16, 16, 64
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6), gridspec_kw={"width_ratios": [1, 1.5]})
    for g in range(8):
        kv = g // group
        left.add_patch(Rectangle((0, g), 1, 0.8, color=f"C{kv}"))
        left.text(0.5, g + 0.4, f"query head {g}", ha="center", va="center", fontsize=8, color="white")
        left.annotate("", xy=(2.2, kv * 4 + 1.9), xytext=(1.05, g + 0.4),
                      arrowprops={"arrowstyle": "->", "color": f"C{kv}", "lw": 0.8})  # fmt: skip
    for kv in range(2):
        left.add_patch(Rectangle((2.2, kv * 4 + 0.9), 1.2, 2, color=f"C{kv}", alpha=0.6))
        left.text(2.8, kv * 4 + 1.9, f"K, V of\nkv head {kv}", ha="center", va="center", fontsize=8)
    left.set(xlim=(-0.1, 3.5), ylim=(8, -0.2), title=f"H_q = 8, H_kv = 2: G = {group}")
    left.set_axis_off()
    # the dot, drawn to scale: (BLOCK_G, D) @ (D, BLOCK_N) = (BLOCK_G, BLOCK_N)
    right.add_patch(Rectangle((0, 0), d, block_g, facecolor="#dddddd", edgecolor="black"))
    right.add_patch(Rectangle((0, 0), d, group, facecolor="C0", edgecolor="black"))
    right.text(d / 2, group / 2, f"q: the group's {group} rows", ha="center", va="center", fontsize=8, color="white")
    right.text(d / 2, (group + block_g) / 2, f"{block_g - group} rows of padding (0)", ha="center", va="center",
               fontsize=8)  # fmt: skip
    right.text(d + 6, block_g / 2, "@", fontsize=14, ha="center", va="center")
    right.add_patch(Rectangle((d + 12, 0), block_n, d, facecolor="C0", alpha=0.6, edgecolor="black"))
    right.text(d + 12 + block_n / 2, d / 2, "kᵀ\n(D, BLOCK_N):\none tile,\nloaded\nonce", ha="center", va="center",
               fontsize=8)  # fmt: skip
    right.text(d + block_n + 18, block_g / 2, "=", fontsize=14, ha="center", va="center")
    x0 = d + block_n + 24
    right.add_patch(Rectangle((x0, 0), block_n, block_g, facecolor="#dddddd", edgecolor="black"))
    right.add_patch(Rectangle((x0, 0), block_n, group, facecolor="C0", edgecolor="black"))
    right.text(x0 + block_n / 2, group / 2, "scores", ha="center", va="center", fontsize=7, color="white")
    right.set(xlim=(-1, x0 + block_n + 1), ylim=(d + 1, -1), aspect="equal",
              title=f"tl.dot(q, tl.trans(k)) to scale: BLOCK_G = {block_g}, D = {d}, BLOCK_N = {block_n}")  # fmt: skip
    right.set_axis_off()
    _save(fig, path)


def draw_pages(path: Path) -> None:
    """Puzzle 13's first CPU case: the cache's pages, the sequence that uses each, and the NaN in the rest."""
    import torch
    from matplotlib.colors import ListedColormap

    from checks.puzzles.p13_paged_decoding import page_layout
    from checks.registry import get_puzzle

    plt = _pyplot()
    case = get_puzzle(13).cases.cpu[0]
    generator = torch.Generator().manual_seed(1)
    table, num_pages = page_layout(case, generator)
    size, lens = int(case.page_size), [int(n) for n in case.seq_lens]
    image = torch.full((num_pages, size), -1.0)
    for b, n in enumerate(lens):
        for j in range(-(-n // size)):
            image[int(table[b, j]), : min(size, n - j * size)] = b
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.2), gridspec_kw={"height_ratios": [1.3, 1]})
    colours = ListedColormap(["#f0d0d0", "C0", "C1", "C2"])
    top.imshow(image.T.numpy(), cmap=colours, vmin=-1.5, vmax=2.5, aspect="auto", interpolation="nearest")
    top.set(xlabel="page number (the cache: num_pages pages)", ylabel=f"slot (page_size = {size})",
            title="k_cache by page: colour = the sequence whose keys it holds; pink = none (NaN)")  # fmt: skip
    top.set_xticks(range(num_pages))
    top.set_yticks(range(0, size, 4))
    top.tick_params(axis="x", labelsize=6)
    rows = table.shape[1]
    cells = [[int(table[b, j]) for j in range(rows)] for b in range(len(lens))]
    used = [[j < -(-lens[b] // size) for j in range(rows)] for b in range(len(lens))]
    for b in range(len(lens)):
        for j in range(rows):
            colour = f"C{b}" if used[b][j] else "#f0d0d0"
            bottom.add_patch(plt.Rectangle((j, b), 0.95, 0.9, color=colour))
            bottom.text(j + 0.47, b + 0.45, str(cells[b][j]), ha="center", va="center", fontsize=7,
                        color="white" if used[b][j] else "black")  # fmt: skip
    bottom.set(xlim=(0, rows), ylim=(len(lens), 0), xlabel="entry j of a row: the page of keys j·page_size ...",
               title=f"block_table (B = {len(lens)}, max_pages = {rows}); seq_lens = {lens}: "
                     "pink entries lie past seq_lens")  # fmt: skip
    bottom.set_yticks([b + 0.45 for b in range(len(lens))], [f"sequence {b}" for b in range(len(lens))])
    bottom.set_xticks([j + 0.47 for j in range(rows)], [str(j) for j in range(rows)], fontsize=7)
    _save(fig, path)


def draw_packed(path: Path) -> None:
    """Puzzle 14's first CPU case: the sequences packed along the tokens, and the answer key's grid over them (as on
    Triton's interpreter), where the programs past a sequence's end return at once."""
    from types import SimpleNamespace

    from matplotlib.patches import Rectangle

    from checks.registry import get_puzzle

    plt = _pyplot()
    case = get_puzzle(14).cases.cpu[0]
    lens, group = [int(n) for n in case.seq_lens], int(case.G)
    block_m, *_ = _answer_key(14).launch_shape(int(case.D), SimpleNamespace(type="cpu"))
    tokens = max(block_m, group) // group
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    blocks = -(-max(lens) // tokens)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 4.6), gridspec_kw={"height_ratios": [1, 1.4]})
    for b, n in enumerate(lens):
        top.add_patch(Rectangle((cu[b], 0), n, 1, color=f"C{b}", alpha=0.75))
        top.text(cu[b] + n / 2, 0.5, f"sequence {b}: {n} tokens", ha="center", va="center", fontsize=8, color="white")
        for m in range(1, -(-n // tokens)):
            top.plot([cu[b] + m * tokens] * 2, [0, 1], color="white", linewidth=1)
    top.set(xlim=(0, cu[-1]), ylim=(0, 1), xlabel="token t of q, k, v (T = cu_seqlens[-1])",
            title=f"packed: cu_seqlens = {cu}; white lines: the key's blocks of {tokens} tokens ({block_m} rows, G = "
                  f"{group})")  # fmt: skip
    top.set_xticks(cu)
    top.set_yticks([])
    for b, n in enumerate(lens):
        for m in range(blocks):
            works = m * tokens < n
            colour = f"C{b}" if works else "#dddddd"
            bottom.add_patch(Rectangle((m, b), 0.95, 0.9, color=colour, alpha=0.75 if works else 1.0))
            text = f"tokens {cu[b] + m * tokens}-{cu[b] + min(n, (m + 1) * tokens) - 1}" if works else "returns"
            bottom.text(m + 0.47, b + 0.45, text, ha="center", va="center", fontsize=8,
                        color="white" if works else "black")  # fmt: skip
    bottom.set(
        xlim=(0, blocks),
        ylim=(len(lens), 0),
        xlabel="program_id(0): the block of queries",
        title=f"the grid (cdiv(max_seqlen, {tokens}), B, H_kv) = ({blocks}, {len(lens)}, H_kv), one kv head shown",
    )
    bottom.set_yticks([b + 0.45 for b in range(len(lens))], [f"program_id(1) = {b}" for b in range(len(lens))])
    bottom.set_xticks([m + 0.47 for m in range(blocks)], [str(m) for m in range(blocks)])
    _save(fig, path)


DIAGRAMS = (
    Diagram(
        "decoding_split",
        "Split-KV: which program reads which keys",
        "Puzzle 11's answer key on the grader's first CPU case (its `launch_shape`, as on Triton's interpreter): "
        "each colour is one split, read by its own program; the white lines are the key blocks each program loads.",
        draw_split,
    ),
    Diagram(
        "gqa_group",
        "Grouped-query attention: a group of query heads as the rows of one tl.dot",
        "Left: with G = 4, query heads 0-3 read kv head 0 and heads 4-7 kv head 1. Right: one program loads the "
        "group's 4 queries as the first rows of a 16-row tile, so each tile of K (and of V) is loaded once for all "
        "four, and the products run on tensor cores.",
        draw_group,
    ),
    Diagram(
        "paged_pages",
        "A paged KV cache: pages, block_table and seq_lens",
        "Puzzle 13's first CPU case as the grader draws it (seed 1): each sequence's pages are scattered through the "
        "cache in no order; the row of block_table lists them in key order, and its entries past the sequence's "
        "last page, the slots past seq_lens in that page, and the pages no sequence uses hold NaN.",
        draw_pages,
    ),
    Diagram(
        "varlen_packed",
        "Packed sequences and a grid sized by the longest",
        "Puzzle 14's first CPU case: three sequences one after another along the tokens, and the answer key's grid "
        "as it runs in Triton's interpreter: a program per block of queries of the longest sequence, per sequence; "
        "in the shorter sequences, the programs whose block starts past the end return at once (grey).",
        draw_packed,
    ),
)


def by_name(name: str) -> Diagram | None:
    return next((d for d in DIAGRAMS if d.name == name), None)


def markdown(diagram: Diagram) -> str:
    return f"![{diagram.title}](figures/{diagram.name}.png)\n\n*{diagram.what}*"


def source_text() -> bytes:
    """What every diagram is drawn from: this file, the answer keys it asks, and the grader's page tables."""
    parts = [Path(__file__), ROOT / "solutions" / "11_flash_decoding.py", ROOT / "checks/puzzles/p13_paged_decoding.py",
             ROOT / "solutions" / "14_varlen_attention.py"]  # fmt: skip
    return b"".join(p.read_bytes() for p in parts) + repr(_cases()).encode()


def _cases() -> list[Any]:
    from checks.registry import get_puzzle

    return [get_puzzle(13).cases.cpu[0], get_puzzle(14).cases.cpu[0]]
