"""Each rule of the rulebook on hand-made observations, and the mutation check: switching any rule off fails a test.

These run in-process and fast: no grading process, no Triton. `RULE_CASES` holds, for every rule,
a call that must break it; `test_each_rule_is_pinned` switches each rule off in turn and checks
that the call is no longer rejected for that rule, so no rule can silently stop working.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch

from checks.engine.access.log import AccessLog
from checks.engine.observations import BufferObs, CaseObservation, LaunchObs, TorchOp
from checks.engine.rules import rulebook
from checks.engine.rules.problem import CaseContext, Problem
from checks.instructor.solutions import expectations, reasons
from checks.puzzles import Expected
from checks.registry import get_puzzle
from tests.helpers import switch_off, wrong_kernels

OWN = LaunchObs("add_kernel", own=True, blocks={"BLOCK_SIZE": 1024})


def vector_ctx(out: torch.Tensor | None = None, **obs_fields) -> CaseContext:
    """A puzzle-1 call on x = 0..9, y = 1 whose observation is the answer key's unless told otherwise."""
    x = torch.arange(10, dtype=torch.float32)
    y = torch.ones(10)
    expected = [Expected("out", (x + y).double(), torch.float32, ("elements",))]
    given = obs_fields.pop("_outputs", None)
    obs = CaseObservation(**{"index": 0, "returned": "tensor", "launches": [OWN], "buffers": [], **obs_fields})
    outputs = given if given is not None else [x + y if out is None else out]
    return CaseContext(get_puzzle(1), {"n": 10}, {"x": x, "y": y}, expected, outputs, obs)


def access(
    loaded: dict[str, int] | None = None,
    outside: dict[str, int] | None = None,
    widest: int = 16,
    regions: tuple[tuple[str, str], ...] = (("x", "input"), ("y", "input"), ("out", "allocated")),
) -> dict:
    """An access log of a puzzle-1 call: lanes loaded per region, lanes loaded from each region's guard bands."""
    loaded, outside = loaded or {}, outside or {}
    rows = [{"name": n, "label": n, "role": role, "numel": 10, "shape": [10], "strides": [1], "offset": 0,
             "size": 10, "element_size": 4} for n, role in regions]  # fmt: skip
    log = AccessLog(regions=rows, loaded=[loaded.get(n, 0) for n, _ in regions],
                    outside_loads=[outside.get(n, 0) for n, _ in regions], widest=widest)  # fmt: skip
    return log.to_dict()


def with_rules(ctx: CaseContext, **rules) -> CaseContext:
    return dataclasses.replace(ctx, puzzle=dataclasses.replace(ctx.puzzle, rules=rules))


def problem_of(ctx: CaseContext) -> str:
    problem = rulebook.first_problem(ctx)
    return problem.rule if problem else ""


def input_buffer(**damage) -> BufferObs:
    return BufferObs("x (10,) float32", "input", 10, 4, **damage)


def allocated(**damage) -> BufferObs:
    return BufferObs("a (10,) float32 tensor you allocated", "allocated", 10, 4, output=0, **damage)


RULE_CASES: dict[str, Callable[[], CaseContext]] = {
    "kernel_launched": lambda: vector_ctx(launches=[LaunchObs("add_kernel", own=False)]),
    "torch_free": lambda: vector_ctx(torch_ops=[TorchOp("aten.add.Tensor", "a.py, line 9: return x + y")]),
    "no_write_outside": lambda: vector_ctx(buffers=[allocated(after=3, first_after=0)]),
    "inputs_unchanged": lambda: vector_ctx(buffers=[input_buffer(changed=4)]),
    "no_load_outside": lambda: vector_ctx(access=access(outside={"x": 6})),
    "output_form": lambda: vector_ctx(out=torch.zeros(10, dtype=torch.float64)),
    "values": lambda: vector_ctx(out=torch.arange(10, dtype=torch.float32)),
    "kernels_read_inputs": lambda: vector_ctx(host_reads=["argument src_ptr of copy_kernel: a (10,) float32 tensor"]),
    "outputs_from_kernels": lambda: vector_ctx(output_origins=["host"]),
    "limits": lambda: with_rules(
        vector_ctx(access=access(loaded={"x": 30})),
        limits={"reads_per_element": {"x": 2}, "why": "two passes."},
    ),
}


def test_the_answer_keys_call_keeps_every_rule():
    ctx = with_rules(
        vector_ctx(access=access(loaded={"x": 10}, widest=1024)),
        limits={"reads_per_element": {"x": 1}, "max_block": 4096},
    )
    assert rulebook.first_problem(ctx) is None


@pytest.mark.parametrize("name", sorted(RULE_CASES))
def test_each_rule_fires_on_its_own_call(name):
    assert problem_of(RULE_CASES[name]()) == name


def test_every_per_call_rule_has_a_case():
    """The method rules (access patterns) have theirs in tests/test_method_rules.py and, for the decoding
    puzzles, tests/test_decoding_rules.py, on hand-made and recorded logs."""
    method = {"grouped_order", "causal_skipping", "parallel_over_queries", "p_never_stored"}
    method |= {"split_kv", "kv_once_per_group", "pages_in_table"}
    per_call = rulebook.checked(rulebook.EVERY_CALL) + rulebook.checked(rulebook.ON_REQUEST)
    assert {entry.name for entry in per_call} == set(RULE_CASES) | method


@pytest.mark.parametrize("name", sorted(RULE_CASES))
def test_each_rule_is_pinned(name, monkeypatch):
    """The mutation check: with the rule switched off, its call is no longer rejected for it."""
    switch_off(monkeypatch, name)
    assert problem_of(RULE_CASES[name]()) != name


def test_messages_say_where_and_what_to_do():
    write = rulebook.first_problem(RULE_CASES["no_write_outside"]())
    assert "the output out" in write.message and "3 elements past its end, starting right after" in write.message
    assert "mask" in write.message
    values = rulebook.first_problem(RULE_CASES["values"]())
    assert values.message.startswith("out: 10 of 10 elements are wrong")
    assert values.picture is not None and values.picture["blocks"] == {"BLOCK_SIZE": 1024}
    launched = rulebook.first_problem(vector_ctx(launches=[LaunchObs("add_kernel", own=False)]))
    assert "only kernels defined elsewhere: add_kernel" in launched.message


def test_a_write_into_an_inputs_guard_is_a_write_outside_not_a_changed_input():
    ctx = vector_ctx(buffers=[input_buffer(changed=2, after=2)])
    problem = rulebook.first_problem(ctx)
    assert problem.rule == "no_write_outside" and "outside the input x" in problem.message


def test_output_form_names_count_type_device_shape_dtype_and_layout():
    assert (
        "it must return 1 tensor(s): out"
        in rulebook.first_problem(
            vector_ctx(returned="tuple of 2", _outputs=[torch.zeros(10), torch.zeros(10)])
        ).message
    )
    assert "other than a tensor" in rulebook.first_problem(vector_ctx(returned="list of 1", _outputs=[None])).message
    assert "has shape (9,)" in rulebook.first_problem(vector_ctx(out=torch.zeros(9))).message
    assert "expected torch.float32" in rulebook.first_problem(vector_ctx(out=torch.zeros(10).half())).message


def test_limits_cap_the_widest_load():
    ctx = with_rules(
        vector_ctx(access=access(widest=131072)),
        limits={"max_block": 65536, "why": "fixed blocks."},
    )
    problem = rulebook.first_problem(ctx)
    assert problem.rule == "limits" and "131072 lanes" in problem.message


def test_limits_are_not_judged_without_an_access_log():
    ctx = with_rules(vector_ctx(access=None), limits={"reads_per_element": {"x": 0}})
    assert rulebook.first_problem(ctx) is None


def test_kernels_matter_only_when_the_kernels_off_answer_is_still_right(monkeypatch):
    still_right = vector_ctx()
    assert rulebook.after_all_cases(still_right).rule == "kernels_matter"
    assert rulebook.after_all_cases(vector_ctx(out=torch.full((10,), float("nan")))) is None
    assert rulebook.after_all_cases(vector_ctx(raised="RuntimeError: boom")) is None
    switch_off(monkeypatch, "kernels_matter")
    assert rulebook.after_all_cases(still_right) is None


def passed_stage(tmp_path, selection: list[int]):
    """A stage of puzzle 1 whose selected cases all passed, and whose report holds no kernels-off re-run."""
    from checks import verdict as V
    from checks.engine.judging.stage import Stage
    from checks.engine.protocol import Job

    stage = Stage(get_puzzle(1), Job(1, "x.py", {}, 1, cases=selection), "interpreter", tmp_path)
    stage.results = [V.CaseResult(index, "x", passed=True) for index in selection]
    return stage


def test_a_report_without_the_kernels_off_rerun_is_tampered_with(tmp_path, monkeypatch):
    from checks import verdict as V
    from checks.engine.judging.wording import TAMPERED_SUMMARY

    verdict = V.Verdict(1, V.FAILED, "")
    passed_stage(tmp_path, [0, 1]).finished_verdict(verdict)
    assert verdict.status == V.TAMPERED
    assert verdict.summary == TAMPERED_SUMMARY.format(why="the kernels-off re-run is missing")
    later_cases = V.Verdict(1, V.FAILED, "")
    passed_stage(tmp_path, [1]).finished_verdict(later_cases)  # case 1 not selected: no re-run to ask for
    assert later_cases.status == V.PASSED
    rerun = passed_stage(tmp_path, [0, 1])
    rerun.stream.kernels_off = CaseObservation(index=0)
    with_rerun = V.Verdict(1, V.FAILED, "")
    rerun.finished_verdict(with_rerun)
    assert with_rerun.status == V.PASSED
    switch_off(monkeypatch, "kernels_off_reported")  # the mutation check: the missing re-run goes unnoticed
    switched_off = V.Verdict(1, V.FAILED, "")
    passed_stage(tmp_path, [0, 1]).finished_verdict(switched_off)
    assert switched_off.status == V.PASSED


def test_every_rule_a_puzzle_names_exists():
    from checks.registry import load_puzzles

    for puzzle in load_puzzles():
        unknown = set(puzzle.rules) - {entry.name for entry in rulebook.checked(rulebook.ON_REQUEST)}
        assert not unknown, f"puzzle {puzzle.number} names rules the rulebook does not have: {unknown}"


def test_every_expect_line_names_a_reason():
    known = reasons()
    for _puzzle, path in wrong_kernels():
        expected = expectations(path)
        assert expected, f"{path} has no 'expect:' line"
        for e in expected:
            assert e.rule in known, f"{path}: 'expect: {e.rule}' is not a rule or reason ({sorted(known)})"


def test_the_summary_names_the_parameter_that_splits_failing_from_passing_cases():
    from checks.engine.judging.wording import failure_pattern

    params = [{"N": 64, "causal": False}, {"N": 64, "causal": True}, {"N": 100, "causal": True}, {"N": 100}]
    line = failure_pattern(params, [True, False, False, True])
    assert line == [
        "Every failing case has causal=True; all cases with causal=(default) or False pass: "
        "look at what your code does differently there."
    ]
    assert failure_pattern(params, [True, False, True, False]) == []  # no single parameter explains it
    assert failure_pattern(params, [False] * 4) == [] and failure_pattern(params, [True] * 4) == []


def test_reads_of_a_copy_count_as_reads_of_its_input_and_count_all_adds_every_non_input():
    copied = access(
        loaded={"x": 10, "x copy": 20}, regions=(("x", "input"), ("x copy", "scratch"), ("out", "allocated"))
    )
    assert rulebook.first_problem(with_rules(vector_ctx(access=copied), limits={"reads_per_element": {"x": 2}})).rule
    reread = access(loaded={"x": 20, "out": 10})
    assert rulebook.first_problem(with_rules(vector_ctx(access=reread), limits={"reads_per_element": {"x": 2}})) is None
    counted = with_rules(vector_ctx(access=reread), limits={"reads_per_element": {"x": 2}, "count_all": True})
    assert "3.00 times" in rulebook.first_problem(counted).message


def softmax_access(x_shape: tuple[int, int], loaded: dict[str, int], others: dict[str, int]) -> dict:
    """A softmax call's access log on x of `x_shape`: lanes loaded per region; `others`: allocated buffers, by numel."""
    numel = x_shape[0] * x_shape[1]
    regions = [("x", "input", numel, list(x_shape))] + [(n, "allocated", k, [k]) for n, k in others.items()]
    rows = [{"name": n, "label": n, "role": role, "numel": k, "shape": shape, "strides": [1] * len(shape),
             "offset": 0, "size": k, "element_size": 4} for n, role, k, shape in regions]  # fmt: skip
    return AccessLog(regions=rows, loaded=[loaded.get(r["name"], 0) for r in rows],
                     outside_loads=[0] * len(rows)).to_dict()  # fmt: skip


@pytest.mark.parametrize("x_shape", [(6, 100), (6, 1)])
def test_count_all_does_not_count_per_row_statistics_as_passes(x_shape):
    """Three kernels, one pass each, hand the row max and sum on in (M,) buffers: still three passes over x."""
    m, n = x_shape
    stats = softmax_access(x_shape, {"x": 3 * m * n, "row max": 2 * m, "row sum": m},
                           {"row max": m, "row sum": m, "out": m * n})  # fmt: skip
    rules = {"reads_per_element": {"x": 3}, "count_all": True}
    assert rulebook.first_problem(with_rules(vector_ctx(access=stats), limits=rules)) is None
    # a copy of x in a scratch buffer, or the output, read again, still counts (when rows are longer than 1)
    reread = softmax_access(x_shape, {"x": 3 * m * n, "out": m * n}, {"out": m * n})
    problem = rulebook.first_problem(with_rules(vector_ctx(access=reread), limits=rules))
    assert (problem is None) == (n == 1)  # with one column a per-row buffer is as large as x: not judged
    if problem:
        assert "4.00 times" in problem.message


def test_limits_never_say_a_count_equals_the_cap_it_exceeds():
    over = softmax_access((6, 10000), {"x": 3 * 60000, "out": 6}, {"out": 60000})
    problem = rulebook.first_problem(
        with_rules(vector_ctx(access=over), limits={"reads_per_element": {"x": 3}, "count_all": True})
    )
    assert "3.000100 times" in problem.message and "3.00 times" not in problem.message


def test_a_write_past_the_end_of_an_output_comes_with_a_picture_of_the_overhang():
    problem = rulebook.first_problem(vector_ctx(buffers=[allocated(after=3, first_after=2, after_spans=[2, 5])]))
    assert problem is not None and problem.rule == "no_write_outside"
    assert problem.picture is not None and problem.picture["kind"] == "overhang"
    assert problem.picture["size"] == 10 and problem.picture["spans"] == [2, 5] and problem.picture["name"] == "out"
    before = rulebook.first_problem(vector_ctx(buffers=[allocated(before=2)]))
    assert before is not None and before.picture is None  # only the overhang past the end is drawn


def test_forged_overhang_offsets_are_refused():
    obs = CaseObservation(0, buffers=[allocated(after=1, first_after=0, after_spans=[0, 1])]).to_dict()
    assert CaseObservation.from_dict(obs).buffers[0].after_spans == [0, 1]
    obs["buffers"][0]["after_spans"] = ["0", 1]
    with pytest.raises(TypeError):
        CaseObservation.from_dict(obs)


def test_a_case_may_allow_a_larger_relative_error_than_the_puzzle():
    close = torch.arange(10, dtype=torch.float32) + 1 + 5e-4 * (torch.arange(10) + 1)  # 5e-4 relative, about
    assert rulebook.first_problem(vector_ctx(out=close)).rule == "values"  # the puzzle's rtol is tighter
    loose = vector_ctx(out=close)
    loose.case = {"n": 10, "rtol": 1e-3}
    assert rulebook.first_problem(loose) is None


@pytest.mark.parametrize(
    ("origin", "words"),
    [
        ("host", "changed outside your kernels after your last kernel wrote it"),
        ("unseen", "none of your kernels ever received"),
        ("fill", "allocated and never written by your kernels"),
        ("copy", "a copy your code made of an input"),
    ],
)
def test_an_output_not_from_a_kernel_says_where_it_came_from(origin, words):
    problem = rulebook.first_problem(vector_ctx(output_origins=["kernel", origin][-1:]))
    assert (
        problem.rule == "outputs_from_kernels"
        and words in problem.message
        and "the out you returned" in (problem.message.lower())
    )


def test_outputs_a_kernel_wrote_and_kernels_that_read_only_clean_memory_pass():
    assert rulebook.first_problem(vector_ctx(output_origins=["kernel"], host_reads=[])) is None
    assert rulebook.first_problem(vector_ctx(output_origins=["kernel copy"])) is None


def test_a_host_read_names_the_kernel_and_the_argument():
    reads = ["argument src_ptr of copy_kernel: a (10,) float32 tensor", "argument b_ptr of add_kernel: a (3,) tensor"]
    problem = rulebook.first_problem(vector_ctx(host_reads=reads))
    assert "src_ptr of copy_kernel" in problem.message and problem.details == [f"Also {reads[1]}"]


# -- the rulebook itself ----------------------------------------------------------------------------
def test_the_rulebook_names_the_problem_after_the_rule_that_found_it(monkeypatch):
    """A rule function says what is wrong; the rulebook, not the function, says which rule it was."""
    entry = rulebook.RULES["values"]
    monkeypatch.setitem(rulebook.RULES, "values", dataclasses.replace(entry, check=lambda ctx: Problem("wrong.")))
    problem = rulebook.first_problem(vector_ctx())
    assert problem is not None and (problem.rule, problem.message) == ("values", "wrong.")


def test_a_rule_that_raises_is_reported_as_the_graders_error_naming_the_rule(monkeypatch):
    def broken(ctx):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setitem(rulebook.RULES, "values", dataclasses.replace(rulebook.RULES["values"], check=broken))
    with pytest.raises(rulebook.RuleFailed, match="values: ZeroDivisionError") as failed:
        rulebook.first_problem(vector_ctx())
    assert failed.value.rule == "values"


def test_rule_parameters_in_puzzles_yaml_are_checked_against_each_rule():
    assert rulebook.parameter_problems(get_puzzle_list()) == []  # the registry as committed fits
    wrong_param = dataclasses.replace(get_puzzle(1), rules={"limits": {"reads_per_elemnt": {"x": 1}}})
    unknown = dataclasses.replace(get_puzzle(1), rules={"no_such_rule": {}})
    every_call = dataclasses.replace(get_puzzle(1), rules={"values": {}})  # applies anyway: not asked for
    problems = rulebook.parameter_problems([wrong_param, unknown, every_call])
    assert len(problems) == 3
    assert "limits" in problems[0] and "reads_per_elemnt" in problems[0]
    assert "no_such_rule" in problems[1] and "values" in problems[2]
    with pytest.raises(rulebook.RulebookError, match="reads_per_elemnt"):
        rulebook.check_registry([wrong_param])


def test_every_rule_and_outcome_a_verdict_can_name_is_in_the_rulebook():
    """The facts about rules live in their entries: the map, the GPU explanation, the access log."""
    assert rulebook.names(draws_map=True) <= rulebook.names(needs_access_log=True)
    assert rulebook.names(explains_gpu_values=True) == {
        "no_load_outside", "no_write_outside", "inputs_unchanged", "pages_in_table"
    }  # fmt: skip
    assert {"raised", "stub", "speed_bar", "interpreter_stage"} <= {
        e.name for e in rulebook.RULES.values() if e.applies == rulebook.OUTCOME
    }
    on_the_report = {e.name for e in rulebook.RULES.values() if e.applies == rulebook.ON_THE_REPORT}
    assert on_the_report == {"kernels_off_reported"}  # a report without it is tampered with: the verdict says so
    assert reasons() == (set(rulebook.RULES) - on_the_report) | set(rulebook.STATUSES)
    with pytest.raises(KeyError):
        rulebook.outcome("no_such_outcome")


def get_puzzle_list():
    from checks.registry import load_puzzles

    return load_puzzles()


@pytest.mark.slow
def test_a_rule_that_raises_gives_an_internal_error_verdict_not_a_traceback(monkeypatch):
    from checks import verdict as V
    from checks.engine.grade import grade

    def broken(ctx):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setitem(rulebook.RULES, "values", dataclasses.replace(rulebook.RULES["values"], check=broken))
    verdict = grade(get_puzzle(1), solution=True, interpret=True, cases=[0, 1])
    assert verdict.status == V.INTERNAL and not verdict.passed
    assert "values: ZeroDivisionError" in verdict.summary and "not in your code" in verdict.summary
