"""The figures of a run folder's result files, as `Figure`s of its record (bench.records): each file kind the course's
tools write has a reader here, and a row it cannot read is left out rather than guessed.

| files | written by | a figure's name: metrics (unit) |
| --- | --- | --- |
| `results.csv` | `make bench` | `make bench/PUZZLE[ (VARIANT)]/SERIES/SIZE`: time (ms), rate (GB/s, TFLOPS) |
| `solutions*.md` | `make solutions` | `make solutions/N PUZZLE`: time (ms) |
| `*wall*.tsv`, `second-rounds.tsv` | `bench wall-times` | `wall-times/N/RUN`: report, verdict (s) |
| `kept-plans*.tsv` | `bench kept-plans` | `kept-plans/N`: first, second (s), plan (bytes) |
| `*decoding-graphs*.csv`, `dg-*.csv` | `bench decoding-graphs` | `decoding-graphs/N B=.. H_q=.. ...`: time (µs) |

A time beside a baseline has the baseline's name, time and the speed ratio the run computed.

Columns before a wall-time TSV's `report s` (a pass, a round, the checkout where a file has several) go into the
name. Each figure keeps the path of its file in the folder (`file`): a run before a change and one after it have the
same names in two files.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench.records import Figure
from checks.bench_results import read_csv


def _rounded(value: float | None) -> float | None:
    """A computed number to 6 significant digits, as the tools print theirs."""
    return None if value is None else float(f"{value:.6g}")


def _float(text: str | None) -> float | None:
    try:
        value = float(str(text).strip().rstrip("x"))
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def make_bench(path: Path) -> list[Figure]:
    """results.csv of `make bench`: each timed size's time beside the grader's baseline, and its rate."""
    figures = []
    for r in read_csv(path):
        if not r.ok or r.key_ms is None:
            continue
        name = f"make bench/{r.puzzle}{f' ({r.variant})' if r.variant else ''}/{r.series}/{r.size}"
        ratio = _rounded(r.ratio)
        figures.append(Figure(name, "time", "ms", r.key_ms, r.baseline or None, r.baseline_ms, ratio))
        if r.key_rate is not None:
            rate = float(f"{r.key_rate:.6g}")
            figures.append(Figure(name, "rate", r.metric, rate, r.baseline or None, _rounded(r.baseline_rate), ratio))
    return figures


def markdown_rows(text: str, needed: set[str]) -> list[dict[str, str]]:
    """The rows of every markdown table of `text` whose header has the columns `needed`, as header -> cell."""
    rows, header = [], None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else None
        if cells is None:
            header = None
        elif header is None:
            header = cells if needed <= set(cells) else []
        elif header and not set(line) <= set("|-: ") and len(cells) == len(header):
            rows.append(dict(zip(header, cells, strict=False)))
    return rows


def make_solutions(path: Path) -> list[Figure]:
    """A `make solutions` table: each answer key's time at the timing size beside its baseline."""
    figures = []
    for row in markdown_rows(path.read_text(encoding="utf-8"), {"#", "puzzle", "key ms", "speed vs baseline"}):
        value = _float(row["key ms"])
        if value is not None:
            name = f"make solutions/{row['#']} {row['puzzle']}"
            figures.append(Figure(name, "time", "ms", value, row.get("baseline") or None,
                                  _float(row.get("baseline ms")), _float(row["speed vs baseline"])))  # fmt: skip
    return figures


def _tsv(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines() if line.strip()]


def wall_times(path: Path) -> list[Figure]:
    return wall_times_of(path.read_text(encoding="utf-8"))


def wall_times_of(text: str) -> list[Figure]:
    """`python -m bench wall-times` lines: seconds to the report (and to the verdict, where a column has them). A file
    without a header has the first form's columns: checkout, puzzle, run, report s, verdict line. The checkout is in
    the name only where the file has several (a tree before a change and after it are compared by their files)."""
    lines = _tsv(text)
    if lines and "report s" in lines[0]:
        header, lines = lines[0], lines[1:]
    else:
        header = ["checkout", "puzzle", "run", "report s", "verdict"]
    if "puzzle" not in header or "run" not in header:
        return []
    named = header[: header.index("report s")]
    if "checkout" in named and len({cells[named.index("checkout")] for cells in lines if len(cells) > 1}) == 1:
        named.remove("checkout")
    figures = []
    for cells in lines:
        if len(cells) < len(named) + 1:
            continue
        row = dict(zip(header, cells, strict=False))
        name = "wall-times/" + "/".join(row[c] for c in named)
        for column, metric in (("report s", "report"), ("verdict s", "verdict")):
            value = _float(row.get(column))
            if value is not None:
                figures.append(Figure(name, metric, "s", value))
    return figures


def kept_plans(path: Path) -> list[Figure]:
    return kept_plans_of(path.read_text(encoding="utf-8"))


def kept_plans_of(text: str) -> list[Figure]:
    """`python -m bench kept-plans` lines: each key's plan recorded twice (seconds) and its size."""
    lines = _tsv(text)
    if not lines or lines[0][:1] != ["puzzle"]:
        return []
    figures = []
    for cells in lines[1:]:
        row = dict(zip(lines[0], cells, strict=False))
        for column, metric, unit in (("first s", "first", "s"), ("second s", "second", "s"),
                                     ("plan bytes", "plan", "bytes")):  # fmt: skip
            value = _float(row.get(column))
            if value is not None:
                figures.append(Figure(f"kept-plans/{row['puzzle']}", metric, unit, value))
    return figures


def decoding_graphs(path: Path) -> list[Figure]:
    """`python -m bench decoding-graphs --out FILE.csv`: each decoding key's CUDA-graph replay beside SDPA's best."""
    figures = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            value = _rounded(_float(row.get("key_us")))
            if value is None:
                continue
            shape = " ".join(f"{k}={row[k]}" for k in ("B", "H_q", "H_kv", "N", "D", "page_size") if row.get(k))
            best = row.get("best_sdpa")
            figures.append(Figure(f"decoding-graphs/{row['puzzle']} {shape}", "time", "µs", value,
                                  f"sdpa {best}" if best else None, _rounded(_float(row.get("best_sdpa_us"))),
                                  _rounded(_float(row.get("ratio")))))  # fmt: skip
    return figures


READERS: list[tuple[str, Callable[[Path], list[Figure]]]] = [  # a file name's pattern -> its reader
    (r"results\.csv", make_bench),
    (r"solutions[\w.-]*\.md", make_solutions),
    (r"[\w.-]*wall[\w.-]*\.tsv|second-rounds\.tsv", wall_times),
    (r"kept-plans[\w.-]*\.tsv", kept_plans),
    (r"[\w.-]*decoding-graphs[\w.-]*\.csv|dg-[\w.-]*\.csv", decoding_graphs),
]


def reader_of(path: Path) -> Callable[[Path], list[Figure]] | None:
    return next((read for pattern, read in READERS if re.fullmatch(pattern, path.name)), None)


def figures_in(folder: Path) -> list[Figure]:
    """Every figure of the result files under `folder` (its subfolders too), each with its file's path in the folder;
    a name and metric a file has again gets " (2)", " (3)", ..."""
    found: list[Figure] = []
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        read = reader_of(path)
        if read is not None:
            file, again = path.relative_to(folder).as_posix(), Counter()
            for f in read(path):
                again[f.name, f.metric] += 1
                n = again[f.name, f.metric]
                found.append(replace(f, name=f"{f.name} ({n})" if n > 1 else f.name, file=file))
    return found
