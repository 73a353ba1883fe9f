"""`python -m checks.bench [--quick] [--out DIR] [--only 4,9] [--budget S]`: the answer keys against torch.

On a CUDA GPU, times every ready puzzle's answer key against its baselines over the sweep that its
`bench.sweep` in puzzles.yaml declares, with the grader's inputs, baselines, work and timer
(checks/puzzles, `checks.timing.bench_ms`), and writes DIR/bench/results.csv, meta.json, the plots
and DIR/BENCHMARKS.md (checks.bench_report; DIR is the repository unless --out says otherwise).
Each puzzle runs in its own process with a share of the time budget, so that a size that runs out
of memory, faults or hangs becomes a failed row; the sizes a target needs are measured first.
Without a GPU it says so and exits 1; `--smoke` runs the pipeline at tiny sizes (in the interpreter
without a GPU), and `--render DIR` redraws the plots and the report from a finished run's CSV.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import timeit
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from checks.bench_report import Row, Target, csv_record, evaluate, format_table, read_csv, write_data, write_outputs
from checks.registry import ROOT, Puzzle, get_puzzle, load_puzzles
from checks.timing import roofline_share

__all__ = ["Row", "csv_record", "read_csv", "main"]  # checks.figures reads the CSV through these
NO_GPU = "The benchmark needs a CUDA GPU, and this machine has none: run `make bench` on a machine with one."
DEVICE_TIMEOUT_S, RESERVE_S = 90.0, 20.0  # RESERVE_S: kept back for each puzzle still to run


@dataclass
class Point:
    """One case to time a puzzle's answer key and baselines on."""

    puzzle: int | str
    series: str
    size: str
    x: float
    case: dict[str, Any]
    first: bool = False  # a target needs it, or it is the grader's timing case: measured before the rest


def _number(value: Any) -> Any:
    """YAML keeps `2^20` as text; a case needs 1048576."""
    if isinstance(value, list):
        return [_number(v) for v in value]
    if isinstance(value, str) and "^" in value:
        base, power = value.split("^")
        return int(base) ** int(power)
    return value


def _timing(puzzle: Puzzle) -> dict[str, Any]:
    return {k: v for k, v in puzzle.bench.items() if k != "baseline"}


def plan(puzzle: Puzzle, mode: str = "full") -> list[Point]:
    """The points one puzzle is measured at (mode: full, quick or smoke), those a target needs first."""
    sweep, points = puzzle.sweep, []
    wanted = {(t.series, t.size) for t in targets(puzzle, with_bar=False)}
    for series, shared in sweep["series"].items():
        for written in sweep["smoke" if mode == "smoke" else "sizes"]:
            case, size = {**shared, **{k: _number(v) for k, v in written.items()}}, sweep["size"].format(**written)
            x = math.prod(float(part) for part in sweep["x"].format(**case).split("*"))
            first = (series, size) in wanted or _timing(puzzle).items() <= case.items()
            points.append(Point(puzzle.number, series, size, x, case, first))
    if mode == "quick":
        points = [p for p in points if p.first or p.size in sweep["quick"]]
    return sorted(points, key=lambda p: not p.first)


def targets(puzzle: Puzzle, with_bar: bool = True) -> list[Target]:
    """The sweep's targets, and the puzzle's speed_bar as a ratio target at the grader's timing case."""
    found = [Target(f"{puzzle.title}, {t['series']}, {t['size']}", puzzle.number, t["series"], t["size"],
                    kind, float(t[kind]), t.get("baseline"))
             for t in puzzle.sweep.get("targets", []) for kind in ("ratio", "tflops") if kind in t]
    timing = next((p for p in plan(puzzle) if _timing(puzzle).items() <= p.case.items()), None) if with_bar else None
    if puzzle.speed_bar and timing is not None:
        found.append(Target(f"{puzzle.title}, {timing.series}, {timing.size} (speed_bar)", puzzle.number,
                            timing.series, timing.size, "ratio", float(puzzle.speed_bar["min_ratio"])))
    return found


def all_targets() -> list[Target]:
    return [t for p in load_puzzles() if p.sweep for t in targets(p)]


# -- in the benchmark's own process ----------------------------------------------------------------


def _check(mine: Any, theirs: Any, puzzle: Puzzle) -> str:
    """'ok' when the answer key's outputs are the baseline's, within the grader's timing-size slack."""
    import torch

    from checks.timing import loosest_tolerance, output_difference

    mine, theirs = ([t] if isinstance(t, torch.Tensor) else list(t) for t in (mine, theirs))
    atol, rtol = loosest_tolerance(puzzle.tolerance)
    rtol = max(rtol, 4 * torch.finfo(mine[0].dtype).eps)  # float16 rows of a float32 puzzle
    return output_difference(mine[: len(theirs)], theirs, atol, rtol) or "ok"


def measure(point: Point, puzzle: Puzzle, key: Callable, timer: Callable, device: str, peaks: Any) -> Row:
    """Time one point: the answer key, then each baseline of the spec; any failure becomes the row's status."""
    import torch

    from checks.memory import Arena
    from checks.puzzles import spec_module

    row, spec = Row(point.puzzle, puzzle.slug, point.series, point.size, point.x), spec_module(puzzle)
    row.baseline, gen = puzzle.bench["baseline"], torch.Generator(device=device)
    gen.manual_seed(zlib.crc32(f"{point.puzzle} {point.series} {point.size}".encode()))
    try:
        inputs = spec.make_inputs(point.case, Arena(device, gen))
        args, work = list(inputs.values()), spec.work(inputs)
        row.bytes, row.flops = work.bytes, work.flops
        calls = {row.baseline: spec.baseline(inputs), **getattr(spec, "baselines", lambda _: {})(inputs)}
        row.check = _check(key(*args), calls[row.baseline](), puzzle)  # compiles and autotunes first
        row.key_ms = timer(lambda: key(*args))
        row.others = {name: timer(fn) for name, fn in calls.items()}
        row.baseline_ms = row.others.pop(row.baseline)
        row.roofline = roofline_share(work.bytes, work.flops, row.key_ms, peaks) if peaks else None
    except torch.cuda.OutOfMemoryError:
        row.status = "failed: out of memory"
    except Exception as exc:  # noqa: BLE001 - any failure is a row, not the end of the benchmark
        row.status = "failed: " + " ".join(f"{type(exc).__name__}: {exc}".split())[:160]
    return row


def device_meta(device: str) -> dict[str, Any]:
    import torch
    import triton

    return {"gpu": torch.cuda.get_device_name() if device == "cuda" else "CPU (Triton interpreter)",
            "torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda or "",
            "python": sys.version.split()[0]}


def child(job: dict[str, Any]) -> int:
    """The benchmark's process: measure the device, or one puzzle's points; a JSON line per result."""
    import torch

    from checks.source import load_module
    from checks.timing import Peaks, bench_ms, measure_peaks

    cuda = job["device"] == "cuda"
    with open(job["out"], "a", encoding="utf-8") as out:
        if job["kind"] == "device":
            peaks = {"peaks": asdict(measure_peaks())} if cuda else {}
            print(json.dumps({"meta": {**device_meta(job["device"]), **peaks}}), file=out, flush=True)
            return 0
        puzzle, peaks = get_puzzle(job["puzzle"]), Peaks(**job["peaks"]) if job["peaks"] else None
        key = getattr(load_module(puzzle.solution, f"answer_key_{puzzle.stem}"), puzzle.name)
        timer = (lambda fn: bench_ms(fn, *job["reps"])) if cuda else (
            lambda fn: 1e3 * min(timeit.repeat(fn, number=1, repeat=3)))  # --smoke on a CPU: times mean nothing
        for data in job["points"]:
            row = measure(Point(**data), puzzle, key, timer, job["device"], peaks)
            print(json.dumps({"row": asdict(row)}), file=out, flush=True)
            done = f"{row.key_ms:.4f} ms, {row.ratio:.2f}x {row.baseline} [{row.check}]" if row.ratio else row.status
            print(f"  {row.puzzle} {row.series} {row.size}: {done}", flush=True)
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.synchronize()  # raises when a fault broke the CUDA context: the rest cannot run here
    return 0


# -- the parent: one process per puzzle within the budget, then the files ---------------------------


def run_child(job: dict[str, Any], workdir: Path, timeout: float) -> tuple[list[dict[str, Any]], str]:
    """`python -m checks.bench --child JOB` in its own session, killed at `timeout`: its JSON lines, and
    why it stopped early ('' when it did not)."""
    name = f"{job['kind']}_{job.get('puzzle', '')}"
    job = dict(job, out=str(workdir / f"{name}.jsonl"))
    (workdir / f"{name}.json").write_text(json.dumps(job), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # it times compiled kernels ...
    env.update(PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    if job["device"] == "cpu":
        env["TRITON_INTERPRET"] = "1"  # ... but --smoke without a GPU runs the interpreter
    proc = subprocess.Popen([sys.executable, "-m", "checks.bench", "--child", str(workdir / f"{name}.json")],
                            cwd=ROOT, env=env, start_new_session=True)
    try:
        rc = proc.wait(timeout=max(timeout, 1.0))
        problem = f"its process ended with exit status {rc}" if rc else ""
    except subprocess.TimeoutExpired:
        problem = f"its time share of {timeout:.0f} s ran out"
    finally:  # also on Ctrl-C: take the child (its own session) down too
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    out = Path(job["out"])
    return [json.loads(line) for line in (out.read_text().splitlines() if out.exists() else []) if line], problem


def run_puzzle(puzzle: Puzzle, mode: str, share: float, workdir: Path, meta: dict[str, Any]) -> list[Row]:
    """One puzzle's rows: those its process measured, and a 'not run' row for each point it did not."""
    points, problem, got = plan(puzzle, mode), "the time budget was spent", []
    print(f"Puzzle {puzzle.number} ({puzzle.slug}): {len(points)} sizes, at most {max(share, 0):.0f} s", flush=True)
    if share >= 5:
        job = {"kind": "puzzle", "device": meta["device"], "puzzle": puzzle.number, "peaks": meta.get("peaks"),
               "reps": (5, 25) if mode == "quick" else (10, 50), "points": [asdict(p) for p in points]}
        records, problem = run_child(job, workdir, share)
        got, problem = [Row(**r["row"]) for r in records if "row" in r], problem or "its process stopped early"
    done = {(r.series, r.size) for r in got}
    missing = [Row(p.puzzle, puzzle.slug, p.series, p.size, p.x, status=f"not run: {problem}")
               for p in points if (p.series, p.size) not in done]
    if missing:
        meta["notes"].append(f"puzzle {puzzle.number}: {len(missing)} size(s) not run: {problem}")
    series = list(puzzle.sweep["series"])
    return sorted(got + missing, key=lambda r: (series.index(r.series), r.x))


def sweep(puzzles: list[Puzzle], mode: str, budget: float, device: str, out: Path) -> tuple[list[Row], dict]:
    """Measure the device, then each puzzle in its own process, rewriting the CSV after each one."""
    start, rows, notes = time.monotonic(), [], []
    for p in puzzles:
        if not (p.ready and p.sweep and p.solution.exists()):
            notes.append(f"puzzle {p.number} ({p.slug}): not ready, no bench.sweep or no answer key: skipped")
    runnable = [p for p in puzzles if p.ready and p.sweep and p.solution.exists()]
    with tempfile.TemporaryDirectory(prefix="bench_") as tmp:
        print("Measuring the device (copy bandwidth, float16 matmul)...", flush=True)
        records, problem = run_child({"kind": "device", "device": device}, Path(tmp), DEVICE_TIMEOUT_S)
        meta = next((r["meta"] for r in records if "meta" in r), None) or device_meta(device)
        meta.update(device=device, notes=notes + ([f"device measurement: {problem or 'no result'}"]
                                                  if device == "cuda" and "peaks" not in meta else []))
        for index, p in enumerate(runnable):
            left = budget - (time.monotonic() - start) - RESERVE_S * (len(runnable) - index - 1)
            rows += run_puzzle(p, mode, min(float(p.sweep.get("cap_s", 60)), left), Path(tmp), meta)
            write_data(rows, meta, out)
    return rows, dict(meta, date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


def report(rows: list[Row], meta: dict[str, Any], out: Path) -> None:
    """Print the table and the targets, and write every file under `out`."""
    goals = all_targets()
    print("\n" + format_table(rows))
    written = write_outputs(rows, meta, out, goals)
    for t in goals:
        measured, ratio, verdict = evaluate(t, rows)
        print(f"  {verdict:<12} {t.label}: {measured}, {ratio} (target {t.requirement})")
    print(f"\nWrote {written['csv']}, {len(written['plots'])} plot(s) and {written['markdown']}.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes (the target sizes and a few more)")
    parser.add_argument("--out", type=Path, help="where bench/ and BENCHMARKS.md go (default: the repository)")
    parser.add_argument("--only", type=lambda text: [t.strip() for t in text.split(",") if t.strip()],
                        help="comma-separated puzzle numbers (default: every ready puzzle)")
    parser.add_argument("--budget", type=float, default=480.0, help="seconds for the whole sweep")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (the CPU interpreter without a GPU)")
    parser.add_argument("--render", type=Path, metavar="DIR", help="redraw from DIR/bench/results.csv")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        return child(json.loads(args.child.read_text(encoding="utf-8")))
    if args.render is not None:
        data = args.render / "bench"
        if not (data / "results.csv").exists():
            print(f"There is no {data / 'results.csv'}: give the folder a run wrote (its --out).", file=sys.stderr)
            return 2
        meta = json.loads((data / "meta.json").read_text(encoding="utf-8")) if (data / "meta.json").exists() else {}
        report(read_csv(data / "results.csv"), meta, args.out or args.render)
        return 0
    import torch

    cuda = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    if not cuda and not args.smoke:
        print(NO_GPU, file=sys.stderr)
        return 1
    start, out = time.monotonic(), args.out or ROOT
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    puzzles = [p for p in load_puzzles() if args.only is None or str(p.number) in args.only]
    rows, meta = sweep(puzzles, mode, args.budget, "cuda" if cuda else "cpu", out)
    only = f" --only {','.join(args.only)}" if args.only else ""
    meta["command"] = "python -m checks.bench" + (f" --{mode}" if mode != "full" else "") + only
    if args.smoke:
        meta["notes"].insert(0, "a --smoke run: tiny sizes that check the benchmark itself; its times mean nothing")
    meta["seconds"] = round(time.monotonic() - start)
    report(rows, meta, out)
    print(f"The benchmark took {meta['seconds']} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
