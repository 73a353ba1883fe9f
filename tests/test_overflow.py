"""Offsets at the largest sizes (`checks.engine.replay.overflow`, judged by the rule `offsets_fit`): the plan a host
function records at the sizes `largest:` in puzzles.yaml names, on tensors without storage, performed in the
interpreter at the ends of its grids. The answer keys come out clean; an int32 offset that wraps and a grid a GPU
cannot launch are found, with the kernel line, in well under a second. (Graded end to end: the known-wrong kernels
`int32_row_offset` of 3-7 and 10a, `int32_batch_offset`, `batch_heads_on_axis_1` of 8a and `int32_page_offset` of 13
and 15, in tests/test_answer_key.py.)"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import torch
from triton.runtime.interpreter import InterpretedFunction

from checks.authoring.wrong import materialize
from checks.engine.compiler_arguments import compiler_arguments
from checks.engine.contract.observations import CaseObservation
from checks.engine.judging.rules import rulebook
from checks.engine.judging.rules.problem import CaseContext
from checks.engine.record.largest import record_largest
from checks.engine.replay.overflow import GRID_LIMITS, ends, largest_findings
from checks.engine.replay.perform import Tuning
from checks.engine.submission import earlier_answer_key, load_module
from checks.puzzles.largest import largest_inputs
from checks.registry import get_puzzle, load_puzzles

PROBED = [p.number for p in load_puzzles() if p.largest is not None]


def jitted(kernel: Any) -> Any:
    """The @triton.jit function under an autotuner or heuristics, as the replay builds it from the source (an
    autotuned launch's plan carries each config's values as arguments)."""
    while not isinstance(kernel, InterpretedFunction):
        kernel = kernel.fn
    return kernel


def explain(exc: BaseException, names: dict) -> tuple[str, list[str]]:
    return f"{type(exc).__name__}: {exc}", []


def probe_of(number: str, tmp_path: Path, wrong: str = "") -> tuple[list[dict], float]:
    """(the probe's findings, its seconds: recording and probe) for the answer key of `number`, or one of its
    known-wrong kernels, loaded in this process."""
    compiler_arguments()  # the scalars typed as a GPU's compiler types them, as in every grading process
    puzzle = get_puzzle(number)
    path = materialize(puzzle, puzzle.wrong_dir / f"{wrong}.edit.yaml", tmp_path) if wrong else puzzle.solution
    earlier = earlier_answer_key(puzzle.solution)
    module = load_module(path, f"probed_{puzzle.label}_{wrong or 'key'}", earlier=earlier)
    kernels = {
        name: jitted(value) for name, value in vars(module).items() if hasattr(value, "fn") and hasattr(value, "run")
    }
    files = {str(p.resolve()): p.name for p in (path, earlier) if p is not None}
    start = time.perf_counter()
    recorded = record_largest(getattr(module, puzzle.name), module, puzzle, "cpu", files, [], explain)
    assert "plan" in recorded, recorded
    found = largest_findings(recorded, kernels, puzzle, files, Tuning())
    return found, time.perf_counter() - start


def judged(number: str, found: list[dict]):
    """The rule offsets_fit on a call whose observation holds these findings."""
    ctx = CaseContext(get_puzzle(number), None, {}, [], [], CaseObservation(index=0, overflow=found))
    return rulebook.apply(rulebook.RULES["offsets_fit"], ctx, {})


def largest_data(number: str) -> list[torch.Tensor]:
    inputs = largest_inputs(get_puzzle(number), "cpu")
    return [t for t in inputs.values() if isinstance(t, torch.Tensor) and t.is_floating_point()]


# The largest tensor of each puzzle at its largest sizes (a result the function makes included): 1 and 2 stay under
# 2^31 elements, as their notes say; from 3 on a real model's tensors pass it (logits, attention probabilities).
LARGEST_ELEMENTS = {
    "1": 128256 * 16384,
    "2": 128256 * 16384,
    "3": 16384 * 152064,
    "4": 16384 * 152064,
    "5": 524288 * 8192,
    "6": 16384 * 152064,
    "7": 16384 * 152064,
    "10a": 524288 * 8192,
}


def test_the_largest_sizes_pass_2_to_the_31_without_storage():
    for number in ("8a", "13", "5", "10a"):
        assert number in PROBED
        data = largest_data(number)
        assert all(t.is_meta for t in data) and max(t.numel() for t in data) > 2**31
    table = largest_inputs(get_puzzle("13"), "cpu")["block_table"]  # real, and reaching the end of the cache
    assert not table.is_meta and int(table.max()) == largest_inputs(get_puzzle("13"), "cpu")["k_cache"].shape[0] - 1


def largest_elements(number: str) -> int:
    """The most elements of one tensor at the puzzle's largest sizes: an input, or a matmul's result c (M, N)."""
    case = get_puzzle(number).largest
    counts = [t.numel() for t in largest_data(number)]
    return max(counts + ([case.M * case.N] if case.M is not None else []))


def test_every_interpreted_puzzle_names_its_largest_sizes_and_the_early_ones_fit_int32():
    """Each puzzle the interpreter grades has largest sizes, and its note says how many elements they make; 1 and 2
    stay under 2^31 (their lessons teach no 64-bit offsets), 3-7 and 10a pass it in their result or their input,
    laid out as the case says."""
    interpreted = [p.number for p in load_puzzles() if p.ready and not p.needs_hopper]
    assert sorted(interpreted) == sorted(PROBED)
    for number, most in LARGEST_ELEMENTS.items():
        assert all(t.is_meta for t in largest_data(number))
        assert largest_elements(number) == most
        assert (most < 2**31) == (number in ("1", "2")), number
        note = get_puzzle(number).largest.note
        assert f"{most} elements" in note or (most == 2**32 and "2^32 elements" in note), (number, note)
    b = largest_inputs(get_puzzle("3"), "cpu")["b"]  # the weight of a linear layer, transposed
    assert b.shape == (8192, 152064) and b.stride() == (1, 8192)


def test_the_ends_of_a_grid():
    assert ends((4, 1, 1)) == [(0, 0, 0), (3, 0, 0)]
    assert len(ends((5, 7, 2))) == 8 and (4, 6, 1) in ends((5, 7, 2))
    assert GRID_LIMITS[1] == GRID_LIMITS[2] == 65535


@pytest.mark.parametrize(
    "number",
    [pytest.param(n, marks=() if n in ("8a", "13", *LARGEST_ELEMENTS) else pytest.mark.exhaustive) for n in PROBED],
)
def test_the_answer_keys_offsets_fit_at_the_largest_sizes(number, tmp_path):
    found, seconds = probe_of(number, tmp_path)
    assert found == []
    assert seconds < 2.0  # about 0.2 s on a laptop's core (an attention key); 0.05 s for 1-7 and 10a


@pytest.mark.parametrize(
    ("number", "wrong", "line", "worked"),
    [
        ("3", "int32_row_offset", "c_ptrs = c_ptr + offs_m[:, None] * stride_cm", (16320, 152064)),
        ("4", "int32_row_offset", "c_ptrs = c_ptr + offs_cm[:, None] * stride_cm", (16352, 152064)),
        ("5", "int32_row_offset", "x = tl.load(x_ptr + row * stride_xm", (524287, 8192)),
        ("6", "int32_row_offset", "x_row_ptr = x_ptr + row * stride_xm", (16383, 152064)),
        ("7", "int32_row_offset", "x_row_ptr = x_ptr + row * stride_xm", (16383, 152064)),
        ("10a", "int32_row_offset", "y = tl.load(y_ptr + row * stride_ym", (524287, 8192)),
        ("8a", "int32_batch_offset", "q = tl.load(q_ptr + off_z * stride_qz", (8191, 524288)),
        ("13", "int32_page_offset", "kv_row = page * stride_kp", (262143, 16384)),
        ("15", "int32_page_offset", "k_rows = page * stride_kp", (262143, 16384)),
    ],
)
def test_an_int32_offset_that_wraps_is_found_at_its_line(number, wrong, line, worked, tmp_path):
    found, _ = probe_of(number, tmp_path, wrong)
    first = found[0]
    assert first["kind"] == "wrap" and first["op"] == "mul" and first["bits"] == 32, found
    assert first["text"].startswith(line) and (first["a"], first["b"]) == worked
    problem = judged(number, found)
    assert problem is not None and problem.rule == "offsets_fit"
    assert f"line {first['line']} of" in problem.message and line in problem.message
    assert "tl.int64" in problem.message and f"{worked[0]} * {worked[1]}" in problem.message


def test_a_grid_past_what_a_gpu_launches_is_found(tmp_path):
    found, _ = probe_of("8a", tmp_path, "batch_heads_on_axis_1")
    grid = [f for f in found if f["kind"] == "grid"]
    assert grid and grid[0]["axis"] == 1 and grid[0]["count"] == 8192 * 32
    problem = judged("8a", found)
    assert problem is not None and "262144 programs along axis 1" in problem.message


def test_a_function_that_raises_at_the_largest_sizes_is_told_so():
    found = largest_findings({"raised": "RuntimeError: no", "where": ["your code, line 3"]}, {}, get_puzzle("8a"),
                             {}, Tuning())  # fmt: skip
    problem = judged("8a", found)
    assert problem is not None and "raised RuntimeError: no (your code, line 3)" in problem.message
    stand_in = "ValueError: Expected a cuda device, but got: meta"  # get_device_properties(q.device), on the stand-in
    found = largest_findings({"raised": stand_in, "where": []}, {}, get_puzzle("8a"), {}, Tuning())
    assert judged("8a", found) is None


def test_what_the_host_makes_small_from_the_metadata_keeps_its_values(tmp_path):
    """A work list made `device=q.device` at the largest sizes is made with its values (the plan carries it), while
    a large allocation on that device stays without storage."""
    from checks.engine.record.largest import RealWhenSmall

    path = tmp_path / "host.py"
    path.write_text(
        "import torch\n\n\ndef make(q, pairs):\n"
        "    return torch.tensor(pairs, dtype=torch.int32, device=q.device), torch.empty_like(q), "
        "torch.empty((2**20, 2**12), device=q.device)\n"
    )
    module = load_module(path, "host_made")
    q = torch.empty((4, 64, 131072, 128), dtype=torch.float16, device="meta")
    with RealWhenSmall("cpu", {str(path.resolve()): path.name}):
        work, o, scratch = module.make(q, [[0, 1], [2, 3]])
        outside = torch.tensor([5], device=q.device)  # the grader's own code (here, the test's) is left alone
    assert work.device.type == "cpu" and work.tolist() == [[0, 1], [2, 3]]
    assert o.is_meta and scratch.is_meta and outside.is_meta


@pytest.mark.slow
@pytest.mark.exhaustive
@pytest.mark.parametrize(
    ("number", "wrong", "must", "must_not"),
    [
        (
            "8a",
            "int32_batch_offset",
            ["B=8192, H=32, N=128, D=128", "line 38 of `_attn_one_block`", "8191 * 524288", "tl.int64"],
            ["elements are wrong", "65535"],
        ),
        (
            "8a",
            "batch_heads_on_axis_1",
            ["262144 programs along axis 1", "65535", "axis 0"],
            ["wraps around", "elements are wrong"],
        ),
        (
            "5",
            "int32_row_offset",
            [
                "shape=[524288, 8192]: the attention probabilities",
                "line 25 of `_softmax_kernel`",
                "524287 * 8192",
                "row.to(tl.int64)",
            ],
            ["elements are wrong", "outside every tensor"],
        ),
        (
            "13",
            "int32_page_offset",
            ["262144 pages", "line 90 of `_attn_decode_split`", "262143 * 16384", "page.to(tl.int64)"],
            ["elements are wrong", "outside every tensor"],
        ),
    ],
)
def test_the_report_names_the_line_and_says_what_to_do(number, wrong, must, must_not, tmp_path):
    """Graded as `make check` grades it: the first case fails for offsets_fit, although its values are right."""
    from checks import verdict as V
    from checks.engine.grade import grade

    puzzle = get_puzzle(number)
    path = materialize(puzzle, puzzle.wrong_dir / f"{wrong}.edit.yaml", tmp_path)
    verdict = grade(puzzle, path, time_it=False, first_failure=True)
    report = V.format_verdict(verdict)
    assert verdict.rule == "offsets_fit" and not verdict.passed, report
    assert all(text in report for text in must), report
    assert not any(text in report for text in must_not), report
    assert verdict.cases[0].index == 0  # found with the first case, whose own values are right


KERNELS = """import triton
import triton.language as tl


@triton.jit
def strided(x_ptr, stride):
    pid = tl.program_id(0)
    tl.store(x_ptr + pid * stride + tl.arange(0, 16), tl.zeros((16,), tl.float32))


@triton.jit
def spin(x_ptr, n):
    i = 0
    while i < n:
        tl.load(x_ptr + i)
        i += 1


@triton.jit
def _walk(x_ptr, n, STEP: tl.constexpr):
    for start in tl.range(0, n, STEP):
        tl.load(x_ptr + start + tl.arange(0, STEP))


@triton.jit
def walk_in_a_helper(x_ptr, n):
    _walk(x_ptr, n, 16)
"""


def launch_plan(kernel: str, grid: list[int], numel: int, **scalars: int) -> dict:
    """A plan of one launch of `kernel` over a float32 input x of `numel` elements."""
    x = {"storage": "input:x", "dtype": "float32", "offset": 0, "shape": [numel], "strides": [1]}
    args = {"x_ptr": {"tensor": x}, **{name: {"scalar": value} for name, value in scalars.items()}}
    launch = {"grid": grid, "args": args, "options": {}}
    return {"ops": [{"op": "launch", "kernel": kernel, "where": "", "alternatives": [launch]}], "returned": []}


def test_the_probe_alone_finds_a_wrapped_product_and_says_where_a_loop_it_cannot_shorten_stopped_it(tmp_path):
    from checks.engine.replay.overflow import MAX_ACCESSES, probe

    compiler_arguments()
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    module = load_module(path, "probe_kernels")
    kernels = {"strided": jitted(module.strided), "spin": jitted(module.spin),
               "walk_in_a_helper": jitted(module.walk_in_a_helper)}  # fmt: skip
    files = {str(path.resolve()): path.name}
    numel = 40000 * 65536
    x = {"x": torch.empty(numel, dtype=torch.float32, device="meta")}
    found = probe(launch_plan("strided", [40000], numel, stride=65536), kernels, x, files, Tuning())
    assert [f["kind"] for f in found] == ["wrap", "outside"]
    assert (found[0]["a"], found[0]["b"], found[0]["program"]) == (39999, 65536, [39999, 0, 0])
    assert found[0]["line"] == 8 and found[0]["text"].startswith("tl.store(x_ptr + pid * stride")
    fits = probe(launch_plan("strided", [30000], numel, stride=65536), kernels, x, files, Tuning())
    assert fits == []  # 29999 * 65536 < 2^31
    start = time.perf_counter()
    spent = probe(launch_plan("spin", [1], numel, n=numel), kernels, x, files, Tuning())
    assert time.perf_counter() - start < 5.0 and MAX_ACCESSES < numel
    # where it stopped is a finding, not a silent pass: what runs after it was not checked
    assert [(f["kind"], f["kernel"], f["line"]) for f in spent] == [("spent", "spin", 15)], spent  # its load
    # a `tl.range` loop in a @triton.jit helper (which the interpreter patches anew at each call) runs its ends only
    assert probe(launch_plan("walk_in_a_helper", [1], numel, n=numel), kernels, x, files, Tuning()) == []
