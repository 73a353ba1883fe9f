"""The submission's kernels, taken from its source text: what the replay process runs, and nothing else.

The grader reads the submission's source before any of the learner's code runs, and keeps of it only the
`@triton.jit` functions (their decorators left out: the plan says which configurations were tried) at the
lines where the learner wrote them, so that every message and access log names the learner's own lines.
Every other line is left blank. A kernel body may call only `triton.language` (`tl.*`), the submission's
other `@triton.jit` functions and a few builtins: what Triton's GPU compiler accepts anyway. Anything else is
a problem named with its line, and no kernel of that submission runs.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field
from typing import Any

# Builtins a kernel body may call or name (Triton's compiler handles these itself).
BUILTINS = frozenset(
    {"range", "min", "max", "len", "int", "float", "bool", "print", "abs", "zip", "enumerate", "isinstance",
     "tuple", "True", "False", "None"}
)  # fmt: skip
# Statements and expressions a kernel has no use for, which would let Python escape the kernel's language.
FORBIDDEN = (
    ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef,
    ast.Lambda, ast.Try, ast.With, ast.AsyncWith, ast.Raise, ast.Delete, ast.Yield, ast.YieldFrom, ast.Await,
    ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.NamedExpr,
)  # fmt: skip
if hasattr(ast, "TryStar"):
    FORBIDDEN = (*FORBIDDEN, ast.TryStar)
JIT_DECORATORS = ("jit", "autotune", "heuristics")


@dataclass
class SourceFile:
    """One file of the submission as the replay runs it: its kernels at their own lines, the rest blank."""

    path: str  # the learner's file (or the module written from their notebook)
    label: str  # how messages name it
    text: str  # kernels only, line numbers kept
    jit_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # kernel -> literal @triton.jit(...) kwargs


@dataclass
class KernelSource:
    """Every kernel of a submission (with the code of the step it builds on first), and their module aliases."""

    files: list[SourceFile] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    language_aliases: dict[str, str] = field(default_factory=dict)  # name -> "triton.language[.sub]" or "triton"
    global_names: list[str] = field(default_factory=list)  # module-level names the kernels read (values recorded)
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
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = _dotted(target) or ""
        if name.split(".")[-1] in JIT_DECORATORS and name.split(".")[0] in ("triton", "jit", "autotune", "heuristics"):
            return True
    return False


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
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full.startswith("triton.language"):
                    found[alias.asname or alias.name] = full
    return found


def _locals(fn: ast.FunctionDef) -> set[str]:
    names = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    for extra in (fn.args.vararg, fn.args.kwarg):
        if extra is not None:
            names.add(extra.arg)
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _problems(
    fn: ast.FunctionDef, kernels: set[str], aliases: dict[str, str], module_names: set[str]
) -> tuple[list[tuple[int, str]], set[str]]:
    """What in this kernel's body is not the kernel language, by line; and the module-level names it reads."""
    local = _locals(fn)
    found: list[tuple[int, str]] = []
    globals_read: set[str] = set()
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(fn):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    nodes = [*fn.body, *fn.args.defaults, *fn.args.kw_defaults]
    for top in nodes:
        if top is None:
            continue
        for node in ast.walk(top):
            line = getattr(node, "lineno", fn.lineno)
            if isinstance(node, FORBIDDEN):
                found.append((line, f"a `{type(node).__name__}` statement or expression, which a kernel cannot hold"))
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                found.append((line, f"the attribute `{node.attr}`, which a kernel has no use for"))
            elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
                found.append((line, "an assignment to an attribute, which a kernel cannot make"))
            elif isinstance(node, ast.Attribute) and not isinstance(parents.get(id(node)), ast.Attribute):
                dotted = _dotted(node)
                root = dotted.split(".")[0] if dotted else ""
                if root in aliases and root not in local:
                    problem = chain_problem(dotted, aliases[root])
                    if problem:
                        found.append((line, problem))
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                name = node.id
                if name in local or name in kernels or name in BUILTINS:
                    continue
                if name in aliases:
                    if not isinstance(parents.get(id(node)), ast.Attribute):
                        found.append((line, f"`{name}` itself as a value: a kernel uses its functions, not the module"))
                    continue  # the chain it starts is checked where it ends (chain_problem)
                if name in module_names:
                    globals_read.add(name)
                    continue
                found.append(
                    (line, f"the name `{name}`, which is neither the kernel language nor defined in your code")
                )
            elif isinstance(node, ast.Call):
                problem = _call_problem(node.func, local, kernels, aliases, module_names)
                if problem:
                    found.append((line, problem))
    for node in ast.walk(fn):  # annotations: tl.constexpr and friends
        if isinstance(node, ast.arg) and node.annotation is not None:
            for sub in ast.walk(node.annotation):
                if isinstance(sub, ast.Attribute) and sub.attr.startswith("_"):
                    found.append((node.lineno, f"the attribute `{sub.attr}`, which a kernel has no use for"))
    return found, globals_read


def _call_problem(
    func: ast.AST, local: set[str], kernels: set[str], aliases: dict[str, str], module_names: set[str]
) -> str | None:
    if isinstance(func, ast.Name):
        if func.id in kernels or func.id in BUILTINS or func.id in local:
            return None
        if aliases.get(func.id, "").startswith("triton.language"):
            return None
        return f"a call of `{func.id}`, which is not the kernel language"
    dotted = _dotted(func)
    if dotted is None:
        return None if isinstance(func, (ast.Attribute, ast.Subscript)) else "a call of something that is not a name"
    root, *rest = dotted.split(".")
    if root in local:
        return None  # a method of a tensor (x.to, x.trans, ...)
    if root in aliases:
        return None  # checked as an attribute chain (chain_problem)
    if root in module_names or root in kernels:
        return None
    return f"a call of `{dotted}`, which is not the kernel language"


def chain_problem(dotted: str, target: str) -> str | None:
    """Whether `a.b.c` (its root an alias of `target`) names a function, class or constant of triton.language.

    Every module on the way must be triton.language or one of its submodules, and the end must not be a module:
    a kernel reaches nothing else through the language's namespace.
    """
    import importlib
    import types

    _, *rest = dotted.split(".")
    if target == "triton":
        if rest[:1] != ["language"]:
            return f"`{dotted}`: inside a kernel only triton.language (tl.*) is available"
        target, rest = "triton.language", rest[1:]
    try:
        obj: Any = importlib.import_module(target)
    except ImportError:
        return f"`{dotted}`: {target} cannot be imported here"
    for part in rest:
        if not isinstance(obj, types.ModuleType) or not obj.__name__.startswith("triton.language"):
            return None  # an attribute of a language object (tl.float16.primitive_bitwidth): plain data
        obj = getattr(obj, part, None)
        if obj is None:
            return f"`{dotted}`: triton.language has no such name"
    if isinstance(obj, types.ModuleType):
        if not obj.__name__.startswith("triton.language"):
            return f"`{dotted}`: a module outside triton.language, which a kernel cannot use"
        return f"`{dotted}`: a module, where a kernel needs one of its functions"
    return None


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


def extract(sources: list[tuple[str, str, str]]) -> KernelSource:
    """The kernels of a submission: `sources` is [(path, label, text)], the step it builds on first.

    A file that does not parse gives no kernels; the grading process reports its syntax error.
    """
    result = KernelSource()
    parsed = []
    for path, label, text in sources:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        parsed.append((path, label, text, tree))
        result.language_aliases.update(_aliases(tree))
    kernels = {node.name for *_, tree in parsed for node in tree.body if _is_kernel(node)}
    module_names = set().union(*(module_level_names(tree) for *_, tree in parsed)) if parsed else set()
    module_names -= kernels
    result.kernels = sorted(kernels)
    globals_read: set[str] = set()
    for path, label, text, tree in parsed:
        lines = text.splitlines()
        keep = [""] * len(lines)
        options: dict[str, dict[str, Any]] = {}
        for node in tree.body:
            if not _is_kernel(node):
                continue
            first = node.lineno - 1  # the `def` line; decorators above it stay blank
            for i in range(first, node.end_lineno or first + 1):
                keep[i] = lines[i]
            options[node.name] = _jit_options(node)
            found, names = _problems(node, kernels, result.language_aliases, module_names)
            globals_read |= names
            first_per_line = {line: what for line, what in reversed(found)}
            result.problems += [
                f"{label}, line {line}, in kernel `{node.name}`: {what}"
                for line, what in sorted(first_per_line.items())
            ]
        result.files.append(SourceFile(path, label, "\n".join(keep) + "\n", options))
    result.global_names = sorted(globals_read)
    return result
