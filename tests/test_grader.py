"""The grader itself: verdicts for broken submissions, right answers in other styles, and its parts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from checks import verdict as V
from checks.authoring.wrong import answer_key_body
from checks.cli import main
from checks.engine.grade import grade
from checks.engine.judging.rules.compare import compare, describe_indices
from checks.engine.machine import numpy_pitfall
from checks.engine.submission import SubmissionError, notebook_code
from checks.learner import progress
from checks.memory import Arena, fill_poison, is_poison
from checks.registry import ROOT, Puzzle, get_puzzle
from tests.helpers import RIGHT, SLEEPS_IN_ITS_FIRST_CASE, as_at_a_terminal, right_submissions, submission
from tests.test_registry import CONTRACT

SUBMISSIONS = Path(__file__).parent / "submissions"


# Right answers graded again only by `make test-all`: styles whose parts another style already exercises in
# `make test`, kept out of its time budget: block pointers pass in 02, 03 and 12's styles and autotuning in
# 01_autotuned and 4's answer key; 4's other launch orders in 04_persistent_grouped; a fixed grid of small blocks is
# 01_kept_workspace's shape too; a pass per @triton.jit helper is how 9's and 10's keys are written; contiguous
# copies of the inputs pass in 02_contiguous_copies and 05_contiguous_copy, exp2 in 05_rows_per_program and
# 07_two_kernels, and 8's own key keeps O in global memory between key blocks; 7's online state merged across
# blocks is 07_two_kernels' and its key's, per lane or per row; 9's causal loops split at the diagonal are its key's
# shape (09_single_loop_to_diagonal is the other); several kernels pass in 06_three_kernels and 07_two_kernels, and
# natural exp in 09_single_loop_to_diagonal, 10b_single_kernel and the decoding styles.
EXHAUSTIVE_STYLES = {
    "14_heads_major_rows",
    "04_block_pointers_autotuned",
    "04_column_bands",
    "04_swizzle2d_2d_grid",
    "01_small_blocks_fixed_grid",
    "06_helper_passes",
    "08_contiguous_unnormalised",
    "07_lanewise_state",
    "09_two_loops_block128",
    "10_three_kernels_single_loops",
}


def right_params() -> list:
    return [
        pytest.param(number, name, id=name, marks=pytest.mark.exhaustive if name in EXHAUSTIVE_STYLES else ())
        for number, name in right_submissions()
    ]


@pytest.mark.slow
@pytest.mark.parametrize(("number", "name"), right_params())
def test_right_answers_in_other_styles_pass(number, name, tmp_path):
    verdict = grade(get_puzzle(number), submission(RIGHT, name, tmp_path))
    assert verdict.passed, V.format_verdict(verdict)


BROKEN = [
    ("syntax_error", V.ERROR, "did not load"),
    ("wrong_name", V.ERROR, "does not define vector_add"),
    ("kernel_raises", V.ERROR, "kernel_raises.py, line 11"),
    ("host_raises", V.ERROR, "Your code raised TypeError: multiple values for argument 'BLOCK_SIZE'"),
    ("aborts", V.CRASHED, "SIGABRT"),
    ("exits_quietly", V.CRASHED, "remove any exit()"),
    ("returns_tuple", V.FAILED, "must return 1 tensor"),
    ("borrows_answer_key", V.FAILED, "runs `add_kernel`, which is not a @triton.jit function of your code"),
    ("wrong_device", V.FAILED, "return it on the inputs' device"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "status", "text"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_submissions_get_a_verdict_not_a_traceback(name, status, text, tmp_path):
    verdict = grade(get_puzzle(1), submission(SUBMISSIONS / "broken", name, tmp_path), timeout=60)
    report = V.format_verdict(verdict)
    assert verdict.status == status, report
    assert text in report, report


@pytest.mark.slow
def test_cli_exit_codes(capsys):
    assert main(["99"]) == 2
    assert "There is no puzzle 99" in capsys.readouterr().err
    assert main(["1", "--file", "no/such/file.py"]) == 2
    assert "There is no file" in capsys.readouterr().err
    assert main(["1", "--solution", "--file", "x.py"]) == 2
    assert main(["1", "--solution", "--json"]) == 0
    assert '"status": "passed"' in capsys.readouterr().out
    assert main(["1", "--file", str(SUBMISSIONS / "broken" / "wrong_name.py")]) == 1


@pytest.mark.slow
def test_python_m_checks_exits_with_the_verdicts_status(tmp_path):
    """`python -m checks` leaves without Python's shutdown (os._exit): the status and the printed verdict stay."""
    import subprocess
    import sys

    env = dict(os.environ, CHECKS_PROGRESS_FILE=str(tmp_path / "progress.json"), TRITON_INTERPRET="1")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "checks", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300)  # fmt: skip

    passed = run("1", "--solution")
    assert passed.returncode == 0 and passed.stdout.rstrip().splitlines()[-1].startswith("PASSED")
    failed = run("1", "--file", str(SUBMISSIONS / "broken" / "wrong_name.py"))
    assert failed.returncode == 1 and failed.stdout.strip()  # a usage error's 2 is test_cli_exit_codes', in-process


def _holding(folder: Path) -> list[int]:
    """The processes with a file under `folder` open or named on their command line."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            opened = [os.readlink(fd) for fd in (proc / "fd").iterdir()]
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if str(folder) in cmdline or any(path.startswith(str(folder)) for path in opened):
            found.append(int(proc.name))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("fork_server", ["0", "1"], ids=["started", "forked"])
def test_ctrl_c_during_a_check_stops_it_and_its_grading_process(tmp_path, fork_server):
    """Ctrl-C while the learner's code runs: exit 130 with one sentence, no traceback, and no process left running
    the learner's code (here a case that sleeps for two minutes); on a GPU, the interpreter stage's processes too."""
    import signal
    import subprocess
    import sys
    import time

    slow = tmp_path / "slow.py"
    slow.write_text(SLEEPS_IN_ITS_FIRST_CASE)
    (work := tmp_path / "tmp").mkdir()
    env = dict(os.environ, CHECKS_WARM="0", CHECKS_FORK_SERVER=fork_server, TMPDIR=str(work),  # the machine's mode
               CHECKS_PROGRESS_FILE=str(tmp_path / "progress.json"))  # fmt: skip
    client = subprocess.Popen([sys.executable, "-m", "checks", "1", "--file", str(slow)], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=as_at_a_terminal)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and client.poll() is None:  # until case 1 runs: the learner's time.sleep
        # the recording process has reported its machine, its last event before it calls the learner's function
        if any('"machine"' in events.read_text(errors="replace") for events in work.rglob("events-record.jsonl")):
            break
        time.sleep(0.1)
    assert client.poll() is None and _holding(work), "the check should be in its first case"
    client.send_signal(signal.SIGINT)
    try:
        out, err = client.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        client.kill()
        out, err = client.communicate()
        pytest.fail(f"the check was still running 30 s after Ctrl-C; it said: {out}{err}")
    assert client.returncode == 130, (out, err)
    assert "Stopped: no verdict was given or recorded." in err and "Traceback" not in err + out
    for _ in range(50):
        if not _holding(work):
            break
        time.sleep(0.1)
    assert not _holding(work), "a process of the stopped check is still running"
    assert not (tmp_path / "progress.json").exists()  # nothing recorded


@pytest.mark.parametrize("given", ["99", "0", "abc", "10c"])
def test_an_unknown_puzzle_gets_one_sentence_and_exit_2(capsys, given):
    assert main([given]) == 2
    err = capsys.readouterr().err
    known = ", ".join(number for number, _, _ in CONTRACT)  # the contract's puzzles, in course order
    assert err.strip() == f"There is no puzzle {given}; the puzzles are {known}."


@pytest.mark.slow
def test_a_lettered_step_is_graded_by_its_id(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv(progress.ENV_FILE, str(tmp_path / "progress.json"))
    assert main(["10A", "--file", str(SUBMISSIONS / "right" / "10a_two_pass.py"), "--json", "--no-time"]) == 0
    assert '"puzzle": "10a"' in capsys.readouterr().out


def test_a_planned_puzzle_says_so_in_one_sentence():
    planned = Puzzle("42", "later", "Later", "planned", ("later",), "", "", (), ROOT, ROOT)
    verdict = grade(planned)
    assert verdict.status == V.NOT_READY and not verdict.passed
    assert "not written yet" in verdict.summary


def test_notebook_without_a_graded_cell_is_a_usage_error(tmp_path):
    path = tmp_path / "empty.ipynb"
    path.write_text('{"cells": [{"cell_type": "code", "source": "x = 1", "metadata": {}}], "metadata": {}}')
    with pytest.raises(SubmissionError, match="starts with the line '# Puzzle 1: your code"):
        notebook_code(path, 1)


def test_numpy_pitfall_is_detected_with_a_fix():
    assert "pip install 'numpy<2.4'" in numpy_pitfall("3.6.0", "2.4.1")
    assert numpy_pitfall("3.6.0", "2.3.5") is None
    assert numpy_pitfall("3.9.0", "2.4.6") is None


def test_compare_locates_a_missing_tail_and_unwritten_elements():
    expected = torch.arange(100, dtype=torch.float64)
    yours = expected.float().clone()
    yours[96:] = 0.0
    mismatch = compare("out", yours, expected, 1e-6, 1e-6, ("elements",))
    assert mismatch is not None and "4 of 100 elements are wrong" in mismatch.headline
    assert any("the last 4" in line for line in mismatch.lines)
    assert any("exactly 0" in line for line in mismatch.lines)
    fill_poison(yours[96:])
    mismatch = compare("out", yours, expected, 1e-6, 1e-6, ("elements",))
    assert "never written" in mismatch.headline
    assert compare("out", expected.float(), expected, 1e-6, 1e-6, ("elements",)) is None


def test_compare_names_rows_and_columns():
    expected = torch.zeros(8, 6, dtype=torch.float64)
    yours = torch.zeros(8, 6)
    yours[2:4, 5] = 1.0
    mismatch = compare("c", yours, expected, 1e-3, 0.0, ("rows", "columns"))
    assert mismatch.lines[-2] == "rows: 2 of 8: 2-3"
    assert mismatch.lines[-1].startswith("columns: 1 of 6: 5 (the last 1")


def test_runs_that_start_on_block_boundaries_are_called_blocks():
    assert "whole blocks" in describe_indices([*range(0, 64), *range(128, 192)], 256)


def test_guards_catch_writes_past_an_allocation():
    arena = Arena("cpu", torch.Generator().manual_seed(0))
    out = arena.adopt(torch.empty(10), poison=True)
    assert bool(is_poison(out).all())
    out.as_strided((12,), (1,))[10:] = 1.0  # two elements past the end
    before, after, first, spans = arena.allocated()[0].guard_damage()
    assert (before, after, first, spans) == (0, 2, 0, [0, 2])


def test_notebook_magics_do_not_break_the_graded_cell():
    from checks.engine.submission import as_module

    code = as_module(["# Puzzle 1: your code\n%time x = 1\n!nvidia-smi\ny = 2"])
    compile(code, "cell", "exec")
    assert "y = 2" in code and "# %time" in code


def test_an_interpreter_fault_fails_a_submission_that_passed_on_the_gpu():
    from checks.engine.grade import merge_interpreter_stage

    def gpu() -> V.Verdict:
        return V.Verdict(7, V.PASSED, "all cases match", mode="gpu", device="GPU")

    failed = V.Verdict(7, V.FAILED, "Your kernels read each element of x 3.00 times", mode="interpreter")
    failed.cases = [V.CaseResult(0, "x (4, 300)", False, problem="read 3.00 times")]
    merged = merge_interpreter_stage(gpu(), failed)
    assert merged.status == V.FAILED and "3.00 times" in merged.summary and "interpreter" in merged.summary
    crashed = V.Verdict(7, V.ERROR, "Your code raised KeyError", mode="interpreter")
    refused = merge_interpreter_stage(gpu(), crashed)  # raising only in the interpreter would dodge the rules
    assert refused.status == V.ERROR and "raised KeyError" in refused.summary
    slow = merge_interpreter_stage(gpu(), V.Verdict(7, V.TIMEOUT, "ran past the 120 s time limit", mode="interpreter"))
    assert slow.status == V.TIMEOUT
    broken = V.Verdict(7, V.ENVIRONMENT, "numpy 2.4 breaks Triton 3.6's interpreter", mode="interpreter")
    kept = merge_interpreter_stage(gpu(), broken)
    assert kept.passed and "not checked" in kept.details[-1]
    assert merge_interpreter_stage(gpu(), V.Verdict(7, V.PASSED, "ok", mode="interpreter")).passed


def test_wrong_values_on_the_gpu_are_traced_to_the_load_the_interpreter_saw():
    from concurrent.futures import Future

    from checks.engine.grade import explain_wrong_values

    def gpu() -> V.Verdict:
        verdict = V.Verdict(5, V.FAILED, "case 1 (x (1823, 781)): 1389828 of 1423763 elements are wrong.", mode="gpu")
        verdict.rule = "values"
        return verdict

    def done(verdict: V.Verdict) -> Future:
        future: Future = Future()
        future.set_result(verdict)
        return future

    outside = V.Verdict(5, V.FAILED, "Your kernel loaded elements from outside the input x.", mode="interpreter")
    outside.rule, outside.map_case = "no_load_outside", 0
    outside.cases = [V.CaseResult(0, "x (4, 300)", False, problem="loads past the end of x")]
    explained = explain_wrong_values(gpu(), done(outside))
    assert explained is not None and explained.rule == "no_load_outside" and explained.map_case == 0
    assert explained.summary.startswith("case 1") and "outside the input x" in explained.summary
    assert any("loads past the end of x" in line for line in explained.details)
    wrong_too = V.Verdict(5, V.FAILED, "elements are wrong", mode="interpreter")
    wrong_too.rule = "values"  # no cause to add: the GPU verdict stands
    assert explain_wrong_values(gpu(), done(wrong_too)) is None
    assert explain_wrong_values(gpu(), done(V.Verdict(5, V.PASSED, "ok", mode="interpreter"))) is None
    merge = V.Verdict(13, V.FAILED, "o: 12 elements are wrong: the merge of the splits is wrong", mode="interpreter")
    merge.rule = "values"  # a cause only the access log shows (which program read which keys)
    merge.cases = [
        V.CaseResult(0, "q (4, 16, 128)", False, problem="the merge of the splits is wrong", cause=True, diagnosed=True)
    ]
    explained = explain_wrong_values(gpu(), done(merge))
    assert explained is not None and "shows why: o: 12 elements are wrong: the merge" in explained.summary
    # the GPU's case names where (a pattern over batches sets its `cause`), not why: the interpreter's why is added
    patterned = gpu()
    patterned.cases = [V.CaseResult(1, "q (4, 16, 128)", False, problem="o: 98 elements are wrong", cause=True)]
    explained = explain_wrong_values(patterned, done(merge))
    assert explained is not None and "the merge of the splits is wrong" in explained.summary
    # a GPU case that says why itself (an overflow) keeps its own verdict
    overflow = gpu()
    overflow.cases = [V.CaseResult(1, "q", False, problem="o: 98 elements are wrong", cause=True, diagnosed=True)]
    assert explain_wrong_values(overflow, done(merge)) is None


def test_an_illegal_memory_access_on_the_gpu_is_traced_to_the_load_the_interpreter_saw():
    from concurrent.futures import Future

    from checks.engine import grade

    fault = V.Verdict(13, V.ERROR, "case 2: Your code raised AcceleratorError: an illegal memory access", mode="gpu")
    fault.rule = "raised"
    crash = V.Verdict(13, V.CRASHED, "The grading process died during case 2 (signal SIGSEGV)", mode="gpu")
    slow = V.Verdict(13, V.FAILED, "Correct, but 0.50x the speed of torch.matmul", mode="gpu")
    slow.rule = "speed_bar"
    assert grade.worth_explaining(fault) and grade.worth_explaining(crash) and not grade.worth_explaining(slow)
    typo = V.Verdict(13, V.ERROR, "case 1: Your code raised NameError: name 'tl' is not defined", mode="gpu")
    typo.rule = "raised"
    assert not grade.worth_explaining(typo)  # a Python error says what to fix itself: no wait for the interpreter
    pages = V.Verdict(13, V.FAILED, "Your kernel read pages that block_table does not list.", mode="interpreter")
    pages.rule = "pages_in_table"
    interpreted: Future = Future()
    interpreted.set_result(pages)
    explained = grade.explain_wrong_values(fault, interpreted)
    assert explained is not None and explained.rule == "pages_in_table"
    assert "illegal memory access" in explained.summary and "block_table does not list" in explained.summary


def test_a_failed_gpu_verdict_does_not_wait_long_for_the_interpreter(monkeypatch):
    import time
    from concurrent.futures import Future

    from checks.engine import grade

    monkeypatch.setattr(grade, "EXPLAIN_WAIT_S", 0.05)
    verdict = V.Verdict(5, V.FAILED, "case 1: elements are wrong.", mode="gpu")
    verdict.rule = "values"
    start = time.monotonic()
    assert grade.explain_wrong_values(verdict, Future()) is None  # still running: the GPU verdict stands
    assert time.monotonic() - start < 1.0


def test_numpy_shim_turns_one_element_blocks_into_ints():
    import numpy as np
    import triton.runtime.interpreter as interpreter

    from checks.engine.machine import numpy_shim

    class Scope:
        def __init__(self) -> None:
            self.attrs: dict[str, object] = {}

        def set_attr(self, obj, name, value) -> None:
            self.attrs[name] = value

    class Handle:
        data = np.array([7], dtype=np.int32)  # one element, but 1-D: int() of it fails on numpy >= 2.4

    class Tensor:
        handle = Handle()

    original = interpreter._patch_lang_tensor
    try:
        assert numpy_shim()
        scope = Scope()
        interpreter._patch_lang_tensor(Tensor, scope)
        assert scope.attrs["__index__"](Tensor()) == 7
    finally:
        interpreter._patch_lang_tensor = original


# puzzle 1's answer key with a host function of its own, which prints and is wrong (with a warning) for one length
PRINTS = (
    "import warnings\n\n"
    + answer_key_body(get_puzzle(1)).split("\n\n\ndef vector_add")[0]
    + """


def vector_add(x, y):
    n = x.numel()
    print(f"vector_add called with n={n}")
    out = torch.empty_like(x)
    if n == 127:  # wrong only here: x + x, with the warning a NaN in the interpreter gives
        warnings.warn("invalid value encountered in subtract", RuntimeWarning)
        y = x
    add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK_SIZE=256)
    return out
"""
)


@pytest.mark.slow
def test_what_a_case_printed_is_shown_under_that_case_and_the_nan_warning_is_explained(tmp_path):
    path = tmp_path / "prints.py"
    path.write_text(PRINTS, encoding="utf-8")
    verdict = grade(get_puzzle(1), path, time_it=False)
    report = V.format_verdict(verdict)
    failing = next(c for c in verdict.cases if not c.passed)
    assert verdict.status == V.FAILED and "(127,)" in failing.description, report
    assert f"What your code printed during case {failing.index + 1}" in report, report
    assert "| vector_add called with n=127" in report and "n=3000" not in report.split("printed during")[1]
    assert "RuntimeWarning: invalid value encountered in subtract" in report
    assert "-inf - (-inf)" in report, "the NaN warning is explained"
    assert "Every failing case has" not in report, "one failing case is told apart from the rest by any parameter"


@pytest.mark.slow
def test_a_known_wrong_kernel_can_be_graded_up_to_its_first_failure(tmp_path):
    """make solutions and the tests stop a known-wrong kernel at its first failing case: the same rule, sooner."""
    from checks.authoring.wrong import materialize

    puzzle = get_puzzle(1)
    wrong = materialize(puzzle, puzzle.wrong_dir / "off_by_one.edit.yaml", tmp_path)
    whole = grade(puzzle, wrong, time_it=False, seed=7)
    first = grade(puzzle, wrong, time_it=False, seed=7, first_failure=True)
    assert not whole.passed and not first.passed and first.rule == whole.rule
    assert len(whole.cases) == len(puzzle.cases.cpu)
    failing = next(c.index for c in whole.cases if not c.passed)
    assert [c.index for c in first.cases] == [c.index for c in whole.cases[: failing + 1]]  # none judged after it
    assert "grading stopped at the first failing case" in first.summary


@pytest.mark.slow
def test_a_notebook_given_by_a_relative_path_is_graded(tmp_path, monkeypatch, capsys):
    """FILE=notebooks/NN_x.ipynb from the course folder: graded (here, the stub), not a traceback."""
    monkeypatch.setenv(progress.ENV_FILE, str(tmp_path / "progress.json"))
    monkeypatch.chdir(get_puzzle(1).notebook.parent.parent)
    relative = get_puzzle(1).notebook.relative_to(get_puzzle(1).notebook.parent.parent)
    assert main(["1", "--file", str(relative)]) == 1
    assert "still the stub" in capsys.readouterr().out
