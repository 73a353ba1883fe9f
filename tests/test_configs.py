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
def test_the_config_the_gpu_stage_ran_is_judged_in_the_interpreter(tmp_path):
    """The GPU stage's report simulated (a GPU chooses by its own clock): beside a GPU stage that ran the row-major
    config, the interpreter judges that config and `grouped_order` fails; when the GPU ran the config the
    interpreter stage already judged, nothing more is graded."""
    from checks.engine.judging.configs import on_the_gpus_configs
    from checks.engine.judging.stage import Stage

    puzzle = get_puzzle(4)

    graded = submission(TAMPERING, TAMPERING_NAME, tmp_path)
    job = Job(4, str(graded), {str(graded): graded.name}, seed=7, solution_file=str(puzzle.solution))
    gpu = Stage(puzzle, job, "gpu", tmp_path, first_failure=True)
    part = Stage(puzzle, replace(job, interpret=True), "interpreter", tmp_path)
    grouped = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_SIZE_M": 2}
    part.configs_run = [{"kernel": "matmul_kernel", "config": grouped}]

    gpu.configs_run = [{"kernel": "matmul_kernel", "config": grouped}]
    assert on_the_gpus_configs(gpu, [part], 120.0) is None

    gpu.configs_run = [{"kernel": "matmul_kernel", "config": {**grouped, "GROUP_SIZE_M": 1}}]
    verdict = on_the_gpus_configs(gpu, [part], 120.0)
    assert verdict is not None and not verdict.passed, verdict
    assert verdict.rule == "grouped_order", V.format_verdict(verdict)
    assert "GROUP_SIZE_M=1 (the config the GPU chose)" in verdict.summary, verdict.summary
