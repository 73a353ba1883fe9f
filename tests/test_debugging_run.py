"""A debugging run (`--seed S`): the same seed gives the same inputs, data values included, and the same report,
which says it is a debugging run and is not recorded in `make progress`; and the case numbers of a report are the
ones `make map --case` and `show(case=...)` take. The tests marked slow grade a known-wrong kernel."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from checks import cli
from checks import verdict as V
from checks.authoring.wrong import source_of
from checks.engine.inputs import RECORDING_DRAWS, SEEDS, debugging_data_seed
from checks.engine.judging import wording
from checks.learner import maps, notebook, progress
from checks.registry import get_puzzle

SECONDS = re.compile(r"\(\d+\.\d+ s\)")  # a case line's time, the one part of a report that may differ
MAP = re.compile(r"make map PUZZLE=(?P<puzzle>\S+)(?: FILE=\S+)?(?: ARGS='(?P<args>[^']*)')?")


def test_the_debugging_data_seed_is_fixed_by_the_seed_and_apart_from_the_recording_draws():
    assert debugging_data_seed(7) == debugging_data_seed(7) != debugging_data_seed(8)
    for seed in (1, 5, 2**31 - 1, SEEDS - 3):
        replayed = {(debugging_data_seed(seed) + i) % SEEDS for i in range(64)}
        recorded = {(seed + i + d) % SEEDS for i in range(64) for d in RECORDING_DRAWS}
        assert not replayed & recorded


def test_a_debugging_run_says_so_and_is_not_recorded():
    case = [V.CaseResult(3, "n=1000", False, problem="wrong values")]
    run = V.Verdict(1, V.FAILED, "1 of 4 cases failed", mode="interpreter", seed=7, debugging=True, cases=case)
    report = V.format_verdict(run)
    assert "debugging run (seed 7)" in report and "not recorded in `make progress`" in report
    assert "make check PUZZLE=1 ARGS='--seed 7'" in report
    assert not progress.record(run)
    run.mode = "gpu"  # a GPU's timings differ from run to run, and the report says so
    assert "this same report again (its timings aside)" in V.format_verdict(run)
    graded = V.Verdict(1, V.FAILED, "1 of 4 cases failed", mode="interpreter", seed=7, cases=case)
    assert "debugging run" not in V.format_verdict(graded).split("(shapes drawn")[0]
    assert progress.record(graded)


@pytest.mark.parametrize("index", [0, 3])
def test_a_reports_case_number_round_trips_into_make_map_and_show(index, monkeypatch):
    """'case K' in a report is `--case K` in the `make map` command it suggests and `show(N, case=K)`: both draw the
    case the report named, with the check's seed."""
    puzzle = get_puzzle(9)
    failing = V.CaseResult(index, "a case", False, problem="a rule on memory accesses")
    advice = wording.map_advice(puzzle.number, index, seed=41)
    report = V.format_verdict(V.Verdict(9, V.FAILED, "", seed=41, cases=[failing], details=[advice]))
    named = int(re.search(r"draw the access map of case (\d+)", report).group(1))
    assert f"case {named}:" in V.case_line(failing)  # the report's case line numbers it the same way

    drawn = []
    monkeypatch.setattr(maps, "make_map", lambda p, f, **kw: drawn.append(kw) or (Path("map.png"), []))
    command = MAP.search(report)
    assert command["puzzle"] == "9"
    assert maps.main([command["puzzle"], *(command["args"] or "").split()]) == 0
    assert drawn[-1]["case"] == index and drawn[-1]["seed"] == 41

    call = re.search(r"show\(9((?:, \w+=\d+)*)\)", report)
    given = dict(part.split("=") for part in call.group(1).split(", ")[1:])
    monkeypatch.setattr(notebook, "_display", lambda *args: None)
    notebook.show(9, **{k: int(v) for k, v in given.items()})
    assert drawn[-1]["case"] == index and drawn[-1]["seed"] == 41


def test_make_map_refuses_a_case_number_the_puzzle_has_not(capsys):
    count = len(get_puzzle(1).cases.cpu)
    assert maps.main(["1", "--case", "0"]) == 2
    assert maps.main(["1", "--case", str(count + 1)]) == 2
    assert f"pick 1 to {count}." in capsys.readouterr().err


@pytest.mark.slow
def test_the_same_seed_twice_gives_the_same_report(tmp_path, monkeypatch, capsys):
    """Softmax without the max subtracted overflows on some data: which cases fail depends on the data values, and
    a debugging run draws them from the seed, so the second run fails the same cases in the same way."""
    record = tmp_path / "progress.json"
    monkeypatch.setenv(progress.ENV_FILE, str(record))
    puzzle = get_puzzle(5)
    submission = tmp_path / "p5.py"
    submission.write_text(source_of(puzzle, puzzle.wrong_dir / "no_max_subtraction.edit.yaml"), encoding="utf-8")
    reports = []
    for _ in range(2):
        assert cli.main(["5", "--file", str(submission), "--seed", "11"]) == 1
        reports.append(SECONDS.sub("(s)", capsys.readouterr().out))
    assert reports[0] == reports[1]
    assert "This was a debugging run (seed 11)" in reports[0] and "FAILED" in reports[0]
    assert "Recorded in `make progress`" not in reports[0]
    assert not record.exists() or "05" not in record.read_text()


def test_every_command_a_debugging_run_suggests_repeats_its_seed():
    longer = V.make_command("check", 5, "p5.py", "--timeout 300")
    mapped = wording.map_advice(5, 2, "p5.py", seed=11)
    run = V.Verdict(5, V.TIMEOUT, f"give it longer ({longer}).", seed=11, debugging=True, details=[mapped])
    V.repeat_seed(run)
    V.repeat_earlier(run, "my_4.py")
    assert "make check PUZZLE=5 FILE=p5.py ARGS='--earlier my_4.py --timeout 300 --seed 11')." in run.summary
    assert run.details[0].count("--seed 11") == 1 and "--earlier my_4.py" in run.details[0]
    graded = V.Verdict(5, V.TIMEOUT, f"give it longer ({longer}).", seed=11)
    V.repeat_seed(graded)  # a graded check's seed was drawn for it: repeating it would make a debugging run
    assert "--seed" not in graded.summary
