"""`python -m bench profile N [--file F | --solution] [--out DIR]` (`make profile PUZZLE=N [FILE=...]`): where the time
goes, kernel by kernel, for your code beside the answer key and the puzzle's baseline, on a CUDA GPU.

At the puzzle's timing size (puzzles.yaml's `bench`, the size `make check` times), on the same fresh inputs, it calls
each contender `--calls` times under Proton (`triton.profiler`, its CUPTI backend: every kernel launched, each in a
scope of its contender) and prints, per contender, each kernel's name, its launches per call, its time per call and its
share of the contender's kernel time; then the contender's rate (TFLOPS or TB/s, for the puzzle's work as `make check`
counts it) and its fraction of the device's peak (the roofline of `make check`: the data sheet's peaks where the GPU is
known, else measured here). Where Proton fails (a runtime without CUPTI's activity tracing, a Triton built without
Proton) or records no kernel, each contender is timed whole by `triton.testing.do_bench` instead, and the table says so.

For the Hopper steps (16a, 16b, 16) on a Hopper GPU it also draws the timeline of one program of the answer key:
which warp (producer or consumer warpgroup) does which phase when (`bench.warp_timeline`).

Your code runs as written, in this process: not in the grader's sealed processes, and not graded (`make check` grades).
Your code is the puzzle's notebook's graded cells, as `make check` finds them, or `--file`; `--solution`: the key only.

The outputs go to `--out` (default profile/NN_slug/, which git ignores): profile.txt (the table), profile.json (its
rows), Proton's profile (profile.hatchet, for `proton-viewer -m time/ms profile.hatchet`), and for a Hopper step the
timeline (timeline.png), its trace and phases.txt. A folder under bench/results/ (or one inside it) adds the figures
to its run folder's record (record.json): each contender's time beside the baseline's, and its fraction of the peak.
Proton's times are of calls run back to back (the cache warm from the call before); do_bench's of calls after it
flushed L2: the two are not to be compared with each other.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from checks.bench_results import RESULTS
from checks.registry import ROOT, Puzzle, UnknownPuzzle, get_puzzle, shown

NO_GPU = (
    "make profile needs a CUDA GPU, and this machine has none: run it on a GPU machine, where Proton (part of Triton) "
    "times each kernel; here, `make check` grades your kernels in Triton's interpreter."
)
CALLS = 20  # calls of each contender under the profiler
PROBE_S = 120.0  # seconds Proton's trial may take (a fresh process: torch, CUDA, CUPTI)
TIMELINE_S = 300.0  # seconds the warp timeline's process may take (it compiles the instrumented key)
YOURS, KEY = "yours", "answer key"
PROTON = "Proton (CUPTI), each kernel's time on the GPU"
WHOLE = "(the whole call, do_bench)"
DO_BENCH = "triton.testing.do_bench, each call whole (median): Proton could not time the kernels here"


@dataclass
class Kernel:
    """One kernel of a contender: its name, its launches per call and its time per call in microseconds."""

    name: str
    calls: float | None
    us: float


@dataclass
class Contender:
    """One contender's kernels and, from their sum, its time per call, rate and fraction of the device's peak."""

    name: str
    kernels: list[Kernel] = field(default_factory=list)
    problem: str = ""  # why it was not timed

    @property
    def us(self) -> float:
        return sum(k.us for k in self.kernels)


# -- Proton's profile (hatchet's JSON: [the tree from its root, the devices]) read into kernels per contender


def kernels_by_scope(profile: list[Any], calls: int) -> dict[str, list[Kernel]]:
    """Each scope under the root of a Proton profile, with the kernels launched in it: name, launches and time per
    call (of `calls` calls), the longest first. Proton's nodes carry metrics "time (ns)" and "count" on kernels only."""
    root = profile[0]
    found: dict[str, list[Kernel]] = {}
    for scope in root.get("children", []):
        totals: dict[str, list[float]] = {}
        stack = list(scope.get("children", []))
        while stack:
            node = stack.pop()
            stack.extend(node.get("children", []))
            metrics = {name.lower(): value for name, value in node.get("metrics", {}).items()}  # older: "Time (ns)"
            if "time (ns)" in metrics:
                entry = totals.setdefault(node["frame"]["name"], [0.0, 0.0])
                entry[0] += float(metrics.get("count", 0))
                entry[1] += float(metrics["time (ns)"])
        kernels = [Kernel(name, count / calls, ns / calls / 1e3) for name, (count, ns) in totals.items()]
        found[scope["frame"]["name"]] = sorted(kernels, key=lambda k: -k.us)
    return found


# -- the table


def rate(nbytes: float, flops: float, us: float, roof: Any) -> tuple[str, float | None]:
    """The rate of the binding roof (TFLOPS where the work is compute-bound, else TB/s) and the fraction of the
    roofline reached; without a roof, the arithmetic rate where there are flops, else the bandwidth."""
    from checks.engine.timing import bound, gbps, roofline_share, tflops

    ms = us / 1e3
    compute = bound(nbytes, flops, roof) == "compute" if roof is not None else bool(flops)
    text = f"{tflops(flops, ms):.3g} TFLOPS" if compute else f"{gbps(nbytes, ms) / 1e3:.3g} TB/s"
    return text, roofline_share(nbytes, flops, ms, roof) if roof is not None else None


def table_lines(contenders: list[Contender], nbytes: float, flops: float, roof: Any) -> list[str]:
    """The table: a line per contender (time per call, rate, fraction of the device's peak), a line per kernel under
    it (launches per call, time per call, share of the contender's time)."""
    lines = [f"{'contender / kernel':<44} {'calls':>6} {'us/call':>11} {'share':>7}  {'rate':>14}  {'of peak':>7}"]
    for c in contenders:
        if c.problem or not c.kernels:
            lines.append(f"{c.name:<44} not timed: {c.problem or 'no kernel was recorded'}")
            continue
        text, share = rate(nbytes, flops, c.us, roof)
        peak = f"{100 * share:6.1f}%" if share is not None else "      -"
        lines.append(f"{c.name:<44} {'':>6} {c.us:>11.2f} {'':>7}  {text:>14}  {peak:>7}")
        for k in c.kernels:
            calls = f"{k.calls:g}" if k.calls is not None else "-"
            name = k.name if len(k.name) <= 40 else k.name[:37] + "..."
            lines.append(f"  {name:<42} {calls:>6} {k.us:>11.2f} {100 * k.us / c.us:>6.1f}%")
    return lines


def figures(contenders: list[Contender], puzzle: Puzzle, nbytes: float, flops: float, roof: Any) -> list[dict]:
    """The record's figures: each contender's time per call (beside the baseline's) and its fraction of the peak."""
    timed = {c.name: c.us / 1e3 for c in contenders if c.kernels and not c.problem}
    base = timed.get(puzzle.baseline)
    found: list[dict[str, Any]] = []
    for name, ms in timed.items():
        label = f"profile {puzzle.number} {name}"
        figure: dict[str, Any] = {"name": label, "metric": "time", "unit": "ms", "value": ms}
        if base is not None and name != puzzle.baseline:
            figure.update(baseline=puzzle.baseline, baseline_value=base, ratio=base / ms)
        found.append(figure)
        share = rate(nbytes, flops, ms * 1e3, roof)[1]
        if share is not None:
            found.append({"name": label, "metric": "roofline share", "unit": "fraction", "value": share})
    return found


# -- the run (GPU)


def contenders_of(puzzle: Puzzle, args: argparse.Namespace, workdir: Path) -> dict[str, Callable[..., Any]]:
    """Yours (unless --solution), the answer key's function; SubmissionError where yours cannot be read."""
    from checks.engine.grade import prepare
    from checks.engine.submission import load_module

    found: dict[str, Callable[..., Any]] = {}
    if not args.solution:
        module, _, before = prepare(puzzle, args.file, False, workdir, earlier=args.earlier)
        found[YOURS] = getattr(load_module(module, f"yours_{puzzle.stem}", earlier=before), puzzle.name)
    found[KEY] = getattr(load_module(puzzle.solution, f"answer_key_{puzzle.stem}"), puzzle.name)
    return found


def proton_times(calls: dict[str, Callable[[], Any]], out: Path, repeat: int) -> dict[str, list[Kernel]]:
    """Each call run `repeat` times in a Proton scope of its name, under Proton's CUPTI backend: its kernels."""
    import torch
    import triton.profiler as proton

    name = out / "profile"
    (out / "profile.hatchet").unlink(missing_ok=True)  # an earlier run's must not stand in for this one's
    proton.start(str(name), context="shadow")
    try:
        for label, call in calls.items():
            with proton.scope(label):
                for _ in range(repeat):
                    call()
            torch.cuda.synchronize()
    finally:
        proton.finalize()
    return kernels_by_scope(json.loads((out / "profile.hatchet").read_text(encoding="utf-8")), repeat)


# Proton's CUPTI backend tried first in a process of its own: where the runtime lacks the GPU's activity tracing it may
# abort or hang the process rather than raise, and the table must still come out
PROBE = """
import sys, torch, triton.profiler as proton
proton.start(sys.argv[1], context="shadow")
with proton.scope("probe"):
    torch.ones(1 << 20, device="cuda").sum()
torch.cuda.synchronize()
proton.finalize()
"""


def proton_probe(out: Path, timeout: float = PROBE_S, run: Callable[..., Any] = subprocess.run) -> str:
    """'' where Proton times a kernel in a trial process (`PROBE`); else why not, in a few words."""
    name = out / "proton_probe"
    file = name.with_suffix(".hatchet")
    file.unlink(missing_ok=True)
    try:
        done = run([sys.executable, "-c", PROBE, str(name)], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"its trial did not finish in {timeout:.0f} s"
    if done.returncode != 0:
        last = (done.stderr or "").strip().splitlines()
        return f"its trial ended with exit status {done.returncode}" + (f" ({last[-1][:200]})" if last else "")
    try:
        recorded = kernels_by_scope(json.loads(file.read_text(encoding="utf-8")), 1).get("probe")
    except (OSError, ValueError, KeyError, IndexError) as exc:
        return f"its trial wrote no profile that reads ({type(exc).__name__}: {exc})"
    finally:
        file.unlink(missing_ok=True)
    return "" if recorded else "its trial recorded no kernel"


def kernel_times(
    calls: dict[str, Callable[[], Any]],
    out: Path,
    repeat: int,
    use_proton: bool = True,
    profiler: Callable[[dict[str, Callable[[], Any]], Path, int], dict[str, list[Kernel]]] = proton_times,
    clock: Callable[[Callable[[], Any]], float] | None = None,
    probe: Callable[[Path], str] = proton_probe,
) -> tuple[dict[str, list[Kernel]], str, list[str]]:
    """Each call's kernels, where the times come from, and notes: the profiler's kernels (Proton's) where its trial
    (`probe`) works and it records some for every call; else, saying why, each call timed whole by `clock` (do_bench's
    median, in ms)."""
    notes: list[str] = []
    failed = probe(out) if use_proton else ""
    if failed:
        notes.append(f"Proton failed: {failed}")
    elif use_proton:
        try:
            found = profiler(calls, out, repeat)
            missing = [name for name in calls if not found.get(name)]
            if not missing:
                return found, PROTON, notes
            notes.append("Proton recorded no kernel for " + ", ".join(missing))
        except Exception as exc:  # noqa: BLE001 - any failure of the profiler falls back to do_bench
            notes.append(f"Proton failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
    else:
        notes.append("--no-proton: each call timed whole")
    if clock is None:
        from checks.engine.timing import bench_ms as clock
    return {name: [Kernel(WHOLE, None, 1e3 * clock(call))] for name, call in calls.items()}, DO_BENCH, notes


def main(argv: list[str] | None = None) -> int:
    code = run(argv)
    if code:  # under `make profile`: what make's own `Error N` line after this one means
        from checks.make_notes import make_note

        note = make_note(code, target="profile")
        if note:
            print(note, file=sys.stderr)
    return code


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench profile", description=__doc__.splitlines()[0])
    parser.add_argument("puzzle", help="the puzzle number (4, 9a, 16, ...)")
    parser.add_argument("--file", type=Path, help="your .py file or notebook (default: the puzzle's notebook)")
    parser.add_argument("--earlier", type=Path, help="your code of the step it builds on (9 on 9a, 10 on 10b)")
    parser.add_argument("--solution", action="store_true", help="the answer key and the baseline only")
    parser.add_argument("--out", type=Path, help="the folder of the outputs (default: profile/NN_slug/)")
    parser.add_argument("--calls", type=int, default=CALLS, help=f"calls of each contender profiled (default {CALLS})")
    parser.add_argument("--no-proton", action="store_true", help="time each call whole with do_bench, not Proton")
    parser.add_argument("--commit", help="the tree's commit for the record (the device's copy may carry stale git)")
    args = parser.parse_args(argv)
    try:
        puzzle = get_puzzle(args.puzzle)
    except UnknownPuzzle as exc:
        print(exc, file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print(NO_GPU, file=sys.stderr)
        return 2
    if args.file is not None and args.solution:
        print("Give either --file or --solution, not both.", file=sys.stderr)
        return 2
    if puzzle.timing_case is None:
        print(f"Puzzle {puzzle.number} has no timing size in puzzles.yaml (bench:), so there is nothing to profile.",
              file=sys.stderr)  # fmt: skip
        return 2
    return profile(puzzle, args, argv if argv is not None else sys.argv[1:])


def profile(puzzle: Puzzle, args: argparse.Namespace, argv: list[str]) -> int:
    import torch

    from bench.records import runtime_of
    from checks.engine.judging.timing import ceiling
    from checks.engine.submission import SubmissionError
    from checks.engine.timing import device_peaks
    from checks.memory import Arena
    from checks.puzzles import spec_module

    out = args.out or ROOT / "profile" / puzzle.stem
    out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as workdir:
        try:
            functions = contenders_of(puzzle, args, Path(workdir))
        except SubmissionError as exc:
            print(exc, file=sys.stderr)
            return 2
        except Exception as exc:  # noqa: BLE001 - your module's own code failed as it loaded: said in one line
            why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            check = f"make check PUZZLE={puzzle.number}" + (f" FILE={args.file}" if args.file else "")
            print(f"Your code for puzzle {puzzle.number} did not load ({why}); `{check}` says where, and what to "
                  "fix.", file=sys.stderr)  # fmt: skip
            return 2
        spec = spec_module(puzzle)
        generator = torch.Generator(device="cuda")
        generator.manual_seed(0)
        inputs = spec.make_inputs(puzzle.timing_case, Arena("cuda", generator))
        work = spec.work(inputs)
        calls: dict[str, Callable[[], Any]] = {}
        contenders: list[Contender] = []
        for name, fn in functions.items():
            call = partial(fn, *inputs.values())
            contenders.append(Contender(name))
            try:
                call()  # compiles and autotunes before anything is timed
                torch.cuda.synchronize()
                calls[name] = call
            except Exception as exc:  # noqa: BLE001 - a contender that fails is a line of the table
                contenders[-1].problem = f"it raised {type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
        calls[puzzle.baseline] = spec.baseline(inputs)
        calls[puzzle.baseline]()
        torch.cuda.synchronize()
        contenders.append(Contender(puzzle.baseline))
        found, source, said = kernel_times(calls, out, args.calls, use_proton=not args.no_proton)
        notes += said
        for c in contenders:
            c.kernels = found.get(c.name, [])
    device = torch.cuda.get_device_name()
    times = {c.name: c.us / 1e3 for c in contenders if c.kernels and not c.problem}
    roof, roof_line = ceiling(device_peaks(), device, work.bytes, work.flops, times)
    case = ", ".join(f"{k}={v}" for k, v in puzzle.timing_case.given().items())
    runtime = runtime_of(platform.release())
    lines = [f"Puzzle {puzzle.number} ({puzzle.title}) at the timing size {case}, on {device} ({runtime} runtime).",
             f"Times: {source}; {args.calls} calls of each." if source == PROTON else f"Times: {source}.",
             *(f"Note: {n}" for n in notes), "", *table_lines(contenders, work.bytes, work.flops, roof),
             roof_line.strip() if roof_line else "roofline: this GPU's peaks are not known"]  # fmt: skip
    lines += timeline(puzzle, out, notes)
    lines.append(f"Outputs in {shown(out)}/. This times your code; `make check` grades it.")
    text = "\n".join(lines)
    print(text)
    (out / "profile.txt").write_text(text + "\n", encoding="utf-8")
    data = {"puzzle": puzzle.number, "case": puzzle.timing_case.given(), "device": device, "runtime": runtime,
            "times_from": source, "notes": notes, "bytes": work.bytes, "flops": work.flops,
            "roof": asdict(roof) if roof else None, "contenders": [asdict(c) for c in contenders]}  # fmt: skip
    (out / "profile.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    run = run_folder(out)
    if run is not None:
        from bench.records import write_record

        command = "python -m bench profile " + " ".join(argv)
        found = figures(contenders, puzzle, work.bytes, work.flops, roof)
        said = [f"profile {puzzle.number}: times from {source}", *(f"profile {puzzle.number}: {n}" for n in notes)]
        print("record:", write_record(run, command, found, commit=args.commit, notes=said))
    return 0


def run_folder(out: Path, results: Path = RESULTS) -> Path | None:
    """The run folder of bench/results/ that `out` is or lies in (its record holds the figures), else None."""
    where = out.resolve()
    if not where.is_relative_to(results.resolve()) or where == results.resolve():
        return None
    return results / where.relative_to(results.resolve()).parts[0]


def timeline(puzzle: Puzzle, out: Path, notes: list[str], timeout: float = TIMELINE_S) -> list[str]:
    """For a Hopper step: the answer key's warp timeline drawn into `out` by `python -m bench warp-timeline`, in a
    process of its own (a profiler or compiler that aborts or hangs takes only that down), and the lines it printed;
    where it drew none, why, in a note too."""
    from bench import warp_timeline
    from checks.engine.processes.spawn import kill, start_module

    if puzzle.number not in warp_timeline.STEPS:
        return []
    proc = start_module("bench", "warp-timeline", puzzle.number, "--out", str(out.resolve()), env=dict(os.environ),
                        stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        said = proc.communicate(timeout=timeout)[0].strip().splitlines()
    except subprocess.TimeoutExpired:
        kill(proc)
        said = [f"No timeline: the instrumented key did not finish in {timeout:.0f} s."]
    finally:
        if proc.poll() is None:
            kill(proc)
    if proc.returncode != 0:
        last = said[-1] if said else f"No timeline: its process ended with exit status {proc.returncode}."
        notes.append(f"timeline not drawn: {last}")
        return ["", last]
    return ["", *said]


if __name__ == "__main__":
    raise SystemExit(main())
