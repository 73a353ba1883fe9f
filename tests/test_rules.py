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
from checks.engine.contract.observations import BufferObs, CaseObservation, LaunchObs
from checks.engine.judging.rules import rulebook
from checks.engine.judging.rules.pictures import ACCESS_MAP, ERROR_MAP, OVERHANG
from checks.engine.judging.rules.problem import CaseContext, Problem
from checks.instructor.solutions import reasons
from checks.puzzles import Expected
from checks.registry import Case, get_puzzle
from tests.helpers import switch_off

OWN = LaunchObs("add_kernel", own=True, blocks={"BLOCK_SIZE": 1024})


def vector_ctx(out: torch.Tensor | None = None, **obs_fields) -> CaseContext:
    """A puzzle-1 call on x = 0..9, y = 1 whose observation is the answer key's unless told otherwise."""
    x = torch.arange(10, dtype=torch.float32)
    y = torch.ones(10)
    expected = [Expected("out", (x + y).double(), torch.float32, ("elements",))]
    given = obs_fields.pop("_outputs", None)
    obs = CaseObservation(**{"index": 0, "returned": "tensor", "launches": [OWN], "buffers": [], **obs_fields})
    outputs = given if given is not None else [x + y if out is None else out]
    return CaseContext(get_puzzle(1), Case(n=10), {"x": x, "y": y}, expected, outputs, obs)


def kept_ctx(out: torch.Tensor, fresh: torch.Tensor | None) -> CaseContext:
    """A puzzle-1 call on a kept tensor that earlier calls changed; `fresh`: what it returns from its first state."""
    ctx = vector_ctx(out=out, kept_changed=["a (1,) float32 tensor"], fresh_outputs=fresh is not None)
    return dataclasses.replace(ctx, fresh_outputs=None if fresh is None else [fresh])


def access(
    loaded: dict[str, int] | None = None,
    outside: dict[str, int] | None = None,
    widest: int = 16,
    regions: tuple[tuple[str, str], ...] = (("x", "input"), ("y", "input"), ("out", "allocated")),
    unstored: int = 0,
) -> dict:
    """An access log of a puzzle-1 call: lanes loaded per region (spread evenly over its 10 elements), lanes loaded
    from each region's guard bands; every element of out stored once but the last `unstored`."""
    loaded, outside = loaded or {}, outside or {}
    rows = [{"name": n, "label": n, "role": role, "numel": 10, "shape": [10], "strides": [1], "offset": 0,
             "size": 10, "element_size": 4} for n, role in regions]  # fmt: skip
    stored = torch.tensor([1] * (10 - unstored) + [0] * unstored, dtype=torch.int32)
    writes = [stored if n == "out" else torch.zeros(0, dtype=torch.int32) for n, _ in regions]
    reads = [torch.full((10,), loaded.get(n, 0) // 10, dtype=torch.int32) for n, _ in regions]
    log = AccessLog(regions=rows, loaded=[loaded.get(n, 0) for n, _ in regions], reads=reads,
                    outside_loads=[outside.get(n, 0) for n, _ in regions], widest=widest, writes=writes)  # fmt: skip
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


def found(rule: str) -> dict:
    """What `checks.engine.judging.plans` attaches to a case whose plan breaks `rule`."""
    return {"rule": rule, "message": f"The plan breaks {rule}: change it.", "details": []}


WRAP = {"kind": "wrap", "kernel": "add_kernel", "function": "add_kernel", "line": 9, "text": "x = pid * n",
        "program": [3, 0, 0], "op": "mul", "bits": 32, "a": 3, "b": 2**30, "result": 3 * 2**30}  # fmt: skip
RACE = {"kind": "race", "launch": 0, "kernel": "add_kernel", "function": "add_kernel", "line": 9, "region": 2,
        "index": [3], "programs": [0, 1]}  # fmt: skip


RULE_CASES: dict[str, Callable[[], CaseContext]] = {
    "kernel_calls": lambda: vector_ctx(plan_problem=found("kernel_calls")),
    "mma_waited": lambda: vector_ctx(plan_problem=found("mma_waited")),
    "kernels_from_source": lambda: vector_ctx(plan_problem=found("kernels_from_source")),
    "torch_free": lambda: vector_ctx(plan_problem=found("torch_free")),
    "plan_from_shapes": lambda: vector_ctx(plan_problem=found("plan_from_shapes")),
    "kernel_launched": lambda: vector_ctx(launches=[LaunchObs("add_kernel", own=False)]),
    "no_write_outside": lambda: vector_ctx(buffers=[allocated(after=3, first_after=0)]),
    "inputs_unchanged": lambda: vector_ctx(buffers=[input_buffer(changed=4)]),
    "no_load_outside": lambda: vector_ctx(access=access(outside={"x": 6})),
    "no_race": lambda: vector_ctx(access={**access(), "races": [RACE]}),
    "output_form": lambda: vector_ctx(out=torch.zeros(10, dtype=torch.float64)),
    "kept_state": lambda: kept_ctx(torch.arange(10, dtype=torch.float32), fresh=torch.arange(10) + 1.0),
    "values": lambda: vector_ctx(out=torch.arange(10, dtype=torch.float32)),
    "offsets_fit": lambda: vector_ctx(overflow=[WRAP]),
    "outputs_stored": lambda: with_rules(
        vector_ctx(access=access(loaded={"x": 10, "y": 10}, unstored=3)), limits={"reads_per_element": {"x": 1}}
    ),
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


def test_kept_state_blames_the_kept_tensor_only_when_the_call_is_right_from_its_first_state():
    right = torch.arange(10, dtype=torch.float32) + 1.0
    assert problem_of(kept_ctx(right, fresh=right)) == ""  # changed state, right outputs: nothing to say
    wrong = torch.arange(10, dtype=torch.float32)
    assert problem_of(kept_ctx(wrong, fresh=wrong)) == "values"  # wrong from the first state too: another bug
    assert problem_of(kept_ctx(wrong, fresh=None)) == "values"  # no second run to tell: the values rule judges
    problem = rulebook.first_problem(kept_ctx(wrong, fresh=right))
    assert problem.rule == "kept_state" and "as the calls before it left it" in problem.message


def test_every_rule_every_call_applies_has_a_case():
    """The rules a puzzle asks for (but `limits`, whose case is here) have theirs in tests/test_method_rules.py and
    tests/test_decoding_rules.py, on hand-made and recorded logs; every rule, a known-wrong kernel that only it
    rejects (tests/test_answer_key.py)."""
    assert {rule.name for rule in rulebook.checked(rulebook.EVERY_CALL)} <= set(RULE_CASES) <= set(rulebook.RULES)


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
    """The facts about rules live in their declarations: the map, the GPU explanation, the access log."""
    assert rulebook.names(draws_map=True) <= rulebook.names(needs_access_log=True)
    assert rulebook.names(explains_gpu_values=True) == {
        "no_load_outside", "no_write_outside", "inputs_unchanged", "pages_in_table", "own_sequence",
        "context_pages_in_table", "no_race",
    }  # fmt: skip
    assert rulebook.names(explained_by_interpreter=True) == {"values"}
    assert set(rulebook.OUTCOMES) == {"raised", "speed_bar", "stub", "too_many_configs"}
    assert not set(rulebook.OUTCOMES) & set(rulebook.RULES)
    assert reasons() == set(rulebook.RULES) | set(rulebook.OUTCOMES) | set(rulebook.STATUSES)
    assert rulebook.outcome("raised") == "raised"
    with pytest.raises(KeyError):
        rulebook.outcome("no_such_outcome")


def test_every_rule_declares_what_the_rest_of_the_grader_asks_for():
    """Each rule's name, message, reference row and picture are declared beside it; nothing else lists them."""
    assert list(rulebook.RULES) == [*rulebook.ORDER, *rulebook.requested_order(rulebook.declared_rules())]
    for name, rule in rulebook.RULES.items():
        assert rule.name == name == rule.check.__name__
        assert rule.message[:1].isupper() and rule.message.endswith("."), f"{name}: a message, in sentences"
        assert rule.checks and not rule.checks.endswith("."), f"{name}: a reference row, what it checks"
        assert "|" not in rule.checks + rule.message, f"{name}: its row must not break the reference page's table"
        assert rulebook.taught_in(rule), f"{name}: no puzzle teaches it (declare taught_in, or ask for it)"
        assert rule.applies in (rulebook.EVERY_CALL, rulebook.ON_REQUEST)
        if rule.draws_map or (rule.explains_gpu_values and rule.applies == rulebook.ON_REQUEST):
            assert rule.needs_access_log, f"{name}: found in the interpreter's access log"
    every_call = [r.applies == rulebook.EVERY_CALL for r in rulebook.RULES.values()]
    assert every_call == sorted(every_call, reverse=True), "the rules every call applies come first"
    assert rulebook.picture_of("values") == ERROR_MAP and rulebook.picture_of("no_write_outside") == OVERHANG
    assert rulebook.picture_of("split_kv") == ACCESS_MAP and rulebook.picture_of("raised") is None


def test_a_rule_left_out_of_the_order_or_named_twice_or_unknown_stops_the_rulebook():
    declared = rulebook.declared_rules()
    assert rulebook.order_problems(rulebook.ORDER, declared) == []
    missing = tuple(name for name in rulebook.ORDER if name != "values")
    problems = rulebook.order_problems((*missing, "output_form", "no_such_rule", "split_kv"), declared)
    assert len(problems) == 4
    assert "'values' (checks.engine.judging.rules.core) applies to every call but is not in ORDER" in problems[0]
    assert "'output_form' twice" in problems[1] and "'no_such_rule', which no module" in problems[2]
    assert "'split_kv', a rule puzzles ask for: its declaration places it" in problems[3]


def test_a_requested_rule_is_placed_by_its_declaration():
    """No list to edit for a rule a puzzle asks for: declaration order, and `before=` where priority differs."""
    declared = rulebook.declared_rules()
    order = rulebook.requested_order(declared)
    assert order.index("pages_in_table") < order.index("kv_once_per_group") < order.index("split_kv")
    assert order[:2] == ["limits", "grouped_order"]  # launch_order is the first of MODULES to declare any
    wrong = {**declared, "limits": dataclasses.replace(declared["limits"], before="values")}
    assert "before='values', which is not a rule puzzles ask for" in rulebook.order_problems(rulebook.ORDER, wrong)[0]


def test_a_puzzle_gives_a_message_only_where_it_differs_from_the_rules_own():
    """The rule's own message is declared beside it: puzzles.yaml gives one only to say something else."""
    for puzzle in get_puzzle_list():
        for name, params in puzzle.rules.items():
            assert params.get("message") != rulebook.RULES[name].message, f"puzzle {puzzle.number}: {name}"


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


def test_a_cases_own_atol_and_rtol_loosen_the_puzzles_for_that_case_only():
    """Puzzle 1 allows 1e-6: an output off by 0.05 everywhere fails, unless the case itself allows more."""
    from checks.engine.judging.rules.core import compare_all

    off = torch.arange(10, dtype=torch.float32) + 1 + 0.05
    strict = vector_ctx(off)
    assert compare_all(strict, strict.outputs)[0][1] is not None
    for loosened in ({"atol": 0.1}, {"rtol": 0.1}):
        ctx = dataclasses.replace(strict, case=dataclasses.replace(strict.case, **loosened))
        assert compare_all(ctx, ctx.outputs)[0][1] is None, loosened


def test_nan_beside_unwritten_scratch_is_only_a_lead_without_an_access_log():
    """On a GPU (no access log) NaN in the output while a scratch buffer still holds poison does not say the kernels
    read it: the report says 'if', the case is not diagnosed, and the interpreter's cause is taken instead; with the
    interpreter's log showing the loads, the poison is the cause."""
    nan = torch.full((10,), float("nan"))
    scratch = BufferObs("a (10,) float32 tensor you allocated", "allocated", 10, 4, poisoned=4)
    ctx = vector_ctx(nan, buffers=[scratch])
    slots = dataclasses.replace(ctx, inputs={**ctx.inputs, "unused": torch.tensor([float("nan")])})  # as 13's cache
    gpu = rulebook.first_problem(slots)
    assert gpu is not None and gpu.rule == "values"
    assert "if your kernels read it there" in gpu.message and "computed from memory no kernel wrote" not in gpu.message
    assert not gpu.diagnosed and not gpu.cause
    finite = rulebook.first_problem(ctx)  # every input finite: the overflow is found behind the lead
    assert finite is not None and finite.diagnosed and any("overflow" in line for line in finite.details)
    regions = (("x", "input"), ("y", "input"), ("out", "allocated"), (scratch.label, "allocated"))
    log = AccessLog.from_dict(access(loaded={"x": 10, "y": 10, scratch.label: 10}, regions=regions))
    log.reads = [torch.ones(10, dtype=torch.int32) for _ in regions]  # the scratch read everywhere, written nowhere
    log.writes = [torch.zeros(10, dtype=torch.int32) for _ in regions]
    interpreter = rulebook.first_problem(vector_ctx(nan, buffers=[scratch], access=log.to_dict()))
    assert interpreter is not None and "computed from memory no kernel wrote" in interpreter.message
    assert interpreter.diagnosed and interpreter.cause


def test_nan_from_masked_off_lanes_is_named_only_where_the_replay_proved_it():
    """A masked load without `other=` is named, with its line, when the replay found that the same call with those
    lanes read as 0 has no NaN where this one has (`masked_poison`); without that proof the NaN is an overflow, as
    before; an output without NaN is wrong for another reason, which the load does not explain."""
    nan = torch.full((10,), float("nan"))
    site = {"kernel": "add_kernel", "function": "add_kernel", "line": 7, "lanes": 6}
    proved = rulebook.first_problem(vector_ctx(nan, masked_poison=[site]))
    assert proved is not None and proved.rule == "values" and proved.diagnosed
    assert "a masked load without `other=` at line 7 of `add_kernel` read lanes outside the mask" in proved.message
    unproved = rulebook.first_problem(vector_ctx(nan))
    assert unproved is not None and "other=" not in unproved.message
    assert any("overflow" in line for line in unproved.details)
    finite = rulebook.first_problem(vector_ctx(torch.zeros(10), masked_poison=[site]))
    assert finite is not None and "other=" not in finite.message


def test_a_race_names_its_programs_element_and_line_and_a_collision_and_a_read_are_told_apart():
    race = rulebook.first_problem(vector_ctx(access={**access(), "races": [RACE]}))
    assert race is not None and race.rule == "no_race"
    assert "Programs 0 and 1 of launch 1 both load and store element [3] of scratch out, at line 9 of `add_kernel`" in (
        race.message
    )
    assert "(a race)" in race.message and "tl.atomic_add" in race.message
    collision = {**RACE, "kind": "collision", "programs": [2, 5]}
    clash = rulebook.first_problem(vector_ctx(access={**access(), "races": [collision]}))
    assert clash is not None and "Programs 2 and 5 of launch 1 store different values" in clash.message
    assert "(a write collision)" in clash.message
    read = rulebook.first_problem(vector_ctx(access={**access(), "races": [{**RACE, "kind": "read"}]}))
    assert read is not None and "Program 1 of launch 1 loads element [3] of scratch out, at line 9" in read.message
    assert "which program 0 of the same launch wrote" in read.message and "(an unordered read)" in read.message
    assert "in a second launch, as puzzle 11's merge kernel does" in read.message


def test_nan_from_atomics_into_unwritten_memory_names_the_atomics_line():
    """Atomics that added into an allocation still holding the poison explain NaN in an output (a `torch.empty` dQ
    buffer left to reset_to_zero); without NaN, or without such atomics, the values are told as before."""
    nan = torch.full((10,), float("nan"))
    site = {"region": 2, "kernel": "add_kernel", "function": "add_kernel", "line": 12}
    told = rulebook.first_problem(vector_ctx(nan, access={**access(), "atomics_on_poison": [site]}))
    assert told is not None and told.rule == "values"
    assert "the atomics at line 12 of `add_kernel` added into scratch out where nothing had been written" in (
        told.message
    )
    assert "reset_to_zero" in told.message
    plain = rulebook.first_problem(vector_ctx(nan, access=access()))
    assert plain is not None and "atomics" not in plain.message
    finite = rulebook.first_problem(vector_ctx(torch.zeros(10), access={**access(), "atomics_on_poison": [site]}))
    assert finite is not None and "atomics" not in finite.message


def test_a_float16_running_sum_is_named_only_where_it_reproduces_the_output():
    """A matmul whose output is the float16 running sum over its K blocks is told so (with the block, from the
    launch); another error of the same size is not."""
    from checks.engine.judging.rules.low_precision import float16_running_sum

    gen = torch.Generator().manual_seed(3)
    a = (torch.randn(8, 2048, generator=gen) + 1.0).half()
    b = (torch.randn(2048, 8, generator=gen) + 1.0).half()
    exact = a.double() @ b.double()

    def ctx(out: torch.Tensor) -> CaseContext:
        obs = CaseObservation(index=0, returned="tensor", launches=[LaunchObs("matmul", True, {"BLOCK_K": 64})])
        expected = [Expected("c", exact, torch.float16, ("rows", "columns"))]
        return CaseContext(get_puzzle("3"), Case(M=8, N=8, K=2048), {"a": a, "b": b}, expected, [out], obs)

    named = rulebook.first_problem(ctx(float16_running_sum(a, b, 64)))
    assert named is not None and named.rule == "values"
    assert "summed in a float16 accumulator over blocks of 64 along K" in named.message
    other = rulebook.first_problem(ctx((exact * 1.01).half()))
    assert other is not None and "float16 accumulator" not in other.message


def test_a_float16_output_accumulator_is_named_only_where_its_overflow_reproduces_the_output():
    """An attention output that is the float16 running sum of p @ v, overflowed past 65504 (v near 1000, weights
    spread over every key), is told so, with the launch's key block; inf in other rows is not."""
    from checks.engine.judging.rules.low_precision import float16_attention_output
    from checks.puzzles.p09_flash_attention_v2_fwd import attention_reference

    gen = torch.Generator().manual_seed(9)
    q, k = ((torch.randn(1, 1, 130, 16, generator=gen) * 0.1).half() for _ in range(2))
    v = torch.randn(1, 1, 130, 16, generator=gen)
    v[..., :8] += 1000  # half the columns, as the puzzles' offset cases draw them
    v = v.half()
    o, lse = attention_reference(q, k, v, True, 0.25)

    def ctx(out: torch.Tensor) -> CaseContext:
        obs = CaseObservation(index=0, returned="tuple", launches=[LaunchObs("_attn_fwd", True, {"BLOCK_N": 32})])
        expected = [Expected("o", o, torch.float16, ("b", "h", "rows", "d")), Expected("lse", lse, torch.float32, ())]
        inputs = {"q": q, "k": k, "v": v, "causal": True, "sm_scale": 0.25}
        return CaseContext(get_puzzle("9"), Case(B=1, H=1, N=130, D=16), inputs, expected, [out, lse.float()], obs)

    twin, _, peak = float16_attention_output(q, k, v, 0.25, True, 32)
    assert peak > 65504 and bool(torch.isinf(twin[0, 0, 70:, :8]).all()) and bool(torch.isfinite(twin[0, 0, :60]).all())
    assert bool(torch.isfinite(twin[..., 8:]).all())
    named = rulebook.first_problem(ctx(twin))
    assert named is not None and named.rule == "values"
    assert "kept in float16 over blocks of 32 keys" in named.message and "a tail" not in " ".join(named.details)
    elsewhere = o.half().clone()
    elsewhere[0, 0, :64] = float("inf")  # inf, but in the rows whose sums stay small
    other = rulebook.first_problem(ctx(elsewhere))
    assert other is not None and "float16" not in other.message
    unnormalised = (o * torch.arange(1, 131, dtype=o.dtype)[:, None]).half()  # not divided by l: inf where it is too
    assert bool(torch.isinf(unnormalised[0, 0, 70:, :8]).all())
    alike = rulebook.first_problem(ctx(unnormalised))
    assert alike is not None and "float16" not in alike.message


@pytest.mark.parametrize(
    "number",
    [n if n in ("9", "13", "15") else pytest.param(n, marks=pytest.mark.exhaustive)  # one of each way of reading
     for n in ("8a", "8", "9a", "9", "11", "12", "13", "14", "15")],
)  # fmt: skip
def test_the_float16_twin_follows_each_attention_puzzles_inputs(number):
    """The recomputation with a float16 output accumulator reads each attention puzzle's inputs as its reference does
    (heads, groups, pages, packed sequences, causal alignment): on the first case it is the reference within the
    tolerance; on the case whose v is near an offset, its sum passes 65504 and rows come out inf."""
    from checks.engine.inputs import draw_case
    from checks.engine.judging.rules.low_precision import FLOAT16_MAX, float16_attention_twin
    from checks.puzzles import spec_module

    puzzle = get_puzzle(number)
    atol, rtol = puzzle.tolerance_for("o")
    _, inputs, _ = draw_case(puzzle, 0)
    expected = spec_module(puzzle).reference(inputs)
    o = expected[0].value
    twin, twin_lse, peak = float16_attention_twin(inputs, 64)
    assert peak < FLOAT16_MAX and bool(((twin.double() - o).abs() <= atol + rtol * o.abs()).all())
    if len(expected) > 1:  # lse, shaped as the puzzle returns it
        assert twin_lse.shape == expected[1].value.shape
        assert bool(((twin_lse - expected[1].value.double()).abs() <= 1e-6).all())
    (near,) = [i for i, case in enumerate(puzzle.cases.cpu) if case.offset]
    _, inputs, _ = draw_case(puzzle, near)
    twin, _, peak = float16_attention_twin(inputs, 64)
    assert peak > FLOAT16_MAX and bool(torch.isinf(twin).any())


@pytest.mark.parametrize("number", ["9a", "9", "14", "15"])
def test_a_float16_row_sum_fails_the_lead_case_and_is_named_only_where_it_reproduces_the_outputs(number):
    """On the case whose first key leads the others, l kept in float16 over blocks of 16 or 32 keys puts lse past the
    tolerance, and the report names it with the block; l in float32 with float16 p fed to the product (Triton's
    tutorial) stays inside it; an lse off in other rows is not named."""
    from checks.engine.inputs import draw_case
    from checks.engine.judging.rules.low_precision import float16_attention_twin
    from checks.puzzles import spec_module

    puzzle = get_puzzle(number)
    (index,) = [i for i, case in enumerate(puzzle.cases.cpu) if case.lead]
    _, inputs, _ = draw_case(puzzle, index, seed=3)
    expected = spec_module(puzzle).reference(inputs)
    tolerance = {e.name: puzzle.tolerance_for(e.name) for e in expected}

    def off(outputs: tuple) -> float:
        """The largest error of lse, as a multiple of what the tolerance allows."""
        lse = expected[1].value.double()
        return float(
            ((outputs[1].double() - lse).abs() / (tolerance["lse"][0] + tolerance["lse"][1] * lse.abs())).max()
        )

    def ctx(outputs: list) -> CaseContext:
        obs = CaseObservation(index=0, returned="tuple", launches=[LaunchObs("_attn_fwd", True, {"BLOCK_N": 16})])
        return CaseContext(puzzle, puzzle.cases.cpu[index], inputs, expected, outputs, obs)

    for block_n in (16, 32):
        assert off(float16_attention_twin(inputs, block_n, kept="l")) > 1.5
        assert off(float16_attention_twin(inputs, block_n, kept="none")) < 0.01
    o, lse, _ = float16_attention_twin(inputs, 16, kept="l")
    named = rulebook.first_problem(ctx([o, lse.float()]))
    assert named is not None and named.rule == "values"
    assert "the running sum l (the softmax's denominator) kept in float16 over blocks of 16 keys" in named.message
    shifted = expected[1].value.float().clone()
    shifted[..., ::2] += 0.01  # off in the rows whose weights spread over every key, where a float16 l is not
    other = rulebook.first_problem(ctx([expected[0].value.half(), shifted]))
    assert other is not None and other.rule == "values" and "float16" not in other.message


@pytest.mark.parametrize(
    ("number", "block_n", "split", "shorter"),
    [("11", 16, 64, 32), pytest.param("12", 16, 64, 32, marks=pytest.mark.exhaustive), ("13", 64, 0, 128)],
)  # 12 reads its inputs as 11 does, its query heads G to a kv head
def test_a_float16_row_sum_fails_the_decoding_lead_case_in_each_split_and_is_named_with_its_split(
    number, block_n, split, shorter
):
    """Decoding (11-13): on the case whose first key leads the others in the odd query heads, l kept in float16 in each
    split, over the answer key's interpreter blocks and splits (13's key walks the case's 240 keys in one), puts lse
    past the tolerance, and the report names the block and the split, not a shorter split whose float16 l stays inside
    the tolerance; l in float32 with float16 p fed to the product (the keys' style), split alike, stays inside it; an
    lse off in other heads is not named."""
    from checks.engine.inputs import draw_case
    from checks.engine.judging.rules.low_precision import float16_attention_twin
    from checks.puzzles import spec_module

    puzzle = get_puzzle(number)
    (index,) = [i for i, case in enumerate(puzzle.cases.cpu) if case.lead]
    _, inputs, _ = draw_case(puzzle, index, seed=3)
    expected = spec_module(puzzle).reference(inputs)
    lse = expected[1].value.double()
    atol, rtol = puzzle.tolerance_for("lse")

    def off(outputs: tuple) -> float:
        """The largest error of lse, as a multiple of what the tolerance allows."""
        return float(((outputs[1].double() - lse).abs() / (atol + rtol * lse.abs())).max())

    def ctx(outputs: list) -> CaseContext:
        obs = CaseObservation(index=0, returned="tuple", launches=[LaunchObs("_split", True, {"BLOCK_N": block_n})])
        return CaseContext(puzzle, puzzle.cases.cpu[index], inputs, expected, outputs, obs)

    assert off(float16_attention_twin(inputs, block_n, kept="l", split=split)) > 1.5
    assert off(float16_attention_twin(inputs, block_n, kept="l", split=shorter)) < 1  # too short to fail
    assert off(float16_attention_twin(inputs, block_n, kept="none", split=split)) < 0.01
    o, twin_lse, _ = float16_attention_twin(inputs, block_n, kept="l", split=split)
    named = rulebook.first_problem(ctx([o, twin_lse.float()]))
    assert named is not None and named.rule == "values"
    walked = f"blocks of {block_n} keys" + (f", each split of {split} keys on its own" if split else ":")
    assert f"the running sum l (the softmax's denominator) kept in float16 over {walked}" in named.message
    shifted = expected[1].value.float().clone()
    shifted[..., ::2] += 0.02  # off in the heads whose weights spread over every key, where a float16 l is not
    other = rulebook.first_problem(ctx([expected[0].value.half(), shifted]))
    assert other is not None and other.rule == "values" and "float16" not in other.message
