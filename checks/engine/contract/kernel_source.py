"""The submission's kernels, taken from its source text: what the replay process runs, and nothing else.

The grader reads the submission's source before any of the learner's code runs, and keeps of it only the
`@triton.jit` functions (their decorators left out: the plan says which configurations were tried) at the
lines where the learner wrote them, so that every message and access log names the learner's own lines.
Every other line is left blank. Every name a kernel body, a default or an annotation uses must resolve to the
kernel language (`checks.engine.contract.kernel_language`: a table of `triton.language`, tensor attributes by name, a
few
builtins), to a parameter or local, to one of the submission's `@triton.jit` functions, or to a module-level
value the plan records (a number, a string, a dtype); defaults are literal constants, strings stand only where a
call takes a message or a keyword, and a kernel's text holds one `def` line, its own. Anything else is a problem
named with its line, and no kernel of that submission runs.
"""

from __future__ import annotations

import ast
import re
import threading
from dataclasses import asdict, dataclass, field
from pathlib import PurePath
from typing import Any

from checks.engine.contract.kernel_language import (
    ATTRIBUTES,
    BUILTINS,
    FLOAT_WORDS,
    FUNCTION,
    GLUON_ATTRIBUTES,
    GLUON_ROOT,
    MESSAGE_CALLS,
    TYPE,
    lookup,
    lookup_gluon,
)

# Statements and expressions a kernel body may hold: the rest (imports, classes, lambdas, comprehensions, f-strings,
# dicts, try, with, ...) has no meaning in Triton's kernel language.
ALLOWED_NODES = (
    ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.If, ast.For, ast.While, ast.Return, ast.Pass, ast.Break,
    ast.Continue, ast.Assert, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Call, ast.Attribute, ast.Subscript,
    ast.Slice, ast.Name, ast.Constant, ast.Tuple, ast.List, ast.IfExp, ast.Starred, ast.keyword, ast.expr_context,
    ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
)  # fmt: skip
# Characters Python's str.splitlines() breaks a line at, besides "\n": Triton reads a kernel's lines with one rule
# and Python's parser with another, so a kernel holds none of them.
ODD_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
JIT_DECORATORS = ("jit", "autotune", "heuristics")
GLUON_JIT = ("gluon.jit", "triton.experimental.gluon.jit")  # a Gluon kernel's decorator (the Hopper track)


@dataclass
class SourceFile:
    """One file of the submission as the replay runs it: its kernels at their own lines, the rest blank."""

    path: str  # the learner's file (or the module written from their notebook)
    label: str  # how messages name it
    text: str  # kernels only, line numbers kept
    jit_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # kernel -> literal @triton.jit(...) kwargs

    def compiled_name(self, index: int) -> str:
        """The file name the replay compiles this file's kernels under, as the `index`-th file of the submission:
        the frames of a crash's stack dump name it, and the judge names the learner's file for it."""
        return f"kernels_{index}_{PurePath(self.path).stem}.py"


@dataclass
class KernelSource:
    """Every kernel of a submission (with the code of the step it builds on first), and their module aliases."""

    files: list[SourceFile] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    gluon_kernels: list[str] = field(default_factory=list)  # those of `kernels` written @gluon.jit
    # name -> "triton.language[.sub]", "triton", or a path under triton.experimental.gluon (a module or a function)
    language_aliases: dict[str, str] = field(default_factory=dict)
    global_names: list[str] = field(default_factory=list)  # module-level names the kernels read (values recorded)
    global_reads: dict[str, str] = field(default_factory=dict)  # such a name -> "label, line N, in kernel `k`"
    problems: list[str] = field(default_factory=list)  # "label, line N: what" for each forbidden use

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelSource:
        data = dict(data)
        data["files"] = [SourceFile(**f) for f in data.get("files", [])]
        return cls(**data)


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _is_kernel(node: ast.AST) -> bool:
    if not isinstance(node, ast.FunctionDef):
        return False
    if _is_gluon(node):
        return True
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = _dotted(target) or ""
        if name.split(".")[-1] in JIT_DECORATORS and name.split(".")[0] in ("triton", "jit", "autotune", "heuristics"):
            return True
    return False


def _is_gluon(node: ast.FunctionDef) -> bool:
    """Whether a function is a Gluon kernel: decorated `@gluon.jit` (or `@gluon.jit(...)`)."""
    return any(_dotted(d.func if isinstance(d, ast.Call) else d) in GLUON_JIT for d in node.decorator_list)


def _jit_options(node: ast.FunctionDef) -> dict[str, Any]:
    for deco in node.decorator_list:
        if isinstance(deco, ast.Call) and (_dotted(deco.func) or "").endswith("jit"):
            options = {}
            for kw in deco.keywords:
                try:
                    options[kw.arg] = ast.literal_eval(kw.value)
                except ValueError:
                    continue
            return options
    return {}


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound to triton.language (or a submodule of it), and `triton` itself."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "triton" or alias.name.startswith("triton.language"):
                    found[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else "triton"
            for alias in node.names:
                if alias.name.startswith(GLUON_ROOT) and alias.asname:
                    found[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full.startswith("triton.language") or full.startswith(GLUON_ROOT):
                    found[alias.asname or alias.name] = full
    return found


def _parameters(fn: ast.FunctionDef) -> set[str]:
    names = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    for extra in (fn.args.vararg, fn.args.kwarg):
        if extra is not None:
            names.add(extra.arg)
    return names


def _locals(fn: ast.FunctionDef) -> set[str]:
    names = _parameters(fn)
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def language_path(dotted: str, target: str) -> str | None:
    """The path inside triton.language that `a.b.c` names when its root `a` is an alias of `target` ("triton",
    "triton.language" or "triton.language.math"); None when the chain leaves triton.language."""
    _, *rest = dotted.split(".")
    if target == "triton":
        if rest[:1] != ["language"]:
            return None
        target, rest = "triton.language", rest[1:]
    if target != "triton.language" and not target.startswith("triton.language."):
        return None
    return ".".join([*target.split(".")[2:], *rest])


def gluon_path(dotted: str, target: str) -> str | None:
    """The path inside triton.experimental.gluon.language that `a.b.c` names when its root `a` is an alias of
    `target` ("triton", or a module or function under triton.experimental.gluon.language); None when the chain
    leaves it."""
    _, *rest = dotted.split(".")
    if target == "triton":
        if rest[:3] != ["experimental", "gluon", "language"]:
            return None
        target, rest = GLUON_ROOT, rest[3:]
    if target != GLUON_ROOT and not target.startswith(GLUON_ROOT + "."):
        return None
    return ".".join([*target.split(".")[4:], *rest])


def _is_literal(node: ast.AST) -> bool:
    """A default a kernel's parameter may have: a number, a string, True, False or None, written out."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
        return (
            isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        )
    return isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (bool, int, float, str)))


class _Kernel:
    """One kernel's names, resolved: what in its body, defaults and annotations is outside the language, by line,
    and the module-level names it reads (with the line of the first read)."""

    def __init__(
        self,
        fn: ast.FunctionDef,
        kernels: set[str],
        aliases: dict[str, str],
        module_names: set[str],
        gluon_kernels: frozenset[str] = frozenset(),
    ):
        self.fn, self.kernels, self.aliases, self.module_names = fn, kernels, aliases, module_names
        self.gluon = fn.name in gluon_kernels  # resolved against Gluon's table, and calls only Gluon kernels
        self.other_kind = (kernels - gluon_kernels) if self.gluon else (kernels & gluon_kernels)
        self.attributes = ATTRIBUTES | GLUON_ATTRIBUTES if self.gluon else ATTRIBUTES
        self.parameters, self.local = _parameters(fn), _locals(fn)
        self.found: list[tuple[int, str]] = []
        self.globals_read: dict[str, int] = {}
        self.parents: dict[int, ast.AST] = {}
        for node in ast.walk(fn):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node

    def resolve(self, dotted: str) -> tuple[str | None, str | None]:
        """(the path of `dotted`, whose root is a language alias, inside this kernel's language, and what it is
        there): triton.language for a Triton kernel, Gluon's language for a Gluon kernel; Nones outside it."""
        target = self.aliases[dotted.split(".")[0]]
        if self.gluon:
            path = gluon_path(dotted, target)
            return path, lookup_gluon(path) if path is not None else None
        path = language_path(dotted, target)
        return path, lookup(path) if path is not None else None

    def problem(self, node: ast.AST, what: str) -> None:
        located: ast.AST | None = node
        while located is not None and not hasattr(located, "lineno"):  # a comprehension, an operator
            located = self.parents.get(id(located))
        self.found.append((getattr(located, "lineno", self.fn.lineno), what))

    def check(self) -> None:
        args = self.fn.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None and arg.annotation is not None:
                self.annotation(arg.annotation, arg.arg)
        if self.fn.returns is not None:
            self.problem(self.fn.returns, "a return annotation, which a kernel has no use for")
        for default in [*args.defaults, *args.kw_defaults]:
            if default is not None and not _is_literal(default):
                self.problem(default, "a default value that is not a literal constant (a number, a string, True, "
                             "False or None)")  # fmt: skip
        docstring = self.fn.body[0] if self.fn.body and _is_string(self.fn.body[0]) else None
        for statement in self.fn.body:
            if statement is docstring:
                continue
            for node in ast.walk(statement):
                self.node(node)

    def annotation(self, node: ast.AST, name: str) -> None:
        if isinstance(node, ast.Constant) and node.value in ("tl.constexpr", "constexpr", "triton.language.constexpr"):
            return
        dotted = _dotted(node)
        root = dotted.split(".")[0] if dotted else ""
        kind = None
        if root in self.aliases and root not in self.local:
            _, kind = self.resolve(dotted)
        if kind != TYPE:
            allowed = "gl.constexpr" if self.gluon else "tl.constexpr or tl.tensor"
            self.problem(node, f"the annotation of `{name}`, which may only be {allowed}")

    def node(self, node: ast.AST) -> None:
        if not isinstance(node, ALLOWED_NODES):
            self.problem(node, f"a `{type(node).__name__}` statement or expression, which a kernel cannot hold")
        elif isinstance(node, ast.Constant):
            self.constant(node)
        elif isinstance(node, ast.Attribute):
            self.attribute(node)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            self.name(node)
        elif isinstance(node, ast.Call):
            self.call(node)

    def constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, bytes):
            self.problem(node, "a bytes constant, which a kernel has no use for")
        if not isinstance(node.value, str):
            return
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.keyword) or (isinstance(parent, ast.Assert) and parent.msg is node):
            return  # a keyword's value (cache_modifier="...", padding_option="zero"), an assert's message
        if isinstance(parent, ast.Call) and node in parent.args:
            callee = self.callee_name(parent.func)
            if callee in MESSAGE_CALLS or (callee == "float" and node.value.strip().lower() in FLOAT_WORDS):
                return
        self.problem(node, "a string where a kernel takes none (strings stand only as a message, a keyword's value "
                     "or float(\"inf\"))")  # fmt: skip

    def callee_name(self, func: ast.AST) -> str:
        """The last name of what a call calls: `print`, `static_assert` of tl.static_assert, `float`."""
        dotted = _dotted(func) or ""
        return dotted.split(".")[-1]

    def attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("_"):
            self.problem(node, f"the attribute `{node.attr}`, which a kernel has no use for")
            return
        if not isinstance(node.ctx, ast.Load):
            self.problem(node, "an assignment to an attribute, which a kernel cannot make")
            return
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return  # the chain is judged whole, where it ends
        dotted = _dotted(node)
        root = dotted.split(".")[0] if dotted else ""
        if root in self.aliases and root not in self.local:
            if self.resolve(dotted)[1] is None:
                self.problem(node, f"`{dotted}`, which is not in the kernel language (the {self.words} functions, "
                             "dtypes and types a kernel may use)")  # fmt: skip
            return
        if root in self.kernels and root not in self.local:
            self.problem(node, f"`{dotted}`: a kernel of yours is called, never looked into")
            return
        if root and root not in self.local and root not in self.module_names:
            return  # a name outside the language (`os.system`): judged as a name, or as a call
        chain: list[str] = []
        current: ast.AST = node
        while isinstance(current, ast.Attribute):
            chain.append(current.attr)
            current = current.value
        for attr in reversed(chain):
            if attr not in self.attributes:
                self.problem(node, f"the attribute `.{attr}`, which is not one a kernel's values have (a tensor's "
                             "methods, .dtype, .shape, .element_ty)")  # fmt: skip
                return

    @property
    def words(self) -> str:
        return "gl.* (Gluon)" if self.gluon else "tl.*"

    def name(self, node: ast.Name) -> None:
        name = node.id
        if name in self.other_kind and name not in self.local:
            kinds = ("a Gluon kernel", "@triton.jit") if self.gluon else ("a Triton kernel", "@gluon.jit")
            self.problem(node, f"`{name}`, which {kinds[0]} cannot use: it calls only kernels written {kinds[1]} "
                         "as it is")  # fmt: skip
            return
        if name in self.local or name in self.kernels:
            return
        if name in self.aliases:
            parent = self.parents.get(id(node))
            if isinstance(parent, ast.Attribute) and parent.value is node:
                return  # the chain it starts is judged where it ends
            if self.resolve(name)[1] is None:
                self.problem(node, f"`{name}` itself as a value: a kernel uses its functions, not the module")
            return
        if name in self.module_names:
            self.globals_read.setdefault(name, node.lineno)
            return
        if name in BUILTINS:
            return
        self.problem(node, f"the name `{name}`, which is neither the kernel language nor defined in your code")

    def call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            name = func.id
            if name in self.local and name not in self.parameters:
                self.problem(node, f"a call of the local name `{name}`: a kernel calls tl.* functions, your kernels "
                             "and a few builtins by their own names")  # fmt: skip
            elif name in self.aliases and name not in self.local:
                if self.resolve(name)[1] != FUNCTION:
                    self.problem(node, f"a call of `{name}`, which is not the kernel language")
            elif name in self.module_names and name not in self.local and name not in self.kernels:
                self.problem(node, f"a call of `{name}`, a module-level name: a kernel calls tl.* functions, your "
                             "kernels and a few builtins")  # fmt: skip
            elif name not in self.local and name not in self.kernels and name not in BUILTINS:
                self.problem(node, f"a call of `{name}`, which is not the kernel language")
            return
        if isinstance(func, ast.Attribute):
            dotted = _dotted(func)
            root = dotted.split(".")[0] if dotted else ""
            if dotted and root in self.aliases and root not in self.local:
                path, kind = self.resolve(dotted)
                if kind is not None and kind != FUNCTION and path != "constexpr":
                    self.problem(node, f"a call of `{dotted}`, which is not a function of the kernel language")
            elif dotted and root not in self.local and root not in self.module_names:
                self.problem(node, f"a call of `{dotted}`, which is not the kernel language")
            return  # a method (x.to(...)): its name is judged as an attribute
        self.problem(node, "a call of something that is not a name (a kernel calls tl.* functions, your kernels, a "
                     "tensor's methods and a few builtins)")  # fmt: skip


def _is_string(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def text_problems(fn: ast.FunctionDef, lines: list[str]) -> list[tuple[int, str]]:
    """What in a kernel's text would let Triton read another body than the one checked: a second line that starts
    with `def` (Triton's interpreter runs from the last such line of a kernel's source, its compiler from the
    first), or a character that breaks a line for some readers and not for others."""
    found = []
    for number in range(fn.lineno, (fn.end_lineno or fn.lineno) + 1):
        line = lines[number - 1]
        if number > fn.lineno and re.match(r"def\W", line.strip() + " "):
            found.append((number, "a second line that starts with `def` inside the kernel (in a string or not): a "
                          "kernel's text holds one `def` line, its own"))  # fmt: skip
        if any(c in line for c in ODD_LINE_BREAKS):
            found.append((number, "a carriage return, form feed or other line break besides a newline, which a "
                          "kernel's text cannot hold"))  # fmt: skip
    return found


def module_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For)):
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        elif isinstance(node, ast.FunctionDef) and not _is_kernel(node):
            names.add(node.name)
    return names


_PARSING = threading.Lock()


def parse_python(text: str) -> ast.Module:
    """`ast.parse`, one thread at a time in this process: CPython 3.11's AST constructor keeps its recursion depth for
    the whole interpreter, not per thread, so two threads of the grader parsing at once (the stages of a check run in
    threads) can raise "SystemError: AST constructor recursion depth mismatch" (CPython issue gh-106905)."""
    with _PARSING:
        return ast.parse(text)


def extract(sources: list[tuple[str, str, str]]) -> KernelSource:
    """The kernels of a submission: `sources` is [(path, label, text)], the step it builds on first.

    A file that does not parse gives no kernels; the grading process reports its syntax error.
    """
    result = KernelSource()
    parsed = []
    for path, label, text in sources:
        try:
            tree = parse_python(text)
        except SyntaxError:
            continue
        parsed.append((path, label, text, tree))
        result.language_aliases.update(_aliases(tree))
    kernels = {node.name for *_, tree in parsed for node in tree.body if _is_kernel(node)}
    gluon = frozenset(node.name for *_, tree in parsed for node in tree.body if _is_kernel(node) and _is_gluon(node))
    module_names = set().union(*(module_level_names(tree) for *_, tree in parsed)) if parsed else set()
    module_names -= kernels
    result.kernels = sorted(kernels)
    result.gluon_kernels = sorted(gluon)
    for path, label, text, tree in parsed:
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # the lines Python's parser numbers
        keep = [""] * len(lines)
        options: dict[str, dict[str, Any]] = {}
        for node in tree.body:
            if not _is_kernel(node):
                continue
            first = node.lineno - 1  # the `def` line; decorators above it stay blank
            for i in range(first, node.end_lineno or first + 1):
                keep[i] = lines[i]
            options[node.name] = _jit_options(node)
            kernel = _Kernel(node, kernels, result.language_aliases, module_names, gluon)
            kernel.check()
            found = kernel.found + text_problems(node, lines)
            for name, line in kernel.globals_read.items():
                result.global_reads.setdefault(name, f"{label}, line {line}, in kernel `{node.name}`")
            first_per_line = {line: what for line, what in reversed(found)}
            result.problems += [
                f"{label}, line {line}, in kernel `{node.name}`: {what}"
                for line, what in sorted(first_per_line.items())
            ]
        result.files.append(SourceFile(path, label, "\n".join(keep).rstrip("\n") + "\n", options))
    result.global_names = sorted(result.global_reads)
    return result
