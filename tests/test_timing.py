"""The GPU timing's arithmetic, fed with made-up times: rates, roofline, ratios and the speed bar."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from checks.engine.child.measure import cached_peaks, measure, remember_peaks
from checks.engine.judging.timing import (
    Peaks,
    bar_message,
    bound,
    from_measurement,
    gbps,
    judge,
    loosest_tolerance,
    output_difference,
    roofline_ms,
    roofline_share,
    speed_ratio,
    tflops,
    timing_table,
)
from checks.puzzles import spec_module
from checks.registry import get_puzzle

PEAKS = Peaks(copy_gbps=3000.0, matmul_tflops=700.0, matmul_side=8192)
CASE = {"M": 4096, "N": 4096, "K": 4096}
MATMUL_BYTES = 2.0 * 3 * 4096 * 4096
MATMUL_FLOPS = 2.0 * 4096**3


def test_rates():
    assert gbps(3e9, 1.0) == pytest.approx(3000.0)  # 3 GB in 1 ms
    assert tflops(1.4e12, 2.0) == pytest.approx(700.0)
    assert gbps(12 * 2**28, 1.2) == pytest.approx(12 * 2**28 / 1.2e6)


def test_roofline_of_memory_bound_work():
    # vector add of 2^28 floats: 3 GiB moved, no flops; at 3000 GB/s the roof is 1.07 ms
    nbytes = 12.0 * 2**28
    assert bound(nbytes, 0.0, PEAKS) == "memory"
    assert roofline_ms(nbytes, 0.0, PEAKS) == pytest.approx(nbytes / 3e9)
    assert roofline_share(nbytes, 0.0, 2 * nbytes / 3e9, PEAKS) == pytest.approx(0.5)


def test_roofline_of_compute_bound_work():
    assert bound(MATMUL_BYTES, MATMUL_FLOPS, PEAKS) == "compute"
    roof = MATMUL_FLOPS / 700e9
    assert roofline_ms(MATMUL_BYTES, MATMUL_FLOPS, PEAKS) == pytest.approx(roof)
    assert roofline_share(MATMUL_BYTES, MATMUL_FLOPS, roof / 0.8, PEAKS) == pytest.approx(0.8)


def test_speed_ratio_is_baseline_over_yours():
    assert speed_ratio(1.0, 2.0) == pytest.approx(0.5)  # twice as slow as the baseline
    assert speed_ratio(3.0, 1.5) == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("ratio", "min_ratio", "fails"),
    [
        (0.79, 0.8, True),
        (0.8, 0.8, False),
        (1.5, 0.8, False),
        (0.1, None, False),
        (0.94, "0.95", True),
    ],
)
def test_speed_bar(ratio, min_ratio, fails):
    message = bar_message(ratio, min_ratio, "torch.matmul")
    assert (message is not None) == fails
    if fails:
        assert f"{ratio:.2f}x" in message and "torch.matmul" in message and f"{float(min_ratio):g}x" in message


def test_judge_fails_below_the_bar_and_passes_above():
    slow = judge(
        CASE,
        {"yours": 2.0, "answer key": 1.0, "torch.matmul": 1.0},
        "torch.matmul",
        0.8,
        MATMUL_BYTES,
        MATMUL_FLOPS,
        PEAKS,
    )
    assert slow["ratio_vs_baseline"] == pytest.approx(0.5)
    assert slow["ratio_vs_answer_key"] == pytest.approx(0.5)
    assert "0.50x" in slow["bar_failed"]
    fast = judge(
        CASE,
        {"yours": 1.0, "answer key": 1.1, "torch.matmul": 0.9},
        "torch.matmul",
        0.8,
        MATMUL_BYTES,
        MATMUL_FLOPS,
        PEAKS,
    )
    assert "bar_failed" not in fast
    assert fast["ratio_vs_baseline"] == pytest.approx(0.9)
    assert fast["roofline_share"] == pytest.approx(MATMUL_FLOPS / 700e9 / 1.0)
    assert fast["summary"].startswith("Speed: 0.90x torch.matmul, 1.10x the answer key")


def test_judge_without_a_bar_never_fails_on_speed():
    result = judge({"n": 10}, {"yours": 100.0, "torch.add": 1.0}, "torch.add", None, 120.0, 0.0, None)
    assert "bar_failed" not in result and result["roofline_share"] is None
    assert result["ratio_vs_answer_key"] is None


def test_judge_reports_a_wrong_answer_at_the_timing_size_even_when_fast():
    result = judge(
        CASE,
        {"yours": 0.5, "torch.matmul": 1.0},
        "torch.matmul",
        0.8,
        MATMUL_BYTES,
        MATMUL_FLOPS,
        PEAKS,
        problem="the result: 7 of 16777216 elements differ from the answer key's",
    )
    assert "wrong at the timing size (M=4096, N=4096, K=4096)" in result["bar_failed"]
    assert "7 of 16777216" in result["bar_failed"]
    crashed = judge(CASE, {}, "torch.matmul", 0.8, 0.0, 0.0, None, problem="it ran out of GPU memory")
    assert "ran out of GPU memory" in crashed["bar_failed"] and crashed["table"] == []


def test_timing_table_lines():
    times = {"yours": 0.25, "answer key": 0.2, "torch.matmul": 0.2}
    lines = timing_table(CASE, times, MATMUL_BYTES, MATMUL_FLOPS, PEAKS)
    assert lines[0].startswith("GPU time at M=4096, N=4096, K=4096")
    yours, key, base, roof = lines[1], lines[2], lines[3], lines[4]
    assert "0.2500 ms" in yours and f"{tflops(MATMUL_FLOPS, 0.25):.1f} TFLOPS" in yours
    share = 100 * roofline_share(MATMUL_BYTES, MATMUL_FLOPS, 0.25, PEAKS)
    assert f"{share:.1f}% of roofline" in yours
    assert "yours: 0.80x" in key and "yours: 0.80x" in base
    assert "3000 GB/s" in roof and "700 TFLOPS" in roof and "8192^3" in roof and "compute-bound" in roof
    no_peaks = timing_table({"n": 5}, {"yours": 1.0, "torch.add": 1.0}, 60.0, 0.0, None)
    assert len(no_peaks) == 3 and "roofline" not in "".join(no_peaks) and "TFLOPS" not in "".join(no_peaks)


def test_loosest_tolerance():
    assert loosest_tolerance({"atol": 1e-2, "rtol": 4e-3}) == (1e-2, 4e-3)
    per_output = {"o": {"atol": 1e-2, "rtol": 1e-2}, "lse": {"atol": 1e-3, "rtol": 5e-2}}
    assert loosest_tolerance(per_output) == (1e-2, 5e-2)


def test_output_difference():
    key = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    assert output_difference(key.clone(), key, 1e-3, 0.0) is None
    off = key.clone()
    off[2, 3] += 1.0
    text = output_difference(off, key, 1e-3, 0.0)
    assert text is not None and "1 of 12 elements differ" in text and "largest difference 1" in text
    assert output_difference(off, key, 0.2, 0.0) is None  # within 10x the tolerance
    nan = key.clone()
    nan[0, 0] = math.nan
    assert "1 of 12" in output_difference(nan, key, 1e-3, 0.0)
    assert output_difference((key, key), (key, off), 1e-3, 0.0).startswith("output 2: 1 of 12")
    assert "returned 1 values" in output_difference((key,), (key, key), 1e-3, 0.0)


class FakeClock:
    """Stands in for do_bench: hands out the given times in order and counts the calls."""

    def __init__(self, *times: float) -> None:
        self.times = list(times)
        self.calls = 0

    def __call__(self, fn) -> float:
        fn()
        self.calls += 1
        return self.times.pop(0)


@pytest.fixture
def small_matmul(tmp_path):
    """Puzzle 4 with a small bench case, a torch-only answer key, and its spec."""
    puzzle = dataclasses.replace(get_puzzle(4), bench={"M": 70, "N": 50, "K": 40, "baseline": "torch.matmul"})
    key = tmp_path / "key.py"
    key.write_text("def matmul_fast(a, b):\n    return (a.float() @ b.float()).half()\n", encoding="utf-8")
    return puzzle, spec_module(puzzle), str(key)


def timed(puzzle, spec, fn, key, **kwargs):
    """Measure in-process (as the grading process does) and judge (as the grader does)."""
    return from_measurement(puzzle, measure(puzzle, spec, fn, key, **kwargs))


def right(a, b):
    return (a.float() @ b.float()).half()


def test_timing_passes_a_fast_right_answer(small_matmul):
    puzzle, spec, key = small_matmul
    clock = FakeClock(1.0, 1.1, 0.9)  # yours, the answer key, torch.matmul
    result = timed(puzzle, spec, right, key, device="cpu", timer=clock)
    assert "bar_failed" not in result and clock.calls == 3
    assert result["ms"] == {"yours": 1.0, "answer key": 1.1, "torch.matmul": 0.9}
    assert result["ratio_vs_baseline"] == pytest.approx(0.9) and result["ratio_vs_answer_key"] == pytest.approx(1.1)
    assert result["table"][0].startswith("GPU time at M=70, N=50, K=40 (median of triton.testing.do_bench")


def test_timing_fails_below_the_speed_bar_after_a_second_try(small_matmul):
    puzzle, spec, key = small_matmul
    clock = FakeClock(3.0, 1.0, 1.0, 2.0)  # yours, key, baseline, yours again: best 2.0 -> 0.5x < 0.8x
    result = timed(puzzle, spec, right, key, device="cpu", timer=clock)
    assert clock.calls == 4 and result["ms"]["yours"] == 2.0
    assert "0.50x the speed of torch.matmul" in result["bar_failed"] and "at least 0.8x" in result["bar_failed"]


def test_timing_fails_an_answer_that_breaks_at_the_timing_size(small_matmul):
    puzzle, spec, key = small_matmul

    def wrong_last_row(a, b):
        c = right(a, b)
        c[-1] = 1000.0
        return c

    result = timed(puzzle, spec, wrong_last_row, key, device="cpu", timer=FakeClock(1.0, 1.0, 1.0))
    assert "wrong at the timing size (M=70, N=50, K=40)" in result["bar_failed"]
    assert "50 of 3500 elements differ" in result["bar_failed"]

    def raises(a, b):
        raise RuntimeError("grid too large")

    result = timed(puzzle, spec, raises, key, device="cpu", timer=FakeClock())
    assert "it raised RuntimeError: grid too large" in result["bar_failed"]


def test_the_roofline_is_remembered_per_gpu_and_versions(tmp_path):
    path = tmp_path / "roofline.json"
    assert cached_peaks("H100 | torch 2.11 | triton 3.6", path) is None
    remember_peaks("H100 | torch 2.11 | triton 3.6", Peaks(3000.0, 700.0), path)
    assert cached_peaks("H100 | torch 2.11 | triton 3.6", path) == Peaks(3000.0, 700.0)
    assert cached_peaks("H200 | torch 2.11 | triton 3.6", path) is None
    path.write_text("{not json", encoding="utf-8")
    assert cached_peaks("H100 | torch 2.11 | triton 3.6", path) is None
