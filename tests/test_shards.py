"""`classroom --shard I/N` and `--merge`: disjoint, stable, balanced slices, merged into `make grade`'s reports.

The grading itself is replaced by a stand-in that gives each learner a fixed verdict, so these tests run in
milliseconds; the Slurm test and the classroom tests grade for real.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from checks.instructor import classroom, shards
from tests.small_class import make_class, run, stand_in_grade_one

ALL = ("1", "5", "8", "9", "10")  # 8, 9 and 10 are attention puzzles: they weigh more


def loads(submissions, plan, count) -> list[float]:
    totals = [0.0] * count
    for s, k in zip(submissions, plan, strict=True):
        totals[k - 1] += shards.expected_seconds(s)
    return totals


def test_the_slices_are_disjoint_cover_the_class_and_are_balanced_by_expected_time(tmp_path):
    make_class(tmp_path, range(40), puzzles=ALL)
    submissions, _ = classroom.find_submissions(tmp_path)
    heaviest = max(shards.expected_seconds(s) for s in submissions)
    assert heaviest == shards.ATTENTION_SECONDS > shards.OTHER_SECONDS
    for count in (1, 2, 3, 8, 13):
        plan = shards.assign(submissions, tmp_path, count)
        assert set(plan) == set(range(1, count + 1))  # every shard has work, each submission exactly one shard
        mean = sum(loads(submissions, plan, count)) / count
        for load in loads(submissions, plan, count):
            assert abs(load - mean) <= heaviest, (count, load, mean)


def test_attention_puzzles_count_for_more_than_a_submission_each(tmp_path):
    make_class(tmp_path, range(60), puzzles=("1", "9"))
    submissions, _ = classroom.find_submissions(tmp_path)
    plan = shards.assign(submissions, tmp_path, 4)
    counts = [plan.count(k) for k in range(1, 5)]
    pairs = list(zip(submissions, plan, strict=True))
    attention = [sum(1 for s, k in pairs if k == shard and s.puzzle.number == "9") for shard in (1, 2, 3, 4)]
    assert sum(counts) == 120 and min(attention) > 0
    assert max(loads(submissions, plan, 4)) - min(loads(submissions, plan, 4)) <= 2 * shards.ATTENTION_SECONDS


def test_the_slices_are_the_same_every_time_and_a_late_file_moves_only_a_few(tmp_path):
    make_class(tmp_path, range(100), puzzles=ALL)
    submissions, _ = classroom.find_submissions(tmp_path)
    count = 8
    before = dict(zip((s.path for s in submissions), shards.assign(submissions, tmp_path, count), strict=True))
    again, _ = classroom.find_submissions(tmp_path)
    assert dict(zip((s.path for s in again), shards.assign(again, tmp_path, count), strict=True)) == before
    late = tmp_path / "learner999" / "9_late.py"  # an attention puzzle: the heaviest kind of file to add
    late.parent.mkdir()
    late.write_text("x = 1\n", encoding="utf-8")
    grown, _ = classroom.find_submissions(tmp_path)
    after = dict(zip((s.path for s in grown), shards.assign(grown, tmp_path, count), strict=True))
    moved = [path for path in before if after[path] != before[path]]
    # each of the N-1 cuts on the ring shifts by at most the added weight: a few light files each
    bound = (count - 1) * (math.ceil(shards.ATTENTION_SECONDS / shards.OTHER_SECONDS) + 1)
    assert len(moved) <= bound < len(before) // 10, (len(moved), bound)
    assert late in after


def test_a_shard_is_written_as_I_of_N():
    assert shards.parse_shard("2/8") == (2, 8) and shards.parse_shard(" 1 / 1 ") == (1, 1)
    for bad in ("0/2", "3/2", "2", "a/b", "-1/2"):
        with pytest.raises(shards.ShardError):
            shards.parse_shard(bad)


@pytest.fixture
def stand_in_grader(monkeypatch):
    monkeypatch.setattr(classroom, "grade_one", stand_in_grade_one)


def graded_in_shards(root: Path, out: Path, count: int) -> list[Path]:
    parts = []
    for index in range(1, count + 1):
        part = out / f"shard-{index}-of-{count}"
        code, printed = run([str(root), "--shard", f"{index}/{count}", "--out", str(part)])
        assert code == 0 and f"Grading shard {index}/{count}" in printed
        assert (part / "grades.csv").exists() and (part / shards.PART).exists()
        parts.append(part)
    return parts


def test_merged_parts_are_byte_for_byte_the_reports_of_one_run(tmp_path, stand_in_grader):
    root = tmp_path / "class"
    make_class(root, range(12), puzzles=("1", "5", "9"))
    (root / "notes.txt.py").write_text("", encoding="utf-8")  # a name that does not fit: a warning
    code, whole = run([str(root), "--out", str(tmp_path / "whole")])
    assert code == 0
    parts = graded_in_shards(root, tmp_path / "parts", 3)
    rows = [len((p / "grades.csv").read_text().splitlines()) - 1 for p in parts]
    assert sum(rows) == 36 and min(rows) > 0  # the parts hold disjoint slices of the whole class
    code, merged = run([str(root), "--merge", *map(str, parts), "--out", str(tmp_path / "merged")])
    assert code == 0
    for report in ("grades.csv", "grades.xml"):
        assert (tmp_path / "merged" / report).read_bytes() == (tmp_path / "whole" / report).read_bytes(), report
    summary = whole.split("\n\n")[-1]
    assert summary.splitlines()[0] == "9 of 36 submissions passed."
    assert summary.replace("whole", "merged") in merged  # the same closing lines
    assert "warning: notes.txt.py" in merged


def test_a_shard_that_never_finished_is_reported_with_its_submissions_not_graded(tmp_path, stand_in_grader):
    root = tmp_path / "class"
    make_class(root, range(10), puzzles=("1", "9"))
    parts = graded_in_shards(root, tmp_path / "parts", 3)
    (parts[1] / shards.PART).unlink()  # shard 2 was cut short: no part.json
    code, printed = run([str(root), "--merge", *map(str, parts), "--out", str(tmp_path / "merged")])
    assert code == 0
    assert "Shard 2/3 never finished" in printed
    assert "were not graded because their shard never finished" in printed
    plan = shards.assign(classroom.find_submissions(root)[0], root, 3)
    suite_cases = ET.parse(tmp_path / "merged" / "grades.xml").getroot().iter("testcase")
    lost = [c for c in suite_cases if c.find("error") is not None and c.find("error").get("type") == "not-graded"]
    assert len(lost) == plan.count(2) > 0
    assert all("--shard 2/3" in c.find("error").get("message") for c in lost)
    text = (tmp_path / "merged" / "grades.csv").read_text()
    assert text.count(",not-graded,") == plan.count(2) and len(text.splitlines()) == 21


def test_no_finished_shard_lists_the_whole_folder_as_not_graded(tmp_path):
    root = tmp_path / "class"
    make_class(root, range(3), puzzles=("1",))
    missing = [tmp_path / "parts" / f"shard-{i}-of-2" for i in (1, 2)]
    code, printed = run([str(root), "--merge", *map(str, missing), "--out", str(tmp_path / "merged")])
    assert code == 0 and "Shard 1/2 never finished" in printed and "Shard 2/2 never finished" in printed
    assert (tmp_path / "merged" / "grades.csv").read_text().count(",not-graded,") == 3


def test_parts_of_different_runs_are_refused(tmp_path, stand_in_grader, capsys):
    root = tmp_path / "class"
    make_class(root, range(4), puzzles=("1",))
    two = graded_in_shards(root, tmp_path / "two", 2)
    three = graded_in_shards(root, tmp_path / "three", 3)
    assert classroom.main([str(root), "--merge", str(two[0]), str(three[1]), "--out", str(tmp_path / "m")]) == 2
    assert "merge parts of one run only" in capsys.readouterr().err
    assert classroom.main([str(root), "--shard", "3/2"]) == 2
    assert classroom.main([str(root), "--shard", "1/2", "--merge", str(two[0])]) == 2
