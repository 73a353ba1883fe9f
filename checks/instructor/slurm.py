"""`make grade-slurm DIR=... [ARGS="--gpus 8 --partition P --time 02:00:00"]`: grade a class on a Slurm cluster.

It submits, with `sbatch` and scripts it writes (nothing to install on the cluster; works without
network), a job array of N tasks, one per shard of the class (`classroom --shard I/N`), each on
one GPU of its own so that timings stay fair, and a merge job that waits for the whole array
(`afterany`: it runs even when a task failed, and lists that shard's submissions as not graded).
It prints the job ids, how to watch them and where the reports will be.

What it writes, under --out (build/grades by default):

    grades.csv, grades.xml          the class's reports, written by the merge job as `make grade` writes them
    slurm/submissions/              the folder of submissions as it was when the jobs were submitted
                                    (read-only); the tasks read this, never the learners' folder
    slurm/shard-I-of-N/             each task's part (grades.csv, grades.xml, part.json)
    slurm/task.sbatch, merge.sbatch the job scripts; slurm/logs/ their output

Each task copies the course into a scratch folder on its node (`$SLURM_TMPDIR`, else `$TMPDIR`,
else /tmp), grades its shard there, and removes it; each submission is graded from a private
folder of its own (see `classroom.take_copies`). A failed or preempted task can be graded again
alone: `sbatch --array=I OUT/slurm/task.sbatch`, then `sbatch OUT/slurm/merge.sbatch`.

`python -m checks.instructor.slurm task I N OUT` is what a task runs; `--dry-run` writes the
scripts and prints the sbatch commands without submitting them.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from checks.instructor.classroom import DEFAULT_OUT, NAMING, find_submissions
from checks.registry import ROOT

# What a task copies of the course into its scratch folder: the grader, the answer keys and the registry.
# On a GPU the interpreter stage runs beside the GPU stage in a few processes (checks.engine.judging.interpreter_parts).
CPUS_WITH_A_GPU = 4
COURSE_IGNORED = {".git", ".venv", "build", "__pycache__", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints"}


def copy_course(destination: Path, leave_out: Path | None = None) -> Path:
    """A copy of the course at destination, without its build outputs, .venv, .git and (if inside) leave_out."""
    skipped = leave_out.resolve() if leave_out is not None else None

    def ignored(folder: str, names: list[str]) -> set[str]:
        return {
            n for n in names if n in COURSE_IGNORED or (skipped is not None and Path(folder, n).resolve() == skipped)
        }

    shutil.copytree(ROOT, destination, ignore=ignored, symlinks=True)
    return destination


def snapshot(root: Path, destination: Path) -> Path:
    """The folder of submissions copied as it is now, made read-only: what the tasks grade."""
    if destination.exists():
        make_writable(destination)
        shutil.rmtree(destination)
    shutil.copytree(root, destination, ignore=shutil.ignore_patterns(".*"))
    for path in sorted(destination.rglob("*"), reverse=True):
        path.chmod(path.stat().st_mode & ~0o222)
    destination.chmod(destination.stat().st_mode & ~0o222)
    return destination


def make_writable(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)


def shard_folder(slurm_dir: Path, index: int, count: int) -> Path:
    return slurm_dir / f"shard-{index}-of-{count}"


def run_task(index: int, count: int, out: Path, timeout: float | None) -> int:
    """One array task: copy the course to scratch, grade shard index/count of the snapshot there, remove the copy."""
    slurm_dir = out / "slurm"
    part = shard_folder(slurm_dir, index, count)
    part.mkdir(parents=True, exist_ok=True)
    base = os.environ.get("SLURM_TMPDIR") or os.environ.get("TMPDIR") or None
    with tempfile.TemporaryDirectory(prefix=f"triton-puzzles-shard-{index}-of-{count}-", dir=base) as tmp:
        course = copy_course(Path(tmp) / "course")
        scratch_tmp = Path(tmp) / "tmp"
        scratch_tmp.mkdir()
        command = [
            sys.executable,
            "-m",
            "checks.instructor.classroom",
            str(slurm_dir / "submissions"),
            "--shard",
            f"{index}/{count}",
            "--out",
            str(part),
        ]
        command += ["--timeout", f"{timeout:g}"] if timeout else []
        print(f"Shard {index}/{count}: grading in {course}", flush=True)
        env = os.environ | {"TMPDIR": str(scratch_tmp)}
        return subprocess.run(command, cwd=course, env=env, check=False).returncode


def sbatch_scripts(
    root: Path, out: Path, count: int, gpus: bool, options: list[str], timeout: float | None
) -> tuple[str, str]:
    """The task script (a job array of `count`) and the merge script."""
    slurm_dir = out / "slurm"
    logs = slurm_dir / "logs"
    python, course = shlex.quote(sys.executable), shlex.quote(str(ROOT))
    header = ["#!/bin/bash", *(f"#SBATCH {o}" for o in options)]
    task = [
        *header,
        "#SBATCH --job-name=grade-shards",
        f"#SBATCH --array=1-{count}",
        "#SBATCH --ntasks=1",
        *(["#SBATCH --gres=gpu:1"] if gpus else []),
        f"#SBATCH --output={logs}/shard-%a-of-{count}.out",
        "set -euo pipefail",
        f"cd {course}",
        f'exec {python} -m checks.instructor.slurm task "$SLURM_ARRAY_TASK_ID" {count} {shlex.quote(str(out))}'
        + (f" --timeout {timeout:g}" if timeout else ""),
    ]
    parts = " ".join(shlex.quote(str(shard_folder(slurm_dir, i, count))) for i in range(1, count + 1))
    merge = [
        *header,
        "#SBATCH --job-name=grade-merge",
        "#SBATCH --ntasks=1",
        f"#SBATCH --output={logs}/merge.out",
        "set -euo pipefail",
        f"cd {course}",
        f"exec {python} -m checks.instructor.classroom {shlex.quote(str(root))} --merge {parts} "
        f"--out {shlex.quote(str(out))}" + (f" --timeout {timeout:g}" if timeout else ""),
    ]
    return "\n".join(task) + "\n", "\n".join(merge) + "\n"


def sbatch(arguments: list[str]) -> str:
    """Submit with sbatch --parsable; the job id."""
    done = subprocess.run(["sbatch", "--parsable", *arguments], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"sbatch {' '.join(arguments)} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip().split(";")[0]


def submit(args: argparse.Namespace) -> int:
    root: Path = args.dir.resolve()
    out: Path = args.out.resolve()
    if not root.is_dir():
        print(
            f"There is no folder {args.dir}: give the folder of submissions, e.g. make grade-slurm DIR=submissions/.",
            file=sys.stderr,
        )
        return 2
    submissions, _ = find_submissions(root)
    if not submissions:
        print(f"No submissions found in {root}. {NAMING}", file=sys.stderr)
        return 2
    count = args.gpus if args.gpus is not None else args.shards
    if count < 1:
        print("--gpus (or --shards) must be 1 or more.", file=sys.stderr)
        return 2
    slurm_dir = out / "slurm"
    (slurm_dir / "logs").mkdir(parents=True, exist_ok=True)
    snapshot(root, slurm_dir / "submissions")
    options = [f"--partition={args.partition}"] if args.partition else []
    options += [f"--time={args.time}"] if args.time else []
    options += [f"--account={args.account}"] if args.account else []
    gpus = not args.cpu_only
    cpus = args.cpus_per_task if args.cpus_per_task is not None else (CPUS_WITH_A_GPU if gpus else None)
    options += [f"--cpus-per-task={cpus}"] if cpus else []
    options += args.sbatch_option
    task_text, merge_text = sbatch_scripts(root, out, count, gpus, options, args.timeout)
    task_script, merge_script = slurm_dir / "task.sbatch", slurm_dir / "merge.sbatch"
    task_script.write_text(task_text, encoding="utf-8")
    merge_script.write_text(merge_text, encoding="utf-8")
    print(f"{len(submissions)} submissions in {root}, in {count} shards ({'one GPU each' if gpus else 'no GPU'}).")
    if args.dry_run:
        print(f"sbatch --parsable {task_script}")
        print(f"sbatch --parsable --dependency=afterany:<the array's id> {merge_script}")
        return 0
    try:
        array = sbatch([str(task_script)])
        merge = sbatch([f"--dependency=afterany:{array}", str(merge_script)])
    except (OSError, RuntimeError) as exc:
        print(f"Could not submit the jobs ({exc}); is this a Slurm login node (sbatch on PATH)?", file=sys.stderr)
        return 2
    print(
        f"Submitted the shards as job array {array} (tasks {array}_1 .. {array}_{count}) and the merge as job {merge}."
    )
    print(f"Watch them: squeue -j {array},{merge}   (logs in {slurm_dir / 'logs'})")
    print(f"The class's reports will be {out / 'grades.csv'} and {out / 'grades.xml'}; each shard's in {slurm_dir}.")
    print(
        f"A shard that failed can be graded again alone: sbatch --array=I {task_script}, "
        f"then merge again: sbatch {merge_script}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["task"]:
        parser = argparse.ArgumentParser(prog="python -m checks.instructor.slurm task")
        parser.add_argument("index", type=int)
        parser.add_argument("count", type=int)
        parser.add_argument("out", type=Path)
        parser.add_argument("--timeout", type=float)
        task = parser.parse_args(argv[1:])
        return run_task(task.index, task.count, task.out, task.timeout)
    parser = argparse.ArgumentParser(
        prog="make grade-slurm DIR=... ARGS=", description="Grade a folder of submissions on a Slurm cluster."
    )
    parser.add_argument("dir", type=Path, help="the folder of submissions")
    parser.add_argument("--gpus", type=int, help="shards, each graded on one GPU of its own (a job array of this size)")
    parser.add_argument("--shards", type=int, default=1, help="shards without saying GPUs (with --cpu-only)")
    parser.add_argument("--cpu-only", action="store_true", help="ask for no GPU: grade in Triton's interpreter")
    parser.add_argument("--partition", help="the Slurm partition")
    parser.add_argument("--time", help="each task's time limit, e.g. 02:00:00")
    parser.add_argument("--account", help="the Slurm account to charge")
    parser.add_argument(
        "--cpus-per-task",
        type=int,
        help=f"cores per task (default {CPUS_WITH_A_GPU} with a GPU, for the interpreter stage; else Slurm's)",
    )
    parser.add_argument(
        "--sbatch-option", action="append", default=[], help="any other sbatch option, e.g. --sbatch-option=--qos=high"
    )
    parser.add_argument("--timeout", type=float, help="seconds per submission (default: the puzzle's, 120)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the reports go (default: build/grades)")
    parser.add_argument("--dry-run", action="store_true", help="write the job scripts and print, but submit nothing")
    return submit(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
