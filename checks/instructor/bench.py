"""`python -m checks.instructor.bench [--quick] [--out DIR] [--only 4,9] [--budget S]`: the answer keys against torch.

Each ready puzzle's `bench.sweep` (puzzles.yaml) timed on a CUDA GPU as the grader would, in a process of its own.
A run's results.csv, meta.json and plots go to a folder of their own, by default bench/results/<date>-<gpu>-make-bench
(`-only-4-9` for a run of some puzzles); BENCHMARKS.md goes to the course root for a folder under bench/results/,
else into the folder."""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import timeit
import zlib
from collections.abc import Callable
from dataclasses import asdict
from itertools import product
from pathlib import Path
from typing import Any

import torch
import triton

from checks.authoring.figures import Figure, Line, draw
from checks.authoring.wrong import materialize
from checks.bench_results import ANSWER_KEY, RESULTS, Row, read_csv, run_folder_name, shown, write_data
from checks.engine.judging.timing import output_difference
from checks.engine.processes.spawn import kill, start_module
from checks.engine.submission import load_module
from checks.engine.timing import bench_ms, device_peaks, in_graph, roofline_share
from checks.instructor import tutorial as tut06
from checks.instructor.bench_report import HAND_NOTES, Target, evaluate, markdown_report
from checks.memory import Arena
from checks.puzzles import spec_module
from checks.registry import ROOT, Puzzle, case_from, get_puzzle, load_puzzles

NO_GPU = "The benchmark needs a CUDA GPU, and this machine has none: run `make bench` on a machine with one."
RESERVE_S = 20.0  # kept back for each puzzle still to run, so that a slow one cannot starve the rest
SMOKE_NOTE = "a --smoke run: tiny sizes that check the benchmark itself; its times mean nothing"


def plan(puzzle: Puzzle, mode: str = "full") -> list[dict[str, Any]]:
    """The points one puzzle is measured at (mode: full, quick or smoke): variant ("" for the answer key), series,
    size, x (the plots' axis), case, timing (the grader's case?), first (a target or timing needs it: timed first)."""
    sweep, timing = puzzle.sweep, puzzle.timing_case.given()
    wanted, points = {(t.series, t.size) for t in sweep.targets}, []
    for variant, (series, shared) in product(["", *sweep.variants], sweep.series.items()):
        for size, own in (sweep.smoke if mode == "smoke" else sweep.sizes).items():
            case = shared.updated(own).given()  # plain data: the point travels to the puzzle's process as JSON
            x = math.prod(float(part) for part in sweep.x.format(**case).split("*"))
            timed = not variant and timing.items() <= case.items()  # the grader's timing case
            first = timed or (not variant and (series, size) in wanted)
            if mode != "quick" or first or size in sweep.quick:
                points += [dict(variant=variant, series=series, size=size, x=x, case=case, timing=timed, first=first)]
    return sorted(points, key=lambda p: not p["first"])


def variant_files(puzzle: Puzzle) -> dict[str, Path]:
    """bench.sweep.variants: label -> the file that defines the puzzle's function another way."""
    return {label: ROOT / file for label, file in puzzle.sweep.variants.items()}


def targets(puzzle: Puzzle) -> list[Target]:
    """The sweep's targets, and the speed_bar as a ratio target at the grader's timing case."""
    listed = [{**asdict(t), "label": f"{puzzle.title}, {t.series}, {t.size}"} for t in puzzle.sweep.targets]
    if puzzle.speed_bar and (at := next((p for p in plan(puzzle) if p["timing"]), None)):
        label = f"{puzzle.title}, {at['series']}, {at['size']} (speed_bar)"
        listed.append({"label": label, **at, "ratio": puzzle.speed_bar.min_ratio})
    return [
        Target(t["label"], puzzle.number, t["series"], t["size"], kind, float(t[kind]), t.get("baseline"))
        for t, kind in product(listed, ("ratio", "tflops"))
        if t.get(kind) is not None
    ]


# puzzles timed beside Triton's tutorial 06 with --tutorial: slug -> the tutorial's baselines for its inputs
TUTORIAL_CALLS = {
    "flash_attention_v2_fwd": tut06.forward_calls,
    "flash_attention_v2_fwd_noncausal": tut06.forward_calls,
    "flash_attention_v2_bwd": tut06.backward_calls,
}


def tutorial_shape(case: dict[str, Any]) -> tut06.Shape:
    return (case["B"], case["H"], case["N"], case["D"], bool(case.get("causal", False)))


def measure(
    point: dict[str, Any], puzzle: Puzzle, kernels: dict[str, Callable | str], device: str, tutorial: Any = None
) -> Row:
    """One point's row: the answer key and the spec's baselines, or a variant and the answer key; or what failed."""
    variant, spec, gen = point["variant"], spec_module(puzzle), torch.Generator(device=device)
    row = Row(puzzle.number, puzzle.slug, point["series"], point["size"], point["x"], variant=variant)
    row.baseline, key = ANSWER_KEY if variant else puzzle.baseline, kernels[variant]
    gen.manual_seed(zlib.crc32(f"{puzzle.number} {row.series} {row.size}".encode()))  # a variant gets the same inputs
    timer = bench_ms if device == "cuda" else lambda fn: 1e3 * min(timeit.repeat(fn, number=1, repeat=3))
    try:
        inputs = spec.make_inputs(case_from(point["case"], "the point's case"), Arena(device, gen))
        args, work = list(inputs.values()), spec.work(inputs)
        row.bytes, row.flops = work.bytes, work.flops
        if isinstance(key, str):  # why the variant could not be loaded
            raise RuntimeError(key)
        base = (lambda: kernels[""](*args)) if variant else spec.baseline(inputs)  # a variant's is the answer key
        calls = {row.baseline: base, **({} if variant else getattr(spec, "baselines", lambda _: {})(inputs))}
        if tutorial is not None and not variant:  # (module, the (shape, setting) pairs that compiled)
            calls.update(TUTORIAL_CALLS[puzzle.slug](tutorial[0], inputs, tutorial[1]))
        mine, theirs = ([t] if isinstance(t, torch.Tensor) else list(t) for t in (key(*args), calls[row.baseline]()))
        (atol, rtol), eps = puzzle.loosest_tolerance(), torch.finfo(mine[0].dtype).eps
        row.check = output_difference(mine[: len(theirs)], theirs, atol, max(rtol, 4 * eps)) or "ok"  # fp16 rows too
        graphed = device == "cuda" and puzzle.sweep.graphs  # kernel time, as serving engines replay
        if graphed:
            row.call_ms = timer(lambda: key(*args))  # no graph; not the host time per call (bench_report.INTRO)
        row.key_ms = timer(in_graph(lambda: key(*args)) if graphed else lambda: key(*args))
        row.others, short = {}, []
        for name, fn in calls.items():
            try:
                row.others[name] = timer(in_graph(fn) if graphed else fn)
            except torch.cuda.OutOfMemoryError:  # one baseline too big for the GPU: the row keeps the others
                short.append(name)
                torch.cuda.empty_cache()
        if short:
            row.check += f" ({', '.join(short)}: out of memory)"
        row.baseline_ms, peaks = row.others.pop(row.baseline, None), device_peaks() if device == "cuda" else None
        row.roofline = roofline_share(work.bytes, work.flops, row.key_ms, peaks) if peaks else None
    except torch.cuda.OutOfMemoryError:
        row.status = "failed: out of memory"
    except Exception as exc:  # noqa: BLE001 - any failure is a row, not the end of the benchmark
        row.status = "failed: " + " ".join(f"{type(exc).__name__}: {exc}".split())[:160]
    return row


def load_variant(puzzle: Puzzle, path: Path, module: str) -> Callable | str:
    """A variant's function (an `*.edit.yaml` written out under build/variants/ first), or why it cannot load."""
    try:
        (folder := ROOT / "build" / "variants").mkdir(parents=True, exist_ok=True)
        return getattr(load_module(materialize(puzzle, path, folder), module), puzzle.name)
    except Exception as exc:  # noqa: BLE001 - any failure is the variant's rows' status
        return f"{path.name} could not be loaded: {type(exc).__name__}: {exc}"


def puzzle_process(job: dict[str, Any]) -> int:
    """The benchmark's process for one puzzle: on stdout, a JSON line for the machine, then one per point."""
    puzzle, cuda = get_puzzle(job["puzzle"]), job["device"] == "cuda"
    kernels = {"": getattr(load_module(puzzle.solution, f"answer_key_{puzzle.stem}"), puzzle.name)}
    for index, (label, path) in enumerate(variant_files(puzzle).items()):
        kernels[label] = load_variant(puzzle, path, f"variant_{index}_{puzzle.stem}")
    peaks = device_peaks() if cuda else None  # the roofline: copy bandwidth and float16 matmul rate
    meta = {"gpu": torch.cuda.get_device_name() if cuda else "CPU (Triton interpreter)", "torch": torch.__version__}
    meta.update(triton=triton.__version__, cuda=torch.version.cuda or "", python=sys.version.split()[0])
    tutorial, notes = None, []
    if job.get("tutorial") and puzzle.slug in TUTORIAL_CALLS and cuda:
        path = Path(job["tutorial"])
        shapes = [tutorial_shape(point["case"]) for point in job["points"] if not point["variant"]]
        ran, failed = tut06.precompile(path, shapes)
        tutorial = (tut06.load(path), ran)
        notes.append(
            f"puzzle {puzzle.number}: timed beside Triton's tutorial 06, {tut06.describe(path)}, with warp "
            "specialisation off ('tutorial 06') and on ('tutorial 06 ws'); 'other baselines' give key / tutorial"
        )
        notes += [
            f"puzzle {puzzle.number}: tutorial 06 (warp_specialize={ws}) did not run at B, H, N, D, causal = "
            f"{shape}: {why}"
            for (shape, ws), why in sorted(failed.items())
        ]
    meta["notes"] = notes
    print(json.dumps({"meta": {**meta, **({"peaks": asdict(peaks)} if peaks else {})}}), flush=True)
    for point in job["points"]:
        row = measure(point, puzzle, kernels, job["device"], tutorial)
        print(json.dumps({"row": asdict(row)}), flush=True)
        done = f"{row.key_ms:.4f} ms, {row.ratio:.2f}x {row.baseline} [{row.check}]" if row.ratio else row.status
        print(f"  {row.puzzle} {row.variant and row.variant + ', '}{row.series} {row.size}: {done}", file=sys.stderr)
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.synchronize()  # raises when a fault broke the CUDA context: the rest cannot run here
    return 0


def run_puzzle_process(job: dict[str, Any], timeout: float) -> tuple[list[Row], dict[str, Any], str]:
    """The rows and machine of a puzzle's process (`--puzzle-process`, the job on its stdin, killed at `timeout`),
    and why it stopped early."""
    env = dict(os.environ, TRITON_INTERPRET="1" if job["device"] == "cpu" else "0")  # compiled kernels on a GPU
    proc = start_module("checks.instructor.bench", "--puzzle-process", env=env, stdout=subprocess.PIPE, text=True)
    try:
        output = proc.communicate(json.dumps(job), timeout=timeout)[0]
        problem = f"its process ended with exit status {proc.returncode}" if proc.returncode else "it stopped early"
    except subprocess.TimeoutExpired:
        kill(proc)
        output, problem = proc.communicate()[0], f"its time share of {timeout:.0f} s ran out"
    finally:  # also on Ctrl-C: take that process (its own session) down too
        if proc.poll() is None:
            kill(proc)
    records = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    machine = next((r["meta"] for r in records if "meta" in r), {})
    return [Row(**r["row"]) for r in records if "row" in r], machine, problem


def sweep(
    puzzles: list[Puzzle], mode: str, budget: float, device: str, out: Path, command: str, tutorial: Path | None = None
) -> tuple[list, dict]:
    """Each puzzle in its own process, within its share of the budget; the points it did not report are 'not run'."""
    start, rows, meta = time.monotonic(), [], {"notes": [SMOKE_NOTE] if mode == "smoke" else []}
    runnable = [p for p in puzzles if p.ready and p.sweep and p.solution.exists()]
    skipped = [f"puzzle {p.number} ({p.slug})" for p in puzzles if p not in runnable]
    meta["notes"] += [f"{name}: not ready, or no bench.sweep or answer key: skipped" for name in skipped]
    for index, p in enumerate(runnable):
        job = {"device": device, "puzzle": p.number, "points": plan(p, mode), "tutorial": str(tutorial or "")}
        left = budget - (time.monotonic() - start) - RESERVE_S * (len(runnable) - index - 1)
        share = min(float(p.sweep.cap_s), left)
        print(f"Puzzle {p.number} ({p.slug}): {len(job['points'])} sizes, at most {max(share, 0):.0f} s", flush=True)
        got, machine, problem = run_puzzle_process(job, share) if share >= 5 else ([], {}, "the time budget was spent")
        meta = {**machine, **meta, "notes": meta["notes"] + machine.get("notes", [])}  # the first report stays
        status, missing = f"not run: {problem}", job["points"][len(got) :]  # it reports the points in order
        got += [Row(p.number, p.slug, q["series"], q["size"], q["x"], status, variant=q["variant"]) for q in missing]
        if missing:
            meta["notes"].append(f"puzzle {p.number}: {len(missing)} size(s) {status}")
        order = ["", *p.sweep.variants], list(p.sweep.series)
        rows += sorted(got, key=lambda r: (order[0].index(r.variant), order[1].index(r.series), r.x))
        write_data(rows, meta, out)
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return rows, dict(meta, date=date, command=command, seconds=round(time.monotonic() - start))


def plot_lines(rows: list[Row], series: str) -> tuple[Line, ...]:
    """A plot's panel of one series: each answer key and variant, solid; each baseline of the answer keys, dashed."""
    keys, baselines = {}, {}
    for r in (r for r in rows if r.series == series):
        label = f"{r.puzzle}: {r.slug}" + (f", {r.variant}" if r.variant else "")
        keys.setdefault(label, Line(label, r.puzzle, series, variant=r.variant))
        if not r.variant:  # a variant's baseline is the answer key: a line of its own already
            baselines.setdefault(r.baseline, Line(r.baseline, r.puzzle, series, baseline=True, style="--"))
            baselines |= {n: Line(n, r.puzzle, series, style="--", other=n) for n in r.others if n not in baselines}
    return (*keys.values(), *baselines.values())


def report_path(folder: Path) -> Path:
    """Where a run's BENCHMARKS.md goes: the course root's for a run folder under bench/results/, else the folder."""
    return ROOT / "BENCHMARKS.md" if folder.resolve().is_relative_to(RESULTS) else folder / "BENCHMARKS.md"


def write_outputs(
    rows: list[Row], meta: dict[str, Any], folder: Path, targets: list[Target], report: Path | None = None
) -> dict[str, Any]:
    """In `folder`: a PNG per plot (bench.sweep.plot, a panel per series; deleted without rows); BENCHMARKS.md at
    `report` (default `report_path(folder)`), its links to the plots relative to it, the folder's notes.md in it."""
    folder.mkdir(parents=True, exist_ok=True)
    report = report or report_path(folder)
    plots, puzzles = [], load_puzzles()
    for stem in dict.fromkeys(p.sweep.plot for p in puzzles if p.sweep):
        group = [p for p in puzzles if p.sweep and p.sweep.plot == stem]
        chosen = [r for r in rows if r.ok and r.puzzle in {p.number for p in group}]
        (path := folder / f"{stem}.png").unlink(missing_ok=True)
        if chosen:
            title = " / ".join(p.title for p in group if p.number in {r.puzzle for r in chosen})
            panels = tuple((s, plot_lines(chosen, s)) for s in dict.fromkeys(r.series for r in chosen))
            draw(Figure(stem, title, group[0].sweep.x_label, panels, what=""), chosen, meta, path)
            plots.append(path)
    links = [Path(os.path.relpath(p, report.parent)).as_posix() for p in plots]
    notes = folder / HAND_NOTES
    report.write_text(markdown_report(rows, meta, links, targets, notes), encoding="utf-8")
    return {"plots": plots, "markdown": report}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks.instructor.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes (the target sizes and a few more)")
    parser.add_argument("--out", type=Path, help="the run's folder (default: bench/results/<date>-<gpu>-make-bench)")
    parser.add_argument("--only", help="comma-separated puzzle numbers (default: every ready puzzle)")
    parser.add_argument("--budget", type=float, default=480.0, help="seconds for the whole sweep")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (the CPU interpreter without a GPU)")
    parser.add_argument("--render", type=Path, metavar="DIR", help="redraw from DIR/results.csv (into --out or DIR)")
    parser.add_argument(
        "--tutorial", type=Path, help="a copy of Triton's 06-fused-attention.py: time it beside 9 and 10"
    )
    argv = sys.argv[1:] if argv is None else argv
    if argv == [
        "--puzzle-process"
    ]:  # the benchmark's process for one puzzle (run_puzzle_process), the job on its stdin
        return puzzle_process(json.load(sys.stdin))
    args = parser.parse_args(argv)
    out = args.out or args.render
    if args.render is not None:
        if not (data := args.render / "results.csv").exists():
            print(f"There is no {data}: give the folder a run wrote (its --out).", file=sys.stderr)
            return 2
        rows, meta_file = read_csv(data), data.with_name("meta.json")
        meta = json.loads(meta_file.read_text(encoding="utf-8")) if meta_file.exists() else {}
    else:
        cuda = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
        if not cuda and not args.smoke:
            print(NO_GPU, file=sys.stderr)
            return 1
        mode = "smoke" if args.smoke else "quick" if args.quick else "full"
        only = None if args.only is None else {number.strip() for number in args.only.split(",")}
        puzzles = [p for p in load_puzzles() if only is None or p.number in only]
        if args.tutorial is not None and not args.tutorial.is_file():
            print(
                f"There is no {args.tutorial}: give the path of a copy of Triton's 06-fused-attention.py.",
                file=sys.stderr,
            )
            return 2
        command = " ".join([parser.prog, *argv])
        if out is None:
            what = "make-bench" + ("" if only is None else "-only-" + "-".join(sorted(only, key=lambda n: (len(n), n))))
            gpu = torch.cuda.get_device_name() if cuda else "cpu"
            taken = {p.name for p in RESULTS.glob("*")}
            out = RESULTS / run_folder_name(time.strftime("%Y-%m-%d", time.gmtime()), gpu, what, taken)
        rows, meta = sweep(puzzles, mode, args.budget, "cuda" if cuda else "cpu", out, command, args.tutorial)
        write_data(rows, meta, out)
    goals = [t for p in load_puzzles() if p.sweep for t in targets(p)]
    written = write_outputs(rows, meta, out, goals)
    for t in goals:
        measured, ratio, verdict = evaluate(t, rows)
        print(f"  {verdict:<12} {t.label}: {measured}, {ratio} (target {t.requirement})")
    print(f"\nWrote {len(written['plots'])} plot(s) under {shown(out)} and {shown(written['markdown'])}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
