"""The progress file: atomic, never fatal when damaged, and `make progress` shows every puzzle."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from checks import cli
from checks import verdict as V
from checks.learner import progress
from checks.registry import ROOT, load_puzzles


@pytest.fixture
def progress_file(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv(progress.ENV_FILE, str(path))
    return path


def verdict(status: str, puzzle: int = 1, ratio: float | None = None) -> V.Verdict:
    timings = {"ratio_vs_baseline": ratio} if ratio is not None else {}
    return V.Verdict(puzzle, status, f"a {status} run", mode="gpu", device="Test GPU", timings=timings)


def stored(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_verdict_is_recorded_atomically(progress_file):
    assert progress.record(verdict(V.FAILED))
    entry = stored(progress_file)["puzzles"]["1"]
    assert entry["status"] == V.FAILED and entry["mode"] == "gpu" and entry["time"]
    assert [p.name for p in progress_file.parent.iterdir()] == [progress_file.name]  # no temporary file left


DAMAGE = {"garbage": "{ not json", "list": "[1, 2, 3]", "wrong-shape": '{"puzzles": 7}', "empty": ""}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_file_starts_fresh_says_so_once_and_is_repaired(progress_file, capsys, damage):
    progress_file.write_text(damage, encoding="utf-8")
    assert progress.load()["puzzles"] == {}
    assert progress.load()["puzzles"] == {}
    err = capsys.readouterr().err
    assert err.count("starting a fresh one") == 1
    assert progress.record(verdict(V.PASSED))
    assert stored(progress_file)["puzzles"]["1"]["status"] == V.PASSED


def test_an_unwritable_place_is_not_fatal(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv(progress.ENV_FILE, str(blocker / "progress.json"))  # its folder is a file
    assert progress.record(verdict(V.FAILED)) is False
    assert "Could not save your progress" in capsys.readouterr().err


def test_best_gpu_ratio_is_kept_and_passing_is_remembered(progress_file):
    for status, ratio in [(V.PASSED, 0.8), (V.PASSED, 1.25), (V.FAILED, 0.9)]:
        progress.record(verdict(status, ratio=ratio))
    entry = stored(progress_file)["puzzles"]["1"]
    assert entry["best_ratio"] == pytest.approx(1.25)
    assert entry["last_ratio"] == pytest.approx(0.9)
    assert entry["status"] == V.FAILED and entry["first_passed"]


@pytest.mark.parametrize("status", [V.NOT_READY, V.ENVIRONMENT, V.INTERNAL])
def test_verdicts_about_the_machine_are_not_recorded(progress_file, status):
    assert progress.record(verdict(status)) is False
    assert not progress_file.exists()


def test_make_progress_lists_every_puzzle(progress_file, capsys):
    progress.record(verdict(V.PASSED, ratio=1.5))
    progress.record(verdict(V.TIMEOUT, puzzle=2))
    assert progress.main([]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    for p in load_puzzles():
        assert any(line.startswith(f"{p.number} ") and p.title in line for line in lines), p.title
    row1 = next(line for line in lines if line.startswith("1 "))
    assert "passed" in row1 and "1.50x" in row1
    assert "timeout" in next(line for line in lines if line.startswith("2 "))
    assert "puzzles passed" in out
    assert "ready" not in lines[0]  # no column that reads as the learner's own status


def test_a_verdict_from_another_file_says_so(progress_file, capsys):
    progress.record(verdict(V.PASSED), source="answer.py")
    progress.record(verdict(V.FAILED, puzzle=2))
    assert progress.main([]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "from answer.py" in next(line for line in lines if line.startswith("1 "))
    assert "from" not in next(line for line in lines if line.startswith("2 "))
    assert "not from the puzzle's notebook" in out


def test_make_progress_with_no_file_yet(progress_file, capsys):
    assert progress.main([]) == 0
    assert "No verdicts recorded yet" in capsys.readouterr().out


def test_the_cli_records_only_the_learners_own_work():
    def args(**kw) -> argparse.Namespace:
        return argparse.Namespace(**{"solution": False, "file": None, **kw})

    assert cli._is_learners(args())  # the notebook
    assert cli._is_learners(args(file=Path("/somewhere/answer.py")))
    assert not cli._is_learners(args(solution=True))
    assert not cli._is_learners(args(file=ROOT / "solutions" / "wrong" / "01_vector_add" / "no_mask.py"))


@pytest.mark.slow
def test_the_cli_says_when_it_records_a_file_that_is_not_the_notebook(progress_file, capsys):
    submission = progress_file.parent / "answer.py"
    submission.write_text((ROOT / "solutions" / "01_vector_add.py").read_text(encoding="utf-8"), encoding="utf-8")
    assert cli.main(["1", "--file", str(submission), "--timeout", "60"]) == 0
    out = capsys.readouterr().out
    assert "Recorded in `make progress` as puzzle 1's last verdict, from answer.py" in out
    assert stored(progress_file)["puzzles"]["1"]["source"] == "answer.py"


@pytest.mark.parametrize("name", ["notes.txt", "folder"])
def test_a_file_that_is_not_a_submission_is_a_usage_error_and_not_recorded(progress_file, capsys, name):
    target = progress_file.parent / name
    if name == "folder":
        target.mkdir()
    else:
        target.write_text("my notes\n", encoding="utf-8")
    assert cli.main(["1", "--file", str(target)]) == 2
    err = capsys.readouterr().err
    assert ".py" in err and ".ipynb" in err and err.strip().endswith(").")
    assert not progress_file.exists()


@pytest.mark.parametrize("jupyter", ["/home/me/course/notebooks/01_vector_add-Copy1.ipynb", "Untitled.ipynb"])
def test_a_check_in_a_copy_of_the_notebook_records_which_file(progress_file, monkeypatch, capsys, jupyter):
    from checks.learner import notebook, session

    monkeypatch.setenv("JPY_SESSION_NAME", jupyter)
    monkeypatch.setattr(notebook, "_ran_cells", lambda number: ["# Puzzle 1: your code\n"])
    monkeypatch.setattr(session, "grade_ahead", lambda puzzle, **kw: V.Verdict(1, V.FAILED, "wrong", mode="cpu"))
    notebook.check(1)
    name = Path(jupyter).name
    assert f"from {name} (not 01_vector_add.ipynb)" in capsys.readouterr().out
    assert json.loads(progress_file.read_text())["puzzles"]["1"]["source"] == name
    assert progress.main(["--file", str(progress_file)]) == 0
    assert f"failed, from {name}" in capsys.readouterr().out


def test_a_check_in_the_notebook_itself_records_no_file(progress_file, monkeypatch, capsys):
    from checks.learner import notebook, session

    monkeypatch.setenv("JPY_SESSION_NAME", str(ROOT / "notebooks" / "01_vector_add.ipynb"))
    monkeypatch.setattr(notebook, "_ran_cells", lambda number: ["# Puzzle 1: your code\n"])
    monkeypatch.setattr(session, "grade_ahead", lambda puzzle, **kw: V.Verdict(1, V.FAILED, "wrong", mode="cpu"))
    notebook.check(1)
    assert "Recorded in" not in capsys.readouterr().out
    assert json.loads(progress_file.read_text())["puzzles"]["1"]["source"] == ""


def test_an_interrupted_notebook_check_says_so_and_records_nothing(progress_file, monkeypatch, capsys):
    from checks.learner import notebook, session

    def interrupted(puzzle, **kw):
        raise KeyboardInterrupt  # Kernel > Interrupt while the grading process runs

    monkeypatch.setattr(notebook, "_ran_cells", lambda number: ["# Puzzle 1: your code\n"])
    monkeypatch.setattr(session, "grade_ahead", interrupted)
    notebook.check(1)
    assert capsys.readouterr().out.strip() == "Stopped: no verdict was given or recorded."
    assert not progress_file.exists()


def test_a_stub_shows_as_not_started(progress_file):
    from checks.engine.judging.rules import rulebook

    stub = V.Verdict(1, V.ERROR, "Your code is still the stub", mode="interpreter", rule=rulebook.outcome("stub"))
    assert progress.record(stub)
    row = next(line for line in progress.table(progress.load()) if line.startswith("1 "))
    assert "not started" in row and "error" not in row
    assert progress.record(verdict(V.ERROR))  # an error of the learner's own code stays an error
    row = next(line for line in progress.table(progress.load()) if line.startswith("1 "))
    assert "error" in row and "not started" not in row
