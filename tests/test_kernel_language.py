"""The kernel language is a table: the resolver accepts exactly its entries and refuses everything else that
triton.language reaches (its submodules, and the standard modules it imports: builtins, inspect, sys, os, ...)."""

from __future__ import annotations

import keyword
import re
import types
from pathlib import Path

import triton.language as tl

from checks.engine.contract.kernel_language import LANGUAGE
from checks.engine.contract.kernel_source import extract

ROOT = Path(__file__).resolve().parent.parent
DEPTH = 3


def reachable() -> dict[str, object]:
    """Every object reachable from triton.language by attribute access, up to DEPTH names, by its path."""
    found: dict[str, object] = {}
    frontier: list[tuple[str, object]] = [("", tl)]
    for _ in range(DEPTH):
        following: list[tuple[str, object]] = []
        for prefix, obj in frontier:
            for name in dir(obj):
                if name.startswith("_") or keyword.iskeyword(name):
                    continue  # refused by its name alone (tests/test_replay.py), or no attribute Python can write
                try:
                    value = getattr(obj, name)
                except Exception:  # noqa: BLE001 - a property that raises is reachable by no kernel either
                    continue
                path = f"{prefix}.{name}" if prefix else name
                if path not in found:
                    found[path] = value
                    if isinstance(value, (types.ModuleType, type)) or callable(value):
                        following.append((path, value))
        frontier = following
    return found


def resolved(paths: list[str]) -> dict[str, bool]:
    """path -> whether the kernel checker accepts `tl.<path>` as a kernel value, one kernel line each."""
    lines = [f"    v{i} = tl.{path}" for i, path in enumerate(paths)]
    code = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr):\n" + "\n".join(lines) + "\n"
    refused = {int(m.group(1)) for m in (re.search(r"line (\d+),", p) for p in extract([("k.py", "k", code)]).problems)}
    return {path: (6 + i) not in refused for i, path in enumerate(paths)}


def test_the_resolver_accepts_exactly_the_tables_entries_of_everything_triton_language_reaches():
    objects = reachable()
    assert len(objects) > 1000 and "core.builtins.exec" in objects and "core.inspect.sys" in objects
    verdicts = resolved(sorted(objects))
    accepted = {path for path, ok in verdicts.items() if ok}
    assert accepted == set(LANGUAGE) & set(objects)
    refused_callables = [p for p, ok in verdicts.items() if not ok and callable(objects[p])]
    assert "core.builtins.exec" in refused_callables and "core.inspect.currentframe" in refused_callables
    assert "inline_asm_elementwise" in refused_callables and "extra.pkgutil.walk_packages" in refused_callables


def test_every_entry_of_the_table_is_in_this_triton():
    for path in LANGUAGE:
        obj: object = tl
        for part in path.split("."):
            obj = getattr(obj, part)  # raises for an entry this Triton does not have


def test_every_tl_name_the_reference_page_lists_is_in_the_table():
    text = (ROOT / "notebooks" / "src" / "reference.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`tl\.([a-z_0-9.]+[a-z_0-9])", text))
    assert len(named) > 20
    assert named <= set(LANGUAGE), sorted(named - set(LANGUAGE))
