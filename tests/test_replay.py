"""The verdict comes from a replay: the plan a learner's function records, performed by the grader with the
submission's kernels taken from its source, on inputs whose values the learner's code never saw.

The first tests take the pieces apart in this process (the kernel source, the plan, the recorder, the
performer); the slow ones grade small submissions, one per clause of the plan, and every attack kept under
tests/submissions/tampering/ that the replay alone defeats.
"""

from __future__ import annotations

import copy
import os
import textwrap
from pathlib import Path

import pytest
import torch

from checks import verdict as V
from checks.engine.contract.kernel_source import extract
from checks.engine.contract.plan import PlanError, check, first_difference
from checks.registry import ROOT, get_puzzle
from tests.helpers import RIGHT, right_submissions, submission, submission_names

TAMPERING = Path(__file__).parent / "submissions" / "tampering"

ADD = """
import torch
import triton
import triton.language as tl

LIMIT = tl.constexpr(1024)


@triton.autotune(configs=[triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < tl.minimum(n, LIMIT)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, out, x.numel())
    return out
"""


# -- the kernels, from the source ---------------------------------------------------------------------------
def test_the_kernels_keep_their_lines_and_nothing_else_of_the_file():
    source = extract([("add.py", "add.py", ADD)])
    text = source.files[0].text.splitlines()
    original = ADD.splitlines()
    def_line = next(i for i, line in enumerate(original) if line.startswith("def add_kernel"))
    assert text[def_line] == original[def_line]  # the kernel at its own line
    assert not text[def_line - 1] and not text[def_line - 2]  # its decorators left out: the plan has the configs
    assert not any("vector_add" in line or "import" in line for line in text)  # the host function is not kept
    assert source.kernels == ["add_kernel"] and source.global_names == ["LIMIT"] and not source.problems


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("os.system('touch /tmp/x')", "`os.system`"),
        ("x = ().__class__", "`__class__`"),
        ("m = tl", "`tl` itself as a value"),
        ("y = tl.core.os", "tl.core.os"),
        ("z = triton.runtime", "`triton.runtime`, which is not in the kernel language"),
        ("w = [i for i in range(3)]", "ListComp"),
        ("v = open('f')", "`open`"),
        ("tl.store.fn = 1", "assignment to an attribute"),
        # chains that leave triton.language through the modules it imports
        ("tl.core.builtins.exec('x = 1')", "`tl.core.builtins.exec`, which is not in the kernel language"),
        ("f = tl.core.inspect.currentframe()", "`tl.core.inspect.currentframe`"),
        ("s = tl.extra.pkgutil.sys", "`tl.extra.pkgutil.sys`"),
        ("t = tl.core.typing", "`tl.core.typing`"),
        ("i = tl.inline_asm_elementwise", "`tl.inline_asm_elementwise`"),
        # a local or a value's attribute reaches nothing outside the language
        ("f = tl.load; f(x_ptr)", "a call of the local name `f`"),
        ("n = x_ptr.handle", "the attribute `.handle`"),
        ("g = k.fn", "`k.fn`: a kernel of yours is called, never looked into"),
        ("h = x_ptr.to(tl.float32).fn", "the attribute `.fn`"),
        ("tl.load(x_ptr)(1)", "a call of something that is not a name"),
        # strings stand only as messages and keyword values
        ("x_ptr + 1; 'a string that is not the docstring'", "a string where a kernel takes none"),
        ("z = float('x')", "a string where a kernel takes none"),
        ("d = {'a': 1}", "`Dict`"),
        ("e = f'{x_ptr}'", "`JoinedStr`"),
        ("b = b'bytes'", "a bytes constant"),
        ("exec('x = 1')", "a call of `exec`"),
        ("eval('1')", "a call of `eval`"),
        ("__import__('os')", "a call of `__import__`"),
        ("getattr(tl, 'load')", "a call of `getattr`"),
    ],
)
def test_a_kernel_body_may_use_only_the_kernel_language(line, said):
    code = f"import os\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr):\n    {line}\n"
    problems = extract([("k.py", "k.py", code)]).problems
    assert problems and "k.py, line 7, in kernel `k`" in problems[0] and said in problems[0], problems


def test_every_answer_key_variant_and_right_submission_uses_only_the_kernel_language(tmp_path):
    files = [*sorted((ROOT / "solutions").glob("*.py")), *sorted((ROOT / "solutions" / "variants").glob("*.py"))]
    files += [submission(RIGHT, name, tmp_path) for _, name in right_submissions()]
    for path in files:
        sources = [(str(path), path.name, path.read_text(encoding="utf-8"))]
        for puzzle in ("9", "10"):  # these build on a step: its key comes first, as the grader puts it
            if path.name.startswith(f"{puzzle}_") or path.name.startswith(f"{int(puzzle):02d}_"):
                step = get_puzzle(puzzle).builds_on
                key = get_puzzle(step).solution
                sources.insert(0, (str(key), key.name, key.read_text(encoding="utf-8")))
        source = extract(sources)
        assert not source.problems, path
        if path.name.startswith("16"):  # the Hopper track's Gluon kernels are read and checked, not passed over
            assert source.gluon_kernels and set(source.gluon_kernels) == set(source.kernels), path


# -- the plan ---------------------------------------------------------------------------------------------
def ref(storage: str, shape: list[int]) -> dict:
    return {"storage": storage, "dtype": "float32", "offset": 0, "shape": shape, "strides": [1] * len(shape)}


def launch(value: float) -> dict:
    args = {"x_ptr": {"tensor": ref("input:x", [4])}, "out_ptr": {"tensor": ref("a1", [4])}, "v": {"scalar": value}}
    return {"op": "launch", "kernel": "k", "where": "", "alternatives": [{"grid": [1], "args": args, "options": {}}]}


def plan(value: float = 1.0) -> dict:
    alloc = {"op": "alloc", "id": "a1", "dtype": "float32", "numel": 4, "shape": [4], "strides": [1], "fill": "empty"}
    return {"ops": [alloc, launch(value)], "returned": [{"tensor": ref("a1", [4])}], "kind": "tensor", "globals": {}}


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.update(ops="all of them"),
        lambda p: p["ops"].append({"op": "exec", "code": "print(1)"}),
        lambda p: p["ops"][1]["alternatives"][0].update(grid=[1, 2, 3, 4]),
        lambda p: p["ops"][1]["alternatives"][0].update(grid=[1.5]),
        lambda p: p["ops"][1]["alternatives"][0]["args"].update(v={"code": "x"}),
        lambda p: p["ops"][1]["alternatives"][0]["options"].update(pre_hook=1),
        lambda p: p["ops"][0].update(fill="answer"),
        lambda p: p["returned"].append({"tensor": {"storage": "a1"}}),
    ],
)
def test_a_plan_not_of_the_recorders_form_is_refused(damage):
    broken = plan()
    damage(broken)
    with pytest.raises(PlanError):
        check(broken)
    assert check(plan())  # the undamaged one is of the form


def test_two_draws_must_give_the_same_plan_and_the_difference_is_named():
    assert first_difference(plan(1.0), plan(1.0)) is None
    said = first_difference(plan(1.0), plan(2.5))
    assert "argument `v` of launch 1 (`k`)" in said and "1.0" in said and "2.5" in said
    grid = plan()
    grid["ops"][1]["alternatives"][0]["grid"] = [2]
    assert "the grid of launch 1" in first_difference(plan(), grid)
    const_a, const_b = copy.deepcopy(plan()), copy.deepcopy(plan())
    const_a["ops"].append({"op": "const", "id": "c2", "dtype": "float32", "values": [1.0], "where": "a.py, line 3"})
    const_b["ops"].append({"op": "const", "id": "c2", "dtype": "float32", "values": [2.0], "where": "a.py, line 3"})
    assert "computed from the data" in first_difference(const_a, const_b)


def test_a_tensor_kept_from_an_earlier_call_is_told_apart_from_one_allocated_in_the_call():
    kept = copy.deepcopy(plan())  # the same shape and dtype, but kept between calls: made before this call
    kept["ops"].insert(0, {"op": "const", "id": "kept7", "kept": True, "dtype": "float32", "values": [0.0] * 4})
    kept["ops"][2]["alternatives"][0]["args"]["out_ptr"] = {"tensor": ref("kept7", [4])}
    said = first_difference(plan(), kept)
    assert "(allocated in this call; strides (1,), offset 0)" in said, said
    assert "kept between calls: made before this call" in said
    assert "make the tensors your launches use in each call" in said
    made = copy.deepcopy(plan())  # made from Python values in this call: said so
    made["ops"].insert(0, {"op": "const", "id": "c7", "dtype": "float32", "values": [0.0] * 4, "where": ""})
    made["ops"][2]["alternatives"][0]["args"]["out_ptr"] = {"tensor": ref("c7", [4])}
    said = first_difference(plan(), made)
    assert "made outside torch in this call" in said and "kept between calls" not in said
    sliced = copy.deepcopy(plan())  # a view at another offset of the same allocation: no advice about kept tensors
    sliced["ops"][1]["alternatives"][0]["args"]["out_ptr"]["tensor"]["offset"] = 2
    said = first_difference(plan(), sliced)
    assert "offset 0) on one draw" in said and "offset 2) on the other" in said and "each call" not in said


# -- recording and performing, in this process -------------------------------------------------------------
@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from checks.engine.machine import autotune_without_benchmarks, detect

    detect(force_interpreter=True)
    autotune_without_benchmarks()


def record(tmp_path: Path, code: str, x: torch.Tensor, y: torch.Tensor) -> dict:
    from checks.engine.record.plan_recorder import PlanRecorder, launches_recorded
    from checks.engine.submission import load_module

    path = tmp_path / "sub.py"
    path.write_text(textwrap.dedent(code), encoding="utf-8")
    module = load_module(path, f"sub_{abs(hash(code))}")
    recorder = PlanRecorder({"x": x, "y": y}, {str(path.resolve()): "sub.py"})
    with recorder, launches_recorded(recorder):
        returned = module.vector_add(x, y)
    return recorder.plan(returned, "tensor", {"LIMIT": {"constexpr": 1024}})


def test_the_recorder_writes_down_allocations_copies_and_launches_and_runs_nothing(tmp_path, interpreter):
    x, y = torch.randn(300), torch.randn(300)
    found = check(
        record(tmp_path, ADD.replace("out = torch.empty_like(x)", "out = torch.empty_like(x)\n    y = y.clone()"), x, y)
    )
    kinds = [op["op"] for op in found["ops"]]
    assert kinds == ["alloc", "alloc", "copy", "launch"]
    (alternative,) = found["ops"][-1]["alternatives"]
    assert alternative["grid"] == [3] and alternative["args"]["BLOCK"] == {"scalar": 128}
    assert alternative["args"]["x_ptr"]["tensor"]["storage"] == "input:x"
    assert found["returned"][0]["tensor"]["storage"] == found["ops"][0]["id"]


def test_what_the_host_computes_from_the_data_is_marked_where_it_was_computed(tmp_path, interpreter):
    found = record(tmp_path, ADD.replace("return out", "return x + y"), torch.randn(300), torch.randn(300))
    (returned,) = found["returned"]
    assert "host" in returned and returned["host"]["what"] == "aten.add" and "sub.py, line" in returned["host"]["where"]


KEPT = ROOT / "tests" / "submissions" / "right" / "01_kept_counter.py"  # zero_ on the host, then two launches


def test_a_kept_tensor_is_carried_once_per_call_under_one_name_with_what_the_host_did_to_it(tmp_path, interpreter):
    from checks.engine.record.plan_recorder import PlanRecorder, launches_recorded
    from checks.engine.replay.perform import KeptState, Performer
    from checks.engine.submission import load_module

    module = load_module(KEPT, "kept_counter_recorded")
    x, y = torch.randn(300), torch.randn(300)
    plans = []
    for _ in range(2):
        recorder = PlanRecorder({"x": x, "y": y}, {str(KEPT.resolve()): KEPT.name})
        with recorder, launches_recorded(recorder):
            returned = module.vector_add(x, y)
        plans.append(check(recorder.plan(returned, "tensor", {})))
    kinds = [op["op"] for op in plans[0]["ops"]]
    assert kinds == ["const", "fill", "alloc", "launch", "launch"], kinds  # the host's zero_ comes before the launches
    kept = plans[0]["ops"][0]
    assert kept["kept"] and kept["id"].startswith("kept") and kept["values"] == [0.0]
    assert plans[1]["ops"][0]["id"] == kept["id"] and first_difference(plans[0], plans[1]) is None
    storages = {op["alternatives"][0]["args"]["calls_ptr"]["tensor"]["storage"] for op in plans[0]["ops"][3:]}
    assert storages == {kept["id"]}  # both launches see the one tensor
    from checks.engine.replay.kernels import build

    kernels, _ = build(extract([(str(KEPT), KEPT.name, KEPT.read_text())]), {}, tmp_path)
    state = KeptState()
    for n in range(3):  # the counter goes from call to call, and the host's zero_ puts it back each time
        performer = Performer(plans[0], kernels, {"x": x, "y": y}, None, "cpu", True, None, state)
        (out,) = performer.run()
        assert torch.equal(out, x + y), n
        assert performer.kept_changed == [], n  # what the first launch saw is the first state again
        assert state.tensors[kept["id"]][0].item() == 1.0


def test_a_run_past_its_time_limit_is_stopped_and_one_within_it_finishes():
    """The bound on the replay's second run of a call with its programs last to first (a program that waits for a
    flag a later program sets would wait forever there): the block stops with TooLong, the timer is then off."""
    import time

    from checks.engine.replay.replay_job import TooLong, time_limit

    start = time.perf_counter()
    with pytest.raises(TooLong), time_limit(0.2):
        while True:
            pass
    assert time.perf_counter() - start < 2.0
    with time_limit(0.2):
        finished = sum(range(1000))
    time.sleep(0.3)  # no timer left to fire
    assert finished == 499500


def test_a_constant_is_replayed_on_the_device_it_was_made_on():
    """A CPU tensor passed to a GPU kernel fails in the replay as it fails in the learner's process."""
    from checks.engine.replay.perform import Performer

    op = {"op": "const", "id": "c1", "dtype": "int32", "values": [1, 2], "device": "cpu"}
    for kept in (False, True):
        performer = Performer(plan(), {}, {}, None, "cuda", False)
        performer._const({**op, "id": "kept1", "kept": True} if kept else op)
        ((t, _),) = performer.storages.values()
        assert t.device.type == "cpu" and t.tolist() == [1, 2]


def test_a_replayed_view_must_stay_inside_its_tensor():
    from checks.engine.replay.perform import Performer

    performer = Performer(plan(), {}, {"x": torch.randn(4)}, None, "cpu", True)
    assert performer.tensor(ref("input:x", [4])).shape == (4,)
    with pytest.raises(PlanError, match="reaches outside"):
        performer.tensor({**ref("input:x", [4]), "strides": [2]})
    with pytest.raises(PlanError, match="never made"):
        performer.tensor(ref("a7", [4]))


ACCUMULATE = """
import torch
import triton
import triton.language as tl


@triton.autotune(configs=CONFIGS, key=["n"], reset_to_zero=["out_ptr"])
@triton.jit
def add_into(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


def vector_add(x, y):
    out = torch.full_like(x, 5.0)  # what the memory held: only the autotuner's reset_to_zero clears it
    add_into[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
    return out
"""


@pytest.mark.parametrize("configs", [1, 2])
def test_reset_to_zero_acts_only_where_the_autotuner_benchmarks(configs, tmp_path, interpreter, monkeypatch):
    """Triton's autotuner zeroes `reset_to_zero` only around its benchmarking, on the first call of each key of a
    kernel with several configs: with one config, or a key tuned before, the kernel adds into what was there."""
    from checks.engine.replay import perform
    from checks.engine.replay.kernels import build

    monkeypatch.setattr(perform, "_benchmarked", set())
    code = ACCUMULATE.replace("CONFIGS", f"[triton.Config({{'BLOCK': b}}) for b in {[64, 128][:configs]}]")
    path = tmp_path / "sub.py"
    path.write_text(code, encoding="utf-8")
    kernels, _ = build(extract([(str(path), path.name, code)]), {}, tmp_path)
    x = torch.randn(300)
    plans = {n: check(record(tmp_path, code, x[:n], x[:n])) for n in (300, 200)}
    assert plans[300]["ops"][-1]["benchmarks"] is (configs > 1)
    got = [perform.Performer(plans[n], kernels, {"x": x[:n], "y": x[:n]}, None, "cpu", True).run()[0] for n in
           (300, 300, 200)]  # fmt: skip
    tuned = [configs > 1, False, configs > 1]  # each key's first call is benchmarked, and zeroes the buffer
    for out, n, zeroed in zip(got, (300, 300, 200), tuned, strict=True):
        assert torch.allclose(out, x[:n] + (0.0 if zeroed else 5.0)), (n, zeroed)


# -- each clause, graded ------------------------------------------------------------------------------------
def grade_code(tmp_path: Path, code: str, number: str = "1") -> V.Verdict:
    from checks.engine.grade import grade

    path = tmp_path / "submission.py"
    path.write_text(textwrap.dedent(code), encoding="utf-8")
    return grade(get_puzzle(number), path, interpret=True, time_it=False, first_failure=True, cases=[0, 1])


COPY_KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask) * scale, mask=mask)
"""


# host functions around COPY_KERNEL whose plan the replay cannot take: (its body, the rule, what the verdict says)
HOST_FROM_THE_DATA = {
    "a grid": (
        """
    extra = int(abs(float(x.sum())) * 1e4) % 1000  # the data decides the grid
    copy_kernel[(triton.cdiv(x.numel(), 1024) + extra,)](x, out, x.numel(), 1.0, BLOCK=1024)
    return out
""",
        "plan_from_shapes",
        "the grid of launch 1 (`copy_kernel`)",
    ),
    "a scalar": (
        """
    copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), float(y[0]), BLOCK=1024)
    return out
""",
        "plan_from_shapes",
        "argument `scale` of launch 1",
    ),
    "a returned tensor that is not in the plan": (
        """
    copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), 1.0, BLOCK=1024)
    return out + y
""",
        "torch_free",
        "Output 1 that your function returned was computed on the host",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("what", sorted(HOST_FROM_THE_DATA))
def test_what_the_host_computes_from_the_data_fails(tmp_path, what):
    body, rule, said = HOST_FROM_THE_DATA[what]
    verdict = grade_code(tmp_path, COPY_KERNEL + "\ndef vector_add(x, y):\n    out = torch.empty_like(x)" + body)
    assert verdict.rule == rule and said in verdict.summary, verdict.summary


@pytest.mark.slow
@pytest.mark.parametrize(
    ("made", "rule", "said"),
    [
        ("np.repeat(x.cpu().numpy()[:1], 70000)", "plan_from_shapes", "holds other values on the two draws"),
        ("np.ones(70000, dtype=np.float32)", "torch_free", "more than the 65536 the grader carries"),
        ("np.ones(70000, dtype=np.float32)).to(torch.bfloat16", "torch_free", "more than the 65536 the grader"),
    ],
    ids=["from the data", "a constant", "a bfloat16 constant"],
)
def test_a_large_tensor_made_outside_torch_is_compared_between_the_draws(tmp_path, made, rule, said):
    """Too large to carry by value, it is compared by its digest: from the data, the plans differ (as a small one's
    values would); a constant cannot reach the replay. The same verdict whatever the device does with `.to`."""
    verdict = grade_code(
        tmp_path,
        COPY_KERNEL
        + f"""
import numpy as np


def vector_add(x, y):
    out = torch.empty_like(x)
    big = torch.from_numpy({made}).to(x.device)
    copy_kernel[(triton.cdiv(x.numel(), 1024),)](big, out, min(x.numel(), 70000), 1.0, BLOCK=1024)
    return out
""",
    )
    assert verdict.rule == rule and said in verdict.summary, verdict.summary


@pytest.mark.slow
def test_a_kernel_that_calls_outside_the_language_fails_without_running(tmp_path):
    touched = tmp_path / "touched"
    verdict = grade_code(
        tmp_path,
        f"""
import os
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    open({str(touched)!r}, "w")
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + tl.load(y_ptr + offsets), mask=offsets < n)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
""",
    )
    assert verdict.rule == "kernel_calls" and "a call of `open`" in verdict.summary and "line 11" in verdict.summary
    assert not touched.exists()  # the kernel never ran, in the recording or in the replay


@pytest.mark.slow
def test_an_empty_read_before_it_is_written_shows_the_poison(tmp_path):
    verdict = grade_code(
        tmp_path,
        """
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, scratch_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    total = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, total + tl.load(scratch_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    scratch = torch.empty_like(x)  # never written: the grader fills it with its poison
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, scratch, out, x.numel(), BLOCK=1024)
    return out
""",
    )
    assert verdict.rule == "values" and "poison" in V.format_verdict(verdict)


# -- the attacks --------------------------------------------------------------------------------------------
ATTACKS = {  # file -> (the rule that rejects it, words its report holds[, puzzle[, the cases graded, when not all]])
    "grid_writes_the_answer": ("values", "never written"),
    "pre_run_hook_answer": ("values", "never written"),
    "answer_as_scalars": ("plan_from_shapes", "argument `value` of launch 1"),
    "answer_in_a_tuple": ("plan_from_shapes", "argument `first` of launch 1"),
    "stride0_view_of_host_buffer": ("torch_free", "computed on the host from the data (aten.add"),
    "input_overwritten_in_place": ("values", "elements are wrong"),
    "compiles_the_answer_key": ("values", "never written"),
    "subclass_pickles_the_answer": ("values", "elements are wrong"),
    "lazy_subclass": ("values", "never written"),
    "thread_finishes_after_return": ("values", "never written"),
    "patched_timers": ("torch_free", "computed on the host from the data (aten.add"),
    "forges_the_plan": ("values", "elements are wrong"),
    "kernel_calls_os": ("kernel_calls", "a call of `os.system`"),
    # the kernel language is a table: chains out of triton.language, names the plan cannot record, defaults
    "kernel_execs_through_tl_core": ("kernel_calls", "`tl.core.builtins.exec`, which is not in the kernel language"),
    "kernel_reads_frames_through_inspect": ("kernel_calls", "the attribute `.f_back`"),
    "builtin_name_left_unrecorded": ("kernel_calls", "a call of `eval`, a module-level name"),
    "module_function_as_kernel_value": ("kernel_calls", "reads the module-level name `RUN`"),
    "default_runs_python": ("kernel_calls", "a default value that is not a literal constant"),
    "default_takes_a_frame": ("kernel_calls", "a default value that is not a literal constant"),
    "kernel_calls_the_reference": ("kernel_calls", "`tl.core.inspect.sys.modules.get`"),
    "kernel_patches_the_replayer": ("kernel_calls", "`tl.core.builtins.setattr`"),
    # one kernel text: what the interpreter and the compiler read is what was checked
    "second_def_in_a_string": ("kernel_calls", "a second line that starts with `def`"),
    "second_def_in_the_docstring": ("kernel_calls", "a second line that starts with `def`"),
    # a method rule judges the loads of a copy of an input as loads of that input
    "three_passes_through_a_clone": ("limits", "read each element of x", "7"),
    # a method rule sees the kernels' stores through the copy the host made into the output
    "stores_through_a_host_copy": ("causal_skipping", "lie entirely on the masked side", "9"),
    # one kernel text, one method: the interpreter passes scalars as a GPU's compiler specialises them
    "method_by_a_one": ("grouped_order", "Launch the tiles of c in grouped order", "4", [8]),
    "method_by_a_float": ("limits", "read each element of x 3.00 times", "7"),
    # every config an autotuner may choose is judged: one that changes the method fails, named
    "method_by_a_config": (
        "grouped_order",
        "With `matmul_kernel` with BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_SIZE_M=1",
        "4",
        [8],
    ),
    "method_by_a_block_size": ("causal_skipping", "With `_attn_fwd_causal` with BLOCK_M=32, BLOCK_N=32", "9", [3]),
    # a config's tiles larger than the puzzle's cases are made for: judged on cases sized from them
    "row_major_at_large_tiles": ("grouped_order", "on a 2 x 16 grid of 128 x 128 tiles", "4", [0]),
    "column_major_at_large_tiles": ("grouped_order", "on a 16 x 2 grid of 128 x 128 tiles", "4", [0]),
    # one account of what the kernels read (checks.engine.access.queries.loads_of): passes counted by where the data
    # came from, through copies of any size, the host's and the kernels' own
    "half_copies_read_in_a_second_kernel": ("limits", "read each element of x 4.00 times", "7"),
    "half_copies_made_in_the_first_pass": ("limits", "read each element of x 3.00 times", "7"),
    # parallel work counted in the work that reaches the output, not in the grid's programs
    "one_program_per_head_beside_idle_programs": ("parallel_over_queries", "did the work of 130 query rows", "9", [8]),
    "one_program_per_head_copied_out_by_many": ("parallel_over_queries", "did the work of 130 query rows", "9", [8]),
    # skipped work counted in the rows each program loaded, not in the box of one load
    "fully_masked_tiles_gather_key_row_0": ("causal_skipping", "loaded k rows 33-47", "9", [5]),
    "masked_query_tiles_gather_the_last_row": ("causal_skipping", "(owns key rows 32-63) loaded q rows 1-7", "10b"),
    # copies followed by every rule: a clone, a broadcasting copy_
    "kv_read_per_query_head_from_a_clone": ("kv_once_per_group", "read each element of k 4.00 times", "12"),
    "slots_past_seq_lens_through_a_broadcast_copy": ("pages_in_table", "past seq_lens there", "13"),
    # a kernel's copy cast to another float type is a copy, through value-keeping casts, selects and arithmetic
    "kv_gathered_into_float32_by_a_kernel": ("kv_once_per_group", "read each element of k_cache 3.00 times", "13", [0]),
    "kv_gathered_into_float32_through_identities": (
        "kv_once_per_group",
        "read each element of k_cache 3.00 times",
        "13",
        [0],
    ),
    # no config a GPU may choose goes unjudged: a launch with more configs than the interpreter judges fails
    "ninth_config_skips_blocks": ("too_many_configs", "have 9 configs that differ in their arguments", "14", [0]),
    # the probe of the largest sizes does not pass what it stopped before reaching
    "int32_offsets_after_a_work_list_loop": ("offsets_fit", "stopped at line", "14", [0]),
    # the programs of a launch run in no order on a GPU: a compare-and-swap excuses no store, an exchange collides as a
    # store does, and a load of what another program stored is ordered only by an atomic
    "stores_masked_at_t_behind_a_cas": ("no_race", "(a write collision)", "15", [0]),
    "lse_exchanged_past_the_sequence_end": ("no_race", "store different values to element [0, 37] of lse", "14", [0]),
    "split_merged_by_the_next_program": ("no_race", "(an unordered read)", "14", [0]),
    "split_merged_behind_unread_atomics": ("no_race", "run with the programs last to first", "14", [0]),
    "last_split_by_number_behind_a_counter": ("no_race", "run with the programs last to first", "11", [0]),
    # a ticket drawn in the order the programs start is not the order they finish in
    "last_split_by_ticket": ("no_race", "paused after their first atomic", "11", [0]),
    # a block of queries is the tokens one program loads of q over all its loads, not the box of each load
    "kv_per_query_head_split_q_load": ("kv_once_per_query_block", "query heads share each kv head", "14", [0]),
    "context_per_query_head_split_q_load": ("kv_once_per_query_block", "query heads share each kv head", "15", [0]),
    # padding made by the host's copies is padding (a buffer of max_seqlen rows per sequence), and a copy per
    # sequence is a loop over the sequences
    "padded_by_one_host_copy": ("no_padded_work", "Your function copied q (421 tokens) into a buffer", "14", [4]),
    "padded_by_host_copies_in_a_loop": ("one_launch_per_kernel", "a copy per sequence is a Python loop", "14", [0]),
    # a program owns the queries it loads, whatever it stores them through (a scratch another kernel casts into o)
    "causal_unskipped_through_a_copy_kernel": (
        "causal_skipping_packed",
        "lying wholly after the last query of their program",
        "14",
        [0],
    ),
    "causal_unskipped_output_by_atomic_add": (
        "causal_skipping_packed",
        "lying wholly after the last query of their program",
        "14",
        [0],
    ),
}


# attacks on a hole another attack of the same kind already pins, in `make test`: graded in `make test-all` only
SAME_HOLE_AS_ANOTHER = {
    "context_per_query_head_split_q_load",  # kv_per_query_head_split_q_load, on 15's cache
    "causal_unskipped_output_by_atomic_add",  # causal_unskipped_through_a_copy_kernel, through an atomic
    # tests/test_access.py::test_atomics_order_programs_only_where_a_gpu_would pins each of these in its own kernels
    "stores_masked_at_t_behind_a_cas",
    "lse_exchanged_past_the_sequence_end",
    "split_merged_by_the_next_program",
    # tests/test_overflow.py pins where the probe stops
    "int32_offsets_after_a_work_list_loop",
    # tests/test_prefill.py pins each on a log made by hand: blocks of queries, host padding, ownership through q
    "padded_by_one_host_copy",
    "causal_unskipped_through_a_copy_kernel",
    # tests/test_access.py pins a cast copy through + 0.0, * 1.0 and a select, and that * 2.0 is no copy
    "kv_gathered_into_float32_through_identities",
    # split_merged_behind_unread_atomics, on 11 (tests/test_access.py pins an unread atomic run both ways)
    "last_split_by_number_behind_a_counter",
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.exhaustive) if n in SAME_HOLE_AS_ANOTHER else n for n in sorted(ATTACKS)],
)
def test_every_attack_fails_by_the_replay_with_a_message_a_learner_reads(name, tmp_path):
    """In grading processes forked from the fork server where the machine has one (seconds sooner than started ones,
    and the same verdicts: tests/test_fork_server.py); the replay and the grader that judge it are the same either way.
    tests/test_integrity.py grades the attacks on the grading process itself in processes started as in production,
    as the tests below grade a launch per element and a method chosen by the device."""
    from checks.engine.grade import grade

    rule, words, *more = ATTACKS[name]
    number = more[0] if more else 1
    cases = more[1] if len(more) > 1 else None  # the case that tells, alone: the earlier ones pass, and take seconds
    graded = submission(TAMPERING, name, tmp_path)
    verdict = grade(get_puzzle(number), graded, interpret=True, time_it=False, first_failure=True, cases=cases)
    report = V.format_verdict(verdict)
    assert not verdict.passed and verdict.rule == rule, report
    assert words in report, report


# Attacks only a machine with a GPU can run: there the interpreter stage records on the GPU as the GPU stage does, so
# a method chosen by the device is judged. On a machine without one, the method that runs is the one judged: right.
GPU_ATTACKS = {
    "method_by_device": ("limits", "read each element of x 3.00 times", "7"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GPU_ATTACKS))
def test_a_method_chosen_by_the_device_is_judged_where_it_runs(name, monkeypatch, tmp_path):
    import torch

    from checks.engine.grade import grade
    from checks.engine.processes import forking

    monkeypatch.delenv(forking.ENV, raising=False)
    rule, words, number = GPU_ATTACKS[name]
    verdict = grade(get_puzzle(number), submission(TAMPERING, name, tmp_path), time_it=False, first_failure=True)
    report = V.format_verdict(verdict)
    if torch.cuda.is_available():  # the GPU stage and the interpreter stage, both recorded on the GPU
        assert not verdict.passed and verdict.rule == rule and words in report, report
    else:  # the interpreter alone, on CPU tensors: the two-pass method runs, and is judged
        assert verdict.passed, report


def test_every_attack_file_is_tested():
    replayed = set(ATTACKS) | set(GPU_ATTACKS)
    hardening = set(submission_names(TAMPERING)) - replayed
    from tests.test_integrity import SUBMISSIONS

    assert hardening <= {name for name, *_ in SUBMISSIONS}, hardening - {name for name, *_ in SUBMISSIONS}
    assert os.path.isdir(TAMPERING)


def test_a_call_that_asks_for_more_operations_than_a_plan_holds_is_refused_where_it_asked(monkeypatch):
    """A launch per element (an answer carried in scalars, or a slow design) is refused at OPS_LIMIT operations, with
    the learner's line, even where the learner's code catches the error and goes on."""
    import torch

    from checks.engine.record import plan_recorder as R

    monkeypatch.setattr(R, "OPS_LIMIT", 8)
    recorder = R.PlanRecorder({}, {__file__: "mine.py"})

    def learner() -> None:
        for _ in range(20):
            try:
                torch.empty(4)
            except R.PlanTooLong:
                pass

    with recorder:
        learner()
    assert len(recorder.ops) == 8
    assert recorder.too_long.startswith("mine.py, line ") and "torch.empty(4)" in recorder.too_long
    assert "launch one kernel whose grid covers the whole output" in R.TOO_LONG


@pytest.mark.slow
def test_a_launch_per_element_is_refused_at_the_plan_limit_with_the_learners_line(monkeypatch, tmp_path):
    from checks.engine.grade import grade
    from checks.engine.processes import forking

    monkeypatch.delenv(forking.ENV, raising=False)
    graded = submission(TAMPERING, "answer_as_scalars", tmp_path)
    verdict = grade(get_puzzle(1), graded, interpret=True, time_it=False)
    too_long = [c for c in verdict.cases if "PlanTooLong" in c.problem]
    assert too_long, V.format_verdict(verdict)  # the cases of more elements than a plan holds operations
    assert "launch one kernel whose grid covers the whole output" in too_long[0].problem
    assert any("answer_as_scalars.py, line" in line for line in too_long[0].details), too_long[0].details


def test_a_gpu_benchmark_zeroes_and_restores_around_each_trial_and_then_zeroes_once(monkeypatch, tmp_path):
    """As Triton's autotuner on a GPU: each timed run of a config starts with `reset_to_zero` zeroed and has
    `restore_value` put back after it; the launch after the benchmarking starts zeroed; a later launch of the same
    key starts from what the earlier one left."""
    import triton.testing

    from checks.engine.replay import perform

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"test-{tmp_path.name}")  # a lock file of this test's own
    monkeypatch.setattr(perform, "_chosen", {})
    monkeypatch.setattr(perform, "_benchmarked", set())
    buf, keep, seen = torch.full((4,), 7.0), torch.full((4,), 3.0), []

    class Kernel:
        def __getitem__(self, grid):
            def run(buf, keep, config, **options):
                seen.append((buf.tolist(), keep.tolist()))
                buf.add_(1.0)
                keep.add_(1.0)

            return run

    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, **kwargs: (fn(), fn(), 1.0)[-1])
    tensors = {name: {"tensor": ref(f"input:{name}", [4])} for name in ("buf", "keep")}
    configs = [{"grid": [1], "args": {**tensors, "config": {"scalar": c}}, "options": {}} for c in (0, 1)]
    op = {"op": "launch", "kernel": "k", "benchmarks": True, "reset_to_zero": ["buf"], "restore_value": ["keep"]}
    op["alternatives"] = configs
    inputs = {"buf": buf, "keep": keep}
    performer = perform.Performer({"ops": [op, op], "returned": []}, {"k": Kernel()}, inputs, None, "cuda", False)
    performer.run()
    trials, launches = seen[:4], seen[4:]
    assert trials == [([0.0] * 4, [3.0] * 4)] * 4  # two configs, timed twice each
    assert launches == [([0.0] * 4, [3.0] * 4), ([1.0] * 4, [4.0] * 4)]


NEXT_UNMASKED = """
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = tl.load(y_ptr + offs, mask=offs < n)
    y_next = tl.load(y_ptr + offs + 1, mask=offs + 1 < n)  # the last element's lane is masked off: no other=
    tl.store(out_ptr + offs, x + y + y_next * 0.0, mask=offs < n)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 64),)](x, y, out, x.numel(), BLOCK=64)
    return out
"""


def test_the_replay_proves_that_a_masked_off_lanes_poison_reached_the_output(tmp_path, interpreter):
    """The replay names a load without other= only where the same call with its masked-off lanes read as 0 has no
    NaN where the call had: here the poison of y_next's last lane reaches the last element, and the loads of x and
    y, whose masked-off lanes are never stored, are not named."""
    from types import SimpleNamespace

    from checks.engine.access.patches import record_access
    from checks.engine.contract.protocol import outputs_path
    from checks.engine.inputs import draw
    from checks.engine.replay.case_runner import poison_suspects
    from checks.engine.replay.kernels import build
    from checks.engine.replay.perform import Performer
    from checks.engine.replay.replay_job import masked_poison_reached
    from checks.puzzles import spec_module

    puzzle = get_puzzle("1")
    spec, case = spec_module(puzzle), puzzle.cases.cpu[0]
    path = tmp_path / "sub.py"
    path.write_text(NEXT_UNMASKED, encoding="utf-8")
    kernels, _ = build(extract([(str(path), path.name, NEXT_UNMASKED)]), {}, tmp_path)
    arena, inputs = draw(spec, case, 5, 0, "cpu", 6)
    plan = check(record(tmp_path, NEXT_UNMASKED, inputs["x"], inputs["y"]))
    with record_access(arena, inputs) as recorder:
        (out,) = Performer(plan, kernels, inputs, arena, "cpu", True).run()
    assert bool(torch.isnan(out[-1])) and not bool(torch.isnan(out[:-1]).any())
    suspects = poison_suspects(recorder, [out])
    assert [(s["kernel"], s["line"]) for s in suspects] == [("add_kernel", 10), ("add_kernel", 11), ("add_kernel", 12)]
    torch.save([out], outputs_path(tmp_path, 0))
    job, machine = SimpleNamespace(seed=5, data_seed=6), SimpleNamespace(device="cpu", mode="interpreter")
    assert masked_poison_reached(plan, kernels, spec, case, job, 0, machine, tmp_path, suspects) == suspects[2:]
    torch.save([out.nan_to_num()], outputs_path(tmp_path, 0))  # no NaN the zeroed lanes clear: no cause
    assert masked_poison_reached(plan, kernels, spec, case, job, 0, machine, tmp_path, suspects) == []
