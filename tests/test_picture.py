"""Pictures of failure: a wrong kernel's error map is saved, drawn, and shown where the learner looks."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from checks import cli
from checks import verdict as V
from checks.authoring.stubs import answer_cell
from checks.authoring.wrong import source_of
from checks.engine.grade import grade
from checks.learner import notebook, picture, progress, session
from checks.registry import ROOT, get_puzzle

PUZZLE = get_puzzle(1)
TAIL_BUG_SOURCE = source_of(PUZZLE, ROOT / "solutions" / "wrong" / "01_vector_add" / "grid_rounds_down.edit.yaml")
RED = np.array([0xD6, 0x27, 0x28]) / 255  # picture.COLOURS[UNWRITTEN]


@pytest.fixture(scope="module")
def failed(tmp_path_factory):
    """A known-wrong kernel (its grid rounds down, so the tail is never written), graded with artifacts."""
    folder = tmp_path_factory.mktemp("artifacts")
    submission = folder / "grid_rounds_down.py"
    submission.write_text(TAIL_BUG_SOURCE, encoding="utf-8")
    verdict = grade(PUZZLE, submission, artifacts=folder, timeout=60)
    assert verdict.status == V.FAILED, verdict.summary
    return verdict


def colour_share(png, rgb) -> float:
    import matplotlib.image

    pixels = matplotlib.image.imread(str(png))[..., :3]
    return float((np.abs(pixels - rgb).max(axis=-1) < 0.03).mean())


@pytest.mark.slow
def test_a_failing_case_saves_its_error_map(failed):
    data = picture.load(failed.picture_data)
    assert data["error"].shape == data["bad"].shape and data["bad"].any()
    assert torch.isnan(data["error"][data["bad"]]).all()  # never written: NaN in the error map
    assert data["blocks"].get("BLOCK_SIZE", 0) > 0
    assert "never written" in data["headline"]


@pytest.mark.slow
def test_the_picture_is_drawn_with_the_unwritten_tail_in_red(failed, tmp_path):
    png = picture.save_png(failed.picture_data, tmp_path / "errors.png")
    assert png.exists() and png.stat().st_size > 10_000
    assert colour_share(png, RED) > 0.002  # the tail shows
    assert colour_share(png, np.array([0xE4, 0xE4, 0xE4]) / 255) > 0.05  # and so do the right elements


def test_a_1d_output_is_folded_into_blocks():
    n, block = 3000, 256
    bad = torch.zeros(n, dtype=torch.bool)
    bad[2816:] = True
    error = torch.where(bad, float("nan"), 0.0).double()
    layout = picture.layout_for({"error": error, "bad": bad, "dims": ("elements",), "blocks": {"BLOCK_SIZE": block}})
    assert layout.category.shape == (12, block)  # one row per block, the last one partly past the end
    assert (layout.category[-1, : 3000 - 11 * block] == picture.UNWRITTEN).all()
    assert (layout.category[-1, 3000 - 11 * block :] == picture.PAST_END).all()
    assert (layout.category[:-1] == picture.RIGHT).all()
    assert "BLOCK_SIZE=256" in layout.grid_note


def test_a_2d_output_gets_its_block_grid():
    bad = torch.zeros(45, 70, dtype=torch.bool)
    bad[:, 64:] = True
    error = torch.where(bad, 1.0, 0.0).double()
    data = {"error": error, "bad": bad, "dims": ("rows", "columns"), "blocks": {"BLOCK_M": 16, "BLOCK_N": 32}}
    layout = picture.layout_for(data)
    assert (layout.row_block, layout.col_block) == (16, 32)
    assert (layout.category[:, 64:] == picture.WRONG).all() and (layout.category[:, :64] == picture.RIGHT).all()
    assert picture.layout_for({**data, "blocks": {"BLOCK_SIZE": 64}}).col_block == 64


def test_a_4d_output_shows_the_first_head_with_a_wrong_element():
    bad = torch.zeros(2, 3, 40, 16, dtype=torch.bool)
    bad[1, 2, 32:, :] = True
    error = torch.where(bad, 0.5, 0.0).double()
    dims = ("batch", "heads", "queries", "head_dim")
    layout = picture.layout_for({"error": error, "bad": bad, "dims": dims, "blocks": {"BLOCK_M": 16, "BLOCK_N": 32}})
    assert layout.category.shape == (40, 16)
    assert "batch 1, heads 2" in layout.where and "1 of 6" in layout.where
    assert (layout.row_label, layout.col_label) == ("queries", "head_dim")
    assert (layout.row_block, layout.col_block) == (16, None)  # BLOCK_N is about keys, not head_dim


def test_shrinking_a_large_output_never_hides_a_single_bad_element():
    n = 1_000_003
    bad = torch.zeros(n, dtype=torch.bool)
    bad[-1] = True
    error = torch.where(bad, float("nan"), 0.0).double()
    layout = picture.layout_for({"error": error, "bad": bad, "dims": ("elements",), "blocks": {}})
    _, category, (fy, fx) = picture.shrink(layout)
    assert category.shape[0] <= picture.MAX_ROWS and category.shape[1] <= picture.MAX_COLS
    assert fy * fx > 1 and int((category == picture.UNWRITTEN).sum()) == 1


def test_no_picture_for_a_pass_or_for_a_failure_without_values(tmp_path):
    assert picture.draw_verdict(V.Verdict(1, V.PASSED, "ok"), tmp_path / "x.png") == (None, "")
    png, note = picture.draw_verdict(V.Verdict(1, V.CRASHED, "died"), tmp_path / "x.png")
    assert png is None and "No picture" in note
    assert not (tmp_path / "x.png").exists()


@pytest.mark.slow
def test_the_terminal_saves_the_picture_with_picture_path(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(progress.ENV_FILE, str(tmp_path / "progress.json"))
    submission = tmp_path / "my_answer.py"
    submission.write_text(TAIL_BUG_SOURCE, encoding="utf-8")
    png = tmp_path / "where.png"
    assert cli.main(["1", "--file", str(submission), "--picture", str(png), "--timeout", "60"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and f"A picture of where the output is wrong: {png}" in out
    assert png.exists() and colour_share(png, RED) > 0.002
    recorded = json.loads((tmp_path / "progress.json").read_text(encoding="utf-8"))["puzzles"]["1"]
    assert recorded["status"] == V.FAILED and recorded["mode"] == "interpreter"


@pytest.mark.slow
def test_a_failing_notebook_check_saves_the_picture_beside_the_notebook(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(progress.ENV_FILE, str(tmp_path / "progress.json"))
    cell = answer_cell(TAIL_BUG_SOURCE, 1)  # as if the learner had run this cell
    monkeypatch.setattr(notebook, "_ran_cells", lambda number: [cell])
    monkeypatch.setattr(notebook, "picture_folder", lambda puzzle: tmp_path / ".check_pictures")
    notebook.check(1, timeout=60)
    out = capsys.readouterr().out
    png = tmp_path / ".check_pictures" / f"{PUZZLE.stem}.png"
    assert "FAILED" in out and str(png) in out  # outside Jupyter it says where the picture is
    assert png.exists() and png.stat().st_size > 10_000
    recorded = json.loads((tmp_path / "progress.json").read_text(encoding="utf-8"))["puzzles"]["1"]
    assert recorded["status"] == V.FAILED


def test_ticks_sit_on_cell_centres_and_the_grid_shows_over_dark_cells():
    bad = torch.zeros(45, 70, dtype=torch.bool)
    bad[:, 64:] = True
    error = torch.where(bad, 1.0, 0.0).double()
    fig = picture.figure({"error": error, "bad": bad, "dims": ("rows", "columns"), "blocks": {"BLOCK_M": 16}})
    ax = fig.axes[0]
    rows = [t for t in ax.get_yticks()]
    assert rows and all(t % 1 == 0.5 for t in rows)
    assert [label.get_text() for label in ax.get_yticklabels()] == [str(int(t - 0.5)) for t in rows]
    grid = [line for line in ax.get_lines() if line.get_path_effects()]
    assert len(grid) == 2  # BLOCK_M=16 over 45 rows: lines at 16 and 32, each with a light halo


@pytest.mark.slow
def test_a_terminal_failure_says_how_to_get_the_picture(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(progress.ENV_FILE, str(tmp_path / "progress.json"))
    submission = tmp_path / "my_answer.py"
    submission.write_text(TAIL_BUG_SOURCE, encoding="utf-8")
    assert cli.main(["1", "--file", str(submission), "--timeout", "60", "--seed", "5"]) == 1
    out = capsys.readouterr().out
    # every command it suggests grades the same file again, not the notebook (check(1, seed=5) would grade that)
    assert f"make check PUZZLE=1 FILE={submission} ARGS='--seed 5 --picture'" in out
    assert f"open build/pictures/{PUZZLE.stem}.png" in out
    assert f"run make check PUZZLE=1 FILE={submission} ARGS='--seed 5')" in out
    assert "check(1, seed=5)" not in out


@pytest.mark.slow
def test_picture_without_a_path_writes_under_build(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(progress.ENV_FILE, str(tmp_path / "progress.json"))
    monkeypatch.setattr(cli, "ROOT", tmp_path)  # the course folder, whose build/ the picture goes to
    submission = tmp_path / "my_answer.py"
    submission.write_text(TAIL_BUG_SOURCE, encoding="utf-8")
    assert cli.main(["1", "--file", str(submission), "--timeout", "60", "--picture"]) == 1
    png = tmp_path / "build" / "pictures" / f"{PUZZLE.stem}.png"
    assert f"A picture of where the output is wrong: {png}" in capsys.readouterr().out and png.exists()


@pytest.mark.slow
def test_a_notebook_check_takes_a_seed(monkeypatch, capsys):
    seen = {}

    def fake_grade(puzzle, **kwargs):
        seen.update(kwargs)
        return V.Verdict(puzzle.number, V.FAILED, "wrong", mode="interpreter", seed=kwargs["seed"])

    monkeypatch.setattr(session, "grade_ahead", fake_grade)
    monkeypatch.setattr(notebook, "_ran_cells", lambda number: ["# Puzzle 1: your code\n"])
    monkeypatch.setattr(progress, "record", lambda verdict, source="": True)
    notebook.check(1, seed=1234)
    assert seen["seed"] == 1234


def test_the_written_runs_past_an_end_are_found():
    from checks.memory import runs

    mask = torch.zeros(20, dtype=torch.bool)
    mask[0:3] = mask[5] = True
    mask[10:12] = True
    assert runs(mask) == [0, 3, 5, 6, 10, 12]
    assert runs(mask, most=2) == [0, 3, 5, 6]
    assert runs(torch.zeros(4, dtype=torch.bool)) == []


def test_an_overhang_is_drawn_after_the_tensor_in_orange(tmp_path):
    layout = picture.layout_for({"kind": "overhang", "size": 3000, "spans": [0, 72], "blocks": {"BLOCK_SIZE": 1024}})
    flat = layout.category.reshape(-1)
    assert layout.category.shape == (3, 1024)  # one row per block: the overhang is the end of the last block
    assert (flat[:3000] == picture.RIGHT).all() and (flat[3000:3072] == picture.OUTSIDE).all()
    png = picture.save_png({"kind": "overhang", "size": 3000, "spans": [0, 72], "name": "out"}, tmp_path / "o.png")
    assert colour_share(png, np.array([0xFF, 0x7F, 0x0E]) / 255) > 0.001


@pytest.mark.slow
def test_a_write_past_the_end_is_pictured_in_the_terminal(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(progress.ENV_FILE, str(tmp_path / "progress.json"))
    submission = tmp_path / "no_mask.py"
    submission.write_text(source_of(PUZZLE, ROOT / "solutions" / "wrong" / "01_vector_add" / "no_mask.edit.yaml"))
    status = cli.main(["1", "--file", str(submission), "--picture", str(tmp_path / "where.png")])
    out = capsys.readouterr().out
    assert status == 1 and "wrote outside the output out" in out and "where.png" in out
    assert colour_share(tmp_path / "where.png", np.array([0xFF, 0x7F, 0x0E]) / 255) > 0.001


@pytest.mark.slow
def test_a_notebook_check_that_breaks_a_rule_on_memory_accesses_draws_the_access_map(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(progress.ENV_FILE, str(tmp_path / "progress.json"))
    puzzle = get_puzzle(4)
    wrong = source_of(puzzle, puzzle.wrong_dir / "row_major_order.edit.yaml")
    cell = answer_cell(wrong, 4)
    monkeypatch.setattr(notebook, "_ran_cells", lambda number: [cell])
    monkeypatch.setattr(notebook, "picture_folder", lambda p: tmp_path / ".check_pictures")
    notebook.check(4, timeout=120)
    out = capsys.readouterr().out
    png = tmp_path / ".check_pictures" / f"{puzzle.stem}_map.png"
    assert "grouped_order" in out or "grouped order" in out
    assert f"The access map is saved as {png}." in out and png.stat().st_size > 10_000
    assert "draw the access map of case" in out  # the advice names the case the map shows


def test_never_written_and_nan_or_inf_are_told_apart():
    """A store that misses and arithmetic that blows up are two bugs: two colours, two legend entries."""
    bad = torch.zeros(8, 40, dtype=torch.bool)
    bad[:, 32:] = True  # the last columns: 4 never written, 4 written as NaN or inf
    unwritten = torch.zeros_like(bad)
    unwritten[:, 32:36] = True
    error = torch.zeros(8, 40, dtype=torch.float64)
    error[:, 32:36] = float("nan")
    error[:, 36:38] = float("nan")  # yours NaN
    error[:, 38:] = float("inf")  # yours inf
    data = {"error": error, "bad": bad, "unwritten": unwritten, "dims": ("rows", "columns"), "blocks": {}}
    layout = picture.layout_for(data)
    assert (layout.category[:, 32:36] == picture.UNWRITTEN).all()
    assert (layout.category[:, 36:] == picture.NONFINITE).all()
    labels = [h.get_label() for h in picture._legend(data, layout, {c: int((layout.category == c).sum()) for c in
                                                                       picture.COLOURS})]  # fmt: skip
    assert "never written (32)" in labels and "written as NaN or inf (32)" in labels
    assert not any("never written, NaN" in label for label in labels)


def test_a_wrong_normaliser_is_drawn_with_its_ratio(tmp_path):
    torch.manual_seed(0)
    x = torch.rand(37, 45, dtype=torch.float64)
    expected = x / x.sum(dim=1, keepdim=True)
    yours = x / (x.sum(dim=1, keepdim=True) + 19.0)
    from checks.engine.judging.rules.compare import compare

    mismatch = compare("out", yours, expected, 1e-9, 1e-4, ("rows", "columns"))
    assert mismatch is not None and mismatch.ratio is not None
    data = {"error": mismatch.error.float(), "bad": mismatch.bad, "unwritten": mismatch.unwritten,
            "ratio": mismatch.ratio.float(), "dims": ("rows", "columns"), "blocks": {}}  # fmt: skip
    fig = picture.figure(data)
    assert len([a for a in fig.axes if a.get_label() != "<colorbar>"]) >= 2
    assert any("yours / expected" in a.get_title(loc="left") for a in fig.axes)
    assert picture.save_png(data, tmp_path / "ratio.png").stat().st_size > 10_000
