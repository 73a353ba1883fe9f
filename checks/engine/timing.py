"""The timing's arithmetic and its clock, below both the replay (which times) and the bench (which sweeps): the
median of do_bench, a call captured in a CUDA graph, the GPU's roofline (cached per GPU and versions), rates and
ratios, and the interleaved rounds that time a shared GPU fairly.

Timing on a shared GPU: whatever else runs on the GPU slows everything timed while it runs. Timing yours, then the
answer key, then the baseline, each once, compares moments, not kernels: with other gradings on the GPU, a right
kernel was measured 2.86x the answer key (alone: 0.83x). So each is timed in short rounds, interleaved:

    yours, answer key, baseline, yours, answer key, baseline, ...

and each ratio is taken within a round (the baseline's time over yours, in the same round), then the
median over rounds. The spread of the rounds' ratios says how steady the GPU was: when it is above
`NOISE_LIMIT`, the GPU was busy, and no speed verdict is given: a speed bar is neither passed nor failed.

The arithmetic is pure (tested without a GPU in tests/test_timing.py); the clock needs CUDA. The verdict on the times
is the judge's (`checks.engine.judging.timing`); the replay's timing of a submission is
`checks.engine.replay.measure`.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROUNDS = 7  # rounds of (yours, answer key, baseline)
WARMUP_ROUNDS = 1  # rounds timed first and thrown away: an idle GPU's clocks ramp up under the first load
ROUND_REP_MS = 30  # do_bench's repetition time per contender and round
NOISE_LIMIT = 0.10  # the rounds' ratios may spread by +-10% around their median before the GPU counts as busy
WARMUP_MS, REP_MS = 25, 100
ROUND_WARMUP_MS = 5  # per round: the first round's compile and autotune happened before the clock
COPY_ELEMENTS = 1 << 28  # float32 elements per copy buffer (1 GiB) for the bandwidth measurement
MATMUL_SIDE = 8192  # the float16 torch.matmul that stands for the peak arithmetic rate


def interleaved(
    contenders: dict[str, Callable[[], Any]],
    clock: Callable[[Callable[[], Any]], float],
    rounds: int = ROUNDS,
    warmup: int = 0,
) -> dict[str, list[float]]:
    """Time each contender once per round, in the given order, round after round: {name: [ms per round]};
    the first `warmup` rounds are timed the same way and left out."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(warmup + rounds):
        for name, fn in contenders.items():
            times[name].append(float(clock(fn)))
    return {name: values[warmup:] for name, values in times.items()}


def paired_ratios(rounds: dict[str, list[float]], other: str, yours: str = "yours") -> list[float]:
    """How many times faster yours was than `other`, round by round (other's time over yours, same round)."""
    return [theirs / mine for mine, theirs in zip(rounds[yours], rounds[other], strict=True) if mine > 0]


def spread(ratios: list[float]) -> float:
    """Half the range of the ratios, relative to their median: 0.1 means the rounds ranged over +-10%.

    From five rounds on, the one round furthest from the median is left out: one stray round (a clock change,
    another process's brief burst) moves neither the median nor the verdict; two or more are a busy GPU."""
    if len(ratios) < 2:
        return 0.0
    middle = statistics.median(ratios)
    if len(ratios) >= 5:
        stray = max(range(len(ratios)), key=lambda i: abs(ratios[i] - middle))
        ratios = ratios[:stray] + ratios[stray + 1 :]
    return (max(ratios) - min(ratios)) / (2 * middle) if middle > 0 else float("inf")


def medians(rounds: dict[str, list[float]]) -> dict[str, float]:
    """Each contender's median time over the rounds (for the table)."""
    return {name: float(statistics.median(values)) for name, values in rounds.items() if values}


def summarize(rounds: dict[str, list[float]], yours: str = "yours") -> dict[str, dict[str, float]]:
    """For every other contender: the median paired ratio and its spread."""
    found = {}
    for other in rounds:
        if other != yours:
            ratios = paired_ratios(rounds, other, yours)
            if ratios:
                found[other] = {"ratio": float(statistics.median(ratios)), "spread": spread(ratios)}
    return found


def busy(summary: dict[str, dict[str, float]], limit: float = NOISE_LIMIT) -> bool:
    """Whether any ratio spread beyond the limit: the GPU was shared while timing."""
    return any(entry["spread"] > limit for entry in summary.values())


def busy_message(summary: dict[str, dict[str, float]], bar: bool) -> str:
    """What the learner reads when the GPU was busy: no speed verdict, and how to retry."""
    widest = max(summary.values(), key=lambda entry: entry["spread"])["spread"] if summary else 0.0
    verdict = "so the speed bar was neither passed nor failed" if bar else "so the speed ratios are uncertain"
    return (
        f"The GPU was busy while timing (the rounds' ratios ranged over +-{100 * widest:.0f}%, more than "
        f"+-{100 * NOISE_LIMIT:.0f}%), {verdict}: check again when the GPU is idle "
        "(nvidia-smi lists what else runs on it); when grading a class, grade with fewer --jobs."
    )


def steadier(first: dict[str, list[float]], second: dict[str, list[float]]) -> dict[str, list[float]]:
    """Of two sets of rounds, the one whose widest ratio spread is smaller."""

    def widest(rounds: dict[str, list[float]]) -> float:
        return max((entry["spread"] for entry in summarize(rounds).values()), default=0.0)

    return first if widest(first) <= widest(second) else second


# -- the roofline and rates (pure arithmetic) ------------------------------------------------------


@dataclass(frozen=True)
class Peaks:
    """What this GPU can do, measured with torch: the roof of the roofline."""

    copy_gbps: float  # device-to-device copy, bytes read + written, in GB/s
    matmul_tflops: float  # a large float16 torch.matmul, in TFLOPS
    matmul_side: int = MATMUL_SIDE  # ... of this many rows and columns


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


# -- the clock (CUDA) -----------------------------------------------------------------------------


def quiet_gpu_path() -> Path:
    """The lock file of this GPU (as CUDA_VISIBLE_DEVICES names it) for the processes of this user."""
    import tempfile

    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace("/", "_").replace(",", "+") or "none"
    return Path(tempfile.gettempdir()) / f"checks-quiet-gpu-{os.getuid()}-{visible[:64]}.lock"


QUIET_WAIT_S = 20.0  # the longest a process waits for the GPU to be quiet (a timing hung in its kernel holds it)


@contextlib.contextmanager
def quiet_gpu(timing: bool, wait_s: float = QUIET_WAIT_S) -> Iterator[None]:
    """While a process times (`timing`: the rounds, an autotuner's choice), no grading process of this course makes
    its CUDA context on the same GPU: a spare started ahead of the next check waits (`timing=False`) until the timing
    is over, and a timing waits for a context being made to be done. An advisory lock (flock) on a file of this GPU;
    without one (no such file can be made), nothing waits. A thread that holds it takes it again at once. After
    `wait_s` seconds it goes on without it (the rounds' spread then says whether the GPU was busy): a timing stuck in
    a kernel until its time limit never makes another check run past its own."""
    import fcntl

    held = _quiet.__dict__.setdefault("held", [])
    if held:  # this thread holds it already (an autotuner's choice made inside the rounds)
        yield
        return
    try:
        fd = os.open(quiet_gpu_path(), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield
        return
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                fcntl.flock(fd, (fcntl.LOCK_EX if timing else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                held.append(fd)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break  # not quiet in time: on without it
                time.sleep(0.01)
        yield
    finally:
        if held:
            held.pop()
        os.close(fd)  # and with it the lock


_quiet = threading.local()  # `held`: the lock's file while this thread holds it (a second flock would wait on it)


def bench_ms(
    fn: Callable[[], Any], warmup: int = WARMUP_MS, rep: int = REP_MS, before: Callable[[], Any] | None = None
) -> float:
    """Median milliseconds of fn() on the GPU (triton.testing.do_bench; it flushes L2 between runs). With `before`:
    do_bench's own procedure (an estimate from five runs, warm-up and timed runs sized from it, L2 flushed before
    each timed run, a pair of CUDA events around each), with before() run ahead of every run, outside the events."""
    import statistics

    import triton.testing

    if before is None:
        return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))
    from triton import runtime

    driver = runtime.driver.active
    device = driver.get_device_interface()
    cache = driver.get_empty_cache_for_benchmark()
    before()
    fn()
    device.synchronize()
    spent = 0.0
    for _ in range(5):
        before()
        driver.clear_cache(cache)
        start, end = device.Event(enable_timing=True), device.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        device.synchronize()
        spent += start.elapsed_time(end)
    estimate_ms = max(spent / 5, 1e-6)
    for _ in range(max(1, int(warmup / estimate_ms))):
        before()
        fn()
    runs = max(1, int(rep / estimate_ms))
    starts = [device.Event(enable_timing=True) for _ in range(runs)]
    ends = [device.Event(enable_timing=True) for _ in range(runs)]
    for start, end in zip(starts, ends, strict=True):
        before()
        driver.clear_cache(cache)
        start.record()
        fn()
        end.record()
    device.synchronize()
    return float(statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)))


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
PEAKS_CACHE = Path(__file__).resolve().parents[2] / "build" / "roofline.json"


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


def in_graph(call: Callable[[], Any]) -> Callable[[], Any]:
    """`call` captured once in a CUDA graph (after a warm-up on a side stream); the graph's replay, which is how a
    serving engine runs a decoding step: the launches' host cost is paid once, at capture. `call` itself where it
    cannot be captured (a host sync inside it)."""
    import torch

    call()
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    try:
        with torch.cuda.stream(side):
            call()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
    except Exception:  # noqa: BLE001 - not capturable: timed as it is
        torch.cuda.synchronize()
        return call
    return graph.replay
