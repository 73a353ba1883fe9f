"""Method rules (checks.engine.judging.rules.method): hand-made access logs, then real kernels recorded in a process
of their
own."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import torch

from checks.engine.access.log import STORE
from checks.engine.contract.observations import CaseObservation
from checks.engine.judging.rules import rulebook
from checks.engine.judging.rules.launch_order import best_working_set, grouped_order, grouped_working_set
from checks.engine.judging.rules.method import causal_skipping, p_never_stored, parallel_over_queries
from checks.engine.judging.rules.problem import CaseContext, Problem
from checks.registry import case_from, get_puzzle
from tests.helpers import Log, attention_log, matmul_log, region, run_rule


# -- hand-made logs ---------------------------------------------------------------------------------
def context(access: dict[str, Any] | None, case: dict[str, Any] | None = None, **inputs: Any) -> CaseContext:
    return CaseContext(None, case_from(case or {}), inputs, [], [], CaseObservation(index=0, access=access))


# -- grouped_order ----------------------------------------------------------------------------------
def test_grouped_order_passes_a_grouped_launch_and_fails_row_major() -> None:
    assert grouped_order(context(matmul_log(128, 512, 32, "grouped"))) is None
    problem = run_rule("grouped_order", context(matmul_log(128, 512, 32, "row-major")), message="Group your tiles.")
    assert isinstance(problem, Problem) and problem.rule == "grouped_order"
    assert problem.message.startswith("Group your tiles. Your first 16 programs load 1 row-tile of a and 16 column")
    assert problem.picture is None  # the access map shows it (rulebook.picture_of): nothing to attach


def test_grouped_order_fails_column_major_order_on_a_tall_grid() -> None:
    """Column-major order is a grouped order on a wide grid (one group as tall as c), not on a tall one."""
    assert grouped_order(context(matmul_log(128, 512, 32, "column-major"))) is None  # 4 x 16 tiles: cannot tell
    assert grouped_order(context(matmul_log(512, 128, 32, "grouped"))) is None
    assert grouped_order(context(matmul_log(512, 128, 32, "row-major"))) is None  # a tall grid suits it
    problem = grouped_order(context(matmul_log(512, 128, 32, "column-major")))
    assert problem is not None and "load 16 row-tiles of a and 1 column-tile of b" in problem.message
    assert "column-major order: 17" in problem.message


@pytest.mark.parametrize("programs", [8, 16])
def test_grouped_order_follows_the_tiles_of_a_persistent_kernel(programs: int) -> None:
    """Persistent programs each walk several tiles: the wave is every program's first tile, then its next."""
    assert grouped_order(context(matmul_log(128, 512, 32, "grouped", programs=programs))) is None
    problem = grouped_order(context(matmul_log(128, 512, 32, "row-major", programs=programs)))
    assert problem is not None and "load 1 row-tile of a and 16 column-tiles of b" in problem.message
    wave = "16 tiles (each program's first, then each one's next)" if programs < 16 else "16 programs"
    assert f"Your first {wave} load" in problem.message


@pytest.mark.parametrize("tile", [32, 64])  # the interpreter config's tiles, and the key's for small products on a GPU
def test_puzzle_4s_cases_tell_row_major_and_column_major_order_from_grouped_at_a_gpus_tiles_too(tile: int) -> None:
    """On a GPU the interpreter stage replays the tiles the GPU chose (64 x 64 for the answer key's small products):
    a wide case must still tell row-major order apart, and a tall one column-major order, or a wrong order passes."""
    rule = get_puzzle(4).rules["grouped_order"]
    wave, factor = rule["first_wave"], rule["factor"]
    grids = [(-(-c.M // tile), -(-c.N // tile)) for c in get_puzzle(4).cases.cpu]
    tells = {order: [] for order in ("row-major", "column-major")}
    for m, n in grids:
        best = best_working_set(m, n, min(wave, m * n))
        tells["row-major"].append(grouped_working_set(m, n, 1, min(wave, m * n)) > factor * best)
        tells["column-major"].append(grouped_working_set(m, n, m, min(wave, m * n)) > factor * best)
    assert any(tells["row-major"]) and any(tells["column-major"]), (tile, grids)


@pytest.mark.parametrize(
    ("puzzle", "rule", "causal"), [("9a", "parallel_over_queries", False), ("9", "causal_skipping", True),
                                   ("10b", "causal_skipping", True), ("10", "causal_skipping", True)]
)  # fmt: skip
def test_an_attention_rule_has_a_case_longer_than_a_gpus_128_row_blocks(puzzle: str, rule: str, causal: bool) -> None:
    """The answer keys take 128-row blocks on a GPU; a case whose sequence fits in one cannot tell skipping or
    splitting from not, so each rule needs a case of more than 128 rows (and causal, for causal skipping)."""
    spec = get_puzzle(puzzle)
    assert rule in spec.rules
    assert any(c.N > 128 and (c.causal or not causal) for c in spec.cases.cpu), [c.N for c in spec.cases.cpu]


def test_grouped_order_says_nothing_where_the_grid_cannot_tell() -> None:
    assert grouped_order(context(matmul_log(130, 100, 32, "row-major"))) is None  # 5 x 4 tiles
    assert grouped_order(context(None)) is None  # on a GPU: no access log


# -- causal_skipping --------------------------------------------------------------------------------
@pytest.mark.parametrize("block_m, block_n", [(32, 16), (16, 16), (64, 32), (16, 32)])
def test_causal_skipping_passes_kernels_that_stop_at_the_diagonal(block_m: int, block_n: int) -> None:
    for backward in (False, True):
        log = attention_log(130, block_m, block_n, skip=True, backward=backward)
        assert causal_skipping(context(log, {"causal": True}, causal=True)) is None


def test_causal_skipping_fails_a_forward_that_walks_every_key_block() -> None:
    log = attention_log(130, 32, 16, skip=False)
    problem = run_rule("causal_skipping", context(log, {"causal": True}, causal=True))
    assert problem is not None and problem.rule == "causal_skipping"
    assert "fwd, program 0 (owns query rows 0-31) loaded k rows 32-129" in problem.details
    assert causal_skipping(context(log, {"causal": False}, causal=False)) is None  # not causal: nothing to skip


def test_causal_skipping_fails_dkdv_programs_that_load_queries_before_their_keys() -> None:
    problem = causal_skipping(context(attention_log(96, 16, 32, skip=False, backward=True), causal=True))
    assert problem is not None
    assert any(d.startswith("dkdv, program 1 (owns key rows 32-63) loaded q rows 0-31") for d in problem.details)
    assert any(d.startswith("dq, program 0") for d in problem.details)


# -- parallel_over_queries --------------------------------------------------------------------------
def test_parallel_over_queries_wants_more_programs_than_heads() -> None:
    q = torch.zeros((2, 3, 100, 16))
    per_head = Log([region("q", (2, 3, 100, 16)), region("o", (2, 3, 100, 16), "allocated")]).launch("fwd", (6, 1, 1))
    for pid in range(6):  # one program per head walks the query blocks of 32 rows in a loop
        for start in range(0, 100, 32):
            rows = (start, min(start + 31, 99))
            per_head.access(STORE, pid, "o", [(pid // 3, pid // 3), (pid % 3, pid % 3), rows, (0, 15)])
    problem = parallel_over_queries(context(per_head.data(), q=q))
    assert problem is not None and "program 0 did the work of 100 query rows of head (0, 0)" in problem.message
    assert "more than one query block of 32 rows" in problem.message
    assert parallel_over_queries(context(per_head.data(), q=q[:, :, :40])) is None  # N below min_n
    blocks = Log([region("q", (2, 3, 100, 16)), region("o", (2, 3, 100, 16), "allocated")]).launch("fwd", (4, 6, 1))
    blocks.access(STORE, 0, "o", [(0, 0), (0, 0), (0, 31), (0, 15)])
    assert parallel_over_queries(context(blocks.data(), q=q)) is None


def whole_sequence_blocks(n: int) -> dict[str, Any]:
    """Grid (cdiv(N, 128), B * H) with BLOCK_M = 128: one program per head while N <= 128."""
    log = Log([region("q", (1, 2, n, 16)), region("o", (1, 2, n, 16), "allocated")])
    log.launch("fwd", (-(-n // 128), 2, 1))
    for block in range(-(-n // 128)):
        for head in range(2):
            rows = (block * 128, min(block * 128 + 127, n - 1))
            log.access(STORE, block + head * -(-n // 128), "o", [(0, 0), (head, head), rows, (0, 15)])
    return log.data()


@pytest.mark.parametrize("n", [64, 100, 128, 130])
def test_parallel_over_queries_accepts_a_query_block_that_holds_a_short_sequence(n: int) -> None:
    """BLOCK_M = 128 (the tutorial's, and the notebook's) makes one program per head up to N = 128: not judged."""
    assert parallel_over_queries(context(whole_sequence_blocks(n), q=torch.zeros((1, 2, n, 16)))) is None


def test_parallel_over_queries_fails_a_query_block_as_tall_as_a_long_sequence() -> None:
    log = Log([region("q", (1, 2, 200, 16)), region("o", (1, 2, 200, 16), "allocated")]).launch("fwd", (1, 2, 1))
    for head in range(2):  # BLOCK_M = 256: one block, one program per head
        log.access(STORE, head, "o", [(0, 0), (head, head), (0, 199), (0, 15)])
    problem = parallel_over_queries(context(log.data(), q=torch.zeros((1, 2, 200, 16))))
    assert problem is not None and "covers all 200 query rows" in problem.message


# -- p_never_stored ---------------------------------------------------------------------------------
def test_p_never_stored_fails_an_n_by_n_buffer() -> None:
    inputs = {name: torch.zeros((1, 1, 192, 16), dtype=torch.float16) for name in ("q", "k", "v", "o", "do")}
    regions = [region(name, (1, 1, 192, 16)) for name in inputs]
    fine = Log([*regions, region("dq", (1, 1, 192, 16), "allocated")]).launch("bwd", (6, 1, 1))
    fine.access(STORE, 0, "dq", [(0, 0), (0, 0), (0, 191), (0, 15)])
    assert p_never_stored(context(fine.data(), **inputs)) is None
    p = region("p", (1, 192, 192), "allocated", element_size=4)
    p["name"] = p["label"]
    stores_p = Log([*regions, p]).launch("probs", (12, 1, 1)).access(STORE, 0, p["name"], [(0, 0), (0, 191), (0, 191)])
    problem = run_rule("p_never_stored", context(stores_p.data(), **inputs), factor=3)
    assert problem is not None and problem.rule == "p_never_stored"
    assert "The largest buffer is a (1, 192, 192) tensor you allocated: 36864 elements" in problem.message


def test_p_never_stored_fails_p_in_float16_too() -> None:
    """P in half precision is 2.5x these inputs in bytes, under the factor: the N x N shape still shows."""
    inputs = {name: torch.zeros((1, 1, 192, 16), dtype=torch.float16) for name in ("q", "k", "v", "o", "do")}
    p = region("p", (1, 192, 192), "allocated", element_size=2)
    log = Log([*(region(name, (1, 1, 192, 16)) for name in inputs), p]).launch("probs", (12, 1, 1))
    problem = p_never_stored(context(log.data(), **inputs), factor=3)
    assert problem is not None and "1.00 x B * H * N * N = 36864, an N x N matrix per head" in problem.message
    # where N < 8 D an N x N buffer is not much larger than a few shaped like q: only the factor judges
    small = {name: torch.zeros((1, 1, 100, 16), dtype=torch.float16) for name in inputs}
    p100 = region("p", (1, 100, 100), "allocated", element_size=2)
    log100 = Log([*(region(name, (1, 1, 100, 16)) for name in small), p100]).launch("probs", (7, 1, 1))
    assert p_never_stored(context(log100.data(), **small), factor=3) is None


def test_p_never_stored_does_not_count_dq_accumulated_in_place() -> None:
    """One kernel adds each key block's share of dQ with tl.atomic_add: many stores, a small buffer, no P."""
    inputs = {name: torch.zeros((2, 1, 100, 32), dtype=torch.float16) for name in ("q", "k", "v", "o", "do")}
    dq32 = region("dq32", (2, 1, 100, 32), "allocated", element_size=4)
    outs = [region(name, (2, 1, 100, 32), "allocated") for name in ("dk", "dv")]
    log = Log([*(region(name, (2, 1, 100, 32)) for name in inputs), dq32, *outs]).launch("bwd", (7, 2, 1))
    for pid in range(14):
        for start in range(0, 100, 16):  # every key block adds to every query row of its head
            log.access(STORE, pid, "dq32", [(pid // 7, pid // 7), (0, 0), (start, min(start + 15, 99)), (0, 31)])
    assert p_never_stored(context(log.data(), **inputs), factor=3) is None


# -- the registry's entries -------------------------------------------------------------------------
def rules_for(number: int) -> dict[str, dict[str, Any]]:
    """The puzzle's method rules (its `rules:` entry without the read limits)."""
    return {name: params for name, params in get_puzzle(number).rules.items() if name != "limits"}


def apply_rules(ctx: CaseContext, rules: dict[str, dict[str, Any]]) -> list[Problem]:
    found = [rulebook.apply(rulebook.RULES[name], ctx, params) for name, params in rules.items()]
    return [p for p in found if p is not None]


@pytest.mark.parametrize("number", [4, 9, 10])
def test_every_rule_in_puzzles_yaml_exists_and_takes_its_params(number: int) -> None:
    rules = rules_for(number)
    assert rules and not rulebook.parameter_problems([get_puzzle(number)])
    assert all((params.get("message") or rulebook.RULES[name].message).endswith(".") for name, params in rules.items())
    assert apply_rules(context(None, causal=True), rules) == []  # on a GPU every rule is silent


# -- real kernels, recorded in a process of their own (the interpreter needs a fresh process) --------
_RECORDED: dict[tuple[int, str, int], dict[str, Any]] = {}


def recorded(number: int, variant: str, case: int, edits: list[dict[str, str]] | None = None) -> CaseContext:
    """The answer key ("key"), a known-wrong edit file, or the key with `edits`, recorded on one CPU case."""
    from checks.authoring.wrong import answer_key_body, apply_edits, known_wrong, materialize, name_of
    from checks.engine.inputs import draw_case
    from checks.engine.processes.access_recording import record_in_own_process

    puzzle = get_puzzle(number)
    if (number, variant, case) not in _RECORDED:
        with tempfile.TemporaryDirectory() as tmp:
            if variant == "key":
                path = puzzle.solution
            elif edits:
                path = Path(tmp) / f"{variant}.py"
                path.write_text(apply_edits(answer_key_body(puzzle), edits, variant), encoding="utf-8")
            else:
                path = materialize(puzzle, next(f for f in known_wrong(puzzle) if name_of(f) == variant), Path(tmp))
            _RECORDED[(number, variant, case)] = record_in_own_process(number, path, case, 300)
    _, inputs, _ = draw_case(puzzle, case)
    data = _RECORDED[(number, variant, case)]
    return CaseContext(puzzle, case_from(data["case"]), inputs, [], [], CaseObservation(index=case, access=data["log"]))


def problems(ctx: CaseContext) -> list[str]:
    return [p.rule for p in apply_rules(ctx, rules_for(ctx.puzzle.number))]


def _case(number: int, **match: Any) -> int:
    cases = get_puzzle(number).cases.cpu
    return next(i for i, c in enumerate(cases) if all(getattr(c, k) == v for k, v in match.items()))


@pytest.mark.slow
def test_matmul_fast_answer_key_passes_and_row_major_order_fails() -> None:
    case = _case(4, M=128, N=1024)
    assert problems(recorded(4, "key", case)) == []
    assert problems(recorded(4, "row_major_order", case)) == ["grouped_order"]


@pytest.mark.slow
def test_flash_attention_2_forward_skips_causal_blocks() -> None:
    case = _case(9, N=130, causal=True)
    assert problems(recorded(9, "key", case)) == []
    assert problems(recorded(9, "causal_no_skipping", case)) == ["causal_skipping"]
    bigger = [{"old": '[triton.Config({"BLOCK_M": 32, "BLOCK_N": 16}, num_warps=4, num_stages=1)]',
               "new": '[triton.Config({"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=4, num_stages=1)]'}]  # fmt: skip
    assert problems(recorded(9, "blocks_64_32", case, bigger)) == []
    assert problems(recorded(9, "key", 0)) == []  # N = 100, not causal: parallel over query blocks


@pytest.mark.slow
def test_flash_attention_2_backward_skips_causal_blocks_and_never_stores_p() -> None:
    case = _case(10, N=192)
    assert problems(recorded(10, "key", case)) == []
    assert problems(recorded(10, "causal_no_skipping", case)) == ["causal_skipping"]
    assert problems(recorded(10, "stores_p", case)) == ["p_never_stored"]
