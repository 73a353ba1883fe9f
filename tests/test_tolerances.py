"""The softmax puzzles' tolerance on their scaled-up cases admits every float32 method of computing the exponentials.

At scale 1.0e4 a row's values reach ~5e4. Subtracting the row's max before exp loses nothing; scaling first, as
exp2(x * log2(e) - m) with m the max of the scaled values, rounds x * log2(e) by up to half of float32's spacing
there, which moves each output by up to ~2.7e-3 of itself. A right kernel in that style (tests/submissions/right/
07_two_kernels.py) failed a case whose rtol was 1e-3 on one draw of the data values (an output 1.9e-3 off): a case's
rtol must hold for every draw, so it is checked here on the cases' own inputs and on a row made to round the most.
"""

from __future__ import annotations

import pytest
import torch

from checks.memory import Arena
from checks.puzzles import spec_module
from checks.registry import get_puzzle

pytestmark = pytest.mark.slow  # the GPU cases' inputs (exhaustive) take about a second each

LOG2E = 1.4426950408889634


def scaled_cases() -> list:
    found = []
    for number in ("5", "6", "7"):
        puzzle = get_puzzle(number)
        for gpu in (False, True):
            for index, case in enumerate(puzzle.cases.on(gpu=gpu), start=1):
                if case.scale is not None and float(case.scale) >= 1.0e3:
                    # the GPU cases' inputs (up to 6 x 2^20 values) by make test-all: the rounding is the same
                    marks = pytest.mark.exhaustive if gpu else ()
                    found.append(
                        pytest.param(puzzle, case, marks=marks, id=f"{number}-{'gpu' if gpu else 'cpu'}-{index}")
                    )
    return found


def exponentials_scaled_first(x: torch.Tensor) -> torch.Tensor:
    """Softmax as a kernel that scales before it subtracts computes it in float32: exp2(x * log2(e) - m) / sum."""
    v = x * torch.tensor(LOG2E, dtype=torch.float32)
    e = torch.exp2(v - v.amax(dim=1, keepdim=True))
    return e / e.sum(dim=1, keepdim=True)


@pytest.mark.parametrize(("puzzle", "case"), scaled_cases())
def test_a_scaled_case_admits_scaling_before_the_max_is_subtracted(puzzle, case):
    atol, rtol = puzzle.tolerance_for("out")
    rtol = max(rtol, float(case.rtol or 0.0))
    for seed in range(3):
        x = spec_module(puzzle).make_inputs(case, Arena("cpu", torch.Generator().manual_seed(seed)))["x"]
        expected = torch.softmax(x.double(), dim=1)
        ours = exponentials_scaled_first(x.contiguous()).double()
        allowed = atol + rtol * expected.abs()
        finite = expected.isfinite()
        assert bool(((ours - expected).abs() <= allowed)[finite].all()), f"seed {seed}: beyond rtol {rtol}"


def test_scaling_first_moves_an_output_by_more_than_the_old_rtol_and_less_than_the_cases():
    """A row of near-ties at 6e4 (six standard deviations of a scaled case's values), where random rows rarely go:
    scaling first moves some outputs by more than 1e-3 of themselves (the rtol that rejected a right kernel), by less
    than every scaled case's rtol."""
    x = (6.0e4 - torch.linspace(0.0, 8.0, 4096, dtype=torch.float64)).float()[None, :]
    expected = torch.softmax(x.double(), dim=1)
    error = ((exponentials_scaled_first(x).double() - expected).abs() / expected).max().item()
    rtols = [max(p.values[0].tolerance_for("out")[1], float(p.values[1].rtol or 0.0)) for p in scaled_cases()]
    assert 1.0e-3 < error < min(rtols), (error, min(rtols))
