"""Load `puzzles.yaml`, the one registry of puzzles, into typed records.

The file is read through its schema: the dataclasses `RegistryFile`, `PuzzleEntry`, `Cases`, `Case`, `Tolerance`,
`Bench`, `Sweep`, `Target` and `SpeedBar` declare every key it may hold, at every level, with the type of its
value, and `read_registry` walks the YAML nodes (which keep each key's line) against their fields: an unknown,
misspelt, missing or mistyped key stops the load with the file, the line and the keys allowed there. The schema
is stdlib dataclasses rather than pydantic or msgspec because the course runs on GPU machines that have neither
and no network to install them. The reader hands on the data as `yaml.safe_load` gives it (the file's keys, in
its order), so the records keep the file's mappings as they are; the names and parameters under `rules:` are
checked by the rulebook (checks.engine.judging.rules.rulebook) against the rules' functions.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from functools import cache, lru_cache
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, ClassVar, NoReturn, Union, get_args, get_origin, get_type_hints

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

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


# The schema of puzzles.yaml. Each dataclass is one level of the file: its fields are the keys allowed there
# (a field without a default is a key the level must have) and their types the values allowed. The reader below
# builds no instances of them: it checks the file against them and hands on the data itself.


@dataclass(frozen=True)
class Case:
    """The keys a case may set: a graded case (`cases.cpu`, `cases.gpu`), the timing case (`bench`) and the
    cases of `bench.sweep` (`series`, `sizes`, `smoke`). The puzzle's module (checks/puzzles) reads them."""

    advice: ClassVar[str] = "A key that a puzzle's module newly reads is declared in `Case` (checks/registry.py)."

    n: int | None = None
    shape: list[int] | None = None
    M: int | None = None
    N: int | None = None
    K: int | None = None
    B: int | None = None
    H: int | None = None
    H_kv: int | None = None
    G: int | None = None
    D: int | None = None
    causal: bool | None = None
    dtype: str | None = None
    layout: str | None = None
    layout_a: str | None = None
    layout_b: str | None = None
    layout_q: str | None = None
    layout_k: str | None = None
    layout_v: str | None = None
    layout_o: str | None = None
    layout_do: str | None = None
    layout_y: str | None = None
    layout_dy: str | None = None
    scale: float | str | None = None  # PyYAML reads 1.0e4 (no sign after the e) as a string; float() reads it
    shift: float | str | None = None
    fill: str | None = None
    offset: float | None = None
    sm_scale: float | None = None
    score_std: float | None = None
    page_size: int | None = None
    seq_lens: list[int] | None = None
    spare_pages: int | None = None
    rtol: float | None = None  # loosens the puzzle's rtol for this case (checks.engine.judging.rules.core)
    atol: float | None = None  # loosens the puzzle's atol for this case (checks.engine.judging.rules.core)
    note: str | None = None  # what the case is for, shown beside its result


@dataclass(frozen=True)
class Cases:
    cpu: list[Case] | None = None
    gpu: list[Case] | None = None


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


@dataclass(frozen=True)
class Target:
    series: str
    size: str
    ratio: float | None = None
    tflops: float | None = None
    baseline: str | None = None


@dataclass(frozen=True)
class Sweep:
    """`bench.sweep`: what `make bench` (checks.instructor.bench) measures the answer key at."""

    series: dict[str, Case]
    sizes: dict[str, Case]
    x: str
    quick: list[str]
    smoke: dict[str, Case]
    x_label: str | None = None
    plot: str | None = None
    cap_s: float | None = None
    variants: dict[str, str] | None = None
    targets: list[Target] | None = None
    graphs: bool | None = None


@dataclass(frozen=True)
class Bench(Case):
    """The GPU timing case: a case, the torch baseline it is timed against and the benchmark's sweep."""

    baseline: str | None = None
    sweep: Sweep | None = None


@dataclass(frozen=True)
class SpeedBar:
    min_ratio: float


@dataclass(frozen=True)
class PuzzleEntry:
    """One puzzle as puzzles.yaml writes it (the comment at the top of the file says what each key means)."""

    number: int | str
    slug: str
    title: str
    defines: list[str]
    inputs: str
    returns: str
    notebook: str
    solution: str
    status: str | None = None
    map: str | None = None
    concepts: list[str] | None = None
    tolerance: Tolerance | dict[str, Tolerance] | None = None  # shared, or one per output name
    cases: Cases | None = None
    bench: Bench | None = None
    speed_bar: SpeedBar | None = None
    hints: list[str] | None = None
    timeout: float | None = None
    rules: dict[str, dict[str, Any] | None] | None = None  # the rulebook checks names and parameters
    builds_on: int | str | None = None


@dataclass(frozen=True)
class RegistryFile:
    puzzles: list[PuzzleEntry]


class RegistryError(ValueError):
    """puzzles.yaml does not fit its schema; the message names the file, the line and what to change."""


_WORDS = {
    bool: "true or false",
    int: "a whole number",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "a mapping",
    NoneType: "nothing (null)",
}


@cache
def _keys(cls: type) -> dict[str, tuple[Any, bool]]:
    """A schema dataclass's keys: name -> (the type of its value, whether the level must have it)."""
    hints = get_type_hints(cls)
    return {f.name: (hints[f.name], f.default is MISSING and f.default_factory is MISSING) for f in fields(cls)}


def _members(hint: Any) -> tuple[Any, ...]:
    return get_args(hint) if get_origin(hint) in (Union, UnionType) else (hint,)


def _kind(hint: Any) -> type:
    return dict if is_dataclass(hint) else get_origin(hint) or hint


def _fits(value: Any, hint: Any) -> bool:
    kind = _kind(hint)
    if kind in (int, float) and isinstance(value, bool):
        return False
    return isinstance(value, (int, float) if kind is float else kind)


def _wanted(hint: Any) -> str:
    kinds = [_kind(m) for m in _members(hint)]
    return " or ".join(dict.fromkeys(_WORDS[k] for k in kinds if k is not NoneType or len(kinds) == 1))


class _Reader:
    """Checks the nodes of one file against the schema and gives back their data, as yaml.safe_load would."""

    def __init__(self, path: Path, loader: Any) -> None:
        self.path, self.loader = path, loader
        self.flattened: set[int] = set()

    def fail(self, node: Node, text: str) -> NoReturn:
        raise RegistryError(f"{shown(self.path)}:{node.start_mark.line + 1}: {text}")

    @staticmethod
    def place(owner: str, path: str) -> str:
        if owner and path:
            return f"{owner}'s {path}"
        return owner or (f"the file's {path}" if path else "the file's top level")

    def read(self, node: Node, hint: Any, owner: str, path: str) -> Any:
        if hint is Any:
            return self.loader.construct_object(node, deep=True)
        members = _members(hint)
        if isinstance(node, MappingNode):
            self.flatten(node, owner, path)
            shapes = [m for m in members if _kind(m) is dict]
            if shapes:
                keys = {k.value for k, _ in node.value if isinstance(k, ScalarNode)}
                # `Tolerance | dict[str, Tolerance]`: the record when the mapping uses its keys, else the dict
                shape = next((m for m in shapes if is_dataclass(m) and keys & _keys(m).keys()), shapes[-1])
                if is_dataclass(shape):
                    return self.record(node, shape, owner, path)
                return self.mapping(node, get_args(shape)[1], owner, path)
            shown_value = "a mapping"
        elif isinstance(node, SequenceNode):
            sequence = next((m for m in members if get_origin(m) is list), None)
            if sequence is not None:
                item = get_args(sequence)[0]
                if item is PuzzleEntry:
                    return [self.read(n, item, self.puzzle(n, i), "") for i, n in enumerate(node.value)]
                return [self.read(n, item, owner, f"{path}[{i}]") for i, n in enumerate(node.value)]
            shown_value = "a list"
        else:
            value = self.loader.construct_object(node)
            if any(_fits(value, m) for m in members):
                return value
            shown_value = repr(value)
        self.fail(node, f"{self.place(owner, path)} is {shown_value}; write {_wanted(hint)} there.")

    def flatten(self, node: MappingNode, owner: str, path: str) -> None:
        """Merge keys (`<<: *anchor`) become the anchor's pairs, as safe_load has them; a key given twice is an
        error, where safe_load would keep the last silently."""
        if id(node) in self.flattened:
            return
        self.flattened.add(id(node))
        seen: set[str] = set()
        for key, _ in node.value:
            if isinstance(key, ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                if key.value in seen:
                    self.fail(key, f"{self.place(owner, path)} gives {key.value!r} twice; keep one of the two.")
                seen.add(key.value)
        self.loader.flatten_mapping(node)

    def record(self, node: MappingNode, cls: Any, owner: str, path: str) -> dict[str, Any]:
        allowed, data = _keys(cls), {}
        for key_node, value_node in node.value:
            key = self.loader.construct_object(key_node) if isinstance(key_node, ScalarNode) else None
            if key not in allowed:
                guess = difflib.get_close_matches(str(key), allowed, n=1)
                self.fail(
                    key_node,
                    f"unknown key {key!r} in {self.place(owner, path)}."
                    + (f" Did you mean {guess[0]!r}?" if guess else "")
                    + f" Correct or remove it; the keys allowed there are {', '.join(allowed)}."
                    + (f" {cls.advice}" if getattr(cls, "advice", "") else ""),
                )
            data[key] = self.read(value_node, allowed[key][0], owner, f"{path}.{key}" if path else key)
        missing = [name for name, (_, required) in allowed.items() if required and name not in data]
        if missing:
            needed = ", ".join(name for name, (_, required) in allowed.items() if required)
            self.fail(
                node, f"{self.place(owner, path)} lacks {missing[0]!r}; add it (the keys it must have are {needed})."
            )
        return data

    def mapping(self, node: MappingNode, hint: Any, owner: str, path: str) -> dict[str, Any]:
        data = {}
        for key_node, value_node in node.value:
            key = self.loader.construct_object(key_node) if isinstance(key_node, ScalarNode) else None
            if not isinstance(key, str):
                self.fail(key_node, f"{self.place(owner, path)} has the key {key!r}, where a name belongs; quote it.")
            data[key] = self.read(value_node, hint, owner, f"{path}[{key!r}]")
        return data

    def puzzle(self, node: Node, index: int) -> str:
        """How messages name the puzzle of this entry: by its number, checked here, where it has one."""
        for key, value in node.value if isinstance(node, MappingNode) else ():
            if isinstance(key, ScalarNode) and key.value == "number" and isinstance(value, ScalarNode):
                if not _ID.match(puzzle_id(value.value)):
                    self.fail(
                        value,
                        f"puzzle number {value.value!r} is not a number with at most one letter; write it as 7 or 10a.",
                    )
                return f"puzzle {puzzle_id(value.value)}"
        return f"the puzzle at position {index + 1}"


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where PyYAML has it: the same nodes, sooner


def _read_file(path: Path) -> dict[str, Any]:
    """The registry file's data, checked against `RegistryFile`."""
    loader = _LOADER(path.read_text(encoding="utf-8"))
    try:
        try:
            root = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            line = exc.problem_mark.line + 1 if exc.problem_mark else 1
            raise RegistryError(f"{shown(path)}:{line}: this is not valid YAML ({exc.problem}); correct it.") from exc
        if root is None:
            raise RegistryError(f"{shown(path)}:1: the file is empty; it must hold `puzzles:`, the list of puzzles.")
        return _Reader(path, loader).read(root, RegistryFile, "", "")
    finally:
        loader.dispose()


def _puzzle(entry: dict[str, Any], order: int) -> Puzzle:
    return Puzzle(
        number=puzzle_id(entry["number"]),
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


def read_registry(path: Path = REGISTRY) -> tuple[Puzzle, ...]:
    """The puzzles of a registry file, in course order; a `RegistryError` where the file does not fit its schema."""
    return tuple(_puzzle(entry, order) for order, entry in enumerate(_read_file(path)["puzzles"], 1))


@lru_cache(maxsize=1)
def load_puzzles() -> tuple[Puzzle, ...]:
    """All puzzles, in course order."""
    return read_registry(REGISTRY)


def get_puzzle(number: int | str) -> Puzzle:
    """The puzzle with this id: 7, "7", "07" and "10a" all work."""
    wanted = puzzle_id(number)
    for puzzle in load_puzzles():
        if puzzle.number == wanted:
            return puzzle
    known = ", ".join(p.number for p in load_puzzles())
    raise UnknownPuzzle(f"There is no puzzle {wanted}; the puzzles are {known}.")
