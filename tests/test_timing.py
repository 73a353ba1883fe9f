"""The GPU timing's arithmetic, fed with made-up times: rates, roofline, ratios and the speed bar."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from checks.engine import timing as engine_timing
from checks.engine.contract.protocol import Timings
from checks.engine.judging.judge import load_timing_outputs
from checks.engine.judging.timing import (
    bar_message,
    from_measurement,
    judge,
    output_difference,
    timing_table,
)
from checks.engine.replay.measure import TimingRun
from checks.engine.timing import (
    ROUNDS,
    WARMUP_ROUNDS,
    Peaks,
    bound,
    cached_peaks,
    gbps,
    remember_peaks,
    roofline_ms,
    roofline_share,
    speed_ratio,
    tflops,
)
from checks.puzzles import spec_module
from checks.registry import Bench, Tolerance, get_puzzle
from checks.typed_reader import build

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


def judge_matmul(times: dict[str, float]) -> dict:
    """The timing verdict of a 4096-cubed matmul with these milliseconds, against torch.matmul with a bar of 0.8x."""
    return judge(CASE, times, "torch.matmul", 0.8, MATMUL_BYTES, MATMUL_FLOPS, PEAKS)


def test_judge_fails_below_the_bar_and_passes_above():
    slow = judge_matmul({"yours": 2.0, "answer key": 1.0, "torch.matmul": 1.0})
    assert slow["ratio_vs_baseline"] == pytest.approx(0.5)
    assert slow["ratio_vs_answer_key"] == pytest.approx(0.5)
    assert "0.50x" in slow["bar_failed"]
    fast = judge_matmul({"yours": 1.0, "answer key": 1.1, "torch.matmul": 0.9})
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
    shared = dataclasses.replace(get_puzzle(1), tolerance=Tolerance(atol=1e-2, rtol=4e-3))
    assert shared.loosest_tolerance() == (1e-2, 4e-3)
    per_output = {"o": Tolerance(atol=1e-2, rtol=1e-2), "lse": Tolerance(atol=1e-3, rtol=5e-2)}
    assert dataclasses.replace(shared, tolerance=per_output).loosest_tolerance() == (1e-2, 5e-2)


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
    two = off.clone()
    two[0, 1] -= 3.0  # compared 5 elements at a time: the count and the largest difference span the chunks
    assert "2 of 12 elements differ" in output_difference(two, key, 1e-3, 0.0, chunk=5)
    assert output_difference(two, key, 1e-3, 0.0, chunk=5) == output_difference(two, key, 1e-3, 0.0)
    assert "largest difference 3)" in output_difference(two.t(), key.t(), 1e-3, 0.0, chunk=5)  # a strided view


class FakeClock:
    """Stands in for do_bench: hands out the given times in order, over and over, and records who was timed."""

    def __init__(self, *times: float) -> None:
        self.times = list(times)
        self.calls = 0
        self.timed: list[object] = []

    def __call__(self, fn) -> float:
        fn()
        self.timed.append(fn)
        self.calls += 1
        return self.times[(self.calls - 1) % len(self.times)]


@pytest.fixture
def small_matmul():
    """Puzzle 4 with a small bench case, its spec, and a torch-only answer key (the function the replay's answer key is,
    `checks.engine.answer_key.AnswerKeyReplay`)."""
    puzzle = dataclasses.replace(get_puzzle(4), bench=Bench(M=70, N=50, K=40, baseline="torch.matmul"))

    def matmul_fast(a, b):
        return (a.float() @ b.float()).half()

    return puzzle, spec_module(puzzle), matmul_fast


def on_the_wire(raw: dict) -> Timings:
    """The timings event the grader reads from `measure`'s raw measurements, through JSON and its checks."""
    return build(Timings, json.loads(json.dumps(raw)), "timings")


def timed(puzzle, spec, fn, key, workdir, device, timer):
    """Measure in-process (as the grading process does) and judge (as the grader does, from the sealed outputs)."""
    raw = on_the_wire(TimingRun(puzzle, spec, fn, key, workdir, device).rounds(timer))
    return from_measurement(puzzle, raw, load_timing_outputs(workdir, raw))


def right(a, b):
    return (a.float() @ b.float()).half()


def test_timing_passes_a_fast_right_answer(small_matmul, tmp_path):
    puzzle, spec, key = small_matmul
    clock = FakeClock(1.0, 1.1, 0.9)  # yours, the answer key, torch.matmul, in every round
    result = timed(puzzle, spec, right, key, tmp_path, device="cpu", timer=clock)
    assert "bar_failed" not in result and "noisy" not in result and clock.calls == 3 * (ROUNDS + WARMUP_ROUNDS)
    assert result["ms"] == {"yours": 1.0, "answer key": 1.1, "torch.matmul": 0.9}
    assert result["ratio_vs_baseline"] == pytest.approx(0.9) and result["ratio_vs_answer_key"] == pytest.approx(1.1)
    assert result["table"][0].startswith("GPU time at M=70, N=50, K=40 (median of triton.testing.do_bench")
    assert result["spread"] == {"answer key": 0.0, "torch.matmul": 0.0}


def test_rounds_interleave_yours_the_key_and_the_baseline(small_matmul, tmp_path):
    puzzle, spec, key = small_matmul
    clock = FakeClock(1.0)
    raw = TimingRun(puzzle, spec, right, key, tmp_path, device="cpu").rounds(timer=clock, rounds_count=3)
    order = {id(fn): None for fn in clock.timed}  # the three contenders, in the order first timed
    assert len(order) == 3 and [id(fn) for fn in clock.timed] == list(order) * (3 + WARMUP_ROUNDS)
    assert {name: len(ms) for name, ms in raw["rounds"].items()} == {"yours": 3, "answer key": 3, "torch.matmul": 3}


def test_timing_fails_below_the_speed_bar_on_a_steady_gpu(small_matmul, tmp_path):
    puzzle, spec, key = small_matmul
    clock = FakeClock(2.0, 1.0, 1.0)  # every round: yours 2.0, key 1.0, baseline 1.0 -> 0.5x < 0.8x
    result = timed(puzzle, spec, right, key, tmp_path, device="cpu", timer=clock)
    assert clock.calls == 3 * (ROUNDS + WARMUP_ROUNDS) and result["ms"]["yours"] == 2.0
    assert "0.50x the speed of torch.matmul" in result["bar_failed"] and "at least 0.8x" in result["bar_failed"]


def test_a_busy_gpu_gives_no_speed_verdict_after_a_second_set_of_rounds(small_matmul, tmp_path):
    puzzle, spec, key = small_matmul
    # another job slows every other round: yours 2.0 then 0.5 against a steady 1.0 -> ratios 0.5, 2.0, ...
    clock = FakeClock(2.0, 1.0, 1.0, 0.5, 1.0, 1.0)
    result = timed(puzzle, spec, right, key, tmp_path, device="cpu", timer=clock)
    assert clock.calls == 3 * (2 * ROUNDS + WARMUP_ROUNDS)  # a second set of rounds before giving up
    assert "bar_failed" not in result
    assert "GPU was busy" in result["noisy"] and "neither passed nor failed" in result["noisy"]


def test_ratios_come_from_paired_rounds_not_from_medians_of_each():
    # the GPU slows down halfway: per-contender medians would compare different moments
    rounds = {"yours": [1.0, 1.0, 4.0, 4.0, 4.0], "torch": [2.0, 2.0, 8.0, 8.0, 8.0]}
    summary = engine_timing.summarize(rounds)
    assert summary["torch"] == {"ratio": 2.0, "spread": 0.0}
    assert engine_timing.paired_ratios(rounds, "torch") == [2.0] * 5
    assert engine_timing.spread([0.9, 1.0, 1.1]) == pytest.approx(0.1)
    assert not engine_timing.busy({"torch": {"ratio": 1.0, "spread": 0.1}})
    assert engine_timing.busy({"torch": {"ratio": 1.0, "spread": 0.11}})


def test_one_stray_round_is_not_a_busy_gpu_and_two_are():
    # an idle GPU ramping its clocks, or one brief burst of another process: one round of seven far off
    assert engine_timing.spread([1.0, 1.0, 1.02, 0.99, 1.0, 1.01, 1.8]) == pytest.approx(0.015)
    assert engine_timing.spread([1.0, 1.0, 1.02, 0.99, 1.0, 1.8, 1.8]) > engine_timing.NOISE_LIMIT
    assert engine_timing.spread([1.0, 1.8, 1.0]) > engine_timing.NOISE_LIMIT  # too few rounds to leave one out


def test_warmup_rounds_are_timed_and_left_out():
    clock = iter([5.0, 9.0, 1.0, 2.0, 1.0, 2.0])  # round 0 (left out), then two rounds
    rounds = engine_timing.interleaved({"yours": lambda: None, "torch": lambda: None}, lambda fn: next(clock), 2, 1)
    assert rounds == {"yours": [1.0, 1.0], "torch": [2.0, 2.0]}


def test_a_noisy_timing_of_a_barred_puzzle_is_not_a_pass_and_a_steady_one_is():
    noisy = {"yours": [1.0, 3.0, 1.0], "torch.matmul": [1.0, 1.0, 1.0]}
    result = judge({"M": 1}, engine_timing.medians(noisy), "torch.matmul", 0.8, 1e6, 1e6, None, None, noisy)
    assert "bar_failed" not in result and "noisy" in result
    steady = {"yours": [1.0, 1.02, 0.98], "torch.matmul": [0.5, 0.51, 0.49]}
    result = judge({"M": 1}, engine_timing.medians(steady), "torch.matmul", 0.8, 1e6, 1e6, None, None, steady)
    assert "noisy" not in result and "0.50x" in result["bar_failed"]


def test_timing_fails_an_answer_that_breaks_at_the_timing_size(small_matmul, tmp_path):
    puzzle, spec, key = small_matmul

    def wrong_last_row(a, b):
        c = right(a, b)
        c[-1] = 1000.0
        return c

    result = timed(puzzle, spec, wrong_last_row, key, tmp_path, device="cpu", timer=FakeClock(1.0, 1.0, 1.0))
    assert "wrong at the timing size (M=70, N=50, K=40)" in result["bar_failed"]
    assert "50 of 3500 elements differ" in result["bar_failed"]

    def raises(a, b):
        raise RuntimeError("grid too large")

    result = timed(puzzle, spec, raises, key, tmp_path, device="cpu", timer=FakeClock())
    assert "it raised RuntimeError: grid too large" in result["bar_failed"]


def test_the_roofline_is_remembered_per_gpu_and_versions(tmp_path):
    path = tmp_path / "roofline.json"
    assert cached_peaks("H100 | torch 2.11 | triton 3.6", path) is None
    remember_peaks("H100 | torch 2.11 | triton 3.6", Peaks(3000.0, 700.0), path)
    assert cached_peaks("H100 | torch 2.11 | triton 3.6", path) == Peaks(3000.0, 700.0)
    assert cached_peaks("H200 | torch 2.11 | triton 3.6", path) is None
    path.write_text("{not json", encoding="utf-8")
    assert cached_peaks("H100 | torch 2.11 | triton 3.6", path) is None


def noisy_stage(tmp_path, number: int):
    from checks.engine.contract.protocol import Job
    from checks.engine.judging.stage import Stage

    puzzle = get_puzzle(number)
    stage = Stage(puzzle, Job(puzzle.number, "x.py", {}, 1), "gpu", tmp_path, time_it=True)
    stage.results = [object()] * 3
    rounds = {"yours": [1.0, 3.0, 1.0], "answer key": [1.0, 1.0, 1.0], "torch": [1.0, 1.0, 1.0]}
    if number == 4:
        rounds["torch.matmul"] = rounds.pop("torch")
    baseline = "torch.matmul" if number == 4 else "torch"
    stage.stream.timings = Timings(case={"n": 1}, times=engine_timing.medians(rounds), rounds=rounds,
                                   baseline=baseline, nbytes=1e6, flops=0.0)  # fmt: skip
    return stage


def test_a_busy_gpu_is_no_verdict_on_a_barred_puzzle_and_a_note_on_another(tmp_path):
    from checks import verdict as V

    barred = noisy_stage(tmp_path, 4)
    verdict = V.Verdict(4, V.PASSED, "all 3 cases match the reference.")
    barred.apply_timings(verdict)
    assert verdict.status == V.ENVIRONMENT and "GPU was busy" in verdict.summary and "check again" in verdict.summary
    free = noisy_stage(tmp_path, 1)
    verdict = V.Verdict(1, V.PASSED, "all 3 cases match the reference.")
    free.apply_timings(verdict)
    assert verdict.status == V.PASSED and "ratios are uncertain" in verdict.summary


def wrong_last_row(a, b):
    c = right(a, b)
    c[-1] = 1000.0
    return c


def timing_stage(puzzle, workdir, timings):
    """A GPU stage whose cases all passed and whose grading process reported `timings`, as the grader sees it."""
    from checks.engine.contract.protocol import Job
    from checks.engine.judging.stage import Stage

    stage = Stage(puzzle, Job(puzzle.number, "x.py", {}, 1), "gpu", workdir, time_it=True)
    stage.results = [object()] * 3
    stage.stream.timings = timings
    return stage


def test_the_grader_compares_the_outputs_at_the_timing_size_the_grading_process_saved(small_matmul, tmp_path):
    from checks import verdict as V
    from checks.engine.contract.protocol import timing_outputs_path

    puzzle, spec, key = small_matmul
    raw = TimingRun(puzzle, spec, wrong_last_row, key, tmp_path, device="cpu").rounds(timer=FakeClock(1.0, 1.0, 1.0))
    assert raw["problem"] is None  # the grading process only observes
    saved = timing_outputs_path(tmp_path)
    assert raw["outputs_file"] == saved.name
    yours, theirs = load_timing_outputs(tmp_path, on_the_wire(raw))
    assert yours[0].dtype == theirs[0].dtype == torch.float16 and yours[0].shape == (70, 50)  # its own dtype
    verdict = V.Verdict(4, V.PASSED, "all 3 cases match the reference.")
    timing_stage(puzzle, tmp_path, on_the_wire(raw)).apply_timings(verdict)
    assert verdict.status == V.FAILED and verdict.rule == "speed_bar"
    assert verdict.summary.startswith("Right on the graded cases, but wrong at the timing size (M=70, N=50, K=40)")
    assert "the result: 50 of 3500 elements differ from the answer key's (largest difference" in verdict.summary


def zeroes_its_inputs(a, b):
    """Wrong at the timing size, and it zeroes both inputs in place: a key run after it on them would agree."""
    c = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float16)
    a.zero_()
    b.zero_()
    return c


def test_the_keys_outputs_at_the_timing_size_are_taken_before_yours_run(small_matmul, tmp_path):
    from checks import verdict as V

    puzzle, spec, key = small_matmul
    raw = TimingRun(puzzle, spec, zeroes_its_inputs, key, tmp_path, device="cpu").rounds(timer=FakeClock(1.0, 1.0, 1.0))
    yours, theirs = load_timing_outputs(tmp_path, on_the_wire(raw))
    assert not torch.equal(yours[0], theirs[0])  # the key's side came from the inputs as drawn
    verdict = V.Verdict(4, V.PASSED, "all 3 cases match the reference.")
    timing_stage(puzzle, tmp_path, on_the_wire(raw)).apply_timings(verdict)
    assert verdict.status == V.FAILED and "wrong at the timing size" in verdict.summary


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"outputs_file": "../case_0.pt"}, "name their outputs at the timing size wrongly"),
        ({"outputs_file": None}, "without the outputs at the timing size"),
        ({"times": {"yours": "1 ms", "torch.matmul": 1.0}}, "timings.times['yours'] is text, not a number"),
        ({"rounds": {"yours": 1.0}}, "timings.rounds['yours'] is a number, not a list"),
    ],
)
def test_the_protocol_refuses_timings_with_malformed_outputs(small_matmul, tmp_path, change, why):
    from checks.engine.contract.protocol import Machine, Stream

    puzzle, spec, key = small_matmul
    raw = TimingRun(puzzle, spec, right, key, tmp_path, device="cpu").rounds(timer=FakeClock(1.0, 1.0, 1.0))
    gpu = Machine(
        mode="gpu", device="cuda", name="GPU", torch_version="2.11", triton_version="3.6", numpy_version="2.3"
    )
    good = Stream([0], machine=gpu, observed=True, asked_time=True, token="t")
    assert good.feed_line(json.dumps({"event": "timings", **raw, "token": "t"})) is not None and not good.tampered
    forged = {k: v for k, v in {**raw, **change}.items() if v is not None}
    stream = Stream([0], machine=gpu, observed=True, asked_time=True, token="t")
    assert stream.feed_line(json.dumps({"event": "timings", **forged, "token": "t"})) is None
    assert why in stream.tampered and stream.timings is None


def test_an_output_right_only_where_a_fixed_pattern_would_look_is_caught(monkeypatch):
    """Every 10th element right (from 0), the rest never computed: the random offset and draws find the rest."""
    from checks.engine.replay import measure as measuring

    monkeypatch.setattr(measuring, "COMPARED", 1000)
    monkeypatch.setattr(measuring, "TAIL", 50)
    key = torch.arange(10_000, dtype=torch.float32)
    lazy = torch.full_like(key, float("nan"))
    lazy[::10] = key[::10]
    lazy[-50:] = key[-50:]
    mine, theirs = measuring.OutputSample(key).compared(lazy)
    assert output_difference(mine, theirs, 1e-3, 1e-3) is not None


def test_a_large_output_at_the_timing_size_is_compared_on_every_kth_element_and_its_tail(monkeypatch):
    from checks.engine.replay import measure as measuring

    monkeypatch.setattr(measuring, "COMPARED", 1000)
    monkeypatch.setattr(measuring, "TAIL", 50)
    key = torch.arange(10_000, dtype=torch.float32).reshape(100, 100)
    wrong = key.clone()
    wrong[40, 10:20] = -1.0  # a run of 10 wrong elements: every 10th element is compared
    wrong[99, 99] = -1.0  # the last element: in the tail
    sample = measuring.OutputSample(key)
    mine, theirs = sample.compared(wrong)
    assert sample.sampled.startswith("every 10th element from a random offset") and mine[0].numel() == 1100
    assert theirs[0].numel() == 1100
    assert int((mine[0] != theirs[0]).sum()) >= 2  # one element of the run, the last (in the tail), maybe drawn ones
    problem = output_difference(mine, theirs, 1e-3, 1e-3)
    assert problem is not None and "elements differ" in problem
    small = measuring.OutputSample(key[:10])
    assert small.sampled == "" and torch.equal(small.compared(key[:10])[0][0], key[:10])  # a small output goes whole
    shapes = measuring.OutputSample(key[:50]).compared(key)
    assert shapes[0][0].device.type == "meta" and "shape (100, 100)" in output_difference(*shapes, 1e-3, 1e-3)
    counted = measuring.OutputSample(key).compared((key, key))
    assert counted == ([None, None], [None]) and "2 values" in output_difference(*counted, 1e-3, 1e-3)


def test_a_function_that_raises_only_at_the_timing_size_fails_there_with_its_error(tmp_path):
    """The recording process reports the error of the call at the timing size; nothing is replayed there, and the
    verdict says the code is wrong at that size, with the error and its line."""
    from checks import verdict as V
    from checks.engine.contract.kernel_source import extract
    from checks.engine.contract.protocol import Job, TimingPlan
    from checks.engine.judging.stage import Stage

    puzzle = get_puzzle(1)
    stage = Stage(puzzle, Job(puzzle.number, "x.py", {}, 1), "gpu", tmp_path, time_it=True)
    stage.results = [object()] * 3
    raised = TimingPlan(plans=[], raised="RuntimeError: too large", raised_where=["x.py, line 9: boom()"],
                        stub=False, printed="", seconds=0.0)  # fmt: skip
    assert stage.timing_plan_of(raised, extract([])) is None
    verdict = V.Verdict(1, V.PASSED, "all 3 cases match the reference.")
    stage.apply_timings(verdict)
    assert verdict.status == V.FAILED and "wrong at the timing size" in verdict.summary
    assert "it raised RuntimeError: too large (x.py, line 9: boom())" in verdict.summary


def test_a_plan_event_without_plans_is_a_forged_report(tmp_path):
    from checks.engine.contract.kernel_source import extract
    from checks.engine.contract.protocol import CasePlan, Job, Tampered
    from checks.engine.judging.stage import Stage

    puzzle = get_puzzle(1)
    stage = Stage(puzzle, Job(puzzle.number, "x.py", {}, 1), "interpreter", tmp_path)
    empty = CasePlan(index=0, plans=[], raised="", raised_where=[], stub=False, printed="", seconds=0.0)
    with pytest.raises(Tampered, match="without its plans"):
        stage.replay_of(empty, extract([]))


def test_a_replay_stopped_after_its_last_case_with_no_timing_asked_keeps_the_cases_verdict(tmp_path):
    """The replay prepares the timing (inputs, first calls, graphs) while the grader judges; a grader that asks for no
    timing stops it there, and how it ended then says nothing. Asked to time, a replay that dies without its timings
    is an unfinished report."""
    from checks import verdict as V
    from checks.engine.contract.protocol import Job
    from checks.engine.judging.stage import Stage
    from checks.engine.processes.run import ProcessEnd

    puzzle = get_puzzle(1)

    def stage_with(asked_time: bool) -> Stage:
        stage = Stage(puzzle, Job(puzzle.number, "x.py", {}, 1), "gpu", tmp_path)
        stage.results = [V.CaseResult(i, f"case {i}", passed=True) for i in range(len(stage.selection))]
        stage.stream.observed, stage.stream.asked_time = True, asked_time
        return stage

    stopped = stage_with(asked_time=False)
    verdict = stopped.verdict(ProcessEnd(stopped.stream, -9, False, 1.0, ""))
    assert verdict.passed, verdict.summary
    died = stage_with(asked_time=True)
    verdict = died.verdict(ProcessEnd(died.stream, -11, False, 1.0, ""))
    assert not verdict.passed and verdict.status == V.CRASHED, verdict.summary
