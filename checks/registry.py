"""Load `puzzles.yaml`, the one registry of puzzles, into typed records."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "puzzles.yaml"


class UnknownPuzzle(LookupError):
    """Raised for a puzzle number the registry does not list."""


@dataclass(frozen=True)
class Puzzle:
    number: int
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
    sweep: dict[str, Any] = field(default_factory=dict)  # bench.sweep: what `make bench` measures (checks.bench)
    speed_bar: dict[str, Any] | None = None
    hints: tuple[str, ...] = ()
    timeout: float = 120.0
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)  # rule name -> its parameters

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def name(self) -> str:
        """The main function the learner defines (the first of `defines`)."""
        return self.defines[0]

    @property
    def stem(self) -> str:
        """`01_vector_add`: the shared stem of the notebook, solution and wrong-kernel folder."""
        return f"{self.number:02d}_{self.slug}"

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


def _puzzle(entry: dict[str, Any]) -> Puzzle:
    return Puzzle(
        number=int(entry["number"]),
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
    )


@lru_cache(maxsize=1)
def load_puzzles() -> tuple[Puzzle, ...]:
    """All puzzles, in course order."""
    with open(REGISTRY, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    return tuple(_puzzle(entry) for entry in data["puzzles"])


def get_puzzle(number: int) -> Puzzle:
    for puzzle in load_puzzles():
        if puzzle.number == number:
            return puzzle
    known = ", ".join(str(p.number) for p in load_puzzles())
    raise UnknownPuzzle(f"There is no puzzle {number}; the puzzles are {known}.")
