"""A Python without torch, triton or pyyaml is told which Python to use, and nothing is recorded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from checks.learner import preflight
from checks.registry import ROOT

# Run `python -m checks` with some packages made unimportable (sys.modules[name] = None).
WITHOUT = (
    "import runpy, sys\nfor name in sys.argv[1].split(','):\n    sys.modules[name] = None\n"
    "sys.argv = ['checks', *sys.argv[2:]]\nrunpy.run_module('checks', run_name='__main__', alter_sys=True)\n"
)


def run_without(modules: str, *args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, CHECKS_PROGRESS_FILE=str(tmp_path / "progress.json"))
    env.pop("PYTEST_CURRENT_TEST", None)
    return subprocess.run(
        [sys.executable, "-c", WITHOUT, modules, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_this_python_has_everything():
    assert preflight.missing() == []


def test_the_missing_packages_are_named():
    assert preflight.missing(lambda name: None if name in ("torch", "yaml") else object()) == ["torch", "pyyaml"]


@pytest.mark.parametrize("modules", ["torch", "triton", "yaml", "torch,triton,yaml"])
def test_a_python_without_the_packages_is_told_which_python_to_use(modules, tmp_path):
    proc = run_without(modules, "7", "--solution", tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "cannot grade" in proc.stderr and "make check PUZZLE=N" in proc.stderr
    for module in modules.split(","):
        assert dict(preflight.NEEDED)[module] in proc.stderr
    assert "exit()" not in proc.stderr + proc.stdout  # the learner's code is not blamed
    assert not (tmp_path / "progress.json").exists()


def test_the_advice_names_the_course_python_when_there_is_one(tmp_path):
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").write_text("", encoding="utf-8")
    text = preflight.advice(["torch"], ["7", "--solution"], root=tmp_path)
    assert "`.venv/bin/python -m checks 7 --solution`" in text and "source .venv/bin/activate" in text
    assert "sets up .venv" in preflight.advice(["torch"], ["7"], root=tmp_path / "elsewhere")


def test_the_system_python_without_torch_is_stopped_before_grading(tmp_path):
    base = Path(sys.base_prefix) / "bin" / "python3"
    if not base.exists():
        pytest.skip("no base Python beside this virtual environment")
    has_torch = subprocess.run([str(base), "-E", "-s", "-c", "import torch"], capture_output=True).returncode == 0
    if has_torch:
        pytest.skip("the base Python has torch")
    env = dict(os.environ, CHECKS_PROGRESS_FILE=str(tmp_path / "progress.json"))
    proc = subprocess.run(
        [str(base), "-E", "-s", "-m", "checks", "7", "--solution"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "torch" in proc.stderr and ".venv/bin/python -m checks 7" in proc.stderr
    assert not (tmp_path / "progress.json").exists()
