"""The GitHub Actions template for a learner's fork: valid YAML that names only things the course has."""

from __future__ import annotations

import glob
import importlib.util
import re
import shutil
from pathlib import Path

import yaml

from checks.instructor import classroom
from checks.registry import ROOT, load_puzzles

TEMPLATE = ROOT / "docs" / "check-puzzles.yml"


def workflow() -> dict:
    return yaml.safe_load(TEMPLATE.read_text(encoding="utf-8"))


def runs() -> str:
    return "\n".join(step.get("run", "") for step in workflow()["jobs"]["check"]["steps"])


def test_it_runs_on_push():
    data = workflow()
    triggers = data.get("on", data.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "push" in triggers


def test_it_installs_the_cpu_requirements():
    text = runs()
    torch = next(line for line in (ROOT / "requirements.txt").read_text().splitlines() if line.startswith("torch"))
    assert f"pip install {torch} --index-url https://download.pytorch.org/whl/cpu" in text
    assert "pip install -r requirements.txt" in text and (ROOT / "requirements.txt").exists()


def test_the_modules_targets_and_notebooks_it_names_exist():
    text = runs()
    for module in re.findall(r"python -m ([\w.]+)", text):
        if module != "pip":
            assert importlib.util.find_spec(module) is not None, module
    targets = set(re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE))
    for target in re.findall(r"\bmake ([a-z-]+)", text):
        assert target in targets, target
    assert "python -m checks.instructor.classroom build/submissions --out build/grades" in text


def test_the_copied_notebooks_are_each_graded_as_their_puzzle(tmp_path):
    learner = tmp_path / "octocat"
    learner.mkdir()
    for path in glob.glob(str(ROOT / "notebooks" / "[0-9][0-9]*_*.ipynb")):  # the template's cp, then rm 00_*
        if not Path(path).name.startswith("00_"):
            shutil.copy(path, learner)
    found, warnings = classroom.find_submissions(tmp_path)
    assert warnings == []
    assert sorted(s.puzzle.number for s in found) == sorted(p.number for p in load_puzzles() if p.notebook.exists())


def test_the_junit_report_is_kept_as_an_artifact():
    steps = workflow()["jobs"]["check"]["steps"]
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["with"]["path"].rstrip("/") == "build/grades" and upload.get("if") == "always()"


def test_the_summary_step_is_python_that_reads_the_class_reports_columns(tmp_path):
    """The step that lists the verdicts on the run's page: its here-document compiles and finds its columns."""
    step = next(s for s in workflow()["jobs"]["check"]["steps"] if "GITHUB_STEP_SUMMARY" in s.get("run", ""))
    script = step["run"].split("<<'PY'", 1)[1].split("\n", 1)[1].rsplit("\nPY", 1)[0]
    compile(script, "summary step", "exec")
    root = tmp_path / "submissions"
    (root / "octocat").mkdir(parents=True)
    notebook = root / "octocat" / "01_vector_add.ipynb"
    notebook.write_text("{}", encoding="utf-8")
    found, _ = classroom.find_submissions(root)
    result = classroom.Result(found[0], "failed", "a summary | with a bar", 1.0)
    classroom.write_csv([result], tmp_path / "grades.csv", root)
    columns = set(re.findall(r"row\['(\w+)'\]", script))
    header = (tmp_path / "grades.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    assert columns and columns <= set(header), (columns, header)
