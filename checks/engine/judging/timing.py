"""GPU timing of a passing submission beside the answer key and the torch baseline.

On a GPU, once every case has passed, the grader draws fresh random inputs of the puzzle's `bench`
size and times, with `triton.testing.do_bench` (median):

    yours, the answer key, the torch baseline (cuBLAS, torch.softmax, scaled_dot_product_attention)

and prints each one's time, GB/s and TFLOPS, its speed next to yours, and its share of the
machine's roofline. The roofline is a ceiling (`ceiling`): the device's peaks from its data sheet where the GPU is
known, else two measurements made once per process (the bandwidth of a large device-to-device copy, bytes read +
written, and the rate of a large float16 torch.matmul), and never below the fastest rate of the run; its line
says which. A puzzle with a `speed_bar` fails when yours is slower than min_ratio x the baseline.

The arithmetic and the clock are `checks.engine.timing`'s, below both the replay and the bench; here is the verdict
on the times the replay measured, and the comparison of the outputs at the timing size.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from checks.engine.contract.protocol import Timings
from checks.engine.timing import Peaks, bound, busy, busy_message, gbps, roofline_share, speed_ratio, summarize, tflops
from checks.registry import Puzzle
from checks.verdict import agree

OUTPUT_SLACK = 10.0  # the timing-size answer may differ from the answer key's by 10x the tolerance
COMPARE_CHUNK = 1 << 24  # elements compared at a time: 128 MiB per float64 copy


# -- pure arithmetic (no GPU) --------------------------------------------------------------------


def bar_message(ratio: float, min_ratio: float | None, baseline: str) -> str | None:
    """The failure sentence when a speed bar is set and the ratio is below it, else None."""
    if min_ratio is None or ratio >= float(min_ratio):
        return None
    return (
        f"Correct, but {ratio:.2f}x the speed of {baseline}; this puzzle asks for at least {float(min_ratio):g}x "
        "on a GPU: see the hints and the notebook for what makes it fast."
    )


def output_difference(
    yours: Any, key: Any, atol: float, rtol: float, slack: float = OUTPUT_SLACK, chunk: int = COMPARE_CHUNK
) -> str | None:
    """None when each returned tensor is within slack x tolerance of the answer key's; else what differs.

    The tensors are compared `chunk` elements at a time, in float64, so that outputs of hundreds of MB
    need only a few float64 chunks beside them."""
    import torch

    mine = list(yours) if isinstance(yours, (tuple, list)) else [yours]
    theirs = list(key) if isinstance(key, (tuple, list)) else [key]
    if len(mine) != len(theirs):
        return f"you returned {len(mine)} values and the answer key {len(theirs)}"
    for index, (a, b) in enumerate(zip(mine, theirs, strict=True)):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            continue
        what = "the result" if len(mine) == 1 else f"output {index + 1}"
        if a.shape != b.shape:
            return f"{what} has shape {tuple(a.shape)}, the answer key's {tuple(b.shape)}"
        flat_a, flat_b = a.detach().reshape(-1), b.detach().reshape(-1)
        bad, largest = 0, None
        for start in range(0, flat_a.numel(), chunk):
            a64, b64 = flat_a[start : start + chunk].double(), flat_b[start : start + chunk].double()
            close = torch.isclose(a64, b64, rtol=slack * rtol, atol=slack * atol, equal_nan=True)
            bad += int((~close).sum())
            diff = (a64 - b64).abs()
            finite = diff[torch.isfinite(diff)]
            if finite.numel():
                most = float(finite.max())
                largest = most if largest is None else max(largest, most)
        if bad:
            shown = f"{largest:.4g}" if largest is not None else "nan"
            return (
                f"{what}: {bad} of {flat_a.numel()} elements {agree(bad, 'differs', 'differ')} from the answer key's "
                f"(largest difference {shown})"
            )
    return None


def rate_text(nbytes: float, flops: float, ms: float) -> str:
    text = f"{gbps(nbytes, ms):8.1f} GB/s"
    if flops:
        text += f" {tflops(flops, ms):7.1f} TFLOPS"
    return text


# (a word of the GPU's name, dense float16/bfloat16 tensor-core TFLOPS, memory GB/s), from the vendor's data sheets;
# the first whose words are all in the device's name gives its peaks (H100 SXM's name is "NVIDIA H100 80GB HBM3")
KNOWN_PEAKS: tuple[tuple[tuple[str, ...], float, float], ...] = (
    (("H200",), 989.0, 4800.0),
    (("H100", "NVL"), 835.0, 3900.0),
    (("H100", "PCIe"), 756.0, 2000.0),
    (("H100",), 989.0, 3350.0),
    (("A100", "40GB"), 312.0, 1555.0),
    (("A100",), 312.0, 2039.0),
)


def ceiling(
    peaks: Peaks | None, device: str, nbytes: float, flops: float, times: dict[str, float]
) -> tuple[Peaks | None, str]:
    """The roof of the roofline and the line that says where it comes from: a ceiling no timed function of the run
    is above. Each roof is the device's peak from its data sheet (KNOWN_PEAKS) where the device is known, or the
    measurement (a device-to-device copy, a large float16 torch.matmul) where it is higher or the device unknown;
    then, where a timed function of this run still goes faster than that, its own rate."""
    known = next((row for row in KNOWN_PEAKS if all(word in device for word in row[0])), None)
    if peaks is None and known is None:
        return None, ""
    gb, tf = (peaks.copy_gbps, peaks.matmul_tflops) if peaks else (0.0, 0.0)
    side = peaks.matmul_side if peaks else 0
    said_gb = "a device-to-device copy measured here, bytes read + written" if peaks else ""
    said_tf = f"float16 torch.matmul {side}^3 measured here" if peaks else ""
    if known is not None and known[2] >= gb:
        gb, said_gb = known[2], f"{device}'s memory bandwidth, from its data sheet"
    if known is not None and known[1] >= tf:
        tf, said_tf = known[1], f"{device}'s dense float16 tensor-core peak, from its data sheet"
    roof = Peaks(gb, tf, side)
    fastest = min(times, key=times.get) if times else ""
    if fastest and roofline_share(nbytes, flops, times[fastest], roof) > 1.0:
        ms = times[fastest]
        if flops and flops / (tf * 1e9) >= nbytes / (gb * 1e6):
            tf, said_tf = tflops(flops, ms), f"the rate of {fastest} in this run, above the peak it replaces"
        else:
            gb, said_gb = gbps(nbytes, ms), f"the rate of {fastest} in this run, above the bandwidth it replaces"
        roof = Peaks(gb, tf, side)
    line = (
        f"  roofline: {roof.copy_gbps:.0f} GB/s ({said_gb}) and {roof.matmul_tflops:.0f} TFLOPS ({said_tf}); "
        f"this work is {bound(nbytes, flops, roof)}-bound"
    )
    return roof, line


def timing_table(
    case: dict[str, Any],
    times: dict[str, float],
    nbytes: float,
    flops: float,
    peaks: Peaks | None,
    yours: str = "yours",
    device: str = "",
) -> list[str]:
    """The lines the grader prints: one per timed function, then the roofline it is measured against (`ceiling`:
    the device's peaks where they are known, above every rate of the run)."""
    peaks, roof_line = ceiling(peaks, device, nbytes, flops, times)
    size = ", ".join(f"{k}={v}" for k, v in case.items())
    lines = [f"GPU time at {size} (median of triton.testing.do_bench, fresh random inputs):"]
    for name, ms in times.items():
        line = f"  {name:<20} {ms:9.4f} ms {rate_text(nbytes, flops, ms)}"
        if peaks is not None:
            line += f"  {100 * roofline_share(nbytes, flops, ms, peaks):5.1f}% of roofline"
        if name != yours and yours in times:
            line += f"  yours: {speed_ratio(ms, times[yours]):.2f}x"
        lines.append(line)
    if roof_line:
        lines.append(roof_line)
    return lines


def summary_text(ratio_baseline: float, baseline: str, ratio_key: float | None, share: float | None) -> str:
    text = f"Speed: {ratio_baseline:.2f}x {baseline}"
    if ratio_key is not None:
        text += f", {ratio_key:.2f}x the answer key"
    if share is not None:
        text += f", {100 * share:.0f}% of the roofline"
    return text + "."


def from_measurement(
    puzzle: Puzzle, raw: Timings, outputs: tuple[list[Any], list[Any]] | None = None, device: str = ""
) -> dict[str, Any]:
    """The timing verdict, in the grader, from the grading process's raw measurements (the timings event, its fields
    typed by `checks.engine.contract.protocol.Timings`) and the registry's bar.

    `outputs`: the submission's and the answer key's outputs at the timing size, as the grading process saved
    them (`checks.engine.judging.judge.load_timing_outputs`); they are compared here, with the puzzle's tolerance.
    """
    if raw == Timings():  # nothing measured: the puzzle has no timing case
        return {}
    problem = raw.problem  # the submission could not run at the timing size: what the process saw
    if outputs is not None and not problem:
        problem = output_difference(*outputs, *puzzle.loosest_tolerance())
        if problem and raw.outputs_compared:  # a large output: the grading process saved a sample of it
            problem += f" (of the elements compared: {raw.outputs_compared[:80]})"
    times, baseline = raw.times, raw.baseline
    if times and not ({"yours", baseline} <= set(times) and all(t > 0 for t in times.values())):
        raise ValueError("timings without the submission's or the baseline's time")
    peaks = Peaks(**raw.peaks) if raw.peaks else None
    min_ratio = puzzle.speed_bar.min_ratio if puzzle.speed_bar else None
    rounds = raw.rounds  # fair timing: the ratios come from paired rounds
    if rounds is not None and (
        set(rounds) != set(times)
        or len({len(v) for v in rounds.values()}) > 1
        or not all(t > 0 for v in rounds.values() for t in v)
    ):
        raise ValueError("rounds that do not match the times")
    return judge(
        raw.case, times, baseline, min_ratio, float(raw.nbytes), float(raw.flops), peaks, problem, rounds, device
    )


def judge(
    case: dict[str, Any],
    times: dict[str, float],
    baseline: str,
    min_ratio: float | None,
    nbytes: float,
    flops: float,
    peaks: Peaks | None,
    problem: str | None = None,
    rounds: dict[str, list[float]] | None = None,
    device: str = "",
) -> dict[str, Any]:
    """The timing verdict from measured times: the table, the ratios, and 'bar_failed' when it fails; the share of
    the roofline is of `ceiling`'s roof, for the GPU named `device`.

    With `rounds` (each contender's time per interleaved round), each ratio is the median of the rounds'
    ratios, with its spread; when the spread says the GPU was busy, 'noisy' says so and no speed bar is
    judged. With no times (the submission could not run at the timing size), only `problem` is reported.
    """
    size = ", ".join(f"{k}={v}" for k, v in case.items())
    wrong = (
        f"Right on the graded cases, but wrong at the timing size ({size}): {problem}. Look for what changes "
        "with size: offsets that overflow int32, a grid or loop bound that stops early, memory use."
    )
    if not times:
        return {"ms": {}, "table": [], "summary": "", "bar_failed": wrong}
    ratio = speed_ratio(times[baseline], times["yours"])
    ratio_key = speed_ratio(times["answer key"], times["yours"]) if "answer key" in times else None
    paired = summarize(rounds) if rounds else {}  # fair timing: ratios from paired rounds
    if paired:
        ratio = paired[baseline]["ratio"]
        ratio_key = paired["answer key"]["ratio"] if "answer key" in paired else None
    roof, _ = ceiling(peaks, device, nbytes, flops, times)
    share = roofline_share(nbytes, flops, times["yours"], roof) if roof else None
    result: dict[str, Any] = {
        "ms": times,
        "table": timing_table(case, times, nbytes, flops, peaks, device=device),
        "ratio_vs_baseline": ratio,
        "ratio_vs_answer_key": ratio_key,
        "roofline_share": share,
        "peaks": asdict(roof) if roof else None,
        "summary": summary_text(ratio, baseline, ratio_key, share),
    }
    if paired:
        result["spread"] = {name: entry["spread"] for name, entry in paired.items()}
        result["table"].append(spread_line(paired, len(next(iter(rounds.values())))))
    if problem:
        result["bar_failed"] = wrong
    elif paired and busy(paired):  # never pass or fail a speed bar on a noisy measurement
        result["noisy"] = busy_message(paired, bar=min_ratio is not None)
    else:
        message = bar_message(ratio, min_ratio, baseline)
        if message:
            result["bar_failed"] = message
    return result


def spread_line(paired: dict[str, dict[str, float]], count: int) -> str:
    """How steady the ratios were over the rounds."""
    parts = ", ".join(f"{name} +-{100 * entry['spread']:.0f}%" for name, entry in paired.items())
    return f"  ratios from {count} interleaved rounds (yours, answer key, baseline, ...); their spread: {parts}"
