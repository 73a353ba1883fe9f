"""The grading process: loads one submission and runs every case of one puzzle.

Started by `checks.sandbox` as `python -m checks.child JOB.json EVENTS.jsonl`. It writes one JSON
object per line to EVENTS (progress, then the verdict), so that the parent can show progress and
still give a verdict when this process hangs or dies.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from checks import verdict as V
from checks.environment import NUMPY_PITFALL_TEXT, Machine, autotune_without_benchmarks, detect
from checks.source import load_module


class Events:
    def __init__(self, path: str) -> None:
        self._f = open(path, "a", encoding="utf-8")

    def emit(self, event: str, **data: Any) -> None:
        self._f.write(json.dumps({"event": event, **data}) + "\n")
        self._f.flush()


def explain_exception(exc: BaseException, names: dict[str, str]) -> tuple[str, list[str]]:
    """One line for the exception and the lines of the learner's own code it passed through."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    root = chain[-1]
    text = f"{type(root).__name__}: {root}".strip()
    if NUMPY_PITFALL_TEXT in str(exc) or NUMPY_PITFALL_TEXT in text:
        return text, [
            "This is the Triton-interpreter/numpy incompatibility: run `pip install 'numpy<2.4'` and check again."
        ]
    where: list[str] = []
    if "illegal memory access" in text or "misaligned address" in text:
        where.append("A CUDA memory fault is an out-of-bounds load or store: check your masks, offsets and strides.")
    for link in reversed(chain):
        for frame in traceback.extract_tb(link.__traceback__):
            shown = names.get(str(Path(frame.filename).resolve()))
            if shown:
                entry = f"{shown}, line {frame.lineno}: {(frame.line or '').strip()}"
                if entry not in where:
                    where.append(entry)
    return text, where[-4:]


# case parameters that the description of the inputs already shows (shapes, layouts, flags)
_SHOWN = {"shape", "n", "M", "N", "K", "B", "H", "D", "layout", "layout_a", "layout_b", "causal", "sm_scale", "dtype"}


def describe_case(case: dict[str, Any], inputs: dict[str, Any]) -> str:
    """The inputs, plus what is special about this case's values (scale, fill, ...)."""
    extras = ", ".join(f"{k}={v}" for k, v in case.items() if k not in _SHOWN and k != "note")
    text = describe_inputs(inputs)
    if extras:
        text += f" [{extras}]"
    if case.get("note"):
        text += f" ({case['note']})"
    return text


def describe_inputs(inputs: dict[str, Any]) -> str:
    import torch

    from checks.memory import describe_tensor

    parts = []
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor):
            parts.append(describe_tensor(name, value))
        elif isinstance(value, float):
            parts.append(f"{name}={value:.4g}")
        else:
            parts.append(f"{name}={value}")
    return ", ".join(parts)


def as_outputs(returned: Any) -> list:
    """What a learner's function returned, as a list of outputs (one tensor or a tuple of them)."""
    return list(returned) if isinstance(returned, (tuple, list)) else [returned]


class Grader:
    def __init__(self, job: dict[str, Any], events: Events, machine: Machine) -> None:
        from checks.puzzles import spec_module
        from checks.registry import get_puzzle

        self.job = job
        self.events = events
        self.machine = machine
        self.puzzle = get_puzzle(job["puzzle"])
        self.spec = spec_module(self.puzzle)
        self.names = {str(Path(k).resolve()): v for k, v in job["names"].items()}
        self.own_files = set(self.names)
        self.seed = int(job["seed"])

    # -- one call of the learner's function, watched -------------------------------------------
    def call(self, fn, inputs: dict[str, Any], arena, skip: bool = False):
        import torch

        from checks.tracking import Reads, Tracker, guard_allocations, input_regions, watch_launches, watch_loads

        tracker = Tracker(self.own_files, skip=skip)
        with contextlib.ExitStack() as stack:
            stack.enter_context(watch_launches(tracker))
            stack.enter_context(guard_allocations(arena))
            if self.machine.mode == "interpreter":
                tracker.reads = stack.enter_context(watch_loads(Reads(input_regions(inputs), arena)))
            result = fn(*inputs.values())
        if self.machine.device == "cuda":
            torch.cuda.synchronize()
        return result, tracker

    def draw(self, case: dict[str, Any], index: int):
        import torch

        from checks.memory import Arena

        gen = torch.Generator(device=self.machine.device)
        gen.manual_seed(self.seed + index)
        arena = Arena(self.machine.device, gen)
        inputs = self.spec.make_inputs(case, arena)
        expected = self.spec.reference(inputs)
        return arena, inputs, expected

    def check_case(self, fn, index: int, case: dict[str, Any]) -> V.CaseResult:
        arena, inputs, expected = self.draw(case, index)
        result = V.CaseResult(index, describe_case(case, inputs), passed=False)
        arena.freeze_inputs()
        start = time.perf_counter()
        try:
            returned, tracker = self.call(fn, inputs, arena)
        except NotImplementedError as exc:
            result.problem = f"Your code still raises NotImplementedError ({exc})."
            result.raised = True
            result.stub = True
            return result
        except Exception as exc:  # noqa: BLE001 - any error in learner code is a verdict
            text, where = explain_exception(exc, self.names)
            result.problem = f"Your code raised {text}"
            result.details = where
            result.raised = True
            return result
        finally:
            result.seconds = time.perf_counter() - start
        problem = self.inspect(returned, tracker, arena, expected, result)
        if problem:
            result.problem = problem
        else:
            result.passed = True
        return result

    def inspect(self, returned, tracker, arena, expected, result: V.CaseResult) -> str:
        """The first thing wrong with one call, or '' when it is right."""
        outputs = as_outputs(returned)
        return (
            self.launch_problem(tracker)
            or self.memory_problem(tracker, arena, outputs, expected)
            or self.shape_problem(returned, outputs, expected)
            or self.value_problem(outputs, expected, tracker, result)
            or self.check_limits(tracker)
        )

    @staticmethod
    def launch_problem(tracker) -> str:
        if tracker.own_launches:
            return ""
        others = sorted({launch.kernel for launch in tracker.launches})
        extra = f" (it launched only kernels defined elsewhere: {', '.join(others)})" if others else ""
        return (
            f"Your function launched none of your own Triton kernels{extra}: compute the answer in a "
            "@triton.jit kernel that your function launches with kernel[grid](...)."
        )

    @staticmethod
    def memory_problem(tracker, arena, outputs: list, expected: list) -> str:
        """Inputs changed, writes outside a tensor, loads outside a tensor."""
        import torch

        for entry in arena.inputs():
            changed = entry.changed()
            if not changed:
                continue
            before, after, _ = entry.guard_damage()
            if before or after:
                where = f"{after} elements past its end" if after else f"{before} elements before its start"
                return (
                    f"Your code wrote outside the input {entry.label} ({where}): "
                    "a store is missing its mask or uses the wrong offsets."
                )
            return (
                f"Your code changed its input {entry.label} ({changed} elements): "
                "write results to a new tensor, never into an input."
            )
        for entry in arena.allocated():
            before, after, first_after = entry.guard_damage()
            if not (before or after):
                continue
            label = entry.label
            for out, exp in zip(outputs, expected, strict=False):
                if isinstance(out, torch.Tensor) and out.untyped_storage().data_ptr() == entry.buf.data_ptr():
                    label = f"the output {exp.name} ({label})"
            if after:
                start = "right after its last element" if first_after == 0 else f"{first_after} elements after its end"
                where = f"{after} elements past its end, starting {start}"
            else:
                where = f"{before} elements before its start"
            return f"Your code wrote outside {label}: {where}; a store is missing its mask, or its offsets run past it."
        if tracker.reads is not None and tracker.reads.outside:
            label, count = next(iter(tracker.reads.outside.items()))
            return (
                f"Your kernel loaded {count} elements from outside {label} (from the grader's guard band around it): "
                "a load is missing its mask, or its offsets run past the tensor; on a GPU this reads garbage or faults."
            )
        return ""

    @staticmethod
    def shape_problem(returned, outputs: list, expected: list) -> str:
        import torch

        if len(outputs) != len(expected):
            names = ", ".join(e.name for e in expected)
            many = isinstance(returned, (tuple, list))
            what = f"{len(outputs)} values" if many else f"a {type(returned).__name__}"
            return f"Your function returned {what}; it must return {len(expected)} tensor(s): {names}."
        for out, exp in zip(outputs, expected, strict=True):
            if not isinstance(out, torch.Tensor):
                return f"Your function returned {type(out).__name__} for {exp.name}; return a torch tensor."
            if out.device.type != exp.value.device.type:
                return f"{exp.name} is on {out.device}; return it on the inputs' device ({exp.value.device})."
            if tuple(out.shape) != tuple(exp.value.shape):
                return f"{exp.name} has shape {tuple(out.shape)}; expected {tuple(exp.value.shape)}."
            if out.dtype != exp.dtype:
                return (
                    f"{exp.name} is {out.dtype}; expected {exp.dtype}: "
                    "convert in the kernel before the store (x.to(...))."
                )
            if exp.contiguous and not out.is_contiguous():
                return (
                    f"{exp.name} has strides {tuple(out.stride())}; the puzzle asks for a contiguous result, "
                    "so allocate it with torch.empty(shape)."
                )
        return ""

    def value_problem(self, outputs: list, expected: list, tracker, result: V.CaseResult) -> str:
        """Compare every output; describe the first wrong one and say which others are right or wrong."""
        mismatches = self.compare_all(outputs, expected)
        wrong = [(exp, m) for exp, m in mismatches if m is not None]
        if not wrong:
            return ""
        exp, first = wrong[0]
        result.details = list(first.lines)
        if len(mismatches) > 1:
            others = [
                f"{e.name} {'also wrong: ' + m.headline.split(': ', 1)[1] if m else 'matches the reference'}"
                for e, m in mismatches
                if e is not exp
            ]
            result.details.append("Other outputs: " + "; ".join(others) + ".")
        self.save_picture(first, exp, result.description, tracker)
        return first.headline

    def check_limits(self, tracker) -> str:
        """The puzzle's rules on how the answer is computed (passes over memory, block size), if any.

        Counted in the interpreter only: on a GPU the timing shows the same thing.
        """
        reads = tracker.reads
        if reads is None:
            return ""
        limits = self.puzzle.limits
        why = limits.get("why", "")
        widest = limits.get("max_block")
        if widest and reads.widest > widest:
            return (
                f"One of your loads had {reads.widest} lanes; this puzzle allows at most {widest} in one tl.load: {why}"
            )
        for name, most in limits.get("reads_per_element", {}).items():
            if name in reads.regions and reads.per_element(name) > most + 1e-6:
                return (
                    f"Your kernels read each element of {name} {reads.per_element(name):.2f} times on average; "
                    f"this puzzle allows at most {most}: {why}"
                )
        return ""

    def save_picture(self, mismatch, exp, description: str, tracker) -> None:
        import torch

        folder = self.job.get("artifacts")
        if not folder or self.job.get("picture_saved"):
            return
        path = Path(folder) / f"puzzle{self.puzzle.label}_errors.pt"
        blocks: dict[str, int] = {}
        for launch in tracker.own_launches:
            blocks.update(launch.blocks)
        torch.save(
            {
                "error": mismatch.error.float(),
                "bad": mismatch.bad,
                "dims": exp.dims,
                "name": exp.name,
                "case": description,
                "headline": mismatch.headline,
                "blocks": blocks,
            },
            path,
        )
        self.job["picture_saved"] = str(path)

    def kernels_matter(self, fn, case: dict[str, Any]) -> bool:
        """Re-run the first case with the learner's kernels switched off: the answer must break."""
        arena, inputs, expected = self.draw(case, 0)
        try:
            returned, _ = self.call(fn, inputs, arena, skip=True)
        except Exception:  # noqa: BLE001 - breaking without its kernels is the expected outcome
            return True
        outputs = as_outputs(returned)
        if len(outputs) != len(expected):
            return True
        return any(mismatch is not None for _, mismatch in self.compare_all(outputs, expected))

    def compare_all(self, outputs: list, expected: list) -> list:
        """(expected output, its Mismatch or None) for every output, each with its own tolerance."""
        from checks.compare import compare

        pairs = []
        for out, exp in zip(outputs, expected, strict=True):
            atol, rtol = self.puzzle.tolerance_for(exp.name)
            pairs.append((exp, compare(exp.name, out, exp.value, atol, rtol, exp.dims)))
        return pairs

    # -- the whole submission ------------------------------------------------------------------
    def run(self) -> V.Verdict:
        v = V.Verdict(
            self.puzzle.number, V.FAILED, "", mode=self.machine.mode, device=self.machine.name, seed=self.seed
        )
        path = Path(self.job["file"])
        try:
            module = load_module(path, "submission")
        except Exception as exc:  # noqa: BLE001
            text, where = explain_exception(exc, self.names)
            v.status = V.ERROR
            v.details = [f"Loading your code raised {text}"] + where
            v.summary = "Your code did not load: fix the error above and check again."
            return v
        missing = [name for name in self.puzzle.defines if not callable(getattr(module, name, None))]
        if missing:
            v.status = V.ERROR
            v.summary = f"Your code does not define {', '.join(missing)}: keep the function name from the stub."
            return v
        fn = getattr(module, self.puzzle.name)
        cases = self.puzzle.cases["gpu" if self.machine.mode == "gpu" else "cpu"]
        only = self.job.get("cases")
        for index, case in enumerate(cases):
            if only is not None and index not in only:
                continue
            self.events.emit("case_start", index=index, total=len(cases))
            result = self.check_case(fn, index, case)
            if result.raised:
                v.status = V.ERROR
            if result.stub:
                label = next(iter(self.names.values()), "your code")
                v.summary = (
                    f"Your code is still the stub: fill in the FILL ME IN parts of {label} "
                    "(save the notebook if you grade it from a terminal), then check again."
                )
                return v
            self.events.emit("case", **result.__dict__)
            v.cases.append(result)
            if self.machine.mode == "gpu" and not result.passed and v.status == V.ERROR:
                break  # after a CUDA error the context may be unusable
        failed = [c for c in v.cases if not c.passed]
        if not v.cases:
            v.status = V.ERROR
            v.summary = "No case was selected, so nothing was graded: leave out the case filter."
            return v
        if failed:
            first = failed[0]
            v.summary = (
                f"{len(failed)} of {len(v.cases)} cases failed; start with case {first.index + 1} "
                f"({first.description}): {first.problem}"
            )
            if v.status != V.ERROR:
                v.status = V.FAILED
            v.picture_data = self.job.get("picture_saved", "")
            return v
        if (only is None or 0 in only) and not self.kernels_matter(fn, cases[0]):
            v.status = V.FAILED
            v.summary = (
                "Your function returns the right answer even when its Triton kernels are switched off, so "
                "torch (not your kernel) computed it: do the arithmetic inside the kernel."
            )
            return v
        v.status = V.PASSED
        v.summary = f"all {len(v.cases)} cases match the reference."
        if self.machine.mode == "gpu" and self.job.get("time", True):
            from checks.timing import time_submission

            v.timings = time_submission(self.puzzle, self.spec, fn, self.job.get("solution_file"))
            bar = v.timings.get("bar_failed")
            if bar:
                v.status = V.FAILED
                v.summary = bar
            else:
                v.summary += " " + v.timings.get("summary", "")
        return v


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    job = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    events = Events(args[1])
    machine = detect(force_interpreter=bool(job.get("interpret")))
    events.emit(
        "machine",
        mode=machine.mode,
        device=machine.name,
        torch=machine.torch_version,
        triton=machine.triton_version,
        numpy=machine.numpy_version,
    )
    start = time.perf_counter()
    if machine.mode == "interpreter" and not machine.problem:
        autotune_without_benchmarks()
    if machine.problem:
        v = V.Verdict(job["puzzle"], V.ENVIRONMENT, machine.problem, mode=machine.mode, device=machine.name)
    else:
        try:
            v = Grader(job, events, machine).run()
        except Exception as exc:  # noqa: BLE001 - a grader bug must still end in a verdict
            v = V.Verdict(
                job["puzzle"],
                V.INTERNAL,
                (
                    f"The grader itself failed ({type(exc).__name__}: {exc}); this is a bug in the course, "
                    "not in your code: please report it with the output above."
                ),
                mode=machine.mode,
                device=machine.name,
            )
            v.details = traceback.format_exc().splitlines()[-8:]
    v.seconds = time.perf_counter() - start
    events.emit("verdict", **json.loads(v.to_json()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
