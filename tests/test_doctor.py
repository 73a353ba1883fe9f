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


def test_the_interpreters_int_of_an_array_note_is_filtered_where_it_is_made():
    """numpy's deprecation note on int(array), made at each loop step inside Triton's interpreter, is
    filtered for that module only: the same note from anywhere else still shows."""
    import warnings

    import torch
    import triton
    import triton.language as tl

    from checks.engine import machine as environment

    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("the note is made by Triton's CPU interpreter")

    @triton.jit
    def _row_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n, BLOCK):  # a loop bound the interpreter turns into an int
            offs = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(out_ptr, tl.sum(acc))

    x, out = torch.ones(100), torch.empty(1)

    def notes() -> list[warnings.WarningMessage]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if quiet:
                environment.quiet_interpreter()
            _row_sum_kernel[(1,)](x, out, x.numel(), BLOCK=16)
            warnings.warn_explicit(environment.INTERPRETER_DEPRECATION, DeprecationWarning, "mine.py", 1, module="mine")
        return [w for w in caught if environment.INTERPRETER_DEPRECATION in str(w.message)]

    quiet = False
    loud = notes()
    if not any("interpreter" in w.filename for w in loud):
        pytest.skip("this numpy does not make the note (numpy >= 2.4 refuses int(array); the shim handles it)")
    quiet = True
    assert [w.filename for w in notes()] == ["mine.py"]
    assert float(out) == 100.0
    pytest_settings = (ROOT / "pyproject.toml").read_text().split("[tool.pytest.ini_options]")[1]
    assert f'"ignore:{environment.INTERPRETER_DEPRECATION}:DeprecationWarning:triton' in pytest_settings
