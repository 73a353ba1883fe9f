"""Markdown tables, as the instructor's reports write them (`make bench`'s BENCHMARKS.md, `make solutions`)."""

from __future__ import annotations


def markdown_table(header: list[str], body: list[list[str]]) -> list[str]:
    """A markdown table's lines (a "|" in a cell becomes "/")."""
    rule = ["---"] * len(header)
    return ["| " + " | ".join(cell.replace("|", "/") for cell in line) + " |" for line in (header, rule, *body)]


def ms_cell(ms: float | None) -> str:
    """A time in milliseconds as the tables show it: four decimals, or "-" where there is none."""
    return "-" if ms is None else f"{ms:.4f}"
