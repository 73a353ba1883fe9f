"""Known-wrong kernels: the grader's own regression set, under `solutions/wrong/NN_slug/`.

A known-wrong kernel is either a whole submission (`name.py`) or, when it is the answer key with
one bug put in, an edit of it (`name.edit.yaml`), so that it follows the answer key when the key
changes and the bug stays the only difference:

    doc: |                      # the module docstring: "Wrong: <the bug>", then "expect: <text>"
      Wrong: dK is never multiplied by sm_scale.

      expect: dk:
    edits:                      # applied in order to the answer key (markers and docstring removed)
      - old: "    dk *= sm_scale\\n"
        new: ""

`base: N` (a puzzle number: 9, 10a) starts from puzzle N's answer key instead (a right answer to
another puzzle that must fail this one), and `append:` adds code at the end. The answer key of a
puzzle that builds on an earlier step (9 on 9a) starts with that step's answer key, so the edited
submission defines everything itself and the edits may change either part.

Each `old` must occur exactly once, so an edit that no longer applies fails loudly.
`python -m checks.authoring.wrong NN NAME` prints the submission an edit file stands for.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from checks.authoring.stubs import module_body, strip_markers
from checks.registry import Puzzle, get_puzzle

EDIT_SUFFIX = ".edit.yaml"


class EditError(ValueError):
    """An edit file that no longer applies to its answer key."""


def known_wrong(puzzle: Puzzle) -> list[Path]:
    """Every known-wrong kernel of a puzzle: whole files and edit files, by name."""
    folder = puzzle.wrong_dir
    return sorted([*folder.glob("*.py"), *folder.glob(f"*{EDIT_SUFFIX}")], key=lambda p: p.name)


def name_of(path: Path) -> str:
    return path.name.removesuffix(EDIT_SUFFIX).removesuffix(".py")


def answer_key_body(puzzle: Puzzle) -> str:
    """The answer key as a learner would hand it in: no markers, no module docstring; after the answer key of
    the step it builds on, if any, so that it defines everything itself."""
    body = module_body(strip_markers(puzzle.solution.read_text(encoding="utf-8")))
    if puzzle.builds_on:
        return answer_key_body(get_puzzle(puzzle.builds_on)) + "\n\n" + body
    return body


def apply_edits(base: str, edits: list[dict[str, str]], where: str) -> str:
    text = base
    for number, edit in enumerate(edits, 1):
        old, new = edit["old"], edit.get("new", "")
        count = text.count(old)
        if count != 1:
            raise EditError(
                f"{where}: edit {number} finds its text {count} times in the answer key (it must be exactly once); "
                "update the edit to the answer key's current code."
            )
        text = text.replace(old, new, 1)
    return text


def source_of(puzzle: Puzzle, path: Path) -> str:
    """The Python source a known-wrong kernel stands for."""
    if path.suffix == ".py":
        return path.read_text(encoding="utf-8")
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    base = get_puzzle(spec["base"]) if "base" in spec else puzzle
    body = apply_edits(answer_key_body(base), spec.get("edits", []), str(path)) + spec.get("append", "")
    return f'"""{spec["doc"]}"""\n\n{body}'


def materialize(puzzle: Puzzle, path: Path, folder: Path) -> Path:
    """A .py file to grade: the file itself, or the edited answer key written into `folder`."""
    if path.suffix == ".py":
        return path
    out = folder / f"{name_of(path)}.py"
    out.write_text(source_of(puzzle, path), encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks.authoring.wrong", description="Print a known-wrong kernel.")
    parser.add_argument("puzzle", help="the puzzle number (7, 10a, ...)")
    parser.add_argument("name", help="its file name, without .py or .edit.yaml")
    args = parser.parse_args(argv)
    puzzle = get_puzzle(args.puzzle)
    for path in known_wrong(puzzle):
        if name_of(path) == args.name:
            sys.stdout.write(source_of(puzzle, path))
            return 0
    names = ", ".join(name_of(p) for p in known_wrong(puzzle))
    print(f"Puzzle {puzzle.number} has no known-wrong kernel {args.name!r}; it has: {names}.", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
