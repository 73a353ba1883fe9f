"""`make doctor`: healthy here, and one sentence of advice for each problem it can find."""

from __future__ import annotations

import os
import subprocess

import pytest

from checks.learner import doctor
from checks.registry import ROOT


@pytest.mark.slow
def test_this_machine_is_healthy(capsys):
    assert doctor.main([]) == 0
    out = capsys.readouterr().out
    assert "Healthy" in out and "PROBLEM" not in out
    for name in ("python", "torch", "triton", "numpy", "pyyaml", "matplotlib", "Jupyter", "tiny Triton kernel"):
        assert name in out, name


def test_old_python_is_a_problem():
    finding = doctor.check_python((3, 8, 10))
    assert finding.level == doctor.PROBLEM and "3.10 or newer" in finding.advice


def test_a_missing_package_is_a_problem_with_a_fix():
    finding = doctor.check_package("no_such_package_for_the_course", "thing", "Install thing.")
    assert finding.level == doctor.PROBLEM and "not installed" in finding.what and finding.advice == "Install thing."


def test_the_numpy_pitfall_is_a_note_with_the_fix_because_the_course_works_around_it(monkeypatch):
    monkeypatch.setattr(doctor, "numpy_pitfall", lambda triton, numpy: "Install numpy<2.4.")
    finding = doctor.check_numpy_pitfall(interpreter=True)
    assert finding.level == doctor.NOTE and "work around it" in finding.what and finding.advice == "Install numpy<2.4."
    assert "interpreter stage" in doctor.check_numpy_pitfall(interpreter=False).what


@pytest.mark.slow
def test_a_hanging_kernel_is_cut_off():
    finding = doctor.check_kernel(True, timeout=1, code="import time\ntime.sleep(30)\n")
    assert finding.level == doctor.PROBLEM and "did not finish" in finding.what


def test_a_failing_kernel_names_the_error():
    finding = doctor.check_kernel(True, timeout=60, code="raise RuntimeError('no driver here')\n")
    assert finding.level == doctor.PROBLEM and "no driver here" in finding.what and finding.advice


def test_each_problem_gets_one_sentence_and_exit_1(monkeypatch, capsys):
    found = [
        doctor.Finding(doctor.OK, "python 3.11"),
        doctor.Finding(doctor.PROBLEM, "triton: not installed", "Install Triton 3.6."),
        doctor.Finding(doctor.PROBLEM, "pyyaml: not installed", "Install pyyaml."),
    ]
    monkeypatch.setattr(doctor, "examine", lambda timeout: found)
    assert doctor.main([]) == 1
    out = capsys.readouterr().out
    assert "2 problem(s) to fix:" in out
    assert "  - Install Triton 3.6.\n  - Install pyyaml.\n" in out


def test_jupyterlab_is_reported_and_make_lab_is_said_to_install_it(monkeypatch):
    monkeypatch.setattr(doctor, "_module", lambda name: (None, None) if name == "jupyterlab" else (object(), None))
    finding = doctor.check_jupyter()
    assert "not JupyterLab" in finding.what and "`make lab` installs JupyterLab" in finding.what
    monkeypatch.setattr(doctor, "_module", lambda name: (None, None))
    assert "`make lab` installs it" in doctor.check_jupyter().what
    monkeypatch.setattr(doctor, "_module", lambda name: (object(), None))
    assert "JupyterLab is installed" in doctor.check_jupyter().what


@pytest.mark.slow  # runs make, which asks Python what this machine has
def test_make_lab_passes_allow_root_to_root_and_args_through():
    out = subprocess.run(
        ["make", "-n", "lab", "ARGS=--port 9999"], cwd=ROOT, capture_output=True, text=True, timeout=60
    ).stdout
    line = next(line for line in out.splitlines() if "jupyter lab" in line)
    assert line.endswith("--port 9999")
    assert ("--allow-root" in line) == (os.geteuid() == 0)


def test_the_doctor_says_whether_a_warm_grader_is_kept(monkeypatch, tmp_path):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # no warm grader lives here
    monkeypatch.delenv("CHECKS_WARM", raising=False)
    assert "none running" in doctor.check_warm_grader().what
    monkeypatch.setenv("CHECKS_WARM", "0")
    assert "off (CHECKS_WARM=0)" in doctor.check_warm_grader().what
