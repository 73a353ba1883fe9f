"""`make grade-slurm` on a real single-node Slurm cluster (munged, slurmctld, slurmd started for the test).

A small class (puzzles 1 and 5: right, wrong, crashing, tampering, and one that overwrites the others' files)
is graded in 2 shards through the job array and the merge job, and the merged reports must equal what
`make grade` writes for the same folder, apart from the timings. `.ci/run` installs Slurm; elsewhere the
test is skipped with the reason (in CI, where CI=true, it fails instead), and `-m "not slurm"` leaves it out.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from checks.registry import ROOT
from tests.slurm_cluster import cluster, unavailable
from tests.small_class import write_small_class

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

# the class graded here: one right, one crashing, one writing into the others' files and answering wrongly (a wrong
# kernel and a tampering one are graded by make grade's own tests, tests/test_classroom.py; here they would add two
# gradings to each of the three passes without another path through Slurm)
LEARNERS = {"alice/01_vector_add.py", "carol_05.py", "mallory/01_vector_add.py"}
WAIT_S = 600


def without_timings(path: Path) -> str:
    """A report with its timings blanked: the CSV's seconds column and the JUnit time attributes."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".xml":
        return re.sub(r'time="[0-9.]+"', 'time=""', text)
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    for row in rows:
        row["seconds"] = ""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else [])
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def digests(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*.py")}


def wait_for(jobs: list[str], env: dict[str, str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        queue = subprocess.run(
            ["squeue", "-h", "-j", ",".join(jobs)], env=env, capture_output=True, text=True, check=False
        )
        if queue.returncode == 0 and not queue.stdout.strip():
            return
        time.sleep(0.5)
    pytest.fail(f"the jobs {jobs} did not finish within {WAIT_S} s")


def sbatch(arguments: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(["sbatch", "--parsable", *arguments], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip().split(";")[0]


@pytest.fixture(scope="module")
def slurm_available():
    reason = unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the Slurm test, but: {reason}")
        print(f"\n*** SKIPPING THE SLURM TEST: {reason} ***")
        pytest.skip(f"SLURM TEST NOT RUN: {reason}")


# a lost shard graded again alone, then merged again (19 s more here, mostly Slurm's scheduling of two more jobs): the
# same task and merge scripts run again, so make test-all grades it
@pytest.mark.parametrize("lose_a_shard", [False, pytest.param(True, marks=pytest.mark.exhaustive)],
                         ids=["graded", "a shard lost and graded again"])  # fmt: skip
def test_a_class_graded_through_slurm_matches_make_grade(slurm_available, tmp_path, lose_a_shard):
    folder = tmp_path / "class"
    folder.mkdir()
    expected = {k: v for k, v in write_small_class(folder).items() if k in LEARNERS}
    for name in set(digests(folder)) - LEARNERS:
        (folder / name).unlink()
    before = digests(folder)
    local = tmp_path / "local"
    make = ["make", "--no-print-directory", "-C", str(ROOT)]
    subprocess.run([*make, "grade", f"DIR={folder}", f"ARGS=--out {local} --timeout 60"], check=True)
    assert digests(folder) == before, "make grade changed a learner's file"

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    out = tmp_path / "slurm-grades"
    started = time.monotonic()
    with cluster(cpus=2) as env:
        env = env | {"TMPDIR": str(scratch)}
        args = f"ARGS=--shards 2 --cpu-only --out {out} --timeout 60"
        submitted = subprocess.run(
            [*make, "grade-slurm", f"DIR={folder}", args], env=env, capture_output=True, text=True, check=False
        )
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        printed = submitted.stdout
        array, merge = re.search(r"job array (\d+) .*the merge as job (\d+)", printed).groups()
        assert f"squeue -j {array},{merge}" in printed and str(out / "grades.csv") in printed
        wait_for([array, merge], env)
        print(f"Slurm: submitted, graded in 2 shards and merged in {time.monotonic() - started:.0f} s")
        logs = "\n".join(p.read_text() for p in sorted((out / "slurm" / "logs").glob("*.out")))
        assert (out / "grades.csv").exists(), logs
        for report in ("grades.csv", "grades.xml"):
            assert without_timings(out / report) == without_timings(local / report), (report, logs)
        with open(out / "grades.csv", newline="", encoding="utf-8") as f:
            assert {row["file"]: row["status"] for row in csv.DictReader(f)} == expected
        for index in (1, 2):  # each task graded its own shard, in a scratch copy of the course
            assert (out / "slurm" / f"shard-{index}-of-2" / "part.json").exists(), logs
            assert f"Shard {index}/2: grading in {scratch}" in logs

        if lose_a_shard:
            # shard 1 lost (a failed or preempted task): graded again alone, then merged again
            (out / "slurm" / "shard-1-of-2" / "part.json").unlink()
            (out / "grades.csv").unlink()
            again = sbatch(["--array=1", str(out / "slurm" / "task.sbatch")], env)
            wait_for([again], env)
            wait_for([sbatch([str(out / "slurm" / "merge.sbatch")], env)], env)
            for report in ("grades.csv", "grades.xml"):
                assert without_timings(out / report) == without_timings(local / report), report
            print(f"Slurm, with one shard graded again: {time.monotonic() - started:.0f} s")
    assert digests(folder) == before, "grading through Slurm changed a learner's file"
    assert list(scratch.iterdir()) == [], "a task left its scratch copy behind"
