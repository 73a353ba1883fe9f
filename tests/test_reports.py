"""What a failing report says: commands that repeat the learner's own FILE, the case split, the named
shapes of wrong values, and the notes on NaN and overflow. Unit tests on hand-made verdicts and tensors."""

from __future__ import annotations

from checks import verdict as V
from checks.engine import endings, verdicts


def test_a_make_command_repeats_puzzle_and_file():
    assert V.make_command("check", 1) == "make check PUZZLE=1"
    assert V.make_command("map", "10a", "my answers/p.py", "--case 2") == (
        "make map PUZZLE=10a FILE='my answers/p.py' ARGS='--case 2'"
    )


def test_the_access_map_advice_carries_the_file():
    advice = verdicts.map_advice(9, 3, "p9.py")
    assert "make map PUZZLE=9 FILE=p9.py ARGS='--case 3'" in advice and "show(" not in advice
    notebook = verdicts.map_advice(9, 0)
    assert "make map PUZZLE=9," in notebook and "FILE" not in notebook and "show(9)" in notebook


def test_a_timeout_suggests_more_time_for_the_same_file():
    class End:
        timed_out, returncode, seconds, output = True, None, 61.0, ""

    class Stream:
        started, machine = 0, {"mode": "interpreter"}

    v = V.Verdict(5, V.FAILED, "")
    endings.unfinished_verdict(v, End(), Stream(), 60.0, "p5.py")
    assert v.status == V.TIMEOUT and "make check PUZZLE=5 FILE=p5.py ARGS='--timeout 300'" in v.summary


def test_the_seed_footer_repeats_the_file():
    v = V.Verdict(1, V.FAILED, "wrong", seed=7, file="p1.py", cases=[V.CaseResult(0, "n=3", False)])
    assert "make check PUZZLE=1 FILE=p1.py ARGS='--seed 7'" in V.format_verdict(v)


def test_one_failing_case_gets_no_case_split():
    params = [{"shape": [37, 300]}, {"shape": [70, 45], "layout": "transposed"}, {"shape": [6, 1]}]
    assert verdicts.failure_pattern(params, [True, False, True]) == []


def test_the_case_split_names_a_tag_before_a_shape():
    params = [
        {"shape": [21, 513], "fill": "neg_inf"},
        {"shape": [21, 513], "fill": "neg_inf", "layout": "sliced"},
        {"shape": [37, 300]},
        {"shape": [37, 300], "layout": "sliced"},
    ]
    (line,) = verdicts.failure_pattern(params, [False, False, True, True])
    assert line.startswith("Every failing case has fill=neg_inf; all cases with fill=(default) pass")


def test_failures_on_exactly_the_non_contiguous_cases_are_named():
    params = [
        {"shape": [37, 300]},
        {"shape": [33, 200], "layout": "sliced"},
        {"shape": [70, 45], "layout": "transposed"},
        {"shape": [4, 9999], "layout": "transposed", "fill": "neg_inf"},
        {"shape": [21, 513], "fill": "neg_inf"},
    ]
    (line,) = verdicts.failure_pattern(params, [True, False, False, False, True])
    assert line.startswith("Every failing case has a non-contiguous input (layout=sliced or transposed)")
    assert "ignores the strides" in line
