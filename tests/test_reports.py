"""What a failing report says: commands that repeat the learner's own FILE, the case split, the named
shapes of wrong values, and the notes on NaN and overflow. Unit tests on hand-made verdicts and tensors."""

from __future__ import annotations

from checks import verdict as V
from checks.engine.judging import wording


def test_a_make_command_repeats_puzzle_and_file():
    assert V.make_command("check", 1) == "make check PUZZLE=1"
    assert V.make_command("map", "10a", "my answers/p.py", "--case 2") == (
        "make map PUZZLE=10a FILE='my answers/p.py' ARGS='--case 2'"
    )


def test_the_access_map_advice_carries_the_file():
    advice = wording.map_advice(9, 3, "p9.py")
    assert "make map PUZZLE=9 FILE=p9.py ARGS='--case 4'" in advice and "show(" not in advice  # index 3: case 4
    notebook = wording.map_advice(9, 0)
    assert "make map PUZZLE=9," in notebook and "FILE" not in notebook and "show(9)" in notebook


def test_a_timeout_suggests_more_time_for_the_same_file():
    class End:
        timed_out, returncode, seconds, output = True, None, 61.0, ""

    class Stream:
        started, machine = 0, {"mode": "interpreter"}

    v = V.Verdict(5, V.FAILED, "")
    wording.unfinished_verdict(v, End(), Stream(), 60.0, "p5.py")
    assert v.status == V.TIMEOUT and "make check PUZZLE=5 FILE=p5.py ARGS='--timeout 300'" in v.summary


def test_the_seed_footer_repeats_the_file():
    v = V.Verdict(1, V.FAILED, "wrong", seed=7, file="p1.py", cases=[V.CaseResult(0, "n=3", False)])
    assert "make check PUZZLE=1 FILE=p1.py ARGS='--seed 7'" in V.format_verdict(v)


def test_one_failing_case_gets_no_case_split():
    params = [{"shape": [37, 300]}, {"shape": [70, 45], "layout": "transposed"}, {"shape": [6, 1]}]
    assert wording.failure_pattern(params, [True, False, True]) == []


def test_the_case_split_names_a_tag_before_a_shape():
    params = [
        {"shape": [21, 513], "fill": "neg_inf"},
        {"shape": [21, 513], "fill": "neg_inf", "layout": "sliced"},
        {"shape": [37, 300]},
        {"shape": [37, 300], "layout": "sliced"},
    ]
    (line,) = wording.failure_pattern(params, [False, False, True, True])
    assert line.startswith("Every failing case has fill=neg_inf; all cases with fill=(default) pass")


def test_failures_on_exactly_the_non_contiguous_cases_are_named():
    params = [
        {"shape": [37, 300]},
        {"shape": [33, 200], "layout": "sliced"},
        {"shape": [70, 45], "layout": "transposed"},
        {"shape": [4, 9999], "layout": "transposed", "fill": "neg_inf"},
        {"shape": [21, 513], "fill": "neg_inf"},
    ]
    (line,) = wording.failure_pattern(params, [True, False, False, False, True])
    assert line.startswith("Every failing case has a non-contiguous input (layout=sliced or transposed)")
    assert "some offset is right only where the tensors are contiguous" in line
    assert "ignores the strides" not in line  # a kernel that uses x's strides for out passes that claim falsely


# -- the shape of wrong values, from (yours, expected) alone

import pytest  # noqa: E402
import torch  # noqa: E402

from checks.engine.judging.rules.compare import compare, error_shapes  # noqa: E402

ROWS = ("rows", "columns")


def said(yours: torch.Tensor, expected: torch.Tensor, dims=ROWS, atol=1e-6, rtol=1e-4) -> str:
    mismatch = compare("out", yours, expected, atol, rtol, dims)
    assert mismatch is not None
    return "\n".join(mismatch.lines)


@pytest.fixture
def expected() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.rand(37, 45, dtype=torch.float64) + 0.1


def test_swapped_axes_are_named(expected):
    square = expected[:30, :30]
    assert "with rows and columns swapped (transposed)" in said(square.T.contiguous(), square)
    written_transposed = expected.T.contiguous().reshape(expected.shape)  # a (45, 37) answer stored row-major
    assert "rows and columns swapped" in said(written_transposed, expected)


def test_a_permutation_is_named(expected):
    shuffled = expected.flatten()[torch.randperm(expected.numel())].reshape(expected.shape)
    assert "exactly the expected values, in other places (a permutation)" in said(shuffled, expected)
    two_swapped = expected.clone()
    two_swapped[3, 4], two_swapped[20, 7] = expected[20, 7], expected[3, 4]
    assert "(a permutation)" in said(two_swapped, expected)


def test_small_errors_are_not_called_a_permutation(expected):
    """An accumulator of too few bits is off a little here and there: sorted, yours and the expected values still
    agree within the tolerance, but no wrong element holds another place's value."""
    off = expected.clone()
    off[5, 6] += 0.003  # beyond atol + rtol * |e|, well inside the gaps between neighbouring sorted values
    assert "permutation" not in said(off, expected, atol=1e-3, rtol=1e-3)
    off[9, 1] -= 0.004
    assert "permutation" not in said(off, expected, atol=1e-3, rtol=1e-3)


def test_a_constant_scale_factor_is_named():
    torch.manual_seed(1)
    o = torch.randn(2, 3, 16, 32, dtype=torch.float64)
    text = said(o * 0.125, o, dims=("batch", "heads", "queries", "head dim"), atol=1e-2, rtol=1e-2)
    assert "yours = 0.125 x expected (expected = 8 x yours)" in text and "sm_scale" in text


def test_a_factor_per_row_is_a_wrong_normaliser(expected):
    probabilities = expected / expected.sum(dim=1, keepdim=True)
    padded = expected / (expected.sum(dim=1, keepdim=True) + 19.0)  # 19 extra terms of exp(0) in each sum
    text = said(padded, probabilities)
    assert "yours / expected is constant along columns and differs between rows" in text
    assert "normaliser" in text and "masked lanes loaded as 0" in text
    lines, ratio = error_shapes(padded, probabilities, 1e-6, 1e-4, ROWS)
    assert ratio is not None and ratio.shape == padded.shape
    assert torch.allclose(ratio[:, 0], ratio[:, -1]) and float(ratio[:, 0].std()) > 0


def test_attention_rows_off_by_one_factor_each_are_named():
    torch.manual_seed(2)
    o = torch.randn(1, 2, 24, 16, dtype=torch.float64)
    l_wrong = torch.rand(1, 2, 24, 1, dtype=torch.float64) + 0.5
    lines, ratio = error_shapes(o / l_wrong, o, 1e-2, 1e-2, ("batch", "heads", "queries", "head dim"))
    assert lines and "constant along head dim and differs between queries" in lines[0] and ratio is not None


def test_noise_gets_no_shape(expected):
    torch.manual_seed(3)
    noisy = expected + 0.05 * torch.randn_like(expected)
    assert error_shapes(noisy, expected, 1e-6, 1e-4, ROWS) == ([], None)
    tail = expected.clone()
    tail[:, -5:] += 1.0  # wrong at one edge only
    assert error_shapes(tail, expected, 1e-6, 1e-4, ROWS) == ([], None)


# -- NaN notes and crashes


def test_an_overflow_warning_is_named_instead_of_the_masked_row_note():
    printed = (
        "RuntimeWarning: overflow encountered in exp (interpreter.py, line 593)\n"
        "RuntimeWarning: invalid value encountered in divide (interpreter.py, line 490)\n"
    )
    (note,) = V.explain_printed(printed)
    assert "exp overflowed to inf: subtract the row max first" in note and "-inf - (-inf)" not in note
    (masked,) = V.explain_printed("RuntimeWarning: invalid value encountered in subtract (interpreter.py, line 1)\n")
    assert "-inf - (-inf)" in masked


def test_a_crash_names_the_learners_own_line():
    dump = (
        "Fatal Python error: Segmentation fault\n\n"
        "Current thread 0x00007f (most recent call first):\n"
        '  File "/usr/lib/python3.12/ctypes/__init__.py", line 530 in string_at\n'
        '  File "/home/me/p1_crash.py", line 17 in vector_add\n'
        '  File "/course/checks/engine/replay/case_runner.py", line 120 in observe\n'
    )
    frame = wording.learner_frame(dump, {"/home/me/p1_crash.py": "p1_crash.py"})
    assert frame == " Your code was at p1_crash.py, line 17 (in vector_add) when it died."
    assert wording.learner_frame(dump, {"/elsewhere.py": "x"}) == ""

    class End:
        timed_out, returncode, seconds, output = False, -11, 1.0, dump

    class Stream:
        started, machine = 0, {"mode": "interpreter"}

    v = V.Verdict(1, V.FAILED, "")
    wording.unfinished_verdict(v, End(), Stream(), 60.0, "", {"/home/me/p1_crash.py": "p1_crash.py"})
    assert v.status == V.CRASHED and v.summary.endswith("at p1_crash.py, line 17 (in vector_add) when it died.")


def test_a_crash_in_a_kernels_access_names_the_access_and_the_learners_line():
    """The replay compiles a file's kernels under a name of its own (`SourceFile.compiled_name`): a crash inside the
    interpreter's store (or load) of a kernel names that access and the line in the learner's file."""
    from checks.engine.contract.kernel_source import SourceFile

    compiled = SourceFile("/home/me/p1_wild.py", "p1_wild.py", "").compiled_name(0)
    dump = (
        "Fatal Python error: Segmentation fault\n\n"
        "Current thread 0x00007f (most recent call first):\n"
        '  File "/venv/triton/runtime/interpreter.py", line 470 in create_masked_store\n'
        '  File "/course/checks/engine/access/patches.py", line 120 in create_masked_store\n'
        '  File "/venv/triton/language/core.py", line 2200 in store\n'
        f'  File "/tmp/checks-x/{compiled}", line 30 in add_kernel\n'
        '  File "/course/checks/engine/replay/perform.py", line 273 in launch\n'
    )
    said = wording.learner_frame(dump, {compiled: "p1_wild.py"})
    assert said.startswith(" It died in a store of your kernel at p1_wild.py, line 30 (in add_kernel)"), said
    assert "outside every tensor" in said
    plain = dump.replace("create_masked_store", "create_dot")  # not an access: only where the kernel was
    assert wording.learner_frame(plain, {compiled: "p1_wild.py"}).startswith(" Your code was at p1_wild.py, line 30")


@pytest.mark.slow
def test_a_wild_load_address_names_the_kernels_line(tmp_path):
    """A load whose addresses leave every tensor and its guard bands ends the replay with SIGSEGV; the report says so
    and names the load's line in the learner's file."""
    from checks.engine.grade import grade
    from checks.registry import get_puzzle

    puzzle = get_puzzle(1)
    key = puzzle.solution.read_text(encoding="utf-8")
    wild = key.replace("tl.load(y_ptr + offsets, mask=mask)", "tl.load(y_ptr + offsets * 1000000007, mask=mask)")
    assert wild != key
    submission = tmp_path / "p1_wild.py"
    submission.write_text(wild, encoding="utf-8")
    line = next(i for i, text in enumerate(wild.splitlines(), 1) if "1000000007" in text)
    verdict = grade(puzzle, submission, cases=[0], timeout=60, time_it=False)
    assert verdict.status == V.CRASHED, verdict.summary
    assert f"It died in a load of your kernel at p1_wild.py, line {line} (in add_kernel)" in verdict.summary, (
        verdict.summary
    )


# -- end to end: real wrong kernels, graded only on the case that shows the point (a few seconds each)

WRONG_KERNELS = [
    ("5", "pad_with_zero", 0, "constant along columns and differs between rows"),
    ("5", "no_max_subtraction", 2, "exp overflowed to inf: subtract the row max first"),
    ("8", "missing_scale", 0, "with sm_scale = 1 instead of 0.125, on every failing case: sm_scale is left out"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("number", "kernel", "case", "named"), WRONG_KERNELS, ids=[k[1] for k in WRONG_KERNELS])
def test_a_real_wrong_kernel_gets_its_error_named(number, kernel, case, named, tmp_path):
    from checks.authoring.wrong import source_of
    from checks.engine.grade import grade
    from checks.registry import get_puzzle

    puzzle = get_puzzle(number)
    submission = tmp_path / f"{kernel}.py"
    submission.write_text(source_of(puzzle, puzzle.wrong_dir / f"{kernel}.edit.yaml"), encoding="utf-8")
    verdict = grade(puzzle, submission, cases=[case], timeout=120, time_it=False)
    report = V.format_verdict(verdict, puzzle.title)
    assert verdict.rule == "values" and named in report, report
    assert "-inf - (-inf)" not in report


@pytest.mark.slow
def test_a_crash_in_the_learners_file_names_its_line(tmp_path):
    from checks.engine.grade import grade
    from checks.registry import get_puzzle

    submission = tmp_path / "p1_crash.py"
    submission.write_text(
        "import faulthandler\n\n\ndef vector_add(x, y):\n    return faulthandler._sigsegv()  # dies with SIGSEGV\n",
        encoding="utf-8",
    )
    verdict = grade(get_puzzle(1), submission, cases=[0], timeout=60, time_it=False)
    assert verdict.status == V.CRASHED and "p1_crash.py, line 5 (in vector_add)" in verdict.summary, verdict.summary
    assert 'File "' not in verdict.output and "Fatal Python error" not in verdict.output  # the dump is not printed


# -- every command a report suggests repeats every input the check used


def test_a_make_command_repeats_the_earlier_step_file():
    assert V.make_command("check", 9, "p9.py", "--seed 7", "my_9a.py") == (
        "make check PUZZLE=9 FILE=p9.py ARGS='--earlier my_9a.py --seed 7'"
    )
    assert V.make_command("map", 9, "", "", "my 9a.py") == "make map PUZZLE=9 ARGS=\"--earlier 'my 9a.py'\""


def test_repeat_earlier_adds_the_earlier_file_to_every_suggested_command():
    v = V.Verdict(
        9,
        V.FAILED,
        f"too slow: give it longer ({V.make_command('check', 9, 'p9.py', '--timeout 300')}).",
        details=[wording.map_advice(9, 3, "p9.py"), "no command here"],
        seed=7,
        file="p9.py",
        cases=[V.CaseResult(0, "n=3", False)],
    )
    V.repeat_earlier(v, "my_9a.py")
    report = V.format_verdict(v)
    commands = [line for line in report.splitlines() if "make " in line]
    assert len(commands) == 3 and all("ARGS='--earlier my_9a.py" in line for line in commands)
    assert "make check PUZZLE=9 FILE=p9.py ARGS='--earlier my_9a.py --timeout 300')." in report
    assert "make map PUZZLE=9 FILE=p9.py ARGS='--earlier my_9a.py --case 4'," in report


def test_a_check_of_files_does_not_suggest_the_notebook():
    """check(N, seed=...) and show(N) grade the notebook's code, not the files this check graded."""
    case = [V.CaseResult(0, "n=3", False)]
    for file, earlier in (("p9.py", ""), ("", "my_9a.py")):
        v = V.Verdict(9, V.FAILED, "wrong", seed=7, file=file, earlier=earlier, cases=case)
        assert "check(9" not in V.format_verdict(v)
        assert "show(" not in wording.map_advice(9, 3, file, earlier)
    notebook = V.format_verdict(V.Verdict(9, V.FAILED, "wrong", seed=7, cases=case))
    assert "check(9, seed=7)" in notebook  # the notebook's own check keeps its notebook form


def test_a_stub_earlier_step_in_the_notebook_names_earlier_as_the_other_way():
    from checks.registry import get_puzzle, shown

    default = f"your step 9a code in {shown(get_puzzle('9a').notebook)}"
    summary = wording.earlier_stub_summary(9, "9a", default, "p9.py")
    assert "--earlier" in summary and "make check PUZZLE=9 FILE=p9.py ARGS='--earlier YOUR_STEP_FILE.py'" in summary
    given = wording.earlier_stub_summary(9, "9a", "your step 9a code in my_9a.py", "p9.py")
    assert "my_9a.py" in given and "--earlier" not in given  # the file given with --earlier is itself the stub


def test_no_case_split_beside_a_named_cause():
    """sm_scale left out passes every case whose sm_scale is 1, whatever its H: "every failing case has H=2" would
    contradict the cause the report names."""
    params = [{"H": 2}, {"H": 1}, {"H": 2}, {"H": 3}]
    passed = [False, True, False, True]
    assert wording.failure_pattern(params, passed)  # without a named cause, the split is said
    assert wording.failure_pattern(params, passed, cause=True) == []


def test_counts_agree_with_their_nouns():
    import torch

    from checks.engine.judging.rules.compare import compare

    expected = torch.arange(10, dtype=torch.float64)
    yours = expected.float().clone()
    yours[3] = 100.0
    assert "1 of 10 elements is wrong" in compare("out", yours, expected, 1e-6, 1e-6, ("elements",)).headline
    yours[4] = 100.0
    assert "2 of 10 elements are wrong" in compare("out", yours, expected, 1e-6, 1e-6, ("elements",)).headline
    one = torch.ones(1, dtype=torch.float64)
    assert "1 of 1 element is wrong" in compare("out", one.float() * 3, one, 1e-6, 1e-6, ("elements",)).headline
    assert V.plural(1, "element") == "1 element" and V.plural(0, "case") == "0 cases"
    assert V.all_match(1) == "the one case graded matches the reference." and V.all_match(9).startswith("all 9 cases")


def test_a_pass_says_what_comes_next_in_the_order_of_puzzles_yaml():
    from checks.learner.session import Checked, what_next
    from checks.registry import load_puzzles

    ready = [p for p in load_puzzles() if p.ready]
    numbers = [p.number for p in ready]
    after_7 = numbers[numbers.index("7") + 1]
    assert what_next(7).startswith(f"Next: puzzle {after_7} (") and f"`make check PUZZLE={after_7}`" in what_next(7)
    assert f"call check({ready[numbers.index(after_7)].literal}) there" in what_next(7, notebook=True)
    assert "FILE=your_file.py" in what_next(7, file="p7.py")
    assert "last puzzle" in what_next(numbers[-1])
    passed = Checked(V.Verdict(1, V.PASSED, "all 9 cases match the reference.", mode="interpreter"), "Vector add")
    assert f"Next: puzzle {numbers[1]}" in passed.report()
    assert "Next:" not in passed.report(learners=False)  # the answer key, or a file under solutions/
    passed.verdict.debugging = True
    assert "Next:" not in passed.report()  # a debugging run is not a pass to move on from
    failed = Checked(V.Verdict(1, V.FAILED, "1 of 9 cases failed", mode="interpreter"), "Vector add")
    assert "Next:" not in failed.report()
