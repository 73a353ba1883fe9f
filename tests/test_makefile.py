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


def plain_make(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}  # not under make test
    return subprocess.run(["make", *args], cwd=ROOT, capture_output=True, text=True, env=env)


@pytest.mark.parametrize("target", ["check", "map", "hint"])
def test_a_target_without_puzzle_explains_makes_error_2_line(target):
    run = plain_make(target)
    assert run.returncode == 2
    said = run.stdout.strip().splitlines()[-1]
    assert said.startswith(f"Say which puzzle: make {target} PUZZLE=")
    assert "make's own line below, ending in Error 2, only repeats that no puzzle was given" in said
    assert run.stderr.strip().splitlines()[-1].endswith(f"{target}] Error 2")


def test_a_map_that_cannot_be_drawn_explains_makes_error_2_line(tmp_path):
    stub = tmp_path / "stub.py"
    stub.write_text("def vector_add(x, y):\n    raise NotImplementedError('Puzzle 1: fill in')\n", encoding="utf-8")
    run = plain_make("map", "PUZZLE=1", f"FILE={stub}")
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert lines[-1].startswith("make: *** [Makefile:") and lines[-1].endswith("map] Error 2")
    assert f"`{lines[-1]}`" in lines[-2] and "the map was not drawn (exit status 2)" in lines[-2]


def test_a_profile_without_a_gpu_explains_makes_error_2_line():
    run = plain_make("profile", "PUZZLE=1")
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert lines[-1].startswith("make: *** [Makefile:") and lines[-1].endswith("profile] Error 2")
    assert "needs a CUDA GPU" in run.stderr
    assert f"`{lines[-1]}`" in lines[-2] and "the profile was not taken (exit status 2)" in lines[-2]


def test_the_first_setup_shows_its_steps_and_how_long_it_takes():
    out = dry_run("-B", ".venv/bin/python")
    assert all(f"[{step}/3]" in out for step in (1, 2, 3))
    assert "It took 35 s in a trial" in out and "bench/results/2026-12-06-cpu-setup/" in out  # the time measured
    install = next(line for line in out.splitlines() if "-r requirements.txt" in line)
    assert "--quiet" not in install  # pip's own lines show what it downloads
    assert "rm -rf .venv" in install  # a failed install leaves no .venv that make would take for a finished one
    dev = dry_run("-B", ".venv/.dev")
    tools = next(line for line in dev.splitlines() if "-r requirements-dev.txt" in line)
    assert "--quiet" not in tools and "usually" in dev
