"""GPU timing of a passing submission beside the answer key and the torch baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checks.registry import Puzzle


def _bench(fn) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def time_submission(puzzle: Puzzle, spec, fn, solution_file: str | None) -> dict[str, Any]:
    """Median milliseconds of the submission, the answer key and the baseline on the bench case."""
    import torch

    from checks.child import load_module
    from checks.memory import Arena

    case = {k: v for k, v in puzzle.bench.items() if k != "baseline"}
    if not case:
        return {}
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    inputs = spec.make_inputs(case, Arena("cuda", gen))
    args = list(inputs.values())
    times = {"yours": _bench(lambda: fn(*args))}
    if solution_file and Path(solution_file).exists():
        key = getattr(load_module(Path(solution_file), "answer_key"), puzzle.name)
        times["answer key"] = _bench(lambda: key(*args))
    times[puzzle.bench.get("baseline", "torch")] = _bench(spec.baseline(inputs))
    work = spec.work(inputs)
    table = [f"GPU time on {case} (median of triton.testing.do_bench):"]
    for name, ms in times.items():
        rate = f"{work.flops / ms / 1e9:8.1f} TFLOPS" if work.flops else f"{work.bytes / ms / 1e6:8.1f} GB/s"
        table.append(f"  {name:<22} {ms:9.4f} ms  {rate}  x{times['yours'] / ms:5.2f} of yours")
    baseline_ms = times[puzzle.bench.get("baseline", "torch")]
    ratio = baseline_ms / times["yours"]
    result: dict[str, Any] = {"ms": times, "table": table, "ratio_vs_baseline": ratio,
                              "summary": f"Speed: {ratio:.2f}x the torch baseline."}
    bar = puzzle.speed_bar
    if bar and ratio < float(bar["min_ratio"]):
        result["bar_failed"] = (
            f"Correct, but {ratio:.2f}x the baseline's speed; this puzzle asks for at least "
            f"{bar['min_ratio']}x: see the hints for what makes it fast."
        )
    return result
