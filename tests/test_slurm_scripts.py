"""`make grade-slurm` without a cluster: the job scripts it writes, the snapshot the tasks grade, the course copy.

tests/test_slurm.py runs the same scripts on a real single-node Slurm.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

from checks.instructor import slurm
from checks.registry import ROOT
from tests.small_class import make_class


def submitted(argv: list[str]) -> tuple[int, str]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = slurm.main(argv)
    return code, printed.getvalue()


def test_the_array_has_a_task_per_shard_with_one_gpu_each_and_the_merge_reads_every_shard(tmp_path):
    root = tmp_path / "class"
    make_class(root, range(5), puzzles=("1", "9"))
    out = tmp_path / "grades"
    argv = [str(root), "--gpus", "8", "--partition", "gpu-a", "--time", "02:00:00", "--out", str(out), "--dry-run"]
    code, printed = submitted(argv)
    assert code == 0 and "10 submissions" in printed and "8 shards (one GPU each)" in printed
    task = (out / "slurm" / "task.sbatch").read_text(encoding="utf-8")
    merge = (out / "slurm" / "merge.sbatch").read_text(encoding="utf-8")
    lines = ("#SBATCH --array=1-8", "#SBATCH --gres=gpu:1", "#SBATCH --partition=gpu-a", "#SBATCH --time=02:00:00")
    for line in (*lines, f"#SBATCH --cpus-per-task={slurm.CPUS_WITH_A_GPU}"):
        assert line in task.splitlines(), line
    assert "--gres" not in merge and "#SBATCH --partition=gpu-a" in merge.splitlines()
    assert f'-m checks.instructor.slurm task "$SLURM_ARRAY_TASK_ID" 8 {out}' in task
    parts = re.search(r"--merge (.*) --out", merge).group(1).split()
    assert parts == [str(out / "slurm" / f"shard-{i}-of-8") for i in range(1, 9)]
    assert f"-m checks.instructor.classroom {root} --merge" in merge and f"cd {ROOT}" in merge
    assert "afterany" in printed  # the merge runs after the whole array, whether or not a task failed


def test_cpu_only_asks_for_no_gpu(tmp_path):
    root = tmp_path / "class"
    make_class(root, range(2), puzzles=("1",))
    code, printed = submitted([str(root), "--shards", "2", "--cpu-only", "--out", str(tmp_path / "g"), "--dry-run"])
    assert code == 0 and "no GPU" in printed
    task = (tmp_path / "g" / "slurm" / "task.sbatch").read_text(encoding="utf-8")
    assert "--gres" not in task and "--cpus-per-task" not in task


def test_the_tasks_grade_a_read_only_snapshot_of_the_folder(tmp_path):
    root = tmp_path / "class"
    make_class(root, range(3), puzzles=("1", "5"))
    (root / ".hidden").mkdir()
    out = tmp_path / "grades"
    assert submitted([str(root), "--gpus", "2", "--out", str(out), "--dry-run"])[0] == 0
    copy = out / "slurm" / "submissions"
    files = sorted(p.relative_to(copy) for p in copy.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())
    assert all(not os.stat(p).st_mode & 0o222 for p in [copy, *copy.rglob("*")])
    (root / "learner000" / "1_answer.py").write_text("changed\n", encoding="utf-8")  # a late change
    assert submitted([str(root), "--gpus", "2", "--out", str(out), "--dry-run"])[0] == 0  # submitting again
    assert (copy / "learner000" / "1_answer.py").read_text(encoding="utf-8") == "changed\n"


def test_a_task_copies_the_course_without_its_outputs(tmp_path):
    course = slurm.copy_course(tmp_path / "course")
    assert (course / "puzzles.yaml").exists() and (course / "checks" / "instructor" / "classroom.py").exists()
    assert (course / "solutions" / "01_vector_add.py").exists()
    assert not any((course / name).exists() for name in (".git", ".venv", "build"))


def test_usage_errors_exit_2(tmp_path, capsys):
    assert slurm.main([str(tmp_path / "missing"), "--dry-run"]) == 2
    assert slurm.main([str(tmp_path), "--dry-run"]) == 2  # no submissions
    make_class(tmp_path, range(1), puzzles=("1",))
    assert slurm.main([str(tmp_path), "--gpus", "0", "--out", str(tmp_path / "g"), "--dry-run"]) == 2
    assert "No submissions found" in capsys.readouterr().err


def test_without_sbatch_it_says_so(tmp_path, monkeypatch, capsys):
    make_class(tmp_path / "class", range(1), puzzles=("1",))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert slurm.main([str(tmp_path / "class"), "--out", str(tmp_path / "g")]) == 2
    assert "sbatch on PATH" in capsys.readouterr().err


def test_the_snapshot_can_be_replaced_though_read_only(tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.py").write_text("1", encoding="utf-8")
    slurm.snapshot(tmp_path / "a", tmp_path / "s")
    slurm.snapshot(tmp_path / "a", tmp_path / "s")
    assert (tmp_path / "s" / "x.py").read_text(encoding="utf-8") == "1"
