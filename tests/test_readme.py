"""The README is the learner's page: short, the learner's part first, every link and every command it shows
working. The pages it links (docs/*.md) are held to the same links and commands."""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from checks.registry import ROOT

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`|```bash\n(.*?)```", re.DOTALL)
# The README's prose, at most: about 1500 words with the puzzle table as it stood at 13 puzzles (some 770 words of
# table); the table, generated from puzzles.yaml, grows with every puzzle and is not counted
MAX_PROSE_WORDS = 800


def commands(page: Path, program: str) -> list[str]:
    """The commands a page shows in code spans and bash blocks that start with `program`."""
    found = []
    for match in CODE.finditer(page.read_text(encoding="utf-8")):
        for line in (match.group(1) or match.group(2)).splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith(program):
                found.append(line)
    return found


def test_the_readmes_prose_is_at_most_about_800_words():
    """Its prose: the puzzle table, generated from puzzles.yaml, grows with the course and is not counted."""
    from checks.authoring.build import BEGIN_TABLE, END_TABLE

    text = README.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN_TABLE)
    table, _, tail = rest.partition(END_TABLE)
    assert table.count("\n| ") >= 3, "the generated puzzle table is where the README's markers say"
    words = len((head + tail).split())
    assert words <= MAX_PROSE_WORDS, (
        f"README.md has {words} words besides its puzzle table; move what is not for the learner to a page in docs/."
    )


def test_the_readme_links_the_pages_that_left_it():
    links = set(LINK.findall(README.read_text(encoding="utf-8")))
    assert {"docs/grading.md", "docs/instructors.md", "docs/authors.md", "AGENTS.md"} <= links
    assert "What the grader guarantees" in (ROOT / "docs" / "grading.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_of_a_page_leads_somewhere(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a web address, or a heading of the same page
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{page.name} links {target}, which does not exist"


@pytest.mark.slow  # each make reads the Makefile, which asks Python whether torch is there: seconds each
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_make_command_of_a_page_is_a_target_make_can_run(page):
    """`make -n` reads the Makefile and prints each command's recipe without running it."""
    shown = commands(page, "make ")
    if page == README:
        assert "make check PUZZLE=1" in shown and "make progress" in shown
    for command in shown:
        words = [w for w in shlex.split(command.replace("...", "x")) if w != "[FILE=path]"]
        returncode, stderr = dry_run(tuple(words[1:]))
        assert returncode == 0, f"{page.name} shows `{command}`, which make cannot run: {stderr}"


@functools.cache
def dry_run(arguments: tuple[str, ...]) -> tuple[int, str]:
    """`make -n ARGUMENTS`: its exit status and what it said on stderr, once per command however many pages show it
    (74 commands on the pages, 33 of them different)."""
    run = subprocess.run(["make", "-n", *arguments], cwd=ROOT, capture_output=True, text=True)
    return run.returncode, run.stderr


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_check_command_of_a_page_takes_its_options(page):
    """A `make check ... ARGS=...` or `python -m checks ...` that a page shows parses as the grader's own options."""
    from checks.cli import parser

    for command in commands(page, "make check") + commands(page, ".venv/bin/python -m checks "):
        words = shlex.split(command)
        if words[0] == "make":
            given = dict(w.split("=", 1) for w in words[2:] if "=" in w)
            argv = [given.get("PUZZLE", "1"), *shlex.split(given.get("ARGS", ""))]
            argv += ["--file", given["FILE"]] if "FILE" in given else []
        else:
            argv = [w for w in words[3:] if not w.startswith("[")]
        try:
            parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"{page.name} shows `{command}`, whose options the grader does not take")
