"""Helpers the test modules share: the registry's puzzles and their known-wrong kernels as pytest parameters,
the right submissions in other styles, the submissions made from another by an edit, switching a rule off for a
mutation test, and hand-made access logs."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import math
import re
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from checks.authoring.wrong import EDIT_SUFFIX, apply_edits, known_wrong, name_of, source_of
from checks.engine.access.log import FIELDS, LOAD, MAX_DIMS, STORE, AccessLog
from checks.memory import Arena, poisonable
from checks.registry import ROOT, Puzzle, get_puzzle, load_puzzles

# the puzzles graded in Triton's interpreter (on any machine); the Hopper track (Gluon) is graded on a Hopper GPU only,
# and tests/test_hopper.py holds its tests
READY = [p for p in load_puzzles() if p.ready and not p.needs_hopper]
HOPPER = [p for p in load_puzzles() if p.needs_hopper]
# puzzle 1 whose first case sleeps for two minutes: a check to interrupt while it runs the learner's code
SLEEPS_IN_ITS_FIRST_CASE = "import time\n\n\ndef vector_add(x, y):\n    time.sleep(120)\n    return x + y\n"


# Jupyter's packages, which executing notebooks needs (make env-dev; a GPU machine without network has none): where
# they are, tests/test_notebooks.py grades each answer key as its notebook filled with it
JUPYTER = all(importlib.util.find_spec(name) for name in ("nbformat", "nbclient", "ipykernel"))


def as_at_a_terminal() -> None:
    """`preexec_fn` of a check a test sends Ctrl-C to: SIGINT and SIGQUIT at their defaults, as at a terminal. A
    command started in the background of a non-interactive shell (`pytest ... &`) ignores both, and so does every
    process it starts, unless it sets them again: such a check would never see the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def wrong_kernels() -> list[tuple[Puzzle, Path]]:
    return [(p, f) for p in READY for f in known_wrong(p)]


def puzzle_params() -> list:
    return [pytest.param(p, id=p.stem) for p in READY]


def written_params() -> list:
    """Every ready puzzle, the Hopper track's too: for what its files hold, not how it is graded."""
    return [pytest.param(p, id=p.stem) for p in load_puzzles() if p.ready]


RIGHT = ROOT / "tests" / "submissions" / "right"


def right_submissions() -> list[tuple[str, str]]:
    """Each right submission in another style (under RIGHT), by name, with the puzzle its name starts with (`10a_x`
    is 10a)."""
    return [(re.match(r"\d+[a-z]?", name).group(), name) for name in submission_names(RIGHT)]


def submission_names(folder: Path) -> list[str]:
    """The names of the submissions under `folder`: its `name.py` files and its edit files `name.edit.yaml`."""
    return sorted({name_of(p) for p in [*folder.glob("*.py"), *folder.glob(f"*{EDIT_SUFFIX}")]})


def submission(folder: Path, name: str, into: Path) -> Path:
    """The file of the submission `name` under tests/submissions/<folder>: `name.py` itself, or the one its edit file
    `name.edit.yaml` stands for, written into the folder `into` as `name.py` (the name a report shows).

    An edit file puts one mistake (or one attack) into another submission, so that it is all that tells them apart.
    Its `edits`, `append` and `doc` (the docstring) are solutions/wrong/'s (checks.authoring.wrong), applied to an
    answer key (`base: 1`, puzzle 1's) or to another submission of the folder (`from: name.py`, or `from: name` for
    one that is itself an edit file), without that submission's docstring:

        from: 09_causal_diagonal_left_out.py
        doc: |-
          Wrong: ...
        edits:
          - old: "    keys_end = offs_m\\n"
            new: "    keys_end = offs_m + 2\\n"
    """
    path = folder / f"{name}.py"
    if path.exists():
        return path
    edit = folder / f"{name}{EDIT_SUFFIX}"
    spec = yaml.safe_load(edit.read_text(encoding="utf-8"))
    if "base" in spec:
        text = source_of(get_puzzle(str(spec["base"])), edit)
    else:
        source = folder / spec["from"]  # a .py of the folder, or the name of another edit file's submission
        body = source.read_text(encoding="utf-8") if source.suffix == ".py" else submission_text(folder, spec["from"])
        if body.startswith('"""'):
            body = body[body.index('"""', 3) + 3 :].lstrip("\n")
        body = apply_edits(body, spec.get("edits", []), str(edit)) + spec.get("append", "")
        text = f'"""{spec["doc"]}"""\n\n{body}' if "doc" in spec else body
    written = into / f"{name}.py"
    written.write_text(text, encoding="utf-8")
    return written


def submission_text(folder: Path, name: str) -> str:
    """The text of the submission `name` under `folder` (see submission), for writing it elsewhere."""
    with tempfile.TemporaryDirectory() as into:
        return submission(folder, name, Path(into)).read_text(encoding="utf-8")


def switch_off(monkeypatch: pytest.MonkeyPatch, rule: str) -> None:
    """The rulebook with `rule` finding nothing (for the test's duration): the mutation check."""
    from checks.engine.judging.rules import rulebook

    entry = rulebook.RULES[rule]
    monkeypatch.setitem(rulebook.RULES, rule, dataclasses.replace(entry, check=lambda ctx, **params: None))


def run_rule(rule: str, ctx: Any, **params: Any) -> Any:
    """One rule on one call, through the rulebook (which names the problem after the rule)."""
    from checks.engine.judging.rules import rulebook

    return rulebook.apply(rulebook.RULES[rule], ctx, params)


# -- hand-made access logs --------------------------------------------------------------------------
def region(name: str, shape: tuple[int, ...], role: str = "input", element_size: int = 2) -> dict[str, Any]:
    strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    numel = math.prod(shape)
    label = name if role == "input" else f"a {shape} tensor you allocated"
    return {"name": name, "label": label, "role": role, "element_size": element_size, "size": numel,
            "shape": list(shape), "strides": strides, "offset": 0, "numel": numel}  # fmt: skip


class Log:
    """Builds an access log the way the recorder would, one access at a time."""

    def __init__(self, regions: list[dict[str, Any]]) -> None:
        self.regions = regions
        self.rows: list[list[int]] = []
        self.launches: list[dict[str, Any]] = []

    def launch(self, kernel: str, grid: tuple[int, int, int]) -> Log:
        self.launches.append({"kernel": kernel, "grid": list(grid)})
        return self

    def access(self, kind: int, pid: int, name: str, box: list[tuple[int, int]]) -> Log:
        r = next(i for i, x in enumerate(self.regions) if x["name"] == name)
        lanes = math.prod(hi - lo + 1 for lo, hi in box)
        lo = [b[0] for b in box] + [0] * (MAX_DIMS - len(box))
        hi = [b[1] for b in box] + [0] * (MAX_DIMS - len(box))
        self.rows.append([kind, len(self.launches) - 1, pid, r, lanes, *lo, *hi, 0])
        return self

    def _counts(self, kind: int) -> list[torch.Tensor]:
        """Each region's accesses of one kind per element of its storage, every element of each box counted once."""
        counts = [torch.zeros(int(x["size"]), dtype=torch.int32) for x in self.regions]
        for row in self.rows:
            if row[0] != kind:
                continue
            region = self.regions[row[3]]
            seen = counts[row[3]].as_strided(region["shape"], region["strides"], region["offset"])
            box = tuple(slice(row[5 + d], row[5 + MAX_DIMS + d] + 1) for d in range(len(region["shape"])))
            seen[box] += 1
        return counts

    def data(self) -> dict[str, Any]:
        loaded = [sum(row[4] for row in self.rows if row[3] == i and row[0] == LOAD) for i in range(len(self.regions))]
        stored = [sum(row[4] for row in self.rows if row[3] == i and row[0] == STORE) for i in range(len(self.regions))]
        return AccessLog(
            regions=self.regions, reads=self._counts(LOAD), writes=self._counts(STORE), loaded=loaded, stored=stored,
            outside_loads=[0] * len(self.regions), outside_stores=[0] * len(self.regions),
            launches=self.launches, records=torch.tensor(self.rows, dtype=torch.int64).reshape(-1, len(FIELDS)),
        ).to_dict()  # fmt: skip


def matmul_log(m: int, n: int, tile: int, order: str, k: int = 64, programs: int = 0) -> dict[str, Any]:
    """A matmul's log: one program per tile, or with `programs`, a persistent kernel whose program p
    computes the tiles p, p + programs, ... (in the interpreter, one program after the other)."""
    num_m, num_n = -(-m // tile), -(-n // tile)
    log = Log([region("a", (m, k)), region("b", (k, n)), region("c", (m, n), "allocated")])
    programs = programs or num_m * num_n
    log.launch("matmul_kernel", (programs, 1, 1))
    walk = [(p, t) for p in range(programs) for t in range(p, num_m * num_n, programs)]
    for pid, tile_id in walk:
        if order == "row-major":
            pm, pn = divmod(tile_id, num_n)
        elif order == "column-major":
            pn, pm = divmod(tile_id, num_m)
        else:  # grouped, GROUP_SIZE_M = 2
            group, first = 2 * num_n, (tile_id // (2 * num_n)) * 2
            size = min(num_m - first, 2)
            pm, pn = first + (tile_id % group) % size, (tile_id % group) // size
        rows, cols = (pm * tile, min(m, pm * tile + tile) - 1), (pn * tile, min(n, pn * tile + tile) - 1)
        for step in range(0, k, 32):
            log.access(LOAD, pid, "a", [rows, (step, step + 31)]).access(LOAD, pid, "b", [(step, step + 31), cols])
        log.access(STORE, pid, "c", [rows, cols])
    return log.data()


def attention_log(n: int, block_m: int, block_n: int, skip: bool, backward: bool = False) -> dict[str, Any]:
    shape = (1, 1, n, 16)
    names = ["q", "k", "v", "do"] if backward else ["q", "k", "v"]
    outputs = ["dq", "dk", "dv"] if backward else ["o"]
    log = Log([region(x, shape) for x in names] + [region(x, shape, "allocated") for x in outputs])
    head = [(0, 0), (0, 0)]
    if backward:  # dK/dV: one program per key block, walking query blocks
        log.launch("dkdv", (-(-n // block_n), 1, 1))
        for pid, start in enumerate(range(0, n, block_n)):
            keys = (start, min(n, start + block_n) - 1)
            log.access(LOAD, pid, "k", [*head, keys, (0, 15)]).access(LOAD, pid, "v", [*head, keys, (0, 15)])
            for q0 in range(start - start % block_m if skip else 0, n, block_m):
                rows = [*head, (q0, min(n, q0 + block_m) - 1), (0, 15)]
                log.access(LOAD, pid, "q", rows).access(LOAD, pid, "do", rows)
            log.access(STORE, pid, "dk", [*head, keys, (0, 15)]).access(STORE, pid, "dv", [*head, keys, (0, 15)])
    log.launch("fwd" if not backward else "dq", (-(-n // block_m), 1, 1))
    for pid, start in enumerate(range(0, n, block_m)):
        rows = (start, min(n, start + block_m) - 1)
        log.access(LOAD, pid, "q", [*head, rows, (0, 15)])
        for k0 in range(0, (rows[1] + 1) if skip else n, block_n):
            keys = [*head, (k0, min(n, k0 + block_n) - 1), (0, 15)]
            log.access(LOAD, pid, "k", keys).access(LOAD, pid, "v", keys)
        log.access(STORE, pid, outputs[0], [*head, rows, (0, 15)])
    return log.data()


_EMPTY = ("empty", "empty_like", "empty_strided")
_FILLED = ("zeros", "zeros_like", "ones", "ones_like", "full", "full_like")


@contextlib.contextmanager
def guard_allocations(arena: Arena) -> Iterator[None]:
    """Give every float tensor allocated inside the block guard bands, poisoning the `empty` ones, as the replay
    does with a plan's allocations (checks.engine.replay.perform): for calling kernels directly in a test."""

    def wrap(original: Callable, poison: bool) -> Callable:
        @functools.wraps(original)
        def allocate(*args, **kwargs):
            t = original(*args, **kwargs)
            if (
                kwargs.get("out") is not None
                or not isinstance(t, torch.Tensor)
                or t.requires_grad
                or t.layout != torch.strided
                or not poisonable(t.dtype)
                or t.numel() == 0
                or str(t.device.type) != torch.device(arena.device).type
            ):
                return t
            return arena.adopt(t, poison)

        return allocate

    patched: list[tuple[object, str, Callable]] = []
    for name in _EMPTY + _FILLED:
        patched.append((torch, name, getattr(torch, name)))
    patched.append((torch.Tensor, "new_empty", torch.Tensor.new_empty))
    patched.append((torch.Tensor, "new_zeros", torch.Tensor.new_zeros))
    try:
        for owner, name, original in patched:
            setattr(owner, name, wrap(original, poison=name.startswith(("empty", "new_empty"))))
        yield
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)
