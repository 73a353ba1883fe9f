"""Every record a lesson or a benchmark page cites is in the repository: a figure the text quotes from
`bench/results/...` (or any other path under `bench/`) can be looked up where the text says it is.

The pages: the lessons' sources (notebooks/src/*.md), bench/tuning.md, BENCHMARKS.md, README.md, docs/*.md, the
records of bench/results/ (the journals at its top and each run folder's README) and the hand notes of `make
bench`'s record. A citation is a path that starts with `bench/`, in the text or in a code cell's
`ROOT / "bench" / ...`; a `*` or a `{a,b}` in it must match at least one file."""

from __future__ import annotations

import glob
import re
from pathlib import Path

import pytest

from checks.registry import ROOT

PAGES = [
    *sorted((ROOT / "notebooks" / "src").glob("*.md")),
    ROOT / "bench" / "tuning.md",
    ROOT / "BENCHMARKS.md",
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "bench" / "results").glob("*.md")),
    *sorted((ROOT / "bench" / "results").glob("*/README.md")),
    *sorted((ROOT / "bench" / "results").glob("*/notes.md")),
]
IN_TEXT = re.compile(r"(?<![\w./-])(bench/[\w.*{},/+-]*[\w*}/])")  # ends before a sentence's full stop
IN_CODE = re.compile(r'ROOT\s*/\s*"bench"((?:\s*/\s*"[^"/]+")+)')


def citations(text: str) -> list[str]:
    """The paths under bench/ that a page's text or code cells cite, in order, each once."""
    found = [m.group(1) for m in IN_TEXT.finditer(text)]
    found += ["bench/" + "/".join(re.findall(r'"([^"]+)"', m.group(1))) for m in IN_CODE.finditer(text)]
    return list(dict.fromkeys(found))


def expand_braces(pattern: str) -> list[str]:
    """`a.{txt,json}` -> [`a.txt`, `a.json`] (glob does not expand braces)."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if not match:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [p for choice in match.group(1).split(",") for p in expand_braces(head + choice + tail)]


def exists(cited: str, root: Path = ROOT) -> bool:
    if not any(c in cited for c in "*{"):
        return (root / cited).exists()
    return any(glob.glob(str(root / p)) for p in expand_braces(cited))


CITED = [(page, cited) for page in PAGES for cited in citations(page.read_text(encoding="utf-8"))]


def test_the_pages_cite_records_of_runs():
    """The finder finds the records the lessons lean on (so that the test below cannot pass by finding none)."""
    found = {cited for _, cited in CITED}
    assert len(found) >= 20, sorted(found)
    assert sum(cited.startswith("bench/results/") for cited in found) >= 10, sorted(found)
    lessons = {page.name for page, cited in CITED if cited.startswith("bench/results/")}
    assert {"11_flash_decoding.md", "12_gqa_decoding.md", "13_paged_decoding.md"} <= lessons, lessons


@pytest.mark.parametrize(("page", "cited"), CITED, ids=[f"{page.name}:{cited}" for page, cited in CITED])
def test_every_cited_record_exists(page, cited):
    assert exists(cited), f"{page.relative_to(ROOT)} cites {cited}, which is not in the repository"


def test_a_missing_record_is_found_and_reported(tmp_path):
    """The finder on a hand-made page: text, a glob with braces, a code cell; the missing one is caught."""
    (tmp_path / "bench" / "results" / "r").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "r" / "a.json").write_text("{}")
    page = (
        "As recorded (`bench/results/r/a.json`; `bench/results/r/a.{txt,json}`), and in bench/results/r/gone.txt.\n"
        'rows = (ROOT / "bench" / "results" / "r" / "b.csv").read_text()\n'
    )
    cited = citations(page)
    assert cited == [
        "bench/results/r/a.json",
        "bench/results/r/a.{txt,json}",
        "bench/results/r/gone.txt",
        "bench/results/r/b.csv",
    ]
    assert [exists(c, tmp_path) for c in cited] == [True, True, False, False]
