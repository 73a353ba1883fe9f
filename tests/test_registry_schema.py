"""puzzles.yaml is read through its schema: a misspelt, unknown, missing or mistyped key stops the load with the
file, the line and the keys allowed there, at every level of the file."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import get_args

import pytest
import yaml

from checks import registry, typed_reader
from checks.registry import (
    REGISTRY,
    REGISTRY_SETTING,
    ROOT,
    Case,
    Layout,
    MapKind,
    PuzzleEntry,
    RegistryError,
    SpeedBar,
    Status,
    Sweep,
    Target,
    Tolerance,
    load_puzzles,
    read_registry,
)

LINES = REGISTRY.read_text(encoding="utf-8").splitlines(keepends=True)


@pytest.fixture(params=["libyaml", "python"])
def loader(request, monkeypatch):
    """Both of PyYAML's loaders: the GPU machines may have PyYAML without libyaml."""
    if request.param == "python":
        monkeypatch.setattr(registry, "_LOADER", yaml.SafeLoader)
    elif not hasattr(yaml, "CSafeLoader"):
        pytest.skip("this PyYAML has no libyaml")
    return request.param


def puzzle_line(number: str, text: str) -> int:
    """The 1-based line of the first line holding `text` in puzzle `number`'s entry."""
    start = LINES.index(f"  - number: {number}\n")
    return next(i for i in range(start, len(LINES)) if text in LINES[i]) + 1


def copy_with(tmp_path: Path, line: int, old: str, new: str) -> Path:
    """A copy of puzzles.yaml in which `old` on `line` is `new`."""
    lines = list(LINES)
    assert old in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    path = tmp_path / "puzzles.yaml"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def allowed(schema: type) -> str:
    return "the keys allowed there are " + ", ".join(f.name for f in fields(schema)) + "."


def test_the_real_registry_loads(loader):
    puzzles = read_registry(REGISTRY)
    assert puzzles == load_puzzles() and len(puzzles) == len(yaml.safe_load("".join(LINES))["puzzles"])


def plain(value):
    """A record's value as safe_load reads it: lists for tuples."""
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    return value


def test_the_records_hold_the_values_safe_load_reads():
    entries = yaml.safe_load("".join(LINES))["puzzles"]
    for puzzle, entry in zip(load_puzzles(), entries, strict=True):
        bench = dict(entry.get("bench") or {})
        for mode in ("cpu", "gpu"):
            cases = [case.given() for case in getattr(puzzle.cases, mode)]
            assert cases == entry.get("cases", {}).get(mode, []), (puzzle.number, mode)
        sweep, baseline = bench.pop("sweep", None), bench.pop("baseline", "torch")
        timing = puzzle.timing_case.given() if puzzle.bench else {}
        assert timing == bench and puzzle.baseline == baseline
        assert (puzzle.sweep is None) == (sweep is None)
        if sweep:
            assert {k: c.given() for k, c in puzzle.sweep.sizes.items()} == sweep["sizes"]
            assert plain(puzzle.sweep.quick) == sweep["quick"] and puzzle.sweep.x == sweep["x"]
        tolerance = entry.get("tolerance", {})
        if "atol" in tolerance:
            assert (puzzle.tolerance.atol, puzzle.tolerance.rtol) == (tolerance["atol"], tolerance["rtol"])
        else:
            assert {k: (t.atol, t.rtol) for k, t in puzzle.tolerance.items()} == {
                k: (t["atol"], t["rtol"]) for k, t in tolerance.items()
            }
        assert (puzzle.speed_bar and puzzle.speed_bar.min_ratio) == (entry.get("speed_bar") or {}).get("min_ratio")
        assert puzzle.rules == {name: params or {} for name, params in (entry.get("rules") or {}).items()}


@pytest.mark.parametrize(
    "number, old, key, typo, where, schema",
    [
        ("7", "    hints:", "hints", "hnits", "puzzle 7", PuzzleEntry),
        ("1", "plot: vector_add", "plot", "plto", "puzzle 1's bench.sweep", Sweep),
        ("2", "layout_b: sliced", "layout_b", "layuot_b", "puzzle 2's cases.cpu[3]", Case),
        ("1", "{series: fp32", "series", "seires", "puzzle 1's bench.sweep.targets[0]", Target),
        ("4", "{min_ratio", "min_ratio", "min_raito", "puzzle 4's speed_bar", SpeedBar),
        ("8a", "o: {atol", "atol", "atoll", "puzzle 8a's tolerance['o']", Tolerance),
    ],
)
def test_a_misspelt_key_is_named_with_its_line(tmp_path, loader, number, old, key, typo, where, schema):
    line = puzzle_line(number, old)
    path = copy_with(tmp_path, line, old, old.replace(key, typo))
    with pytest.raises(RegistryError) as caught:
        read_registry(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: unknown key {typo!r} in {where}. Did you mean {key!r}?"), message
    assert allowed(schema) in message


def test_a_misspelt_top_level_key(tmp_path):
    path = copy_with(tmp_path, LINES.index("puzzles:\n") + 1, "puzzles:", "puzles:")
    with pytest.raises(RegistryError, match=r"unknown key 'puzles' in the file's top level\. Did you mean 'puzzles'\?"):
        read_registry(path)


def test_a_missing_key_a_wrong_type_and_a_key_given_twice(tmp_path):
    start, line = LINES.index("  - number: 1\n") + 1, puzzle_line("1", "    slug: vector_add")
    with pytest.raises(RegistryError, match=rf":{start}: puzzle 1 lacks 'slug'; add it"):
        read_registry(copy_with(tmp_path, line, "slug: vector_add", "# slug: vector_add"))
    line = puzzle_line("1", "cap_s: 40")
    with pytest.raises(RegistryError, match=rf":{line}: puzzle 1's bench.sweep.cap_s is 'forty'; write a number there"):
        read_registry(copy_with(tmp_path, line, "cap_s: 40", "cap_s: forty"))
    line = puzzle_line("3", "    title: ")
    with pytest.raises(RegistryError, match=rf":{line + 1}: puzzle 3 gives 'title' twice; keep one of the two"):
        read_registry(copy_with(tmp_path, line, "    title:", "    title: Twice\n    title:"))


def imports_of(module) -> set[str]:
    """The modules a module imports."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return imported | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}


def test_the_registry_needs_nothing_a_gpu_machine_lacks():
    """The GPU machines have PyYAML but neither pydantic nor msgspec, and no network to install them: the registry
    needs only PyYAML and the typed reader, which needs only the standard library."""
    assert {name for name in imports_of(registry) if name.split(".")[0] not in sys.stdlib_module_names} == {
        "yaml",
        "yaml.nodes",
        "checks.typed_reader",
    }
    assert {name.split(".")[0] for name in imports_of(typed_reader)} <= set(sys.stdlib_module_names)


@pytest.mark.parametrize(
    "number, old, value, typo, where, allowed_values",
    [
        ("1", "    map: elementwise", "elementwise", "elementwse", "puzzle 1's map", MapKind),
        ("1", "    status: ready", "ready", "redy", "puzzle 1's status", Status),
        ("2", "layout_b: sliced", "sliced", "slcied", "puzzle 2's cases.cpu[3].layout_b", Layout),
    ],
)
def test_a_misspelt_value_is_named_with_its_line_and_the_values_allowed(
    tmp_path, loader, number, old, value, typo, where, allowed_values
):
    line = puzzle_line(number, old)
    path = copy_with(tmp_path, line, old, old.replace(value, typo))
    with pytest.raises(RegistryError) as caught:
        read_registry(path)
    listed = ", ".join(repr(v) for v in get_args(allowed_values))
    assert str(caught.value) == (
        f"{path}:{line}: {where} is {typo!r}. Did you mean {value!r}? Write one of {listed} there."
    ), str(caught.value)


BROKEN = "The puzzle registry is broken, so nothing can be graded:"


def broken_copy(tmp_path: Path) -> tuple[Path, int]:
    """A copy of puzzles.yaml whose puzzle 1 has a misspelt key, and the line of it."""
    line = puzzle_line("1", "    slug: vector_add")
    return copy_with(tmp_path, line, "slug:", "slgu:"), line


@pytest.mark.slow  # each command imports torch before it reads the registry
@pytest.mark.parametrize(
    "command",
    [
        ["checks", "9", "--solution"],  # make check
        ["checks.instructor.solutions", "--puzzle", "1"],  # make solutions
        ["checks.instructor.classroom", "{folder}"],  # make grade
    ],
    ids=["check", "solutions", "grade"],
)
def test_a_broken_registry_ends_a_command_with_one_line_and_exit_status_2(tmp_path, command):
    path, line = broken_copy(tmp_path)
    (folder := tmp_path / "submissions").mkdir()
    env = {**os.environ, REGISTRY_SETTING: str(path), "CHECKS_WARM": "0"}
    env.pop("CHECKS_MAKE_LEVEL", None)
    args = [sys.executable, "-m", *(part.format(folder=folder) for part in command)]
    run = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr and run.stdout == "", run.stdout + run.stderr
    (said,) = run.stderr.strip().splitlines()
    assert said.startswith(
        f"The puzzle registry is broken, so nothing can be graded: {path}:{line}: unknown key 'slgu'"
    )
    assert "Did you mean 'slug'?" in said


@pytest.fixture
def broken_registry(tmp_path, monkeypatch):
    """This process reads a broken copy of puzzles.yaml (and the course's own again after the test)."""
    path, line = broken_copy(tmp_path)
    monkeypatch.setenv(REGISTRY_SETTING, str(path))
    load_puzzles.cache_clear()
    yield path, line
    monkeypatch.delenv(REGISTRY_SETTING)
    load_puzzles.cache_clear()


def test_check_in_a_notebook_says_the_registry_is_broken_in_one_line(broken_registry, capsys):
    from checks.learner.notebook import check

    path, line = broken_registry
    assert check(1) is None
    said = capsys.readouterr().out.strip().splitlines()
    assert len(said) == 1 and said[0].startswith(
        f"The puzzle registry is broken, so nothing can be graded: {path}:{line}:"
    )
    assert "git checkout puzzles.yaml" in said[0]
