"""The replay's timing of a submission: its replayed plan, the answer key's and the baseline on fresh inputs of the
bench size, prepared while the grader judges and timed in interleaved rounds when it asks; the outputs at that size
saved for the grader to compare. The clock and the arithmetic are `checks.engine.timing`'s; the verdict on the times
is the judge's (`checks.engine.judging.timing`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from checks.engine.contract.protocol import timing_outputs_path
from checks.engine.phases import mark
from checks.engine.replay.perform import TimedReplay
from checks.engine.timing import (
    ROUND_REP_MS,
    ROUND_WARMUP_MS,
    ROUNDS,
    WARMUP_ROUNDS,
    bench_ms,
    busy,
    device_peaks,
    in_graph,
    interleaved,
    medians,
    quiet_gpu,
    steadier,
    summarize,
)
from checks.registry import Puzzle

COMPARED = 2**22  # elements of an output the grader compares at the timing size: all of a smaller one
TAIL = 2**16  # and, of a larger one, every k-th element, TAIL more drawn at random and the last TAIL


class OutputSample:
    """The elements of the outputs the grader compares at the timing size, chosen from the answer key's outputs and
    copied to the CPU before any kernel of the submission runs at that size.

    So the key's side is computed on inputs no kernel of yours has touched, and is out of the device's memory
    before yours run: nothing a kernel of yours writes, in place or through a stray pointer, can reach it.
    An output of at most COMPARED elements goes whole. Of a larger one (hundreds of MB at the timing size), the
    same elements of both: every k-th in row-major order from an offset drawn at random, so that any wrong run of k
    or more shows, TAIL elements drawn at random, and the last TAIL. The draws come from a generator seeded by the
    operating system in this process, which a kernel cannot read: a kernel that computes only the elements a fixed
    pattern would compare is caught. Outputs of different shapes go as tensors with no data (torch's meta device)
    of those shapes, so that the grader can name them.
    """

    def __init__(self, theirs: Any) -> None:
        import torch

        from checks.engine.contract.plan import as_outputs

        self.shapes: list[tuple[Any, Any] | None] = []  # each output's shape and dtype; None: not a tensor
        self.picks: list[Any] = []  # each output's compared elements: None for all of them
        self.key: list[Any] = []
        self.sampled = ""
        for b in as_outputs(theirs):
            if not isinstance(b, torch.Tensor):
                self.shapes.append(None)
                self.picks.append(None)
                self.key.append(None)
                continue
            self.shapes.append((b.shape, b.dtype))
            picked = None
            if b.numel() > COMPARED:
                step = -(-b.numel() // COMPARED)
                draw = torch.Generator()
                draw.seed()
                offset = int(torch.randint(step, (1,), generator=draw))
                anywhere = torch.randint(b.numel(), (TAIL,), generator=draw)
                tail = torch.arange(b.numel() - TAIL, b.numel())
                picked = torch.cat([torch.arange(offset, b.numel(), step), anywhere, tail])  # kept on the CPU
                self.sampled = (
                    f"every {step}th element from a random offset, {TAIL} drawn at random and the last {TAIL}"
                )
            self.picks.append(picked)
            self.key.append(_taken(b, picked))

    def compared(self, yours: Any) -> tuple[list[Any], list[Any]]:
        """Your outputs' compared elements beside the key's, on the CPU, for the grader (`timing_outputs_path`)."""
        import torch

        from checks.engine.contract.plan import as_outputs

        ys = as_outputs(yours)
        if len(ys) != len(self.key):  # the grader says how many each returned: no data needed
            return [None] * len(ys), [None] * len(self.key)
        mine, key = [], []
        for a, shape, picked, b in zip(ys, self.shapes, self.picks, self.key, strict=True):
            if isinstance(a, torch.Tensor) and shape is not None and a.shape != shape[0]:
                mine.append(torch.empty(a.shape, dtype=a.dtype, device="meta"))
                key.append(torch.empty(shape[0], dtype=shape[1], device="meta"))
            elif isinstance(a, torch.Tensor) and shape is not None:
                mine.append(_taken(a, picked))
                key.append(b)
            else:
                mine.append(a.detach().cpu() if isinstance(a, torch.Tensor) else None)
                key.append(b)
        return mine, key

    def save(self, yours: Any, workdir: Path) -> Path:
        """`compared(yours)` saved where the grader reads it (`timing_outputs_path`); that path."""
        import torch

        mine, key = self.compared(yours)
        path = timing_outputs_path(workdir)
        torch.save({"yours": mine, "answer key": key}, path)
        return path


def _taken(output: Any, picked: Any) -> Any:
    """An output's compared elements (all of them when `picked` is None), on the CPU."""
    whole = output.detach()
    return whole.cpu() if picked is None else whole.reshape(-1)[picked.to(whole.device)].cpu()


class TimingRun:
    """The timing of the submission's replayed plan, the answer key (`key_fn`, its replayed plan too: the replay's
    `checks.engine.answer_key.AnswerKeyReplay`; None: no key to time beside) and the baseline on the bench case, in two
    steps. `TimingRun(...)` draws the inputs, calls the key
    and then yours once (compiling, autotuning), saves both outputs (`OutputSample`) and, on a GPU, captures each
    call in a CUDA graph where it can be (as serving engines run decoding), with no clock running; `rounds()` then
    times them in interleaved rounds (checks.engine.timing), so that the ratios compare kernel time, not the Python
    that launches them (`graphs` names those captured). The replay prepares while the grader judges the cases, and
    times only when asked.

    `rounds()` returns raw measurements only; `from_measurement` (in the grader) turns them into the verdict. Both
    outputs at the timing size go, on the CPU, to the file `timing_outputs_path(workdir)` names: the grader compares
    them. The key's are taken before any kernel of yours runs at that size. `device` and `rounds(timer=...)` exist
    for the tests, which run this on a CPU with a made-up clock.
    """

    def __init__(
        self,
        puzzle: Puzzle,
        spec,
        fn,
        key_fn: Callable[..., Any] | None,
        workdir: Path,
        device: str = "cuda",
    ) -> None:
        import torch

        from checks.memory import Arena

        self.spec, self.device = spec, device
        self.contenders: dict[str, Callable[[], Any]] = {}
        case = puzzle.timing_case
        timed = case.given() if case else {}
        self.raw: dict[str, Any] = {"case": timed, "times": {}, "baseline": puzzle.baseline, "problem": None}
        if case is None:
            return
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        gen = torch.Generator(device=device)
        gen.seed()  # fresh random inputs, not the graded ones
        self.inputs = inputs = spec.make_inputs(case, Arena(device, gen))
        args = list(inputs.values())
        mark("timing inputs drawn")
        key, sample = None, None
        if key_fn is not None:
            try:  # the key first, on inputs no kernel of yours has touched; its side leaves the device at once
                key = key_fn
                sample = OutputSample(key(*args))
                sync()
            except Exception:  # noqa: BLE001 - a broken answer key is the course's bug: time without it
                key, sample = None, None
        try:
            mine = fn(*args)  # also compiles and autotunes before the clock starts
            sync()
        except Exception as exc:  # noqa: BLE001 - the learner's code failing at a new size is a verdict
            if isinstance(exc, torch.cuda.OutOfMemoryError):
                self.raw["problem"] = "it ran out of GPU memory"
            else:
                self.raw["problem"] = f"it raised {type(exc).__name__}: {exc}"
            return
        self.sample = sample
        if sample is not None:
            self.raw.update(outputs_file=sample.save(mine, workdir).name)
            if sample.sampled:
                self.raw["outputs_compared"] = sample.sampled
        del mine
        sync()
        mark("yours and the key called once, outputs saved")

        # fair timing (checks.engine.timing): yours, the answer key and the baseline in interleaved rounds
        contenders: dict[str, Callable[[], Any]] = {"yours": lambda: fn(*args)}
        self.replays: dict[str, Any] = {"yours": fn}  # the sides that are replayed plans (TimedReplay)
        if key is not None:
            contenders["answer key"] = lambda: key(*args)
            self.replays["answer key"] = key
        contenders[puzzle.baseline] = spec.baseline(inputs)
        self.resets: dict[Any, Callable[[], Any]] = {}  # a captured graph's replay -> what fills its memory first
        if device == "cuda":  # each as the replay of a CUDA graph where it can be captured: kernel time, not host time
            graphed = {}
            for name, call in contenders.items():
                replay = self.replays.get(name)
                if isinstance(replay, TimedReplay):  # every timed replay starts from the same memory
                    capture = lambda replay=replay: replay.capture(*args)
                    captured = in_graph(capture)
                    graphed[name] = call if captured is capture else captured  # not capturable: called, filled
                    if captured is not capture:
                        self.resets[captured] = replay.reset
                else:
                    graphed[name] = in_graph(call)
            self.raw["graphs"] = sorted(name for name in contenders if graphed[name] is not contenders[name])
            contenders = graphed
            mark("graphs captured")
        self.contenders = contenders
        self.workdir = workdir

    def rounds(
        self, timer: Callable[[Callable[[], Any]], float] | None = None, rounds_count: int = ROUNDS
    ) -> dict[str, Any]:
        """The raw measurements: the interleaved rounds' times, the work done, the machine's peaks."""
        if not self.contenders:  # nothing to time, or the learner's code failed at the timing size (raw says)
            return {} if not self.raw["case"] else self.raw
        contenders = self.contenders
        round_clock = timer or (
            lambda f: bench_ms(f, warmup=ROUND_WARMUP_MS, rep=ROUND_REP_MS, before=self.resets.get(f))
        )
        with quiet_gpu(timing=True):  # no grading process makes its CUDA context on this GPU meanwhile
            rounds = interleaved(contenders, round_clock, rounds_count, warmup=WARMUP_ROUNDS)
            if busy(summarize(rounds)):  # one more set of rounds before saying the GPU was busy
                rounds = steadier(rounds, interleaved(contenders, round_clock, rounds_count))
        mark("rounds timed")
        self.save_timed_outputs()
        work = self.spec.work(self.inputs)
        peaks = device_peaks() if self.device == "cuda" else None
        return dict(
            self.raw,
            times=medians(rounds),
            rounds=rounds,
            nbytes=work.bytes,
            flops=work.flops,
            peaks=asdict(peaks) if peaks else None,
        )

    def save_timed_outputs(self) -> None:
        """What yours returns when run once more the way it was timed (a graph's replay after its memory was filled,
        or a call), in place of its first call's, beside the answer key's first outputs: the grader compares these,
        so that a timed run that does less than the first call is wrong at the timing size. The key's side stays the
        one taken before any kernel of yours ran (`OutputSample`)."""
        import torch

        if self.sample is None or self.raw.get("outputs_file") is None:
            return
        run, replay = self.contenders["yours"], self.replays["yours"]
        if run in self.resets:
            self.resets[run]()
            run()
            found = replay.returned
        else:
            found = run()
        if self.device == "cuda":
            torch.cuda.synchronize()
        self.sample.save(found, self.workdir)
