"""`make grade`: a folder of good, wrong, crashing, endless and cheating submissions, graded to CSV and JUnit."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import xml.etree.ElementTree as ET

import pytest

from checks import verdict as V
from checks.authoring.build import build_notebook
from checks.authoring.wrong import source_of
from checks.instructor import classroom
from checks.registry import ROOT, get_puzzle
from tests.helpers import submission_text
from tests.small_class import small_class

WRONG = ROOT / "solutions" / "wrong" / "01_vector_add"
KEY = ROOT / "solutions" / "01_vector_add.py"
TAMPERING = ROOT / "tests" / "submissions" / "tampering"

pytestmark = pytest.mark.slow  # every test here grades in grading processes
# the tests that share the module's `graded` fixture run on one worker (`make test` passes `--dist loadgroup`), so
# that it is built once rather than once per worker
ONE_WORKER = pytest.mark.xdist_group("classroom_graded")

EXITS = """
import os

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass


def vector_add(x, y):
    os._exit(3)
"""

SEGFAULTS = """
import faulthandler


def vector_add(x, y):
    return faulthandler._sigsegv()  # the process dies with SIGSEGV, as a bad native call would
"""

# learner -> (path under DIR, source, expected status)
CLASS = {
    "alice": ("alice/01_vector_add.py", KEY.read_text(encoding="utf-8"), V.PASSED),
    "bob": ("bob/1-add.py", source_of(get_puzzle(1), WRONG / "grid_rounds_down.edit.yaml"), V.FAILED),
    "carol": ("carol_01.py", EXITS, V.CRASHED),
    "dave": ("dave/01.py", (WRONG / "endless_loop.py").read_text(encoding="utf-8"), V.TIMEOUT),
    "erin": ("erin/01_cheat.py", (WRONG / "decoy_kernel.py").read_text(encoding="utf-8"), V.FAILED),
    "frank": ("frank-1.py", SEGFAULTS, V.CRASHED),
    "ivan": ("ivan/01_vector_add.py", submission_text(TAMPERING, "appends_verdict"), V.TAMPERED),
    "judy": ("judy/01.py", submission_text(TAMPERING, "forges_case_reports"), V.TAMPERED),
}
# each check's time limit: dave's endless loop holds the class this long, the others take a few seconds each
LIMIT_S = 15
UNCLEAR = ["notes.py", "gina/readme.py", "gina/99_later.py", "henry/week1/01_add.py"]
IGNORED = ["syllabus.txt", "alice/.ipynb_checkpoints/01_vector_add-checkpoint.ipynb"]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("submissions")
    for path, source, _ in CLASS.values():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(source, encoding="utf-8")
    puzzle = get_puzzle(1)  # a notebook submission, with the answer in its graded cell
    nb = build_notebook(
        puzzle,
        puzzle.notebook_source.read_text(encoding="utf-8"),
        puzzle.solution.read_text(encoding="utf-8"),
        filled=True,
    )
    (root / "ivy").mkdir()
    (root / "ivy" / "01_vector_add.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    for path in UNCLEAR + IGNORED:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("x = 1\n", encoding="utf-8")
    out = tmp_path_factory.mktemp("reports")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = classroom.main([str(root), "--out", str(out), "--timeout", str(LIMIT_S), "--jobs", "2"])
    return code, out, printed.getvalue()


def csv_rows(out) -> dict[str, dict[str, str]]:
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        return {row["learner"]: row for row in csv.DictReader(f)}


@ONE_WORKER
def test_the_run_finishes_and_writes_both_reports(graded):
    code, out, _ = graded
    assert code == 0
    assert (out / "grades.csv").exists() and (out / "grades.xml").exists()


@ONE_WORKER
def test_every_submission_gets_its_own_verdict_in_the_csv(graded):
    _, out, _ = graded
    rows = csv_rows(out)
    expected = {name: status for name, (_, _, status) in CLASS.items()} | {"ivy": V.PASSED}
    assert {name: row["status"] for name, row in rows.items()} == expected
    assert all(row["puzzle"] == "1" and row["summary"] and float(row["seconds"]) >= 0 for row in rows.values())
    assert "never written" in rows["bob"]["summary"]
    assert "computed on the host" in rows["erin"]["summary"]
    assert "incomplete or forged" in rows["ivan"]["summary"] and "incomplete or forged" in rows["judy"]["summary"]
    assert "time limit" in rows["dave"]["summary"] and float(rows["dave"]["seconds"]) < 90
    # the command it suggests names dave's own file, not the private copy it was graded from
    assert "FILE=" in rows["dave"]["summary"] and "dave/01.py" in rows["dave"]["summary"]
    assert "checks-submission-" not in rows["dave"]["summary"]
    assert "SIGSEGV" in rows["frank"]["summary"]


@ONE_WORKER
def test_the_junit_report_has_failures_for_wrong_answers_and_errors_for_runs_without_one(graded):
    _, out, _ = graded
    suites = ET.parse(out / "grades.xml").getroot()
    assert suites.tag == "testsuites"
    suite = suites.find("testsuite")
    assert suite is not None and "vector_add" in suite.get("name")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == set(CLASS) | {"ivy"}
    errors = {name for name, (_, _, status) in CLASS.items() if status in (V.CRASHED, V.TIMEOUT, V.TAMPERED)}
    for name, case in cases.items():
        element = case.find("error" if name in errors else "failure")
        passed = name in ("alice", "ivy")
        assert (element is None) == passed, name
        assert case.find("failure" if name in errors else "error") is None, name
        if not passed:
            assert element.get("message") == csv_rows(out)[name]["summary"]
            assert element.get("type") == CLASS[name][2]
    assert suite.get("tests") == str(len(cases)) and suite.get("errors") == str(len(errors))
    assert suite.get("failures") == str(len(cases) - 2 - len(errors))
    assert suites.get("errors") == str(len(errors))


@ONE_WORKER
def test_the_terminal_shows_each_failure_and_advice_for_an_instructor(graded):
    _, out, printed = graded
    rows = csv_rows(out)
    for name in ("bob", "carol", "erin", "frank"):
        if rows[name]["status"] != V.TIMEOUT:  # a timeout's line is the instructor's version, checked below
            assert rows[name]["summary"] in printed, name
    assert f"ran past the {LIMIT_S} s time limit" in printed
    assert "make grade DIR=" in printed and 'ARGS="--timeout 300"' in printed
    assert "make check PUZZLE" not in printed  # the learner's advice stays in the learner's report
    assert "2 submission(s) were not graded because their grading process was tampered with" in printed
    assert "file(s) skipped because their names do not fit" in printed and classroom.NAMING in printed
    assert "doubled" not in printed.split("submissions passed.")[1]  # nobody handed in twice


def test_unclear_names_are_warned_about_and_skipped(tmp_path, capsys):
    for path in UNCLEAR + IGNORED + ["zoe_01.py"]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x = 1\n", encoding="utf-8")
    found, warnings = classroom.find_submissions(tmp_path)
    assert [(s.learner, s.puzzle.number) for s in found] == [("zoe", "1")]
    assert len(warnings) == len(UNCLEAR)
    for path in UNCLEAR:
        assert any(w.text.startswith(path) and w.kind == "name" for w in warnings), path


def test_lettered_steps_are_named_like_puzzles(tmp_path):
    names = [
        "amy/10a_softmax_dx.py",
        "amy/10_flash_bwd.py",
        "amy/10B-dkdv.ipynb",
        "amy/09.py",
        "bob_10b.py",
        "bob-10.py",
        "carl/1a_typo.py",
    ]
    for path in names:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x = 1\n", encoding="utf-8")
    found, warnings = classroom.find_submissions(tmp_path)
    assert [(s.learner, s.puzzle.number, s.path.name) for s in found] == [
        ("amy", "9", "09.py"),
        ("amy", "10a", "10a_softmax_dx.py"),
        ("amy", "10b", "10B-dkdv.ipynb"),
        ("bob", "10b", "bob_10b.py"),
        ("amy", "10", "10_flash_bwd.py"),
        ("bob", "10", "bob-10.py"),
    ]
    assert [w.text for w in warnings] == ["carl/1a_typo.py: there is no puzzle 1a; skipped."]


def test_lettered_steps_get_their_own_junit_suite_in_course_order(tmp_path):
    results = [
        classroom.Result(classroom.Submission("amy", get_puzzle(n), tmp_path / f"amy_{n}.py"), V.PASSED, "", 0.1)
        for n in ("10", "10a", "2")
    ]
    classroom.write_junit(results, tmp_path / "g.xml", tmp_path)
    suites = ET.parse(tmp_path / "g.xml").getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == [
        "puzzle 02 matrix_add",
        "puzzle 10a softmax_backward",
        "puzzle 10 flash_attention_v2_bwd",
    ]
    assert suites[1].find("testcase").get("classname") == "puzzle10a_softmax_backward"


def test_doubled_submissions_are_both_graded_with_a_warning(tmp_path):
    (tmp_path / "amy").mkdir()
    (tmp_path / "amy" / "01_first.py").write_text("", encoding="utf-8")
    (tmp_path / "amy_1.py").write_text("", encoding="utf-8")
    found, warnings = classroom.find_submissions(tmp_path)
    assert len(found) == 2 and len(warnings) == 1 and "both are graded" in warnings[0].text
    assert warnings[0].kind == "doubled"
    lines = classroom.class_summary([], warnings, tmp_path, None)
    assert not any(classroom.NAMING in line for line in lines)  # nothing to rename
    assert any("doubled" in line and "own row" in line for line in lines)


def test_usage_errors_exit_2(tmp_path, capsys):
    assert classroom.main([str(tmp_path / "missing")]) == 2
    assert classroom.main([str(tmp_path)]) == 2  # an empty folder: nothing to grade
    assert "No submissions found" in capsys.readouterr().err


def test_reports_can_be_written_without_grading(tmp_path):
    puzzle = get_puzzle(1)
    sub = classroom.Submission("amy", puzzle, tmp_path / "amy_01.py")
    results = [classroom.Result(sub, V.FAILED, 'said "hi" & <left>', 0.5, ["line 1"])]
    classroom.write_csv(results, tmp_path / "g.csv", tmp_path)
    classroom.write_junit(results, tmp_path / "g.xml", tmp_path)
    failure = ET.parse(tmp_path / "g.xml").getroot().find("testsuite/testcase/failure")
    assert failure.get("message") == 'said "hi" & <left>' and failure.text == "line 1"
    with open(tmp_path / "g.csv", newline="", encoding="utf-8") as f:
        assert next(csv.DictReader(f))["summary"] == 'said "hi" & <left>'


def test_a_tampered_grading_is_an_error_with_its_reason_and_is_counted(tmp_path):
    puzzle = get_puzzle(1)
    reason = "The grading process's report was cut short before its last case; this submission was not graded."
    results = [
        classroom.Result(classroom.Submission("amy", puzzle, tmp_path / "amy_01.py"), V.TAMPERED, reason, 1.0),
        classroom.Result(classroom.Submission("ben", puzzle, tmp_path / "ben_01.py"), V.TAMPERED, reason, 1.0),
        classroom.Result(classroom.Submission("cy", puzzle, tmp_path / "cy_01.py"), V.PASSED, "ok", 1.0),
    ]
    classroom.write_csv(results, tmp_path / "g.csv", tmp_path)
    classroom.write_junit(results, tmp_path / "g.xml", tmp_path)
    with open(tmp_path / "g.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["status"], r["summary"]) for r in rows[:2]] == [(V.TAMPERED, reason)] * 2
    suite = ET.parse(tmp_path / "g.xml").getroot().find("testsuite")
    errors = suite.findall("testcase/error")
    assert len(errors) == 2 and all(e.get("type") == V.TAMPERED and e.get("message") == reason for e in errors)
    assert suite.get("errors") == "2" and suite.get("failures") == "0"
    lines = classroom.class_summary(results, [], tmp_path, None)
    assert lines[0] == "1 of 3 submissions passed."
    assert any(
        line.startswith("2 submission(s) were not graded because their grading process was tampered") for line in lines
    )


@pytest.mark.slow
def test_a_submission_cannot_write_into_another_learners_files(tmp_path):
    """Each submission is read before any runs and graded from a private folder: one that overwrites every file
    it can reach from its own path changes nothing in the learners' folder, nor another learner's verdict."""
    root = tmp_path / "class"
    attacker, victim = "mallory/01_vector_add.py", "alice/05_softmax.py"  # puzzle 1 is graded before puzzle 5
    for name in (attacker, victim):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(small_class()[name][0], encoding="utf-8")
    victim_text = (root / victim).read_text(encoding="utf-8")
    out = tmp_path / "reports"
    code = classroom.main([str(root), "--out", str(out), "--timeout", "60"])
    assert code == 0
    assert (root / victim).read_text(encoding="utf-8") == victim_text
    rows = csv_rows(out)
    assert rows["alice"]["status"] == V.PASSED and rows["mallory"]["status"] == V.FAILED
