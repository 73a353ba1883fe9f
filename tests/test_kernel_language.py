"""The kernel language is a table: the resolver accepts exactly its entries and refuses everything else that
triton.language reaches (its submodules, and the standard modules it imports: builtins, inspect, sys, os, ...)."""

from __future__ import annotations

import keyword
import re
import types
from pathlib import Path

import pytest
import triton.language as tl

from checks.engine.contract.kernel_language import GLUON, LANGUAGE
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


# -- Gluon: the Hopper track's kernels resolve against a table of their own ----------------------------------------
GLUON_HEAD = """import os
import triton
import pytest
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma


@triton.jit
def triton_kernel(x_ptr):
    tl.store(x_ptr, 1.0)


@gluon.jit
def k(x_ptr, BLOCK: gl.constexpr):
"""
GLUON_LINE = GLUON_HEAD.count("\n") + 1  # the line of the kernel's first statement


def gluon_reachable() -> dict[str, object]:
    """Every object reachable from triton.experimental.gluon.language by attribute access, up to DEPTH names."""
    import triton.experimental.gluon.language as gl

    found: dict[str, object] = {}
    frontier: list[tuple[str, object]] = [("", gl)]
    for _ in range(DEPTH + 1):  # one more: nvidia.hopper.mbarrier.wait
        following: list[tuple[str, object]] = []
        for prefix, obj in frontier:
            for name in dir(obj):
                if name.startswith("_") or keyword.iskeyword(name):
                    continue
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


def test_a_gluon_kernel_may_use_exactly_the_gluon_tables_entries_of_everything_gluon_language_reaches():
    objects = gluon_reachable()
    assert "nvidia.hopper.mbarrier.wait" in objects and "inline_asm_elementwise" in objects
    paths = sorted(objects)
    lines = [f"    v{i} = gl.{path}" for i, path in enumerate(paths)]
    code = GLUON_HEAD + "\n".join(lines) + "\n"
    refused = {int(m.group(1)) for m in (re.search(r"line (\d+),", p) for p in extract([("k.py", "k", code)]).problems)}
    accepted = {path for i, path in enumerate(paths) if GLUON_LINE + i not in refused}
    assert accepted == set(GLUON) & set(objects)
    assert "inline_asm_elementwise" not in accepted and "nvidia.hopper.tma.async_gather" not in accepted


def test_every_entry_of_the_gluon_table_is_in_this_triton():
    import triton.experimental.gluon.language as gl

    for path in GLUON:
        obj: object = gl
        for part in path.split("."):
            obj = getattr(obj, part)  # raises for an entry this Triton does not have


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("os.system('touch /tmp/x')", "`os.system`"),
        ("gl.inline_asm_elementwise('mov.b32 $0, $1;', '=r,r', [x_ptr], gl.int32, True, 1)",
         "`gl.inline_asm_elementwise`, which is not in the kernel language (the gl.* (Gluon)"),
        ("x = tl.load(x_ptr)", "`tl.load`, which is not in the kernel language (the gl.* (Gluon)"),
        ("triton_kernel(x_ptr)", "`triton_kernel`, which a Gluon kernel cannot use"),
        ("d = x_ptr.handle", "the attribute `.handle`"),
        ("tma.async_gather(x_ptr, x_ptr, 0, x_ptr, x_ptr)", "`tma.async_gather`"),
        ("b = mbarrier.core", "`mbarrier.core`"),
        ("warpgroup_mma.__globals__", "the attribute `__globals__`"),
        ("n = gl.nvidia.hopper.mbarrier.init.fn", "`gl.nvidia.hopper.mbarrier.init.fn`, which is not in"),
        ("s = BLOCK.value.fn", "the attribute `.fn`"),
    ],
)  # fmt: skip
def test_a_gluon_kernel_may_use_only_the_gluon_table(line, said):
    code = GLUON_HEAD + f"    {line}\n"
    problems = extract([("k.py", "k.py", code)]).problems
    assert problems and f"k.py, line {GLUON_LINE}, in kernel `k`" in problems[0] and said in problems[0], problems


def test_a_triton_kernel_reaches_none_of_gluons_names():
    code = GLUON_HEAD.replace("tl.store(x_ptr, 1.0)", "tl.store(x_ptr, gl.arange(0, 4))") + "    pass\n"
    problems = extract([("k.py", "k.py", code)]).problems
    assert any("kernel `triton_kernel`" in p and "`gl.arange`, which is not in the kernel language" in p
               for p in problems), problems  # fmt: skip
    code = GLUON_HEAD.replace("tl.store(x_ptr, 1.0)", "k(x_ptr, 4)") + "    pass\n"
    problems = extract([("k.py", "k.py", code)]).problems
    assert any("`k`, which a Triton kernel cannot use" in p for p in problems), problems


def test_the_hopper_keys_are_read_as_gluon_kernels_and_use_only_its_table():
    for path in [*sorted((ROOT / "solutions").glob("16*.py")), *sorted((ROOT / "solutions" / "variants").glob("16*"))]:
        source = extract([(str(path), path.name, path.read_text(encoding="utf-8"))])
        assert source.gluon_kernels and source.gluon_kernels == source.kernels, path
        assert not source.problems, (path, source.problems)
        assert any("def _" in line for line in source.files[0].text.splitlines())  # the kernels' text was kept
