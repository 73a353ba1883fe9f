"""The GitHub Actions template that grades a class on self-hosted GPU runners, a job per shard, then merges.

No runner can run it here: it is checked against GitHub's workflow schema (the copy vendored in the
check-jsonschema package, offline), its structure is asserted, and its shell commands are run with the
GitHub expressions filled in, through the real classroom command with a stand-in grader.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from checks.instructor import classroom
from checks.registry import ROOT
from tests.small_class import make_class, run, stand_in_grade_one

TEMPLATE = ROOT / "docs" / "grade-class.yml"


def workflow() -> dict:
    return yaml.safe_load(TEMPLATE.read_text(encoding="utf-8"))


def schema_check(path: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("check_jsonschema", reason="check-jsonschema comes with requirements-dev.txt")
    command = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(path)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_it_is_a_valid_github_workflow_and_a_broken_one_is_not(tmp_path):
    done = schema_check(TEMPLATE)
    assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(TEMPLATE.read_text(encoding="utf-8").replace("    runs-on:", "    run-on:", 1), encoding="utf-8")
    assert schema_check(broken).returncode != 0


def step_named(job: dict, words: str) -> dict:
    return next(s for s in job["steps"] if words in s.get("name", "") or words in str(s.get("uses", "")))


def test_each_shard_is_a_job_on_a_self_hosted_gpu_runner_that_keeps_its_partial_reports():
    jobs = workflow()["jobs"]
    grade = jobs["grade"]
    assert "self-hosted" in grade["runs-on"] and grade["needs"] == "plan"
    assert grade["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.plan.outputs.shards) }}"
    assert grade["strategy"]["fail-fast"] is False  # one shard failing does not stop the others
    upload = step_named(grade, "actions/upload-artifact")
    assert upload["if"] == "always()" and upload["with"]["name"] == "part-${{ matrix.shard }}"
    assert "--shard ${{ matrix.shard }}/${{ needs.plan.outputs.count }}" in step_named(grade, "Grade shard")["run"]


def test_a_final_job_merges_the_parts_into_one_grades_artifact():
    merge = workflow()["jobs"]["merge"]
    assert merge["needs"] == ["plan", "grade"] and merge["if"] == "always()"  # it runs when a shard failed too
    download = step_named(merge, "actions/download-artifact")
    assert download["with"] == {"pattern": "part-*", "path": "build/parts"}
    upload = step_named(merge, "actions/upload-artifact")
    assert upload["with"]["name"] == "grades" and upload["with"]["path"].rstrip("/") == "build/grades"


def filled(script: str, values: dict[str, str]) -> str:
    """A step's script with its GitHub expressions replaced by values."""
    return re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", lambda m: values[m.group(1)], script)


def make_grade_args(script: str) -> list[str]:
    """`make grade DIR="$DIR" ARGS="..."` in a script (line continuations joined) as classroom's arguments."""
    line = script.replace("\\\n", " ")
    args = re.search(r'make grade DIR="\$DIR"\s+ARGS="([^"]*)"', line).group(1)
    return shlex.split(args)


def test_its_commands_grade_the_shards_and_merge_them_as_make_grade_would(tmp_path, monkeypatch):
    monkeypatch.setattr(classroom, "grade_one", stand_in_grade_one)
    root = tmp_path / "submissions"
    make_class(root, range(6), puzzles=("1", "9"))
    jobs = workflow()["jobs"]
    plan = jobs["plan"]["steps"][0]["run"]
    github_output = tmp_path / "output"
    env = {"SHARDS": "3", "GITHUB_OUTPUT": str(github_output), "PATH": "/usr/bin:/bin"}
    subprocess.run(["bash", "-c", plan], env=env, check=True)
    outputs = dict(line.split("=", 1) for line in github_output.read_text().splitlines())
    assert outputs == {"count": "3", "shards": "[1, 2, 3]"}
    monkeypatch.chdir(tmp_path)
    for shard in ("1", "2", "3"):
        script = filled(
            step_named(jobs["grade"], "Grade shard")["run"], {"matrix.shard": shard} | {"needs.plan.outputs.count": "3"}
        )
        code, _ = run([str(root), *make_grade_args(script)])
        assert code == 0 and (tmp_path / "build" / "parts" / f"part-{shard}" / "part.json").exists()
    merge = filled(step_named(jobs["merge"], "Merge")["run"], {"needs.plan.outputs.count": "3"})
    parts = " ".join(f"build/parts/part-{i}" for i in range(1, 4))
    script = merge.split("done\n", 1)[1].replace("$parts", parts)
    code, _ = run([str(root), *make_grade_args(script)])
    assert code == 0
    code, _ = run([str(root), "--out", str(tmp_path / "whole")])
    for report in ("grades.csv", "grades.xml"):
        assert (tmp_path / "build" / "grades" / report).read_bytes() == (tmp_path / "whole" / report).read_bytes()
    assert classroom.find_submissions(root)[0]  # the class is still there, untouched
