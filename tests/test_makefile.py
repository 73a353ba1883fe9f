"""What the Makefile's learner targets do, read with `make -n` (which prints a target's recipes, and those of the
targets it needs, without running them)."""

from __future__ import annotations

import os
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


def test_a_failed_make_check_explains_makes_own_last_line():
    # GNU make ends every failed recipe with a line of its own, which no Makefile setting removes while the exit
    # status stays non-zero: the course's last line, right above it, says what it means
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}  # not under make test
    run = subprocess.run(["make", "check", "PUZZLE=99"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert lines[-1].startswith("make: *** [Makefile:") and lines[-1].endswith("check] Error 2")
    assert f"`{lines[-1]}`" in lines[-2]  # the note quotes make's line as make prints it
    assert "make adds one line of its own after this one" in lines[-2]
    assert "Error 2" in lines[-2] and "exit status 2" in lines[-2]
    for page in ("README.md", "docs/grading.md"):  # the pages quote make's line as this Makefile makes it
        assert lines[-1].replace("Error 2", "Error 1") in (ROOT / page).read_text(encoding="utf-8"), page


def test_the_note_on_makes_line_is_only_for_a_failure_under_make():
    from checks.cli import make_note

    assert make_note(1, {"CHECKS_MAKE_LEVEL": "0"}).endswith(
        "fix what the report above names and run the same command again."
    )
    assert "`make[1]: *** [Makefile:" in make_note(1, {"CHECKS_MAKE_LEVEL": "1"})  # make run by make
    assert make_note(0, {"CHECKS_MAKE_LEVEL": "0"}) == ""
    assert make_note(1, {"MAKELEVEL": "1"}) == ""  # python -m checks run by something else that make started
