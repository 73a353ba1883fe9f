"""What the Makefile's learner targets do, read with `make -n` (which prints a target's recipes, and those of the
targets it needs, without running them)."""

from __future__ import annotations

import subprocess

import pytest

from checks.registry import ROOT

pytestmark = pytest.mark.slow  # each make asks Python whether torch is there while it reads the Makefile


def dry_run(*args: str) -> str:
    run = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return run.stdout


def test_make_lab_installs_jupyterlab_only():
    # -W: as if requirements-dev.txt had just changed, so a lab that needed the development tools would install them
    out = dry_run("-W", "requirements-dev.txt", "lab")
    assert "jupyter lab notebooks/" in out and "requirements-dev.txt" not in out
