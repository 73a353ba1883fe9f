"""Timing on a shared GPU: interleaved rounds, ratios from paired rounds, and no speed verdict on a busy GPU.

Whatever else runs on the GPU slows everything timed while it runs. Timing yours, then the answer key,
then the baseline, each once, compares moments, not kernels: with other gradings on the GPU, a right
kernel was measured 2.86x the answer key (alone: 0.83x). So each is timed in short rounds, interleaved:

    yours, answer key, baseline, yours, answer key, baseline, ...

and each ratio is taken within a round (the baseline's time over yours, in the same round), then the
median over rounds. The spread of the rounds' ratios says how steady the GPU was: when it is above
`NOISE_LIMIT`, the GPU was busy, and no speed verdict is given: a speed bar is neither passed nor failed.

Pure functions of times; `checks.engine.grading_process.measure` runs the rounds on the GPU with `interleaved`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

ROUNDS = 7  # rounds of (yours, answer key, baseline)
WARMUP_ROUNDS = 1  # rounds timed first and thrown away: an idle GPU's clocks ramp up under the first load
ROUND_REP_MS = 30  # do_bench's repetition time per contender and round
NOISE_LIMIT = 0.10  # the rounds' ratios may spread by +-10% around their median before the GPU counts as busy


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
