"""GPU timing of a passing submission beside the answer key and the torch baseline.

On a GPU, once every case has passed, the grader draws fresh random inputs of the puzzle's `bench`
size and times, with `triton.testing.do_bench` (median):

    yours, the answer key, the torch baseline (cuBLAS, torch.softmax, scaled_dot_product_attention)

and prints each one's time, GB/s and TFLOPS, its speed next to yours, and its share of the
machine's roofline. The roofline comes from two measurements made once per process: the bandwidth
of a large device-to-device copy (bytes read + written) and the rate of a large float16
torch.matmul. A puzzle with a `speed_bar` fails when yours is slower than min_ratio x the baseline.

The arithmetic is in small pure functions (tested without a GPU in tests/test_timing.py); only
`measure_peaks` and `time_submission` need CUDA. `checks.instructor.bench` reuses them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from checks.registry import Puzzle

WARMUP_MS, REP_MS = 25, 100
COPY_ELEMENTS = 1 << 28  # float32 elements per copy buffer (1 GiB) for the bandwidth measurement
MATMUL_SIDE = 8192  # the float16 torch.matmul that stands for the peak arithmetic rate
OUTPUT_SLACK = 10.0  # the timing-size answer may differ from the answer key's by 10x the tolerance


@dataclass(frozen=True)
class Peaks:
    """What this GPU can do, measured with torch: the roof of the roofline."""

    copy_gbps: float  # device-to-device copy, bytes read + written, in GB/s
    matmul_tflops: float  # a large float16 torch.matmul, in TFLOPS
    matmul_side: int = MATMUL_SIDE  # ... of this many rows and columns


# -- pure arithmetic (no GPU) --------------------------------------------------------------------


def gbps(nbytes: float, ms: float) -> float:
    """Gigabytes per second for nbytes moved in ms milliseconds."""
    return nbytes / ms / 1e6


def tflops(flops: float, ms: float) -> float:
    """Tera floating-point operations per second for flops done in ms milliseconds."""
    return flops / ms / 1e9


def roofline_ms(nbytes: float, flops: float, peaks: Peaks) -> float:
    """The fastest possible time: moving the bytes at copy speed or doing the flops at matmul speed."""
    memory = nbytes / (peaks.copy_gbps * 1e6)
    compute = flops / (peaks.matmul_tflops * 1e9) if flops else 0.0
    return max(memory, compute)


def roofline_share(nbytes: float, flops: float, ms: float, peaks: Peaks) -> float:
    """Fraction of the roofline reached: 1.0 means as fast as the machine's measured limits allow."""
    return roofline_ms(nbytes, flops, peaks) / ms


def bound(nbytes: float, flops: float, peaks: Peaks) -> str:
    """Which roof limits this work: 'memory' or 'compute'."""
    compute = flops / (peaks.matmul_tflops * 1e9) if flops else 0.0
    return "compute" if compute > nbytes / (peaks.copy_gbps * 1e6) else "memory"


def speed_ratio(baseline_ms: float, yours_ms: float) -> float:
    """How many times faster than the baseline (2.0: twice as fast; 0.5: half as fast)."""
    return baseline_ms / yours_ms


def bar_message(ratio: float, min_ratio: float | None, baseline: str) -> str | None:
    """The failure sentence when a speed bar is set and the ratio is below it, else None."""
    if min_ratio is None or ratio >= float(min_ratio):
        return None
    return (
        f"Correct, but {ratio:.2f}x the speed of {baseline}; this puzzle asks for at least {float(min_ratio):g}x "
        "on a GPU: see the hints and the notebook for what makes it fast."
    )


def loosest_tolerance(tolerance: dict[str, Any]) -> tuple[float, float]:
    """(atol, rtol) covering every output: the shared entry, or the largest of the per-output ones."""
    if "atol" in tolerance:
        return float(tolerance["atol"]), float(tolerance.get("rtol", 0.0))
    entries = [t for t in tolerance.values() if isinstance(t, dict) and "atol" in t]
    if not entries:
        return 0.0, 0.0
    return max(float(t["atol"]) for t in entries), max(float(t.get("rtol", 0.0)) for t in entries)


def output_difference(yours: Any, key: Any, atol: float, rtol: float, slack: float = OUTPUT_SLACK) -> str | None:
    """None when each returned tensor is within slack x tolerance of the answer key's; else what differs."""
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
        a64, b64 = a.detach().double(), b.detach().double()
        close = torch.isclose(a64, b64, rtol=slack * rtol, atol=slack * atol, equal_nan=True)
        bad = int((~close).sum())
        if bad:
            diff = (a64 - b64).abs()
            finite = diff[torch.isfinite(diff)]
            largest = f"{float(finite.max()):.4g}" if finite.numel() else "nan"
            return (
                f"{what}: {bad} of {close.numel()} elements differ from the answer key's (largest difference {largest})"
            )
    return None


def rate_text(nbytes: float, flops: float, ms: float) -> str:
    text = f"{gbps(nbytes, ms):8.1f} GB/s"
    if flops:
        text += f" {tflops(flops, ms):7.1f} TFLOPS"
    return text


def timing_table(
    case: dict[str, Any],
    times: dict[str, float],
    nbytes: float,
    flops: float,
    peaks: Peaks | None,
    yours: str = "yours",
) -> list[str]:
    """The lines the grader prints: one per timed function, then the roofline it is measured against."""
    size = ", ".join(f"{k}={v}" for k, v in case.items())
    lines = [f"GPU time at {size} (median of triton.testing.do_bench, fresh random inputs):"]
    for name, ms in times.items():
        line = f"  {name:<20} {ms:9.4f} ms {rate_text(nbytes, flops, ms)}"
        if peaks is not None:
            line += f"  {100 * roofline_share(nbytes, flops, ms, peaks):5.1f}% of roofline"
        if name != yours and yours in times:
            line += f"  yours: {speed_ratio(ms, times[yours]):.2f}x"
        lines.append(line)
    if peaks is not None:
        lines.append(
            f"  roofline: {peaks.copy_gbps:.0f} GB/s (device-to-device copy, bytes read + written) and "
            f"{peaks.matmul_tflops:.0f} TFLOPS (float16 torch.matmul {peaks.matmul_side}^3); "
            f"this work is {bound(nbytes, flops, peaks)}-bound"
        )
    return lines


def summary_text(ratio_baseline: float, baseline: str, ratio_key: float | None, share: float | None) -> str:
    text = f"Speed: {ratio_baseline:.2f}x {baseline}"
    if ratio_key is not None:
        text += f", {ratio_key:.2f}x the answer key"
    if share is not None:
        text += f", {100 * share:.0f}% of the roofline"
    return text + "."


# -- measurements (CUDA) ---------------------------------------------------------------------------


def bench_ms(fn: Callable[[], Any], warmup: int = WARMUP_MS, rep: int = REP_MS) -> float:
    """Median milliseconds of fn() on the GPU (triton.testing.do_bench; it flushes L2 between runs)."""
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def _copy_gbps(n: int) -> float:
    import torch

    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    return gbps(2 * n * 4, bench_ms(lambda: dst.copy_(src)))  # every byte is read once and written once


def _matmul_tflops(side: int) -> float:
    import torch

    a = torch.randn(side, side, device="cuda", dtype=torch.float16)
    b = torch.randn(side, side, device="cuda", dtype=torch.float16)
    return tflops(2.0 * side**3, bench_ms(lambda: torch.matmul(a, b)))


def measure_peaks(copy_elements: int = COPY_ELEMENTS, matmul_side: int = MATMUL_SIDE) -> Peaks:
    """Copy bandwidth and float16 matmul rate of this GPU, on random data, scaled down on small GPUs."""
    import torch

    free, _ = torch.cuda.mem_get_info()
    n = int(min(copy_elements, free // 16))  # two float32 buffers, at most half the free memory
    side = matmul_side
    while side > 1024 and 3 * side * side * 2 > free // 2:
        side //= 2
    peaks = Peaks(copy_gbps=_copy_gbps(n), matmul_tflops=_matmul_tflops(side), matmul_side=side)
    torch.cuda.empty_cache()
    return peaks


_peaks: list[Peaks | None] = []
PEAKS_CACHE = Path(__file__).resolve().parent.parent.parent / "build" / "roofline.json"


def _machine_key() -> str:
    import torch
    import triton

    return f"{torch.cuda.get_device_name()} | torch {torch.__version__} | triton {triton.__version__}"


def cached_peaks(key: str, path: Path = PEAKS_CACHE) -> Peaks | None:
    """The roofline measured earlier on the machine `key` names (GPU and versions), if there is one."""
    import json

    try:
        entry = json.loads(path.read_text(encoding="utf-8")).get(key)
        return Peaks(**entry) if entry else None
    except (OSError, ValueError, TypeError):
        return None


def remember_peaks(key: str, peaks: Peaks, path: Path = PEAKS_CACHE) -> None:
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        data[key] = asdict(peaks)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    except (OSError, ValueError):
        pass  # the roofline is only shown; measuring it again next time is the worst that happens


def device_peaks() -> Peaks | None:
    """The GPU's limits: cached per GPU and versions (build/roofline.json), else measured once, or None."""
    if not _peaks:
        key = _machine_key()
        peaks = cached_peaks(key)
        if peaks is None:
            try:
                peaks = measure_peaks()
                remember_peaks(key, peaks)
            except Exception:  # noqa: BLE001 - the timing still works without a roofline
                peaks = None
        _peaks.append(peaks)
    return _peaks[0]


def measure(
    puzzle: Puzzle,
    spec,
    fn,
    solution_file: str | None,
    device: str = "cuda",
    timer: Callable[[Callable[[], Any]], float] | None = None,
) -> dict[str, Any]:
    """Time the submission, the answer key and the baseline on the bench case (in the grading process).

    Returns raw measurements only; `from_measurement` (in the grader) turns them into the verdict.
    `device` and `timer` exist for the tests, which run this on a CPU with a made-up clock.
    """
    import torch

    from checks.engine.memory import Arena
    from checks.engine.source import load_module

    case = {k: v for k, v in puzzle.bench.items() if k != "baseline"}
    if not case:
        return {}
    clock = timer or bench_ms
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    baseline = puzzle.bench.get("baseline", "torch")
    gen = torch.Generator(device=device)
    gen.seed()  # fresh random inputs, not the graded ones
    inputs = spec.make_inputs(case, Arena(device, gen))
    args = list(inputs.values())
    raw: dict[str, Any] = {"case": case, "times": {}, "baseline": baseline, "problem": None}

    try:
        mine = fn(*args)  # also compiles and autotunes before the clock starts
        sync()
    except Exception as exc:  # noqa: BLE001 - the learner's code failing at a new size is a verdict
        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return dict(raw, problem="it ran out of GPU memory")
        return dict(raw, problem=f"it raised {type(exc).__name__}: {exc}")
    key = None
    if solution_file and Path(solution_file).exists():
        atol, rtol = loosest_tolerance(puzzle.tolerance)
        try:
            key = getattr(load_module(Path(solution_file), "answer_key"), puzzle.name)
            raw["problem"] = output_difference(mine, key(*args), atol, rtol)
        except Exception:  # noqa: BLE001 - a broken answer key is the course's bug: time without it
            key, raw["problem"] = None, None
    del mine
    sync()

    times = {"yours": clock(lambda: fn(*args))}
    if key is not None:
        times["answer key"] = clock(lambda: key(*args))
    times[baseline] = clock(spec.baseline(inputs))
    min_ratio = (puzzle.speed_bar or {}).get("min_ratio")
    if bar_message(speed_ratio(times[baseline], times["yours"]), min_ratio, baseline):
        times["yours"] = min(times["yours"], clock(lambda: fn(*args)))  # one more try before failing
    work = spec.work(inputs)
    peaks = device_peaks() if device == "cuda" else None
    return dict(raw, times=times, nbytes=work.bytes, flops=work.flops, peaks=asdict(peaks) if peaks else None)


def from_measurement(puzzle: Puzzle, raw: dict[str, Any]) -> dict[str, Any]:
    """The timing verdict, in the grader, from the grading process's raw measurements and the registry's bar."""
    if not raw:
        return {}
    times = {str(k): float(v) for k, v in raw.get("times", {}).items()}
    baseline = str(raw.get("baseline", "torch"))
    if times and not ({"yours", baseline} <= set(times) and all(t > 0 for t in times.values())):
        raise ValueError("timings without the submission's or the baseline's time")
    peaks = Peaks(**raw["peaks"]) if raw.get("peaks") else None
    min_ratio = (puzzle.speed_bar or {}).get("min_ratio")
    return judge(
        dict(raw.get("case", {})),
        times,
        baseline,
        min_ratio,
        float(raw.get("nbytes", 0.0)),
        float(raw.get("flops", 0.0)),
        peaks,
        raw.get("problem"),
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
) -> dict[str, Any]:
    """The timing verdict from measured times: the table, the ratios, and 'bar_failed' when it fails.

    With no times (the submission could not run at the timing size), only `problem` is reported.
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
    share = roofline_share(nbytes, flops, times["yours"], peaks) if peaks else None
    result: dict[str, Any] = {
        "ms": times,
        "table": timing_table(case, times, nbytes, flops, peaks),
        "ratio_vs_baseline": ratio,
        "ratio_vs_answer_key": ratio_key,
        "roofline_share": share,
        "peaks": asdict(peaks) if peaks else None,
        "summary": summary_text(ratio, baseline, ratio_key, share),
    }
    if problem:
        result["bar_failed"] = wrong
    else:
        message = bar_message(ratio, min_ratio, baseline)
        if message:
            result["bar_failed"] = message
    return result
