"""The Hopper track (16a, 16b, 16): Gluon steps graded on a Hopper GPU only.

On this machine (no Hopper GPU) every way of checking them says, in one sentence, that they need one and why,
and nothing grades them as failed: `python -m checks`, `make check`, a notebook's check(), `make progress`,
`make solutions`, class grading, hints and maps. Their known-wrong kernels are well-formed and refused here the
same way; on a Hopper GPU, `python -m checks.instructor.solutions --puzzle 16a --puzzle 16b --puzzle 16` grades
them.
"""

from __future__ import annotations

import ast
import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

from checks import cli
from checks import verdict as V
from checks.authoring.wrong import known_wrong, materialize, name_of
from checks.engine.contract.kernel_source import extract
from checks.engine.grade import grade
from checks.engine.hopper import hopper_here
from checks.instructor import classroom, solutions
from checks.learner import hints, maps, progress
from checks.puzzles import spec_module
from checks.registry import ROOT
from tests.helpers import HOPPER, READY

# on a Hopper GPU these steps are graded (tests/test_hopper_gpu.py), not refused
refused_here = pytest.mark.skipif(hopper_here(), reason="a Hopper GPU grades these steps: tests/test_hopper_gpu.py")

SENTENCE = "needs a Hopper GPU (an H100 or H200)"


@pytest.fixture
def progress_file(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv(progress.ENV_FILE, str(path))
    return path


WHY = "Triton's interpreter cannot run"


def test_the_track_is_the_three_steps_and_no_other_puzzle_needs_a_hopper_gpu():
    assert [p.number for p in HOPPER] == ["16a", "16b", "16"]
    assert not any(p.needs_hopper for p in READY)


@pytest.mark.parametrize("puzzle", HOPPER, ids=lambda p: p.stem)
def test_a_hopper_step_has_every_part_and_gpu_cases_only(puzzle):
    assert puzzle.ready and puzzle.requires == "hopper"
    assert puzzle.solution.exists() and puzzle.notebook.exists() and puzzle.notebook_source.exists()
    module = spec_module(puzzle)
    for name in ("make_inputs", "reference", "baseline", "work"):
        assert callable(getattr(module, name)), f"checks/puzzles module of {puzzle.stem} lacks {name}"
    assert puzzle.cases.gpu and not puzzle.cases.cpu  # Triton's interpreter cannot run Gluon
    assert puzzle.bench and puzzle.tolerance and puzzle.speed_bar and 2 <= len(puzzle.hints) <= 3
    assert len(known_wrong(puzzle)) >= 3
    key = extract([(str(puzzle.solution), puzzle.solution.name, puzzle.solution.read_text(encoding="utf-8"))])
    assert key.gluon_kernels and not key.problems


def test_the_registry_refuses_a_requirement_it_does_not_know(tmp_path, monkeypatch):
    from checks.registry import RegistryError, read_registry

    text = (ROOT / "puzzles.yaml").read_text(encoding="utf-8")
    text = text.replace("    requires: hopper", "    requires: ampere", 1)
    (broken := tmp_path / "puzzles.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(RegistryError, match="'ampere'.*'hopper'"):
        read_registry(broken)


@refused_here
@pytest.mark.parametrize("puzzle", HOPPER, ids=lambda p: p.stem)
def test_a_check_here_says_in_one_sentence_that_the_step_needs_a_hopper_gpu_and_exits_2(puzzle, capsys):
    assert cli.main([puzzle.number, "--solution"]) == 2
    out = capsys.readouterr().out
    said = next(line for line in out.splitlines() if line.startswith("NOT GRADED: "))
    assert f"Puzzle {puzzle.number} {SENTENCE}" in said and WHY in said and said.count(". ") == 0
    assert f"make check PUZZLE={puzzle.number}" in said and "FAILED" not in out


@refused_here
def test_a_learners_check_is_not_recorded_and_progress_marks_the_steps(progress_file, capsys):
    assert cli.main(["16"]) == 2  # the notebook's stub: not graded, not recorded as a verdict
    capsys.readouterr()
    assert "16" not in progress.load()["puzzles"] or "status" not in progress.load()["puzzles"]["16"]
    assert progress.main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    for number in ("16a", "16b", "16"):
        row = next(line for line in lines if line.startswith(f"{number} "))
        assert progress.NEEDS_HOPPER in row
    assert not any(progress.NEEDS_HOPPER in line for line in lines if line.startswith("1 "))


@refused_here
@pytest.mark.exhaustive  # the refusal above, through make or a notebook (a make; spare grading processes started)
def test_make_check_exits_2_with_the_sentence():
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["CHECKS_PROGRESS_FILE"] = os.devnull
    done = subprocess.run(
        ["make", "-s", "check", "PUZZLE=16a", "FILE=solutions/16a_tma_copy.py"],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert SENTENCE in done.stdout and WHY in done.stdout


@refused_here
@pytest.mark.exhaustive  # the refusal above, through make or a notebook (a make; spare grading processes started)
def test_a_notebooks_check_says_so(monkeypatch, capsys, progress_file):
    from checks.learner import notebook

    monkeypatch.setattr(notebook, "_ran_cells", lambda number: [])
    notebook.check("16b")
    out = capsys.readouterr().out
    assert SENTENCE in out and WHY in out and "FAILED" not in out


@refused_here
def test_make_solutions_lists_the_steps_as_not_graded_here(capsys):
    assert solutions.main(["--puzzle", "16a", "--puzzle", "16b", "--puzzle", "16", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count(solutions.NOT_HERE) >= 6  # a line as each is met, and a row of the table
    assert "grading 0 known-wrong kernels" in out and "OK: every answer key graded here passed" in out
    assert "16a, 16b, 16 not graded here" in out and "FAILED" not in out


@refused_here
def test_class_grading_records_the_steps_as_not_graded_here(tmp_path, capsys):
    (learner := tmp_path / "class" / "alice").mkdir(parents=True)
    (learner / "16a_copy.py").write_text((ROOT / "solutions" / "16a_tma_copy.py").read_text(), encoding="utf-8")
    assert classroom.main([str(tmp_path / "class"), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert V.NEEDS_HOPPER in out and "need a Hopper GPU" in out
    suite = ET.parse(tmp_path / "out" / "grades.xml").getroot()
    assert suite.get("skipped") == "1" and suite.get("failures") == "0" and suite.get("errors") == "0"
    assert V.NEEDS_HOPPER in (tmp_path / "out" / "grades.csv").read_text(encoding="utf-8")


def test_hints_and_maps_of_a_hopper_step_point_to_no_access_map(progress_file, capsys):
    for _ in range(3):
        lines = hints.reveal("16")
    assert lines[-1] == hints.STILL_STUCK_HOPPER and not any("make map" in line for line in lines)
    assert maps.main(["16a"]) == 2
    assert "no access map" in capsys.readouterr().err


def test_a_kernel_that_hangs_is_said_as_a_barrier_never_completed():
    from checks.engine.contract.protocol import Stream
    from checks.engine.judging.wording import unfinished_verdict
    from checks.engine.processes.run import ProcessEnd

    for number, said in (("16", "mbarrier that never completes"), ("9", "a loop whose bound never changes")):
        stream = Stream(selection=[0])
        stream.started = 0
        verdict = V.Verdict(number, V.FAILED, "")
        unfinished_verdict(verdict, ProcessEnd(stream, None, True, 120.0, ""), stream, 120)
        assert verdict.status == V.TIMEOUT and said in verdict.summary and "case 1" in verdict.summary


HOPPER_WRONG = [(p, path) for p in HOPPER for path in known_wrong(p)]


@refused_here
@pytest.mark.parametrize(("puzzle", "path"), HOPPER_WRONG, ids=[f"{p.number}-{name_of(f)}" for p, f in HOPPER_WRONG])
def test_a_known_wrong_hopper_kernel_is_well_formed_and_refused_here(puzzle, path, tmp_path):
    expected = solutions.expectations(path)
    assert expected and all(e.rule in solutions.reasons() for e in expected), path.name
    graded = materialize(puzzle, path, tmp_path)
    text = graded.read_text(encoding="utf-8")
    ast.parse(text)
    assert text != puzzle.solution.read_text(encoding="utf-8")
    source = extract([(str(graded), graded.name, text)])
    assert not source.problems  # the bug is in what the kernels do, not in the language they use
    assert source.gluon_kernels or "torch" in name_of(path)
    verdict = grade(puzzle, graded, time_it=False, first_failure=True)
    assert verdict.status == V.NEEDS_HOPPER and SENTENCE in verdict.summary


def test_the_grader_itself_tells_a_hopper_gpu(monkeypatch):
    import torch

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for capability, expected in (((9, 0), True), ((8, 0), False), ((10, 0), False)):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda capability=capability: capability)
        assert hopper_here() is expected
        assert hopper_here(interpret=True) is False


def test_the_course_says_the_track_needs_a_hopper_gpu_where_learners_read():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for puzzle in HOPPER:
        row = next(line for line in readme.splitlines() if line.startswith(f"| {puzzle.number} |"))
        assert "Hopper GPU only" in row
        lesson = puzzle.notebook_source.read_text(encoding="utf-8")
        assert "Hopper GPU" in lesson and "H100 or H200" in lesson


# -- record and replay: on a CPU up to the launch (a Gluon kernel runs on a Hopper GPU only) ------------------------
class LaunchSeen:
    """Stands in for a replayed kernel: what `kernel[grid](...)` was given."""

    def __init__(self, name: str, seen: list) -> None:
        self.name, self.seen = name, seen

    def __getitem__(self, grid: tuple) -> object:
        return lambda **kwargs: self.seen.append((self.name, grid, kwargs))


@pytest.mark.parametrize("puzzle", HOPPER, ids=lambda p: p.stem)
def test_a_gluon_plan_is_recorded_with_its_descriptors_and_replayed_up_to_the_launch(puzzle, monkeypatch, tmp_path):
    import torch
    from triton.experimental.gluon._runtime import GluonJITFunction
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from checks.engine.answer_key import key_plan_here
    from checks.engine.contract.kernel_source import KernelSource
    from checks.engine.contract.plan import check
    from checks.engine.replay.kernels import build
    from checks.engine.replay.perform import Performer
    from checks.memory import Arena

    sms = type("Properties", (), {"multi_processor_count": 132})()
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: sms)
    case = puzzle.cases.gpu[2]  # sizes that are not multiples of a box
    kept = key_plan_here(puzzle, "cpu", case)
    plan, source = check(kept["plan"]), KernelSource.from_dict(kept["kernel_source"])
    (launch,) = [op for op in plan["ops"] if op["op"] == "launch"]
    alternative = launch["alternatives"][0]
    descriptors = {name: v["descriptor"] for name, v in alternative["args"].items() if "descriptor" in v}
    assert len(descriptors) == {"16a": 2, "16b": 3, "16": 3}[puzzle.number]
    for body in descriptors.values():
        assert body["base"]["storage"].startswith(("input:", "a")) and body["padding"] == "zero"
        assert body["layout"]["swizzle_byte_width"] in (32, 64, 128) and len(body["block_shape"]) == 2
    assert alternative["options"]["num_warps"] in (1, 4, 8)
    if puzzle.number == "16":
        assert alternative["options"]["maxnreg"] == 168

    kernels, _ = build(source, plan["globals"], tmp_path)  # compiled from the checked text: Gluon's kernels
    assert isinstance(kernels[launch["kernel"]], GluonJITFunction)
    seen: list = []
    arena = Arena("cpu", torch.Generator().manual_seed(1))
    inputs = spec_module(puzzle).make_inputs(case, arena)  # named as the function's parameters, as recorded
    fakes = {name: LaunchSeen(name, seen) for name in source.kernels}
    Performer(plan, fakes, inputs, arena, "cpu", interpret=False).run()
    ((name, grid, kwargs),) = seen
    assert name == launch["kernel"] and list(grid) == alternative["grid"]
    built = [v for v in kwargs.values() if isinstance(v, TensorDescriptor)]
    assert len(built) == len(descriptors)
    buffers = {b.buf.untyped_storage().data_ptr() for b in arena.buffers}  # the drawn inputs, the allocated outputs
    assert all(d.base.untyped_storage().data_ptr() in buffers for d in built)  # over the replay's own tensors
    assert kwargs["num_warps"] == alternative["options"]["num_warps"]


def test_a_descriptor_reaching_past_its_tensors_allocation_is_refused(tmp_path):
    import torch

    from checks.engine.contract.plan import PlanError
    from checks.engine.replay.perform import Performer

    layout = {"swizzle_byte_width": 128, "element_bitwidth": 16, "rank": 2, "transposed": False, "fp4_padded": False,
              "cga_layout": []}  # fmt: skip
    ref = {"storage": "input:x", "dtype": "float16", "offset": 0, "shape": [64, 64], "strides": [64, 1]}
    body = {"base": ref, "shape": [64, 64], "strides": [64, 1], "block_shape": [64, 64], "layout": layout,
            "padding": "zero"}  # fmt: skip
    performer = Performer({"ops": [], "returned": []}, {}, {"x": torch.zeros(64, 64, dtype=torch.float16)}, None,
                          "cpu", interpret=False)  # fmt: skip
    assert performer.value({"descriptor": body}).block_shape == [64, 64]
    with pytest.raises(PlanError, match="reaches outside"):
        performer.value({"descriptor": {**body, "shape": [128, 64]}})
    with pytest.raises(PlanError, match="TMA cannot use"):
        performer.value({"descriptor": {**body, "strides": [3, 1]}})


def test_the_pass_before_the_track_says_where_its_next_step_is_graded():
    from checks.learner.session import what_next
    from checks.registry import load_puzzles

    ready = [p.number for p in load_puzzles() if p.ready]
    before = ready[ready.index("16a") - 1]
    assert "16a" in what_next(before) and "Hopper GPU (an H100 or H200)" in what_next(before, notebook=True)
    assert "Hopper" not in what_next(1)


def test_a_gluon_kernel_outside_its_table_fails_kernel_calls_with_its_line():
    from checks.engine.judging.plans import source_problem

    key = (ROOT / "solutions" / "16a_tma_copy.py").read_text(encoding="utf-8")
    line = "    pid = gl.program_id(0)\n"
    bad = key.replace(
        line, line + "    gl.inline_asm_elementwise('mov.b32 $0, $1;', '=r,r', [pid], gl.int32, True, 1)\n"
    )
    number = bad.splitlines().index(line.rstrip("\n")) + 2
    found = source_problem(extract([("mine.py", "mine.py", bad)]))
    assert (
        found["rule"] == "kernel_calls" and f"mine.py, line {number}, in kernel `_tma_copy_kernel`" in found["message"]
    )
    assert "Gluon kernel" in found["message"] and "gl.inline_asm_elementwise" in found["message"]
    assert source_problem(extract([("key.py", "key.py", key)])) is None


def test_make_doctor_says_where_the_track_is_graded(monkeypatch):
    import torch

    from checks.learner.doctor import check_device

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "Hopper track (16a, 16b, 16) needs a Hopper GPU" in check_device()[0].what
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda: (9, 0))
    assert "Hopper track" not in check_device()[0].what
