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
