"""Load `puzzles.yaml`, the one registry of puzzles, into typed records.

This is the schema of the file: the dataclasses `RegistryFile`, `PuzzleEntry`, `Cases`, `Case`, `Tolerance`,
`Bench`, `Sweep`, `Target` and `SpeedBar` declare every key it may hold, at every level, with the type of its
value, and the values of the keys that take one of a fixed list (`Status`, `MapKind`, `Layout`, `Fill`, `DType`) as
`Literal`s. `read_registry` composes the YAML (whose nodes keep each key's line) into plain data and reads it through
the course's one typed reader (`checks.typed_reader.build`): an unknown, misspelt, missing or mistyped key, or a value
not in its list, stops the load with the file, the line and the keys or values allowed there. The schema is stdlib
dataclasses rather than pydantic or msgspec because the course runs on GPU machines that have neither and no network
to install them. The names and parameters under `rules:` are checked by the rulebook
(checks.engine.judging.rules.rulebook) against the rules' functions.

`CHECKS_REGISTRY`, a path, names another registry file to load instead of the course's own (the tests load broken
copies of it that way); a command that finds the registry broken says so in one line and exits with status 2
(`exit_on_registry_error`).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from checks.typed_reader import Key, Mismatch, RecordError, build
from checks.typed_reader import shown as kind_shown

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "puzzles.yaml"
REGISTRY_SETTING = "CHECKS_REGISTRY"  # a path: the registry file to load instead of REGISTRY
BROKEN_REGISTRY_STATUS = 2  # the exit status of a command that finds the registry broken (a failed check is 1)


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


# The values of the keys that take one of a fixed list.
Status = Literal["ready", "planned"]  # ready: graded; planned: listed, not yet gradeable
MapKind = Literal["elementwise", "softmax", "matmul", "attention", "decoding"]  # how checks.learner.maps draws it
Layout = Literal["contiguous", "transposed", "sliced", "bnhd"]  # checks.memory.layout_view
Fill = Literal["random", "neg_inf", "equal"]  # what softmax's cases write over their random values
DType = Literal["float16", "bfloat16", "float32"]
Requires = Literal["hopper"]  # a device the puzzle's kernels need: Gluon's Hopper kernels run on an H100 or H200 only


# The schema of puzzles.yaml. Each dataclass is one level of the file: its fields are the keys allowed there (a field
# without a default is a key the level must have) and their types the values allowed.


@dataclass(frozen=True)
class Case:
    """The keys a case may set: a graded case (`cases.cpu`, `cases.gpu`), the timing case (`bench`) and the
    cases of `bench.sweep` (`series`, `sizes`, `smoke`). The puzzle's module (checks/puzzles) reads them; a key
    the case does not set is None."""

    advice: ClassVar[str] = "A key that a puzzle's module newly reads is declared in `Case` (checks/registry.py)."

    n: int | None = None
    shape: tuple[int, ...] | None = None
    B: int | None = None
    H: int | None = None
    H_kv: int | None = None
    G: int | None = None
    M: int | None = None
    N: int | None = None
    K: int | None = None
    D: int | None = None
    causal: bool | None = None
    dtype: DType | None = None
    layout: Layout | None = None  # every input's layout, where the input has no `layout_<name>` of its own
    layout_a: Layout | None = None
    layout_b: Layout | None = None
    layout_q: Layout | None = None
    layout_k: Layout | None = None
    layout_v: Layout | None = None
    layout_o: Layout | None = None
    layout_do: Layout | None = None
    layout_y: Layout | None = None
    layout_dy: Layout | None = None
    scale: float | str | None = None  # PyYAML reads 1.0e4 (no sign after the e) as a string; float() reads it
    shift: float | str | None = None
    fill: Fill | None = None
    offset: float | None = None
    sm_scale: float | None = None
    score_std: float | None = None
    lead: float | None = None  # 9a, 9, 11-15: the first key's lead over the others in odd rows' scores (a float16 l)
    page_size: int | None = None
    seq_lens: tuple[int, ...] | None = None
    context_lens: tuple[int, ...] | None = None  # puzzle 15: each sequence's cached tokens, before its new ones
    context: int | None = None  # puzzle 15's benchmark: every sequence's cached tokens
    spare_pages: int | None = None
    # 13, 15: entries of block_table past the longest sequence's pages (default 1; 0: that row has no spare entry)
    table_spare: int | None = None
    rtol: float | None = None  # loosens the puzzle's rtol for this case (checks.engine.judging.rules.core)
    atol: float | None = None  # loosens the puzzle's atol for this case (checks.engine.judging.rules.core)
    note: str | None = None  # what the case is for, shown beside its result

    def __repr__(self) -> str:
        return f"Case({', '.join(f'{key}={value!r}' for key, value in self.given().items())})"

    def given(self) -> dict[str, Any]:
        """The keys the case sets, with their values as the file writes them (lists, not tuples): how a case is shown,
        formatted and sent on as JSON; `case_from` reads it back."""
        values = ((f.name, getattr(self, f.name)) for f in fields(Case))
        return {name: list(value) if isinstance(value, tuple) else value for name, value in values if value is not None}

    def layout_of(self, name: str) -> Layout:
        """The layout of the input `name`: its own `layout_<name>`, else the case's `layout`, else contiguous."""
        return getattr(self, f"layout_{name}", None) or self.layout or "contiguous"

    def updated(self, other: Case) -> Case:
        """This case with the keys `other` sets taken from `other` (a sweep's series and size make one case)."""
        return replace(self, **other.given())

    def as_case(self) -> Case:
        """The case alone: a `Bench` without its baseline and sweep."""
        return Case(**self.given())


def with_method_cases(puzzle: Puzzle, extra: list[dict[str, Any]]) -> Puzzle:
    """The puzzle with `extra` cases (`Case.given`'s form) after its interpreter cases: the method cases a grading
    adds for tiles larger than its own cases show a method at (checks.engine.judging.configs)."""
    if not extra:
        return puzzle
    added = tuple(case_from(values, "method case") for values in extra)
    return replace(puzzle, cases=replace(puzzle.cases, cpu=puzzle.cases.cpu + added))


def case_from(values: dict[str, Any], where: str = "case") -> Case:
    """A case from plain data (`Case.given`'s form), checked as puzzles.yaml's cases are."""
    return build(Case, values, where)


@dataclass(frozen=True)
class Cases:
    cpu: tuple[Case, ...] = ()  # graded in Triton's interpreter: small
    gpu: tuple[Case, ...] = ()

    def on(self, gpu: bool) -> tuple[Case, ...]:
        """The cases graded on a GPU (`gpu`), or in the interpreter."""
        return self.gpu if gpu else self.cpu


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
    quick: tuple[str, ...]
    smoke: dict[str, Case]
    x_label: str
    plot: str  # the plot (bench/<plot>.png) the puzzle is drawn in, beside the puzzles that name the same
    cap_s: float
    variants: dict[str, str] = field(default_factory=dict)
    targets: tuple[Target, ...] = ()
    graphs: bool = False


@dataclass(frozen=True)
class Bench(Case):
    """The GPU timing case: a case, the torch baseline it is timed against and the benchmark's sweep."""

    baseline: str = "torch"
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
    defines: tuple[str, ...]
    inputs: str
    returns: str
    notebook: str
    solution: str
    status: Status = "planned"
    map: MapKind = "elementwise"
    concepts: tuple[str, ...] = ()
    tolerance: Tolerance | dict[str, Tolerance] | None = None  # shared, or one per output name
    cases: Cases = Cases()
    bench: Bench | None = None
    speed_bar: SpeedBar | None = None
    hints: tuple[str, ...] = ()
    timeout: float = 120.0
    rules: dict[str, dict[str, Any] | None] = field(default_factory=dict)  # the rulebook checks names and parameters
    builds_on: int | str | None = None
    requires: Requires | None = None
    largest: Case | None = None  # the largest sizes of the contract, probed for int32 offsets without their storage


@dataclass(frozen=True)
class RegistryFile:
    puzzles: tuple[PuzzleEntry, ...]


@dataclass(frozen=True)
class Puzzle:
    number: str  # the contract's id: "7", or "10a" for a lettered step that comes before puzzle 10
    slug: str
    title: str
    status: Status
    defines: tuple[str, ...]
    inputs: str
    returns: str
    concepts: tuple[str, ...]
    notebook: Path
    solution: Path
    tolerance: Tolerance | dict[str, Tolerance] | None = None  # shared, or one per output name
    cases: Cases = Cases()
    bench: Bench | None = None  # the grader's timing case, with its `baseline` and `sweep`
    speed_bar: SpeedBar | None = None
    hints: tuple[str, ...] = ()
    timeout: float = 120.0
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)  # rule name -> its parameters
    map_kind: MapKind = "elementwise"  # how the access map is drawn (checks.learner.maps)
    order: int = 0  # place in the course: lettered steps sort before their puzzle (10a, 10b, 10)
    builds_on: str | None = None  # the earlier step whose graded code this puzzle's code may use (9 on 9a)
    requires: Requires | None = None  # "hopper": graded on a Hopper GPU only (Gluon; no interpreter runs it)
    # the largest sizes the contract names (what a real model's tensors reach), at which offsets must fit their
    # integers: checked without allocating them (checks.engine.replay.overflow)
    largest: Case | None = None

    @property
    def needs_hopper(self) -> bool:
        """Whether the puzzle is graded only on a Hopper GPU: its kernels are Gluon's, which Triton's interpreter
        cannot run, so it has GPU cases only."""
        return self.requires == "hopper"

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

    @property
    def sweep(self) -> Sweep | None:
        """bench.sweep: what `make bench` (checks.instructor.bench) measures, where the puzzle has one."""
        return self.bench.sweep if self.bench else None

    @property
    def timing_case(self) -> Case | None:
        """The case the grader times on a GPU (the bench case without its baseline and sweep)."""
        return self.bench.as_case() if self.bench else None

    @property
    def baseline(self) -> str:
        """The torch operation the timing case is timed against."""
        return self.bench.baseline if self.bench else "torch"

    def tolerance_for(self, output: str) -> tuple[float, float]:
        """(atol, rtol) for one output: a per-output entry wins over the shared one."""
        tol = self.tolerance.get(output) if isinstance(self.tolerance, dict) else self.tolerance
        if tol is None:
            raise KeyError(f"puzzles.yaml gives puzzle {self.number} no tolerance for {output!r}; add one.")
        return float(tol.atol), float(tol.rtol)

    def loosest_tolerance(self) -> tuple[float, float]:
        """(atol, rtol) covering every output: the shared entry, or the largest of the per-output ones."""
        if isinstance(self.tolerance, Tolerance):
            return float(self.tolerance.atol), float(self.tolerance.rtol)
        entries = list((self.tolerance or {}).values())
        if not entries:
            return 0.0, 0.0
        return max(float(t.atol) for t in entries), max(float(t.rtol) for t in entries)


class RegistryError(ValueError):
    """puzzles.yaml does not fit its schema; the message names the file, the line and what to change."""


# How a mismatch names what belongs in a YAML file, where the typed reader speaks of JSON's kinds.
_YAML_WORDS = {"text": "a string", "an object": "a mapping", "null": "nothing (null)"}


class _Composed:
    """A YAML file's data, as yaml.safe_load gives it, with the line of each value and of each key."""

    def __init__(self, path: Path, loader: Any) -> None:
        self.path, self.loader = path, loader
        self.lines: dict[tuple[Key, ...], int] = {}  # a value's path -> its first line
        self.key_lines: dict[tuple[Key, ...], int] = {}  # a mapping's key's path -> the key's line
        self.flattened: set[int] = set()
        self.numbers: dict[int, dict[str, Any]] = {}  # a puzzle's position -> {"number": its number}, for messages

    def fail(self, node: Node, text: str) -> RegistryError:
        return RegistryError(f"{shown(self.path)}:{node.start_mark.line + 1}: {text}")

    def plain(self, node: Node, path: tuple[Key, ...]) -> Any:
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, SequenceNode):
            return [self.plain(item, (*path, i)) for i, item in enumerate(node.value)]
        if not isinstance(node, MappingNode):
            return self.loader.construct_object(node)
        if len(path) == 2 and path[0] == "puzzles" and isinstance(path[1], int):
            for key, value in node.value:
                if isinstance(key, ScalarNode) and key.value == "number" and isinstance(value, ScalarNode):
                    self.numbers[path[1]] = {"number": value.value}
        self.flatten(node, path)
        data: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise self.fail(key_node, f"{self.place(path)} has a key that is not a name; write a name there.")
            key = self.loader.construct_object(key_node)
            self.key_lines[(*path, key)] = key_node.start_mark.line + 1
            self.lines.pop((*path, key), None)  # the later of a merged key and the mapping's own is the one kept
            data[key] = self.plain(value_node, (*path, key))
        return data

    def flatten(self, node: MappingNode, path: tuple[Key, ...]) -> None:
        """Merge keys (`<<: *anchor`) become the anchor's pairs, as safe_load has them; a key given twice is an
        error, where safe_load would keep the last silently."""
        if id(node) in self.flattened:
            return
        self.flattened.add(id(node))
        seen: set[str] = set()
        for key, _ in node.value:
            if isinstance(key, ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                if key.value in seen:
                    raise self.fail(key, f"{self.place(path)} gives {key.value!r} twice; keep one of the two.")
                seen.add(key.value)
        self.loader.flatten_mapping(node)

    def place(self, path: tuple[Key, ...]) -> str:
        return place_in_file(path, data={"puzzles": self.numbers})

    def line_of(self, mismatch: Mismatch) -> int:
        """The line a mismatch is on: an unknown key's own, a mapping's for a key it lacks, else the value's."""
        if mismatch.kind == "unknown" and (*mismatch.path, mismatch.found) in self.key_lines:
            return self.key_lines[(*mismatch.path, mismatch.found)]
        path = mismatch.path
        while path and path not in self.lines:
            path = path[:-1]
        return self.lines.get(path, 1)


def place_in_file(path: tuple[Key, ...], place: str = "", data: Any = None) -> str:
    """How messages name the place `path` of the registry (`place`: the same as the typed reader writes it,
    `.puzzles[6].tolerance['o']`): "puzzle 8a's tolerance['o']", "the file's top level"."""
    place = place or _dotted(path)
    if not path:
        return "the file's top level"
    if path[0] != "puzzles" or len(path) < 2 or not isinstance(path[1], int):
        return "the file's " + place.lstrip(".")
    owner = f"the puzzle at position {path[1] + 1}"
    with suppress(LookupError, TypeError):  # a file whose puzzle has no number (yet): named by its position
        number = data["puzzles"][path[1]]["number"]
        if _ID.match(puzzle_id(number)):
            owner = f"puzzle {puzzle_id(number)}"
    inside = place.removeprefix(f".puzzles[{path[1]}]").lstrip(".")
    return f"{owner}'s {inside}" if inside else owner


def _dotted(path: tuple[Key, ...]) -> str:
    """A path as the typed reader writes it, where every key is a field's: `.puzzles[0].bench.sweep`."""
    return "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path)


def _message(mismatch: Mismatch, data: Any) -> str:
    """A mismatch as the registry says it: what is wrong, and what to write instead."""
    where = place_in_file(mismatch.path, mismatch.place, data)
    guess = mismatch.guess()
    did_you_mean = f" Did you mean {guess!r}?" if guess else ""
    if mismatch.kind == "unknown":
        allowed = ", ".join(mismatch.allowed)
        advice = f" {mismatch.advice}" if mismatch.advice else ""
        return (
            f"unknown key {mismatch.found!r} in {where}.{did_you_mean} Correct or remove it; "
            f"the keys allowed there are {allowed}.{advice}"
        )
    if mismatch.kind == "missing":
        return f"{where} lacks {mismatch.found!r}; add it (the keys it must have are {', '.join(mismatch.allowed)})."
    if mismatch.kind == "value":
        allowed = ", ".join(repr(value) for value in mismatch.allowed)
        return f"{where} is {mismatch.found!r}.{did_you_mean} Write one of {allowed} there."
    found = mismatch.found
    value = repr(found) if not isinstance(found, dict | list) else kind_shown(found).replace("an object", "a mapping")
    wanted = " or ".join(_YAML_WORDS.get(word, word) for word in mismatch.wanted.split(" or "))
    return f"{where} is {value}; write {wanted} there."


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where PyYAML has it: the same nodes, sooner


def _read_file(path: Path) -> RegistryFile:
    """The registry file's records, checked against `RegistryFile`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RegistryError(f"{shown(path)}:1: the registry cannot be read ({exc.strerror}); restore it.") from exc
    loader = _LOADER(text)
    try:
        try:
            root = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            line = exc.problem_mark.line + 1 if exc.problem_mark else 1
            raise RegistryError(f"{shown(path)}:{line}: this is not valid YAML ({exc.problem}); correct it.") from exc
        if root is None:
            raise RegistryError(f"{shown(path)}:1: the file is empty; it must hold `puzzles:`, the list of puzzles.")
        composed = _Composed(path, loader)
        data = composed.plain(root, ())
    finally:
        loader.dispose()
    try:
        registry = build(RegistryFile, data, "the registry")
    except RecordError as exc:
        mismatch = exc.mismatch
        raise RegistryError(f"{shown(path)}:{composed.line_of(mismatch)}: {_message(mismatch, data)}") from None
    for index, entry in enumerate(registry.puzzles):
        if not _ID.match(puzzle_id(entry.number)):
            line = composed.lines.get(("puzzles", index, "number"), 1)
            raise RegistryError(
                f"{shown(path)}:{line}: puzzle number {entry.number!r} is not a number with at most one letter; "
                "write it as 7 or 10a."
            )
    return registry


def _puzzle(entry: PuzzleEntry, order: int) -> Puzzle:
    return Puzzle(
        number=puzzle_id(entry.number),
        slug=entry.slug,
        title=entry.title,
        status=entry.status,
        defines=entry.defines,
        inputs=entry.inputs,
        returns=entry.returns,
        concepts=entry.concepts,
        notebook=ROOT / entry.notebook,
        solution=ROOT / entry.solution,
        tolerance=entry.tolerance,
        cases=entry.cases,
        bench=entry.bench,
        speed_bar=entry.speed_bar,
        hints=entry.hints,
        timeout=float(entry.timeout),
        rules={name: dict(params or {}) for name, params in entry.rules.items()},
        map_kind=entry.map,
        order=order,
        builds_on=puzzle_id(entry.builds_on) if entry.builds_on else None,
        requires=entry.requires,
        largest=entry.largest,
    )


def read_registry(path: Path = REGISTRY) -> tuple[Puzzle, ...]:
    """The puzzles of a registry file, in course order; a `RegistryError` where the file does not fit its schema."""
    return tuple(_puzzle(entry, order) for order, entry in enumerate(_read_file(path).puzzles, 1))


def registry_path() -> Path:
    """The registry file to load: $CHECKS_REGISTRY where it is set, else the course's puzzles.yaml."""
    setting = os.environ.get(REGISTRY_SETTING, "")
    return Path(setting) if setting else REGISTRY


@lru_cache(maxsize=1)
def load_puzzles() -> tuple[Puzzle, ...]:
    """All puzzles, in course order."""
    return read_registry(registry_path())


def get_puzzle(number: int | str) -> Puzzle:
    """The puzzle with this id: 7, "7", "07" and "10a" all work."""
    wanted = puzzle_id(number)
    for puzzle in load_puzzles():
        if puzzle.number == wanted:
            return puzzle
    known = ", ".join(p.number for p in load_puzzles())
    raise UnknownPuzzle(f"There is no puzzle {wanted}; the puzzles are {known}.")


def broken_registry_line(error: RegistryError) -> str:
    """The one line a command prints when the registry is broken: where, what, and what to do next."""
    return (
        f"The puzzle registry is broken, so nothing can be graded: {error} "
        "(If you did not mean to change puzzles.yaml, `git checkout puzzles.yaml` restores the course's own.)"
    )


def report_broken_registry(error: RegistryError) -> int:
    """Say on standard error, in one line, that the registry is broken and where; the exit status that says so."""
    print(broken_registry_line(error), file=sys.stderr, flush=True)
    return BROKEN_REGISTRY_STATUS


@contextmanager
def exit_on_registry_error() -> Iterator[None]:
    """Around a command's work: a broken registry ends it with one line on standard error and exit status 2 (a
    failed check ends with 1), not with a traceback."""
    try:
        yield
    except RegistryError as error:
        raise SystemExit(report_broken_registry(error)) from None
