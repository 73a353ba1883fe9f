"""Generated notebooks and the README table stay in sync with their sources, and carry no outputs."""

from __future__ import annotations

import json
import re

import pytest

from checks.authoring import build
from checks.authoring.stubs import make_stub
from checks.engine.submission import STUB_MARKER, graded_cells
from checks.registry import ROOT
from tests.helpers import written_params


def test_generated_files_are_in_sync():
    stale = build.drift().stale  # a learner's answers in graded cells are not drift (see the tests below)
    assert not stale, f"run `make notebooks` and commit: {[str(p.relative_to(ROOT)) for p in stale]}"


def _answered(text: str, answer: str = "def vector_add(x, y):\n    return 'my answer'\n", lesson: str = "") -> str:
    """A generated notebook as a learner leaves it: an answer in the graded cell, outputs, a scratch cell;
    with `lesson`, the course's first markdown cell changed as well."""
    notebook = json.loads(text)
    for cell in notebook["cells"]:
        if "stub" in cell["metadata"].get("tags", []):
            cell["source"] = answer
            cell["execution_count"] = 3
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ok\n"]}]
    if lesson:
        next(c for c in notebook["cells"] if c["cell_type"] == "markdown")["source"] = lesson
    notebook["cells"].append({"cell_type": "code", "id": "scratch", "metadata": {}, "source": "1 + 1",
                              "execution_count": None, "outputs": []})  # fmt: skip
    notebook["metadata"]["language_info"]["version"] = "3.12.3"
    return build.notebook_json(notebook)


@pytest.fixture
def learner_notebook(tmp_path, monkeypatch):
    """A course folder in tmp_path (no git) with puzzle 1's notebook; `generated` gives what its sources give."""
    from checks.registry import get_puzzle

    monkeypatch.setattr(build, "ROOT", tmp_path)
    monkeypatch.setattr(build.figures, "stale", lambda: [])
    monkeypatch.setattr(build.figures, "write", lambda: [])
    path = tmp_path / "notebooks" / "01_vector_add.ipynb"
    path.parent.mkdir()
    fresh = get_puzzle(1).notebook.read_text(encoding="utf-8")
    monkeypatch.setattr(build, "generated", lambda: {path: fresh})
    return path, fresh


def test_a_learners_answer_is_not_drift_and_survives_make_notebooks(learner_notebook, capsys):
    path, fresh = learner_notebook
    mine = _answered(fresh)
    path.write_text(mine, encoding="utf-8")
    found = build.drift()
    assert found.learners == [path] and not found.stale
    assert build.main(["--check"]) == 0
    said = capsys.readouterr()
    assert "Your answers are in notebooks/01_vector_add.ipynb" in said.out
    assert "make notebooks" not in said.out + said.err
    assert build.main([]) == 0
    assert path.read_text(encoding="utf-8") == mine, "make notebooks must leave the learner's notebook alone"


def test_make_notebooks_refuses_to_overwrite_answers_unless_forced_and_then_backs_up(learner_notebook, capsys):
    path, fresh = learner_notebook
    mine = _answered(fresh, lesson="# Vector add, as the course had it before")
    path.write_text(mine, encoding="utf-8")
    found = build.drift()
    assert found.stale == [path] and found.guarded == [path]
    assert build.main(["--check"]) == 1
    assert "make notebooks FORCE=1" in capsys.readouterr().err
    assert build.main([]) == 1
    assert "Not rebuilt, to keep the answers" in capsys.readouterr().err
    assert path.read_text(encoding="utf-8") == mine
    assert build.main(["--force"]) == 0
    assert path.read_text(encoding="utf-8") == fresh
    (kept,) = (build.ROOT / build.BACKUPS).glob("01_vector_add.*.ipynb")
    assert kept.read_text(encoding="utf-8") == mine and str(kept.relative_to(build.ROOT)) in capsys.readouterr().out


def test_a_committed_answer_is_the_courses_drift(learner_notebook, monkeypatch):
    """CI checks a clean checkout: an answer committed in a graded cell must still fail the check."""
    path, fresh = learner_notebook
    mine = _answered(fresh)
    path.write_text(mine, encoding="utf-8")
    monkeypatch.setattr(build, "committed", lambda p: mine)
    assert build.drift().stale == [path]
    assert build.main(["--check"]) == 1


def test_build_check_reports_drift(tmp_path, monkeypatch, capsys):
    readme = tmp_path / "README.md"
    readme.write_text((ROOT / "README.md").read_text().replace("| 1 |", "| one |"))
    monkeypatch.setattr(build, "ROOT", tmp_path)
    (tmp_path / "notebooks" / "src").mkdir(parents=True)
    (tmp_path / "notebooks" / "src" / "00_setup.md").write_text((ROOT / "notebooks/src/00_setup.md").read_text())
    monkeypatch.setattr(build, "generated", lambda: {readme: build.readme_text(readme.read_text())})
    assert build.main(["--check"]) == 1
    assert "make notebooks" in capsys.readouterr().err


MOST_TO_FILL = 60  # lines of code a learner writes in one graded cell, at most


@pytest.mark.parametrize("puzzle", written_params())
def test_notebook_is_clean_and_its_graded_cells_are_short(puzzle):
    notebook = json.loads(puzzle.notebook.read_text())
    ids = [cell["id"] for cell in notebook["cells"]]
    assert len(ids) == len(set(ids)), "cell ids are unique"
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert all(cell["outputs"] == [] and cell["execution_count"] is None for cell in code)
    sources = ["".join(cell["source"]) for cell in code]
    graded = graded_cells(sources, puzzle.number)
    if len(graded) == 1:
        assert graded[0].startswith(STUB_MARKER.format(number=puzzle.number))
    else:
        markers = [build.PART_MARKER.format(number=puzzle.number, part=k, parts=len(graded)) for k in range(1, 7)]
        assert [cell.splitlines()[0] for cell in graded] == markers[: len(graded)]
    for cell in graded:
        to_fill = sum(int(n) for n in re.findall(r"FILL ME IN \(roughly (\d+) lines\)", cell))
        assert 0 < to_fill <= MOST_TO_FILL, f"{to_fill} lines to write in one graded cell:\n{cell[:200]}"
    assert any(f"check({puzzle.literal})" in s for s in sources)
    assert "data:image" not in puzzle.notebook.read_text(), "pictures are files or code, never base64"


def test_graded_code_in_parts_is_the_whole_solution_in_order():
    """Named {stub} fences split the solution into cells at function boundaries; joined, they are the solution."""
    from checks.authoring.stubs import module_body, strip_markers
    from checks.registry import get_puzzle

    puzzle = get_puzzle("10b")
    solution = puzzle.solution.read_text(encoding="utf-8")
    fences = [["_attn_bwd_preprocess", "_attn_bwd_dkdv_inner"], ["_attn_bwd_dkdv"], ["flash_attention_v2_bwd_dkdv"]]
    cells = build.graded_parts(solution, "10b", fences, filled=True)
    assert [c.splitlines()[0] for c in cells] == [
        build.PART_MARKER.format(number="10b", part=k, parts=3) for k in (1, 2, 3)
    ]
    joined = "\n".join(c.split("\n", 1)[1] for c in cells)
    assert joined.split() == strip_markers(module_body(solution)).split()
    assert "def _attn_bwd_dkdv(" in cells[1] and cells[2].startswith(cells[2].splitlines()[0] + "\ndef flash_attention")
    with pytest.raises(ValueError, match="order"):
        build.graded_parts(solution, "10b", fences[::-1], filled=False)
    with pytest.raises(ValueError, match="does not define"):
        build.graded_parts(solution, "10b", [["_attn_bwd_nothing"]], filled=False)


def test_stub_replaces_blocks_by_size():
    source = '''import triton


@triton.jit
def k(x_ptr):
    ### BEGIN SOLUTION
    a = 1
    # a comment is not a line to write
    b = 2
    ### END SOLUTION


def host(x):
    """doc"""
    ### BEGIN SOLUTION
    return x
    ### END SOLUTION
'''
    stub = make_stub(source, 9)
    assert "    # FILL ME IN (roughly 2 lines)\n    pass" in stub
    assert '    # FILL ME IN (roughly 1 lines)\n    raise NotImplementedError("Puzzle 9: fill in host")' in stub
    assert "a = 1" not in stub and "return x" not in stub


def test_unclosed_marker_is_an_error():
    with pytest.raises(ValueError, match="without"):
        make_stub("### BEGIN SOLUTION\nx = 1\n", 1)


def test_parse_splits_markdown_and_fences():
    blocks = build.parse("# T\n\ntext\n<!-- cell -->\nmore\n```python\nx = 1\n```\n```{stub}\n```\n```{check}\n```\n")
    assert [k for k, _ in blocks] == ["markdown", "markdown", "python", "stub", "check"]


def test_figures_are_drawn_and_in_sync():
    from checks.authoring import figures

    assert figures.stale() == [], "run `make notebooks` and commit the figures"


def test_figure_drift_is_detected(tmp_path):
    import shutil

    from checks.authoring import figures

    folder = tmp_path / "figures"
    shutil.copytree(figures.FOLDER, folder)
    assert figures.stale(folder) == []
    png = folder / f"{figures.FIGURES[0].name}.png"
    png.write_bytes(png.read_bytes() + b"edited")
    (folder / f"{figures.FIGURES[1].name}.png").unlink()
    assert len(figures.stale(folder)) == 2


def test_a_figure_without_recorded_rows_says_so_and_is_not_drawn(tmp_path, monkeypatch):
    """Until `make bench` records a figure's rows, its cell says how to get them, and no PNG is kept."""
    import shutil

    from checks.authoring import figures

    rows, meta = figures._bench()
    monkeypatch.setattr(figures, "_bench", lambda: ([r for r in rows if r.variant != "atomic dQ"], meta))
    text = figures.markdown("fa2_bwd_atomic_dq")
    assert "No run of the atomic-dQ variant is recorded" in text and "![" not in text and "make bench" in text
    folder = tmp_path / "figures"
    shutil.copytree(figures.FOLDER, folder)
    assert figures.stale(folder) == [str(folder / "fa2_bwd_atomic_dq.png"), str(folder / figures.MANIFEST)]
    figures.write(folder)
    assert not (folder / "fa2_bwd_atomic_dq.png").exists() and figures.stale(folder) == []


def test_rows_merged_from_a_later_run_are_captioned_with_that_run(monkeypatch):
    from checks.authoring import figures

    rows, meta = figures._bench()
    later = {"puzzle": "10", "variant": "atomic dQ", "gpu": "GPU X", "date": "2030-01-02 03:04 UTC"}
    later |= {"torch": "9.9", "triton": "8.8", "cuda": "7.7"}
    monkeypatch.setattr(figures, "_bench", lambda: (rows, {**meta, "merged": [later]}))
    assert figures._rows(figures._figure("fa2_bwd_atomic_dq"), rows), "the recorded CSV has the variant's rows"
    text = figures.markdown("fa2_bwd_atomic_dq")
    assert "GPU X, 2030-01-02 03:04 UTC, with torch 9.9, Triton 8.8 and CUDA 7.7" in text
    assert "At N = 16384, the time of the atomic-dQ variant was" in text and "answer key's with D=64 causal" in text
    assert meta["date"] in figures.markdown("fa2_bwd_vs_sdpa") and "GPU X" not in figures.markdown("fa2_bwd_vs_sdpa")


def test_the_readme_has_one_place_to_start():
    """One "Start here" with the first commands; the learner's loop comes before any page for others."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert [h for h in headings if "start" in h.lower()] == ["## Start here"]
    start = text.split("## Start here", 1)[1].split("\n## ", 1)[0]
    assert "make check PUZZLE=1" in start and "make progress" in start and "make lab" in start
    assert headings.index("## Start here") < headings.index("## The loop") < headings.index("## Where to go next")


def test_check_grades_the_last_run_of_each_part_and_names_the_parts_not_run(monkeypatch, capsys):
    """In a notebook whose graded code is in parts, check() joins the latest run of each, in part order."""
    ipython = pytest.importorskip("IPython")
    from checks.learner import notebook, session

    part = lambda k, body: build.PART_MARKER.format(number=9, part=k, parts=2) + "\n" + body
    history = ["", part(2, "b = 1"), part(1, "a = 1"), "print(a)", part(2, "b = 2")]
    monkeypatch.setattr(ipython, "get_ipython", lambda: type("Shell", (), {"user_ns": {"In": history}})())
    assert notebook._ran_cells(9) == [part(1, "a = 1"), part(2, "b = 2")]
    assert notebook.parts_not_run(notebook._ran_cells(9)) == []
    assert notebook.parts_not_run([part(2, "b = 2")]) == [1]
    assert notebook.parts_not_run(["# Puzzle 9: your code (this whole cell is graded)\nx = 1"]) == []
    history[:] = ["", part(2, "b = 1")]
    nothing = lambda *a, **k: pytest.fail("nothing is graded while a part has not run")
    monkeypatch.setattr(session, "grade_ahead", nothing)
    notebook.check(9)
    assert "Part 1 has not been run in this session" in capsys.readouterr().out


def test_a_figure_of_another_baseline_appears_once_the_baseline_is_recorded(tmp_path, monkeypatch):
    """The unfused attention is one of puzzle 9's other baselines: its figure waits for its timings."""
    import dataclasses

    from checks.authoring import figures

    recorded, meta = figures._bench()
    figure = figures._figure("unfused_vs_flash")
    # the recorded run without its unfused timings, whether or not it has them
    rows = [
        dataclasses.replace(r, others={k: v for k, v in r.others.items() if k != "torch unfused"}) for r in recorded
    ]
    monkeypatch.setattr(figures, "_bench", lambda: (rows, meta))
    assert not figures._complete(figure, rows)
    assert "No run of the unfused attention is recorded" in figures.markdown("unfused_vs_flash")
    timed = [
        dataclasses.replace(r, others={**r.others, "torch unfused": 3 * r.key_ms})
        if (r.puzzle, r.series) in {("9", "D=64"), ("9", "D=128")} and r.x <= 8192 and r.ok
        else r
        for r in rows
    ]
    monkeypatch.setattr(figures, "_bench", lambda: (timed, meta))
    assert figures.markdown("unfused_vs_flash").startswith("![Attention forward")
    figures.draw(figure, timed, meta, tmp_path / "unfused.png")
    assert (tmp_path / "unfused.png").read_bytes()[:4] == b"\x89PNG"


def test_the_setup_notebook_links_every_notebook_in_course_order():
    """JupyterLab's file browser lists 10_ before 10a_; the first notebook gives the course order instead."""
    from checks.registry import load_puzzles

    notebook = json.loads((ROOT / "notebooks" / "00_setup.ipynb").read_text(encoding="utf-8"))
    text = "".join("".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "markdown")
    linked = re.findall(r"\]\((\d+[a-z]?_\w+\.ipynb)\)", text)
    assert linked == [p.notebook.name for p in load_puzzles() if p.ready]
    assert linked.index("10a_softmax_backward.ipynb") < linked.index("10_flash_attention_v2_bwd.ipynb")


def test_a_learners_own_cells_are_kept_when_the_course_text_changed(learner_notebook, capsys):
    path, fresh = learner_notebook
    notebook = json.loads(fresh)
    notebook["cells"][0]["source"] = "# an older lesson text"
    notebook["cells"].append(
        {"cell_type": "markdown", "id": "my-notes", "metadata": {}, "source": "my notes on masks"}
    )  # fmt: skip
    mine = build.notebook_json(notebook)  # no answer in the graded cell, but a cell of the learner's own
    path.write_text(mine, encoding="utf-8")
    assert build.drift().guarded == [path]
    assert build.main([]) == 1 and path.read_text(encoding="utf-8") == mine


def test_a_figure_of_rows_from_several_runs_says_so(monkeypatch):
    from checks.authoring import figures

    rows, meta = figures._bench()
    first = {k: v for k, v in meta.items() if k != "merged"}
    later = {"puzzle": "9", "variant": "", "gpu": "GPU X", "date": "2030-01-02 03:04 UTC"}
    later |= {"torch": first["torch"], "triton": first["triton"], "cuda": first["cuda"]}
    monkeypatch.setattr(figures, "_bench", lambda: (rows, {**first, "merged": [later]}))
    text = figures.markdown("fa1_vs_fa2")  # puzzle 8's rows from the first run, 9's from the later one
    assert f"{first['gpu']} and GPU X, in 2 runs from {first['date']} to 2030-01-02 03:04 UTC" in text
    assert f"with torch {first['torch']}, Triton {first['triton']}" in text  # one version, said once
