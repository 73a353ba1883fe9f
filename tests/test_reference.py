"""The reference page (notebooks/src/reference.md) covers what the course uses, and quotes Triton truly.

Every `tl.*` name an answer key uses has an entry with a meaning and a two-line example; every rule
the grader can report is in its index, generated from the rulebook; every lesson links to it; the error
messages it quotes are the ones the installed Triton gives.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from checks.authoring import build
from checks.registry import ROOT, load_puzzles

PAGE = ROOT / "notebooks" / "src" / build.REFERENCE_SOURCE
TL_NAME = re.compile(r"\btl\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")
ENTRY = re.compile(r"^\*\*`([^`]+)`")  # an entry's first line: **`tl.load(pointer, ...)`** ...


def grader_rule_names() -> set[str]:
    """Every rule name the grader can report (the one place this test asks the grader for them)."""
    from checks.engine.judging.rules import rulebook

    return set(rulebook.all_rules()) | {name for p in load_puzzles() for name in p.rules}


def answer_key_files() -> list[Path]:
    """The answer keys and the other designs of a puzzle's function kept beside them (not the known-wrong kernels)."""
    return sorted((ROOT / "solutions").glob("*.py")) + sorted((ROOT / "solutions" / "variants").glob("*.py"))


def section(text: str, title: str) -> str:
    """The text of the `## title` section, up to the next `## ` heading."""
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def split_entry(line: str) -> tuple[str, str]:
    """An entry's first line at its first ': ' outside code spans: (the names, the meaning)."""
    parts = line.split("`")
    for i in range(0, len(parts), 2):
        if ": " in parts[i]:
            before, after = parts[i].split(": ", 1)
            return "`".join([*parts[:i], before]), "`".join([after, *parts[i + 1 :]])
    return line, ""


def entries(text: str) -> dict[str, tuple[str, list[str]]]:
    """Each entry of the functions section: every name it covers -> (its meaning, its example's lines)."""
    found: dict[str, tuple[str, list[str]]] = {}
    lines = section(text, "Triton functions").splitlines()
    for i, line in enumerate(lines):
        if not ENTRY.match(line):
            continue
        head, meaning = split_entry(line)
        example: list[str] = []
        if i + 1 < len(lines) and lines[i + 1] == "```":
            end = lines.index("```", i + 2)
            example = lines[i + 2 : end]
        for name in re.findall(r"`([^`]+)`", head):
            found[re.split(r"[(\s]", name)[0]] = (meaning.strip(), example)
    return found


def test_every_tl_name_an_answer_key_uses_has_an_entry():
    covered = entries(PAGE.read_text(encoding="utf-8"))
    assert len(covered) > 30
    used = {f"tl.{name}": path.name for path in answer_key_files() for name in TL_NAME.findall(path.read_text())}
    missing = {name: where for name, where in used.items() if name not in covered}
    assert not missing, f"add an entry to {PAGE.name}'s 'Triton functions' for: {missing}"


def test_a_name_missing_from_the_page_is_noticed():
    text = PAGE.read_text(encoding="utf-8").replace("**`tl.trans(x)`**", "**trans**")
    assert "tl.trans" not in entries(text)


def test_every_entry_has_a_meaning_and_a_two_line_example():
    for name, (meaning, example) in entries(PAGE.read_text(encoding="utf-8")).items():
        assert len(meaning) > 20 and meaning.endswith("."), f"{name}: one line of meaning, a sentence"
        assert len(example) == 2 and all(line.strip() for line in example), f"{name}: a two-line example"


def test_every_rule_of_the_grader_is_in_the_index_with_a_puzzle():
    index = section(PAGE.read_text(encoding="utf-8"), "The grader's rules")
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \|.*\| ([\w, ]+) \|$", index, re.MULTILINE)}
    missing = grader_rule_names() - set(rows)
    assert not missing, f"run `make notebooks` (the index is generated from the rulebook): {sorted(missing)}"
    numbers = {p.number for p in load_puzzles()}
    assert all(set(taught.replace(" ", "").split(",")) <= numbers for taught in rows.values()), rows


def test_the_rule_index_is_the_rulebooks_in_its_order():
    """The index between the page's `rules:begin` and `rules:end` lines is generated: a rule added, removed,
    moved or reworded in its declaration, without `make notebooks`, fails here (and `build --check`)."""
    from checks.engine.judging.rules import rulebook

    text = PAGE.read_text(encoding="utf-8")
    block = text[text.index(build.BEGIN_RULES) + len(build.BEGIN_RULES) : text.index(build.END_RULES)]
    assert block.strip() == build.rules_index(), f"run `make notebooks`: {PAGE.name}'s rule index is stale"
    listed = re.findall(r"^\| `(\w+)` \|", block, re.MULTILINE)
    assert listed == list(rulebook.RULES)
    for rule in rulebook.RULES.values():
        assert f"| `{rule.name}` | {rule.checks} | {rule.message} | {rulebook.taught_in(rule)} |" in block


def test_a_reworded_rule_makes_the_page_stale(monkeypatch):
    import dataclasses

    from checks.engine.judging.rules import rulebook

    current = PAGE.read_text(encoding="utf-8")
    assert build.reference_text(current) == current
    values = rulebook.RULES["values"]
    monkeypatch.setitem(rulebook.RULES, "values", dataclasses.replace(values, checks="something else"))
    assert "| `values` | something else |" in build.reference_text(current) != current


def test_the_page_has_its_parts():
    text = PAGE.read_text(encoding="utf-8")
    for title in ("CUDA and Triton", "Where the data lives", "Glossary", "Debugging", "The formulas"):
        assert section(text, title).strip()
    cuda = section(text, "CUDA and Triton")
    for cuda_name, triton_name in [
        ("blockIdx", "tl.program_id"),
        ("__shared__", "implicit"),
        ("__syncthreads", "tl.debug_barrier"),
        ("atomicAdd", "tl.atomic_add"),
    ]:
        assert any(cuda_name in row and triton_name in row for row in cuda.splitlines()), cuda_name
    glossary = section(text, "Glossary")
    for word in ("program", "block", "tile", "wave", "constexpr", "roofline", "on-band", "lse", "delta"):
        assert f"**{word}" in glossary or f", {word}**" in glossary, word
    assert "memory_hierarchy" in section(text, "Where the data lives")
    assert (ROOT / "notebooks" / "figures" / "memory_hierarchy.png").exists()


def test_every_lesson_links_to_the_reference_page():
    notebooks = [ROOT / "notebooks" / "00_setup.ipynb"] + [p.notebook for p in load_puzzles() if p.ready]
    for path in notebooks:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        first = next(c for c in cells if c["cell_type"] == "markdown")
        assert f"]({build.REFERENCE_NOTEBOOK})" in "".join(first["source"]), path.name
    reference = json.loads((ROOT / "notebooks" / build.REFERENCE_NOTEBOOK).read_text(encoding="utf-8"))
    assert not any(build.REFERENCE_LINK in "".join(c["source"]) for c in reference["cells"])


def quoted_messages(debugging: str) -> list[str]:
    """The code spans of the list items of the error list: the messages as quoted."""
    return [span for line in debugging.splitlines() if line.startswith("- ") for span in re.findall(r"`([^`]+)`", line)]


# Each mistake of the page's error list, as a kernel, compiled for an H100 (sm_90) without running it
# (Triton needs no GPU for that), and run in the interpreter where the page quotes the interpreter.
REPRODUCE = textwrap.dedent(
    """
    import json
    import triton, triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def arange_kernel(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, offs)

    @triton.jit
    def dot_kernel(a_ptr, c_ptr, M: tl.constexpr, K: tl.constexpr):
        offs_m = tl.arange(0, M)
        offs_k = tl.arange(0, K)
        a = tl.load(a_ptr + offs_m[:, None] * K + offs_k[None, :])
        b = tl.load(a_ptr + offs_k[:, None] * M + offs_m[None, :])
        c = tl.dot(a, b)
        tl.store(c_ptr + offs_m[:, None] * M + offs_m[None, :], c)

    @triton.jit
    def loop_kernel(x_ptr, n, BLOCK: tl.constexpr):
        acc = 0
        for start in range(0, n, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            acc += tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0))
        tl.store(x_ptr, acc)

    def compile_error(fn, signature, constants):
        try:
            triton.compile(ASTSource(fn, signature, constants), target=GPUTarget("cuda", 90, 32))
        except Exception as exc:
            return f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
        return "compiled"

    fp16 = {"a_ptr": "*fp16", "c_ptr": "*fp16", "M": "constexpr", "K": "constexpr"}
    print(json.dumps([
        compile_error(arange_kernel, {"x_ptr": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": 10}),
        compile_error(dot_kernel, fp16, {"M": 16, "K": 8}),
        compile_error(dot_kernel, fp16, {"M": 8, "K": 16}),
        compile_error(loop_kernel, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 16}),
    ]))
    """
)
INTERPRETED = textwrap.dedent(
    """
    import torch, triton, triton.language as tl

    @triton.jit
    def arange_kernel(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, offs)

    try:
        arange_kernel[(1,)](torch.zeros(16), BLOCK=10)
    except Exception as exc:
        print(f"{type(exc).__module__}.{type(exc).__name__}: {exc}")
    """
)


@pytest.mark.slow
def test_the_quoted_error_messages_are_the_ones_triton_gives(tmp_path):
    """Compiles for an H100 without one and runs the interpreter: the page quotes each message as printed."""
    from checks.engine.machine import NUMPY_PITFALL_TEXT

    debugging = section(PAGE.read_text(encoding="utf-8"), "Debugging")
    quoted = quoted_messages(debugging)
    assert len(quoted) >= 6, quoted
    compiling = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    script = tmp_path / "mistakes.py"  # @triton.jit needs its source in a file
    script.write_text(REPRODUCE, encoding="utf-8")
    compiled = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=compiling)
    assert compiled.returncode == 0, compiled.stderr[-2000:]
    arange, dot_k8, dot_m8, loop = json.loads(compiled.stdout.splitlines()[-1])
    interpreted = subprocess.run(
        [sys.executable, "-c", INTERPRETED],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TRITON_INTERPRET": "1"},
    ).stdout.strip()  # (its kernel is interpreted: no file needed)
    assert dot_m8 == "compiled", "M under 16 compiles: the page says only K must be 16"
    for quote, said in [
        ("arange's range must be a power of 2", arange),
        ("Input shapes should have M >= 1, N >= 1 and K >= 16", dot_k8),
        ("triton.compiler.errors.CompilationError: at 6:8:", dot_k8),
        ("triton.compiler.errors.CompilationError: at 2:11:", arange),
        ("triton.compiler.errors.CompilationError: at 3:4:", loop),
        (
            "AssertionError('Loop-carried variable acc has initial type int32 but is re-assigned to fp32 in loop! "
            "Please make sure that the type stays consistent.')",
            loop,
        ),
        ("""triton.runtime.errors.InterpreterError: ValueError("arange's range must be a power of 2")""", interpreted),
    ]:
        assert quote in said, f"Triton says {said!r}"
        assert quote in debugging, f"the page should quote {quote!r}"
    numpy_quote = f"triton.runtime.errors.InterpreterError: TypeError('{NUMPY_PITFALL_TEXT}')"
    assert numpy_quote in quoted
