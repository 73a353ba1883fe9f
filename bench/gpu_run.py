"""One run on a GPU machine, as one command: `make solutions` in shards of one GPU each, other bench commands on GPUs
of their own beside them, then, alone on the machine, the tampering submissions and the latency of warm checks; all
of it written to a results folder whose README says the command, the commit, the GPUs and the versions.

    python -m bench gpu-run --shards "1 2 3 4 5|6 7 8a 8 9a|9 10a 10b 10|11 12 13" --tampering --latency 1,9,11
    python -m bench gpu-run --shards "11 12 13" --also "decoding-graphs --out {out}/decoding-graphs.csv" --dry-run

Shard i runs `python -m checks.instructor.solutions --puzzle ...` with CUDA_VISIBLE_DEVICES=i (its table and log:
solutions-i.md, solutions-i.log); each `--also` command (a `python -m bench` command, `{out}` standing for the
results folder) runs on the next GPU, its output in also-N-COMMAND.txt. After them, on GPU 0: `python -m bench
tampering` (tampering.txt) and `python -m bench wall-times . PUZZLES` with the time marks of the last check
(wall.tsv, phases.log and its table phases.txt). shards.txt gets each step's exit status and seconds, and record.json
the run's record (bench.records), its figures read from those files. The folder
defaults to bench/results/<date>-<gpu>/ (-b, -c, ... if taken). --dry-run prints the steps and the README instead.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.records import RecordError, current_commit, write_record
from checks.bench_results import RESULTS, run_folder_name, shown

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Step:
    """One command of the run: what it runs, on which GPU, where its output goes, and for how long at most."""

    name: str
    argv: tuple[str, ...]
    log: str  # file name inside the results folder (stdout and stderr)
    gpu: int | None = None  # CUDA_VISIBLE_DEVICES; None: every GPU
    timeout_s: float = 540.0
    env: dict[str, str] = field(default_factory=dict)

    def shell(self, out: Path) -> str:
        """The step as a shell line (what --dry-run prints)."""
        env = {**({"CUDA_VISIBLE_DEVICES": str(self.gpu)} if self.gpu is not None else {}), **self.env}
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        command = " ".join(shlex.quote(a) for a in self.argv)
        log = shlex.quote(str(out / self.log))
        return f"{prefix + ' ' if prefix else ''}timeout {self.timeout_s:g} {command} > {log} 2>&1"


@dataclass(frozen=True)
class Plan:
    """Steps run at once (each on its own GPU), then steps run one after the other."""

    together: tuple[Step, ...]
    after: tuple[Step, ...]


def parse_shards(text: str) -> list[list[str]]:
    """'1 2 3|4 5' -> [['1', '2', '3'], ['4', '5']]: puzzles separated by spaces or commas, shards by '|'."""
    shards = [re.split(r"[\s,]+", part.strip()) for part in text.split("|")]
    if any(shard == [""] for shard in shards):
        raise ValueError(f"an empty shard in {text!r}: give puzzles between every '|'")
    return shards


def parse_puzzles(text: str) -> list[str]:
    """'1,9,11' or '1 9 11' -> ['1', '9', '11']."""
    return [p for p in re.split(r"[\s,]+", text.strip()) if p]


def plan_run(
    shards: list[list[str]],
    out: Path,
    *,
    also: tuple[str, ...] | list[str] = (),
    tampering: bool = False,
    latency: tuple[str, ...] | list[str] = (),
    jobs: int = 12,
    shard_limit_s: float = 540.0,
    python: str = sys.executable,
) -> Plan:
    """The steps of a run, without running anything: shard i on GPU i, each `also` command on the GPUs after the
    shards', then the tampering submissions and the latency of warm checks on GPU 0, alone."""
    together = []
    for gpu, puzzles in enumerate(shards):
        argv = [python, "-m", "checks.instructor.solutions"]
        argv += [a for p in puzzles for a in ("--puzzle", p)]
        argv += ["--jobs", str(jobs), "--out", str(out / f"solutions-{gpu}.md")]
        together.append(Step(f"shard {gpu} ({' '.join(puzzles)})", tuple(argv), f"solutions-{gpu}.log", gpu,
                             shard_limit_s))  # fmt: skip
    for i, command in enumerate(also):
        words = shlex.split(command.replace("{out}", str(out)))
        if not words:
            raise ValueError("an empty --also command")
        together.append(Step(f"also {i}: {words[0]}", (python, "-m", "bench", *words), f"also-{i}-{words[0]}.txt",
                             len(shards) + i, shard_limit_s))  # fmt: skip
    after = []
    if tampering:
        after.append(Step("tampering", (python, "-m", "bench", "tampering"), "tampering.txt", 0, 600.0))
    if latency:
        env = {"CHECKS_PHASES": str(out / "phases.log")}
        after.append(Step("latency", (python, "-m", "bench", "wall-times", str(ROOT), *latency), "wall.tsv", 0,
                          120.0 * len(latency), env))  # fmt: skip
        after.append(Step("phases", (python, "-m", "bench", "phases", str(out / "phases.log")), "phases.txt", None,
                          30.0))  # fmt: skip
    return Plan(tuple(together), tuple(after))


def run_readme(command: str, commit: str, date: str, gpus: list[str], versions: dict[str, str], plan: Plan) -> str:
    """The results folder's README: what made it (command, commit, GPUs, versions) and which file holds what."""

    def shown(arg: str) -> str:  # the course root's paths relative to it, as a reader would type them
        return arg.replace(f"{ROOT}/", "").replace(str(ROOT), ".")

    lines = [
        f"# {date}: {', '.join(dict.fromkeys(gpus)) or 'no GPU found'}",
        "",
        f"- command: `{command}`",
        f"- commit: {commit}",
        f"- GPUs: {len(gpus)} ({'; '.join(gpus) or '-'})",
        f"- versions: {', '.join(f'{k} {v}' for k, v in versions.items())}",
        "",
        "| file | step | GPU | command |",
        "| --- | --- | --- | --- |",
    ]
    for step in (*plan.together, *plan.after):
        where = "all" if step.gpu is None else str(step.gpu)
        lines.append(f"| `{step.log}` | {step.name} | {where} | `python {' '.join(map(shown, step.argv[1:]))}` |")
    lines += [
        "",
        "`shards.txt`: each step's exit status and seconds; `record.json`: the run's record, its figures",
        "read from these files (`python -m bench records show FOLDER`). What the run shows: (to be written).",
        "",
    ]
    return "\n".join(lines)


def describe_machine() -> tuple[list[str], dict[str, str]]:
    """The GPUs (nvidia-smi's names and drivers) and the versions of Python, torch, Triton and numpy."""
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)  # fmt: skip
        gpus = [line.strip() for line in smi.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError):
        gpus = []
    versions = {"python": sys.version.split()[0]}
    for module in ("torch", "triton", "numpy"):
        try:
            versions[module] = __import__(module).__version__
        except ImportError:
            versions[module] = "not installed"
    return gpus, versions


def _start(step: Step, out: Path) -> tuple[subprocess.Popen, object, float]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", **step.env)
    if step.gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(step.gpu)
    log = open(out / step.log, "w")  # closed by _finish when the step ends
    process = subprocess.Popen(step.argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    return process, log, time.monotonic()


def _finish(step: Step, started: tuple[subprocess.Popen, object, float], out: Path) -> tuple[str, bool]:
    process, log, began = started
    try:
        rc: int | str = process.wait(timeout=max(0.0, step.timeout_s - (time.monotonic() - began)))
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        rc = f"killed after {step.timeout_s:g} s"
    log.close()  # type: ignore[attr-defined]
    line = f"{step.name}: rc={rc}, {time.monotonic() - began:.0f} s, ended {time.strftime('%H:%M:%S')}"
    with open(out / "shards.txt", "a") as f:
        f.write(line + "\n")
    return line, rc == 0


def execute(plan: Plan, out: Path) -> int:
    """Run the plan: the steps of `together` at once, then those of `after` one by one. 1 if any step failed."""
    started = [(step, _start(step, out)) for step in plan.together]
    ended = [_finish(step, handle, out) for step, handle in started]
    ended += [_finish(step, _start(step, out), out) for step in plan.after]
    print("\n".join(line for line, _ in ended))
    return 0 if all(ok for _, ok in ended) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench gpu-run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", default="", help="puzzles of `make solutions`, one shard per GPU: '1 2|3 4'")
    parser.add_argument("--also", action="append", default=[], help="a `python -m bench` command on a GPU of its own")
    parser.add_argument("--tampering", action="store_true", help="grade the tampering submissions on GPU 0")
    parser.add_argument("--latency", default="", help="puzzles whose warm checks are timed on GPU 0: '1,9,11'")
    parser.add_argument("--jobs", type=int, default=12, help="known-wrong kernels graded at once per shard")
    parser.add_argument("--shard-limit", type=float, default=540.0, help="seconds a shard or --also command may take")
    parser.add_argument("--out", type=Path, help="the results folder (default bench/results/<date>-<gpu>)")
    parser.add_argument("--dry-run", action="store_true", help="print the steps and the README; run nothing")
    args = parser.parse_args(argv)
    try:
        shards = parse_shards(args.shards) if args.shards.strip() else []
    except ValueError as exc:
        parser.error(str(exc))
    if not (shards or args.also or args.tampering or args.latency):
        parser.error("nothing to run: give --shards, --also, --tampering or --latency")
    gpus, versions = describe_machine()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    taken = {p.name for p in RESULTS.iterdir()} if RESULTS.is_dir() else set()
    out = args.out or RESULTS / run_folder_name(date, gpus[0] if gpus else "no-gpu", taken=taken)
    plan = plan_run(shards, out, also=args.also, tampering=args.tampering, latency=parse_puzzles(args.latency),
                    jobs=args.jobs, shard_limit_s=args.shard_limit)  # fmt: skip
    command = " ".join(["python -m bench gpu-run", *(shlex.quote(a) for a in (argv or sys.argv[1:]))])
    commit = current_commit()
    readme = run_readme(command, commit, date, gpus, versions, plan)
    if args.dry_run:
        print(f"# results folder: {out}")
        together = [s.shell(out) + " &" for s in plan.together] + (["wait"] if plan.together else [])
        print("\n".join(["# at once:", *together]))
        print("# then, one by one:\n" + "\n".join(s.shell(out) for s in plan.after))
        print(f"# {out / 'README.md'}:\n{readme}")
        return 0
    if len(plan.together) > len(gpus):
        parser.error(f"{len(plan.together)} shards and --also commands, one GPU each, but {len(gpus)} GPU(s) here")
    out.mkdir(parents=True, exist_ok=True)
    (out / "README.md").write_text(readme, encoding="utf-8")
    (out / "gpu.txt").write_text("\n".join([*gpus, " ".join(f"{k} {v}" for k, v in versions.items())]) + "\n")
    failed = execute(plan, out)
    try:
        record = write_record(out, command, commit=commit)
    except RecordError as exc:  # the folder holds another tree's or machine's record: the results stay, unrecorded
        print(exc, file=sys.stderr)
        return 1
    print(f"The run's record: {shown(record)} (`python -m bench records show {shown(out)}`).")
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
