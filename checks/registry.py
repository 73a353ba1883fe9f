"""Load `puzzles.yaml`, the one registry of puzzles, into typed records."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "puzzles.yaml"


class UnknownPuzzle(LookupError):
    """Raised for a puzzle number the registry does not list."""


_ID = re.compile(r"^0*(\d+)([a-z]?)$")


def shown(path: Path) -> Path:
    """A path as messages show it: relative to the course folder when it lies inside, else as given."""
    return path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path


def puzzle_id(value: int | str) -> str:
    """A puzzle's id as the contract writes it: 7, "7" and "07" are "7"; "10A" is "10a".

    Anything that does not look like a number, with at most one letter after it, comes back as
    given (stripped), so that the error that follows can quote it.
    """
    text = str(value).strip().lower()
    match = _ID.match(text)
    return f"{int(match.group(1))}{match.group(2)}" if match else str(value).strip()


@dataclass(frozen=True)
class Puzzle:
    number: str  # the contract's id: "7", or "10a" for a lettered step that comes before puzzle 10
    slug: str
    title: str
    status: str
    defines: tuple[str, ...]
    inputs: str
    returns: str
    concepts: tuple[str, ...]
    notebook: Path
    solution: Path
    tolerance: dict[str, Any] = field(default_factory=dict)
    cases: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    bench: dict[str, Any] = field(default_factory=dict)  # the grader's timing case, with its `baseline`
    sweep: dict[str, Any] = field(
        default_factory=dict
    )  # bench.sweep: what `make bench` measures (checks.instructor.bench)
    speed_bar: dict[str, Any] | None = None
    hints: tuple[str, ...] = ()
    timeout: float = 120.0
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)  # rule name -> its parameters
    map_kind: str = "elementwise"  # how the access map is drawn (checks.learner.maps)
    order: int = 0  # place in the course: lettered steps sort before their puzzle (10a, 10b, 10)
    builds_on: str | None = None  # the earlier step whose graded code this puzzle's code may use (9 on 9a)

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def name(self) -> str:
        """The main function the learner defines (the first of `defines`)."""
        return self.defines[0]

    @property
    def label(self) -> str:
        """The id padded to two digits, as file names carry it: `07`, `10a`."""
        digits = self.number.rstrip("abcdefghijklmnopqrstuvwxyz")
        return f"{int(digits):02d}{self.number[len(digits) :]}"

    @property
    def literal(self) -> str:
        """The id as a Python literal for generated code: `check(7)`, `check("10a")`."""
        return self.number if self.number.isdigit() else f'"{self.number}"'

    @property
    def stem(self) -> str:
        """`01_vector_add`, `10a_softmax_backward`: the stem of the notebook, solution and wrong-kernel folder."""
        return f"{self.label}_{self.slug}"

    @property
    def wrong_dir(self) -> Path:
        return ROOT / "solutions" / "wrong" / self.stem

    @property
    def notebook_source(self) -> Path:
        return ROOT / "notebooks" / "src" / f"{self.stem}.md"

    def tolerance_for(self, output: str) -> tuple[float, float]:
        """(atol, rtol) for one output: a per-output entry wins over the shared one."""
        tol = self.tolerance.get(output, self.tolerance)
        return float(tol["atol"]), float(tol["rtol"])


def _puzzle(entry: dict[str, Any], order: int) -> Puzzle:
    number = puzzle_id(entry["number"])
    if not _ID.match(number):
        raise ValueError(f"{REGISTRY.name}: puzzle number {entry['number']!r} is not a number with at most one letter")
    return Puzzle(
        number=number,
        slug=entry["slug"],
        title=entry["title"],
        status=entry.get("status", "planned"),
        defines=tuple(entry["defines"]),
        inputs=entry["inputs"],
        returns=entry["returns"],
        concepts=tuple(entry.get("concepts", ())),
        notebook=ROOT / entry["notebook"],
        solution=ROOT / entry["solution"],
        tolerance=entry.get("tolerance", {}),
        cases=entry.get("cases", {}),
        bench={k: v for k, v in (entry.get("bench") or {}).items() if k != "sweep"},
        sweep=(entry.get("bench") or {}).get("sweep", {}),
        speed_bar=entry.get("speed_bar"),
        hints=tuple(entry.get("hints", ())),
        timeout=float(entry.get("timeout", 120.0)),
        rules={name: dict(params or {}) for name, params in (entry.get("rules") or {}).items()},
        map_kind=entry.get("map", "elementwise"),
        order=order,
        builds_on=puzzle_id(entry["builds_on"]) if entry.get("builds_on") else None,
    )


@lru_cache(maxsize=1)
def load_puzzles() -> tuple[Puzzle, ...]:
    """All puzzles, in course order."""
    with open(REGISTRY, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    return tuple(_puzzle(entry, order) for order, entry in enumerate(data["puzzles"], 1))


def get_puzzle(number: int | str) -> Puzzle:
    """The puzzle with this id: 7, "7", "07" and "10a" all work."""
    wanted = puzzle_id(number)
    for puzzle in load_puzzles():
        if puzzle.number == wanted:
            return puzzle
    known = ", ".join(p.number for p in load_puzzles())
    raise UnknownPuzzle(f"There is no puzzle {wanted}; the puzzles are {known}.")
