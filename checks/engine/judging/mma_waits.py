"""Reads of an asynchronous warpgroup MMA's result before a wait retires it, found in the checked kernel text.

`warpgroup_mma(a, b, acc, is_async=True)` (Gluon, the Hopper track) starts a product on the tensor cores and returns at
once; its result is in flight until `warpgroup_mma_wait(num_outstanding=n, deps=(...))` retires it. The PTX ISA
leaves the accumulator's registers undefined until `wgmma.wait_group` covers the product, whatever the values a
GPU shows: the compiler (ptxas) may serialise the products where it sees their registers read, so a kernel that
reads too early can pass by the toolchain's grace, not by its own right. The grader therefore decides the rule from
the text, the same on every machine, before any kernel runs.

The model is the hardware's: products retire in the order they were issued, and a wait with `num_outstanding=n`
retires every product but the n issued last (`deps` says which values the wait hands back, not which it retires).
Each value of each `@gluon.jit` function is followed through straight code, `if` (in flight on either branch: in
flight after it), `for` and `while` (the body walked again until the state at its head no longer changes: a value in
flight at the end of the body is in flight at its start), and calls of the submission's other `@gluon.jit` functions
(walked with their arguments' states and the caller's products still in flight: their waits retire those too, and a
value they return in flight stays in flight for the caller). A value in flight may be assigned, passed to such a
function, returned, given as the accumulator of another `warpgroup_mma` (third argument or `acc=`) or as a wait's
`deps`; any other use reads it, and is the error. Only metadata read at compile time (`.shape`, `.dtype`, `.type`,
`.layout`) is no read.

Where the text does not say what the analysis needs, it takes the side that can only reject: an `is_async` that is
not written True or False (nor passed as such) counts as True, a `num_outstanding` that is not a number retires
nothing, and a call of a function the analysis cannot name (a parameter holding a function it was not given) is
refused with its line, never passed. What a finding rests on such a choice, its message says.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Iterable

from checks.engine.contract.kernel_source import KernelSource, gluon_path, parse_python

MMA = "nvidia.hopper.warpgroup_mma"
WAIT = "nvidia.hopper.warpgroup_mma_wait"
METADATA = frozenset({"shape", "dtype", "type", "layout"})  # known at compile time: no register is read
CAP = 64  # products issued after one are counted up to this many (a wait's num_outstanding is smaller)
MAX_DEPTH = 32  # calls nested deeper than this are not followed
MAX_ROUNDS = 64  # walks of one loop's body before the analysis gives up (the keys' loops settle in two or three)
MAX_STEPS = 200_000  # statements walked in all before the analysis gives up (the keys take under 2,000)


@dataclasses.dataclass(frozen=True)
class InFlight:
    """A value an asynchronous warpgroup_mma may still be writing."""

    after: int  # the fewest products issued after it on any path here (up to CAP)
    issued: frozenset[tuple[str, str, int]]  # (file label, function, line) of the warpgroup_mma it may come from


@dataclasses.dataclass(frozen=True)
class Known:
    """A value the analysis can name: a literal number or boolean, or a function (a Gluon path or `@name`)."""

    value: object


# A value's status: None (ready, nothing known), InFlight, Known, or a tuple of statuses (a tuple of values).
Status = InFlight | Known | tuple | None
State = dict[str, Status]


def join(a: Status, b: Status) -> Status:
    """The status of a value that is `a` on one path and `b` on another: in flight on either, in flight."""
    if a == b:
        return a
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(join(x, y) for x, y in zip(a, b, strict=True))
    a, b = worst(a), worst(b)
    if isinstance(a, InFlight) and isinstance(b, InFlight):
        return InFlight(min(a.after, b.after), a.issued | b.issued)
    if isinstance(a, InFlight) or isinstance(b, InFlight):
        return a if isinstance(a, InFlight) else b
    return None


def worst(status: Status) -> Status:
    """A tuple's elements joined into one status (in flight if any is); any other status as it is."""
    if not isinstance(status, tuple):
        return status
    found: Status = None
    for item in status:
        item = worst(item)
        if isinstance(item, InFlight):
            found = item if not isinstance(found, InFlight) else join(found, item)
    return found


def _issued_one(status: Status) -> Status:
    if isinstance(status, InFlight):
        return InFlight(min(status.after + 1, CAP), status.issued)
    if isinstance(status, tuple):
        return tuple(_issued_one(s) for s in status)
    return status


def _retired(status: Status, n: int | None) -> Status:
    """The status after a wait with num_outstanding=n (None: unknown, retires nothing)."""
    if isinstance(status, InFlight):
        return None if n is not None and status.after >= n else status
    if isinstance(status, tuple):
        return tuple(_retired(s, n) for s in status)
    return status


def join_states(states: Iterable[State | None]) -> State | None:
    """The state where paths meet (None: no path reaches it)."""
    reached = [s for s in states if s is not None]
    if not reached:
        return None
    keys = set().union(*reached)
    return {k: functools.reduce(join, (s.get(k) for s in reached)) for k in keys}


@dataclasses.dataclass(frozen=True)
class EarlyRead:
    """The first read found: where, of what, and which product it may read before it is done."""

    label: str
    function: str
    line: int
    expression: str
    issued: tuple[str, str, int]  # (file label, function, line) of the warpgroup_mma
    called_at: tuple[str, int] | None = None  # (caller, line) where the reading function was called from
    unfollowed: str = ""  # what the analysis cannot follow there, refused (a call of a parameter, ...)
    notes: tuple[str, ...] = ()

    def message(self) -> str:
        """The learner's message: the read, the product, what to do."""
        notes = "".join(f" ({note})" for note in self.notes)
        if self.unfollowed:
            return (
                f"{self.label}, line {self.line}, in `{self.function}`: the grader cannot follow {self.unfollowed}, "
                f"so it cannot tell whether every asynchronous warpgroup_mma is waited for before its result is "
                f"read{notes}. Call warpgroup_mma, warpgroup_mma_wait and your @gluon.jit functions by their own "
                "names, in straight code, loops, ifs and calls."
            )
        label, function, line = self.issued
        where = f" of `{function}`" if function != self.function else ""
        where += f" ({label})" if label != self.label else ""
        via = f" (called at line {self.called_at[1]} of `{self.called_at[0]}`)" if self.called_at else ""
        return (
            f"{self.label}, line {self.line}, in `{self.function}`{via}, reads `{self.expression}`, the result of the "
            f"asynchronous warpgroup_mma at line {line}{where}, before a warpgroup_mma_wait retires it (a wait with "
            f"num_outstanding=n retires every product but the n issued last){notes}. Wait for it with "
            "`warpgroup_mma_wait(num_outstanding=..., deps=(...))` before you read it: the PTX ISA leaves its "
            "registers undefined until then, and the compiler's own waits are not something to rely on."
        )


@dataclasses.dataclass
class _Function:
    node: ast.FunctionDef
    label: str
    locals: frozenset[str]


def _locals(fn: ast.FunctionDef) -> frozenset[str]:
    names = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    names |= {a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None}
    names |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return frozenset(names)


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


class _Unfollowed(Exception):
    """A call the analysis cannot follow: the finding is made of it."""

    def __init__(self, read: EarlyRead) -> None:
        super().__init__(read.expression)
        self.read = read


@dataclasses.dataclass
class _Program:
    """The submission's Gluon functions, their aliases, and what the walks found."""

    functions: dict[str, _Function]
    aliases: dict[str, str]
    reads: list[EarlyRead] = dataclasses.field(default_factory=list)
    steps: int = 0  # statements walked
    # (function, line) -> a choice the walk made where the text did not say
    notes: dict[tuple[str, int], str] = dataclasses.field(default_factory=dict)
    # a call's context -> (what it returns, the caller's values after it)
    calls: dict[tuple, tuple[Status, tuple[Status, ...]]] = dataclasses.field(default_factory=dict)

    def path_of(self, fn: _Function, func: ast.AST, state: State) -> str | None:
        """What a call calls: a Gluon path ("nvidia.hopper.warpgroup_mma"), "@name" for a function of the
        submission, "?" for a local the walk cannot name, or None for anything else (a method, a builtin)."""
        if isinstance(func, ast.Name) and func.id in fn.locals:
            known = state.get(func.id)
            return str(known.value) if isinstance(known, Known) and isinstance(known.value, str) else "?"
        if isinstance(func, ast.Name) and func.id in self.functions:
            return f"@{func.id}"
        dotted = _dotted(func)
        if dotted is None:
            return None
        root = dotted.split(".")[0]
        if root in fn.locals or root not in self.aliases:
            return None
        return gluon_path(dotted, self.aliases[root])


class _Walk:
    """One walk of one function, from the state it is entered with."""

    def __init__(self, program: _Program, name: str, chain: tuple[tuple[str, int], ...]) -> None:
        self.program, self.name, self.chain = program, name, chain
        self.fn = program.functions[name]
        self.returned: list[tuple[Status, State]] = []
        self.loops: list[tuple[list[State], list[State]]] = []  # (breaks, continues) of each loop around
        self.loop_exits: dict[tuple, State | None] = {}  # (loop, the state it was entered in) -> the state after it

    # -- statements --------------------------------------------------------------------------------------------
    def body(self, statements: list[ast.stmt], state: State | None) -> State | None:
        for statement in statements:
            if state is None:
                return None
            self.program.steps += 1
            if self.program.steps > MAX_STEPS:
                raise _Unfollowed(self.early(statement, "", unfollowed=f"more than {MAX_STEPS} statements"))
            state = self.statement(statement, state)
        return state

    def statement(self, node: ast.stmt, state: State) -> State | None:
        if isinstance(node, ast.Assign):
            value = self.value(node.value, state)
            for target in node.targets:
                self.bind(target, value, state)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.bind(node.target, self.value(node.value, state), state)
        elif isinstance(node, ast.AugAssign):
            self.read(node.target, state)
            self.read(node.value, state)
            self.bind(node.target, None, state)
        elif isinstance(node, ast.If):
            self.read(node.test, state)
            return join_states([self.body(node.body, dict(state)), self.body(node.orelse, dict(state))])
        elif isinstance(node, (ast.For, ast.While)):
            return self.loop(node, state)
        elif isinstance(node, ast.Return):
            value = self.value(node.value, state) if node.value is not None else None
            self.returned.append((value, state))
            return None
        elif isinstance(node, (ast.Break, ast.Continue)):
            if self.loops:  # outside a loop Python refuses it when it compiles the kernel
                breaks, continues = self.loops[-1]
                (breaks if isinstance(node, ast.Break) else continues).append(state)
            return None
        elif isinstance(node, ast.Expr):
            self.value(node.value, state)
        elif isinstance(node, ast.FunctionDef):
            raise _Unfollowed(self.early(node, node.name, unfollowed=f"the function `{node.name}` defined inside it"))
        else:  # assert, pass, and anything else: every expression in it is read
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.read(child, state)
        return state

    def loop(self, node: ast.For | ast.While, state: State) -> State | None:
        if isinstance(node, ast.For):
            self.read(node.iter, state)
        key = (id(node), tuple(sorted(state.items(), key=lambda item: item[0])))
        if key not in self.loop_exits:  # the same loop entered in the same state leaves it in the same state
            self.loop_exits[key] = self.fixed_point(node, state)
        exit_state = self.loop_exits[key]
        return dict(exit_state) if exit_state is not None else None

    def fixed_point(self, node: ast.For | ast.While, state: State) -> State | None:
        """The state after the loop: its body walked until the state at its head no longer changes (the head's
        state only ever gets worse, so this ends)."""
        head = state
        for _ in range(MAX_ROUNDS):
            inside = dict(head)
            if isinstance(node, ast.For):
                self.bind(node.target, None, inside)
            else:
                self.read(node.test, inside)
            self.loops.append(([], []))
            end = self.body(node.body, inside)
            breaks, continues = self.loops.pop()
            after = join_states([head, end, *continues])
            if after == head:
                break
            head = after
        else:
            raise _Unfollowed(
                self.early(node, "", unfollowed=f"this loop, whose state still changed after {MAX_ROUNDS} passes")
            )
        leaving = dict(head)
        if isinstance(node, ast.While):
            self.read(node.test, leaving)
        return join_states([self.body(node.orelse, leaving), *breaks])

    def bind(self, target: ast.expr, value: Status, state: State) -> None:
        if isinstance(target, ast.Name):
            state[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            parts = value if isinstance(value, tuple) and len(value) == len(target.elts) else None
            for i, element in enumerate(target.elts):
                if isinstance(element, ast.Starred):
                    self.bind(element.value, worst(value), state)
                else:
                    self.bind(element, parts[i] if parts is not None else worst(value), state)
        else:  # an attribute or a subscript: the kernel language has none, and what it names is read
            self.read(target, state)

    # -- expressions -------------------------------------------------------------------------------------------
    def read(self, node: ast.expr, state: State) -> None:
        """`node`'s value is used: an error if it may still be in flight."""
        status = worst(self.value(node, state))
        if isinstance(status, InFlight):
            self.found(node, status)

    def value(self, node: ast.expr, state: State) -> Status:
        """`node`'s status, reading (and checking) what it reads on the way."""
        if isinstance(node, ast.Name):
            if node.id in self.fn.locals:
                return state.get(node.id)
            if node.id in self.program.functions:
                return Known(f"@{node.id}")
            path = self.program.path_of(self.fn, node, state)
            return Known(path) if path is not None else None
        if isinstance(node, ast.Constant):
            return Known(node.value) if isinstance(node.value, (bool, int)) else None
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.value(e, state) for e in node.elts)
        if isinstance(node, ast.Starred):
            return worst(self.value(node.value, state))
        if isinstance(node, ast.IfExp):
            self.read(node.test, state)
            return join(self.value(node.body, state), self.value(node.orelse, state))
        if isinstance(node, ast.Call):
            return self.call(node, state)
        if isinstance(node, ast.Subscript):
            base = self.value(node.value, state)
            index = node.slice
            if isinstance(base, tuple) and isinstance(index, ast.Constant) and isinstance(index.value, int):
                if -len(base) <= index.value < len(base):
                    return base[index.value]
            if isinstance(worst(base), InFlight):
                self.found(node.value, worst(base))
            self.read(index, state)
            return None
        if isinstance(node, ast.Attribute):
            base = self.value(node.value, state)
            if isinstance(worst(base), InFlight) and node.attr not in METADATA:
                self.found(node.value, worst(base))
            path = self.program.path_of(self.fn, node, state)
            return Known(path) if path is not None else None
        for child in ast.iter_child_nodes(node):  # an operator, a comparison, ...: its operands are read
            if isinstance(child, ast.expr):
                self.read(child, state)
        return None

    def call(self, node: ast.Call, state: State) -> Status:
        path = self.program.path_of(self.fn, node.func, state)
        if path == MMA:
            return self.mma(node, state)
        if path == WAIT:
            return self.wait(node, state)
        if path == "?":
            called = ast.unparse(node.func)
            raise _Unfollowed(
                self.early(node, called, unfollowed=f"the call of `{called}`, a function it was not given")
            )
        if path is not None and path.startswith("@"):
            return self.helper(node, path[1:], state)
        self.value(node.func, state)  # a method reads the value it belongs to (`acc.to`)
        for arg in node.args:
            self.read(arg, state)
        for keyword in node.keywords:
            self.read(keyword.value, state)
        return None

    def argument(self, node: ast.Call, position: int, name: str) -> ast.expr | None:
        keyword = next((k.value for k in node.keywords if k.arg == name), None)
        if keyword is not None:
            return keyword
        return node.args[position] if len(node.args) > position else None

    def mma(self, node: ast.Call, state: State) -> Status:
        acc = self.argument(node, 2, "acc")
        for i, arg in enumerate(node.args):
            if i == 2:
                self.value(arg, state)  # the accumulator: handed to the tensor cores, not read
            else:
                self.read(arg, state)
        for keyword in node.keywords:
            if keyword.value is acc:
                self.value(keyword.value, state)
            elif keyword.arg != "is_async":
                self.read(keyword.value, state)
        flag = next((k.value for k in node.keywords if k.arg == "is_async"), None)
        is_async = self.value(flag, state) if flag is not None else Known(False)
        product = InFlight(0, frozenset({(self.fn.label, self.name, node.lineno)}))
        if not (isinstance(is_async, Known) and isinstance(is_async.value, bool)):
            # its result is taken to be in flight, and the products before it not to have one more after them
            self.note(node, f"is_async at line {node.lineno} is not written True or False, so it was taken as True")
            return product
        if not is_async.value:
            return None
        for key in state:
            state[key] = _issued_one(state[key])
        return product

    def wait(self, node: ast.Call, state: State) -> Status:
        count = self.argument(node, 0, "num_outstanding")
        deps = self.argument(node, 1, "deps")
        n: int | None = 0
        if count is not None:
            known = self.value(count, state)
            n = known.value if isinstance(known, Known) and type(known.value) is int else None
            if n is None:
                self.note(node, f"num_outstanding at line {node.lineno} is not a number, so that wait was taken to "
                          "retire no product")  # fmt: skip
        for other in node.args[2:]:
            self.read(other, state)
        for keyword in node.keywords:
            if keyword.arg not in ("num_outstanding", "deps"):
                self.read(keyword.value, state)
        given = self.value(deps, state) if deps is not None else ()
        for key in state:
            state[key] = _retired(state[key], n)
        handed = _retired(given, n)
        if isinstance(handed, tuple) and len(handed) == 1:
            return handed[0]
        return handed

    def helper(self, node: ast.Call, name: str, state: State) -> Status:
        """A call of another @gluon.jit function: walked with its arguments' states and the caller's in flight."""
        if name in {caller for caller, _ in self.chain} | {self.name}:
            raise _Unfollowed(self.early(node, name, unfollowed=f"the call of `{name}` from inside itself"))
        if len(self.chain) >= MAX_DEPTH:
            raise _Unfollowed(self.early(node, name, unfollowed=f"calls nested more than {MAX_DEPTH} deep"))
        callee = self.program.functions[name]
        args = callee.node.args
        positional = [a.arg for a in [*args.posonlyargs, *args.args]]
        entry: State = {}
        for i, arg in enumerate(node.args):
            if isinstance(arg, ast.Starred) or i >= len(positional):
                self.read(arg, state)
            else:
                entry[positional[i]] = self.value(arg, state)
        for keyword in node.keywords:
            if keyword.arg is None or keyword.arg not in {*positional, *(a.arg for a in args.kwonlyargs)}:
                self.read(keyword.value, state)
            else:
                entry[keyword.arg] = self.value(keyword.value, state)
        keys = sorted(state)
        outer = tuple(state[k] for k in keys)
        context = (name, tuple(sorted(entry.items(), key=lambda item: item[0])), outer, node.lineno, self.name)
        if context not in self.program.calls:
            walk = _Walk(self.program, name, (*self.chain, (self.name, node.lineno)))
            hidden = {f"\0{i}": status for i, status in enumerate(outer)}
            self.program.calls[context] = walk.run({**entry, **hidden}, len(outer))
        returned, after = self.program.calls[context]
        for key, status in zip(keys, after, strict=True):
            state[key] = status
        return returned

    def run(self, entry: State, hidden: int) -> tuple[Status, tuple[Status, ...]]:
        """Walk the function from `entry`: (what it returns, the hidden values' statuses where it returns)."""
        end = self.body(self.fn.node.body, entry)
        exits = [*self.returned, *([(None, end)] if end is not None else [])]
        returned: Status = None
        for i, (value, _) in enumerate(exits):
            returned = value if i == 0 else join(returned, value)
        final = join_states(state for _, state in exits) or {}
        return returned, tuple(final.get(f"\0{i}") for i in range(hidden))

    # -- findings ----------------------------------------------------------------------------------------------
    def note(self, node: ast.AST, text: str) -> None:
        self.program.notes.setdefault((self.name, node.lineno), text)

    def found(self, node: ast.expr, status: InFlight) -> None:
        issued = min(status.issued, key=lambda i: (i[0] != self.fn.label, i[2]))
        called_at = self.chain[-1] if self.chain and issued[1] != self.name else None
        self.program.reads.append(self.early(node, ast.unparse(node), issued=issued, called_at=called_at))

    def early(
        self,
        node: ast.AST,
        expression: str,
        issued: tuple[str, str, int] = ("", "", 0),
        called_at: tuple[str, int] | None = None,
        unfollowed: str = "",
    ) -> EarlyRead:
        shown = expression if len(expression) <= 40 else expression[:37] + "..."
        line = getattr(node, "lineno", self.fn.node.lineno)
        return EarlyRead(self.fn.label, self.name, line, shown, issued, called_at, unfollowed)


def _program(texts: tuple[tuple[str, str], ...], gluon: tuple[str, ...], aliases: dict[str, str]) -> _Program:
    """The @gluon.jit functions of the checked text ((label, text) per file), by name."""
    functions: dict[str, _Function] = {}
    for label, text in texts:
        try:
            tree = parse_python(text)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in gluon:
                functions[node.name] = _Function(node, label, _locals(node))
    return _Program(functions, aliases)


def _entries(program: _Program) -> list[str]:
    """The functions walked from a state of their own: those no function of the submission calls by name (a
    kernel, a warp_specialize partition); the rest are walked where they are called, with their arguments."""
    called = set()
    for fn in program.functions.values():
        for node in ast.walk(fn.node):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in program.functions:
                if node.func.id not in fn.locals:
                    called.add(node.func.id)
    return [name for name in program.functions if name not in called] or list(program.functions)


def first_early_read(source: KernelSource) -> EarlyRead | None:
    """The first read of an asynchronous warpgroup_mma's result before a wait retires it, in the submission's
    @gluon.jit functions (the checked text), or a call the analysis cannot follow; None when there is none."""
    if not source.gluon_kernels:
        return None
    texts = tuple((f.label, f.text) for f in source.files)
    return _first_early_read(texts, tuple(source.gluon_kernels), tuple(sorted(source.language_aliases.items())))


@functools.lru_cache(maxsize=32)
def _first_early_read(
    texts: tuple[tuple[str, str], ...], gluon: tuple[str, ...], aliases: tuple[tuple[str, str], ...]
) -> EarlyRead | None:
    program = _program(texts, gluon, dict(aliases))
    for name in _entries(program):
        walk = _Walk(program, name, ())
        try:
            walk.run({}, 0)
        except _Unfollowed as stop:
            return stop.read
        except RecursionError:  # expressions nested deeper than this Python follows
            return walk.early(walk.fn.node, name, unfollowed="expressions nested this deep")
        if program.reads:
            return dataclasses.replace(program.reads[0], notes=tuple(program.notes.values()))
    return None
