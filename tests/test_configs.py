"""Every config an autotuned kernel runs on a GPU is the one the interpreter judges (checks.engine.judging.configs):
with no GPU stage each config that differs in its arguments (tests/test_replay.py grades the attacks that hide a
method in one), beside a GPU stage the config the GPU reported."""

from __future__ import annotations

from dataclasses import replace

import pytest

from checks import verdict as V
from checks.engine.contract.plan import distinct_alternatives, method_alternatives
from checks.engine.contract.protocol import Job
from checks.engine.replay.perform import Tuning, interpreted_choice, ran_config
from checks.registry import get_puzzle
from tests.helpers import ROOT, submission

TAMPERING = ROOT / "tests" / "submissions" / "tampering"
TAMPERING_NAME = "method_by_a_config"


def alternative(block: int, group: int, num_warps: int = 4) -> dict:
    return {
        "grid": [4 * 64 // block],
        "args": {"M": {"scalar": 64}, "BLOCK_M": {"scalar": block}, "GROUP_SIZE_M": {"scalar": group}},
        "options": {"num_warps": num_warps},
        "config": {"BLOCK_M": block, "GROUP_SIZE_M": group},
    }


LAUNCH = {
    "op": "launch",
    "kernel": "matmul_kernel",
    "alternatives": [alternative(32, 8), alternative(32, 8, num_warps=8), alternative(64, 8), alternative(32, 1)],
}


def test_configs_that_differ_only_in_launch_settings_count_as_one():
    assert distinct_alternatives(LAUNCH) == [0, 2, 3]
    assert method_alternatives([{"ops": [LAUNCH]}, {"ops": []}]) == 3


def test_the_interpreter_runs_each_distinct_config_in_turn_or_the_one_the_gpu_ran():
    assert [interpreted_choice(LAUNCH, Tuning(alternative=k)) for k in range(5)] == [0, 2, 3, 3, 3]
    gpu_ran = ran_config("matmul_kernel", alternative(32, 1))
    assert gpu_ran == {"kernel": "matmul_kernel", "config": {"BLOCK_M": 32, "GROUP_SIZE_M": 1}}
    assert interpreted_choice(LAUNCH, Tuning(chosen={"matmul_kernel": gpu_ran["config"]})) == 3
    # the values are read from the arguments, not from the config's own record of them
    forged = {**LAUNCH, "alternatives": [{**alternative(32, 8), "config": {"BLOCK_M": 32, "GROUP_SIZE_M": 1}}]}
    assert ran_config("matmul_kernel", forged["alternatives"][0])["config"] == {"BLOCK_M": 32, "GROUP_SIZE_M": 8}


@pytest.mark.slow
@pytest.mark.exhaustive  # the attack method_by_a_config graded again, as beside a GPU stage
def test_the_config_the_gpu_stage_ran_is_judged_in_the_interpreter(tmp_path):
    """The GPU stage's report simulated (a GPU chooses by its own clock): beside a GPU stage that ran the row-major
    config, the interpreter judges that config and `grouped_order` fails; when the GPU ran the config the
    interpreter stage already judged, nothing more is graded."""
    from checks.engine.judging.configs import on_the_gpus_configs
    from checks.engine.judging.stage import Stage

    puzzle = get_puzzle(4)
    graded = submission(TAMPERING, TAMPERING_NAME, tmp_path)
    job = Job(4, str(graded), {str(graded): graded.name}, seed=7)
    gpu = Stage(puzzle, job, "gpu", tmp_path, first_failure=True)
    part = Stage(puzzle, replace(job, interpret=True), "interpreter", tmp_path)
    grouped = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_SIZE_M": 2}
    part.configs_run = [{"kernel": "matmul_kernel", "config": grouped}]

    gpu.configs_run = [{"kernel": "matmul_kernel", "config": grouped}]
    assert on_the_gpus_configs(gpu, [part], 120.0) is None

    gpu.configs_run = [{"kernel": "matmul_kernel", "config": {**grouped, "GROUP_SIZE_M": 1}}]
    verdict = on_the_gpus_configs(gpu, [part], 120.0, cases=[8])  # the wide case, where row-major order shows
    assert verdict is not None and not verdict.passed, verdict
    assert verdict.rule == "grouped_order", V.format_verdict(verdict)
    assert "GROUP_SIZE_M=1 (the config the GPU chose)" in verdict.summary, verdict.summary


@pytest.mark.slow
@pytest.mark.exhaustive  # the attack row_major_at_large_tiles graded again, as beside a GPU stage
def test_the_tiles_the_gpu_stage_ran_are_judged_on_cases_sized_from_them(tmp_path):
    """The GPU stage's report simulated: it ran a config of 128 x 128 tiles, on cases too small for any launch order
    to show; the interpreter judges it once more on puzzle 4's method cases sized from those tiles (as it judges the
    configs its own parts ran, beside the GPU stage), and the row-major order fails. A config of tiles the cases are
    made for adds none."""
    from checks.engine.judging.configs import on_method_cases, tile_of
    from checks.engine.judging.stage import Stage
    from checks.puzzles.p04_matmul_fast import method_cases

    large = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_SIZE_M": 8}
    assert tile_of(large) == 128 and tile_of({**large, "BLOCK_M": 64, "BLOCK_N": 64}) == 64
    assert method_cases(64) == [] and [(c["M"], c["N"]) for c in method_cases(128)] == [(256, 2048), (2048, 256)]

    puzzle = get_puzzle(4)
    graded = submission(TAMPERING, "row_major_at_large_tiles", tmp_path)
    job = Job(4, str(graded), {str(graded): graded.name}, seed=7)
    gpu = Stage(puzzle, job, "gpu", tmp_path, first_failure=True)
    gpu.configs_run = [{"kernel": "matmul_kernel", "config": large}]
    verdict = on_method_cases(gpu, replace(job, record_on_gpu=True), gpu.configs_run, 120.0)
    assert verdict is not None and verdict.rule == "grouped_order", verdict and V.format_verdict(verdict)
    assert "on a case sized from its tiles" in verdict.summary and "(256, 40)" in verdict.summary, verdict.summary
    # a map drawn from the puzzle's own cases and the first config would not show it: none is offered
    assert verdict.map_case is None and "draw the access map" not in V.format_verdict(verdict)


def test_a_kernel_only_the_timing_size_launched_is_named():
    from checks.engine.judging.stage import unjudged_at_the_timing_size

    launched = {0: {"matmul_kernel"}, 1: {"matmul_kernel", "fill"}}
    assert unjudged_at_the_timing_size(["fill", "matmul_kernel"], launched) == []
    (line,) = unjudged_at_the_timing_size(["matmul_kernel", "row_major_kernel"], launched)
    assert "`row_major_kernel`, which no graded case ran" in line and "matmul_kernel" not in line


def test_a_plan_whose_config_names_nothing_is_refused():
    from checks.engine.contract.plan import PlanError, check

    plan = {"ops": [LAUNCH], "returned": []}
    assert check(plan) is not None
    forged = {**LAUNCH, "alternatives": [{**alternative(32, 8), "config": 7}]}
    with pytest.raises(PlanError, match="autotuner config"):
        check({"ops": [forged], "returned": []})
