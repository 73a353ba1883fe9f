"""The benchmark: its plan and targets read from puzzles.yaml, its writers fed with made-up rows, a smoke run."""

from __future__ import annotations

import csv
import inspect
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from checks.authoring.wrong import EDIT_SUFFIX, materialize
from checks.bench_results import ANSWER_KEY, CSV_COLUMNS, Row, read_csv, write_data
from checks.engine.judging.rules import rulebook
from checks.engine.timing import Peaks, roofline_share
from checks.instructor import bench
from checks.instructor.bench import write_outputs
from checks.instructor.bench_report import Target, evaluate, markdown_report
from checks.registry import ROOT, case_from, get_puzzle, load_puzzles

PEAKS = Peaks(copy_gbps=3000.0, matmul_tflops=700.0, matmul_side=8192)
META = {
    "gpu": "NVIDIA H100 80GB HBM3",
    "torch": "2.11.0",
    "triton": "3.6.0",
    "cuda": "12.8",
    "date": "2026-01-02 03:04 UTC",
    "command": "python -m checks.instructor.bench",
    "peaks": {"copy_gbps": 3000.0, "matmul_tflops": 700.0, "matmul_side": 8192},
    "notes": ["a note"],
}
BENCHED = [p for p in load_puzzles() if p.sweep]
VARIANTS = [(p, label, path) for p in BENCHED for label, path in bench.variant_files(p).items()]


def attention_flops(n: int, d: int, causal: bool, backward: bool = False) -> float:
    return 4.0 * 4 * 32 * n * n * d / (2 if causal else 1) * (2.5 if backward else 1)


def goals() -> dict[tuple[str, str], tuple]:
    """(label, requirement) -> the target's verdict on the made-up rows."""
    return {(t.label, t.requirement): evaluate(t, fake_rows()) for p in BENCHED for t in bench.targets(p)}


def fake_rows() -> list[Row]:
    n, fa, fa_causal = 1 << 28, attention_flops(16384, 64, False), attention_flops(16384, 64, True)
    rows = [
        # vector add: 3.2 GB in 1.1 ms against torch's 1.0 ms -> 0.909x, below the 0.95x target
        Row(
            "1",
            "vector_add",
            "fp32",
            "n=2^28",
            n,
            key_ms=1.1,
            baseline="torch.add",
            baseline_ms=1.0,
            bytes=12.0 * n,
            check="ok",
        ),
        Row(
            "1",
            "vector_add",
            "fp32",
            "n=2^24",
            1 << 24,
            key_ms=0.08,
            baseline="torch.add",
            baseline_ms=0.08,
            bytes=12.0 * (1 << 24),
            check="ok",
        ),
        # matmul_fast: 0.19 ms against cuBLAS 0.18 ms -> 0.947x, meets the 0.8x speed bar
        Row(
            "4",
            "matmul_fast",
            "fp16",
            "4096x4096x4096",
            4096,
            key_ms=0.19,
            baseline="torch.matmul",
            baseline_ms=0.18,
            bytes=6.0 * 4096**2,
            flops=2.0 * 4096**3,
            check="ok",
        ),
        Row("4", "matmul_fast", "fp16", "1024x1024x1024", 1024, status="failed: out of memory"),
        # FA2 forward D=64: 430 TFLOPS; the default SDPA 0.9x its time, SDPA's flash backend 1.6x
        Row(
            "9",
            "flash_attention_v2_fwd",
            "D=64",
            "N=16384",
            16384,
            key_ms=fa / 430e9,
            baseline="scaled_dot_product_attention",
            baseline_ms=0.9 * fa / 430e9,
            bytes=1e9,
            flops=fa,
            check="ok",
            others={"sdpa flash": 1.6 * fa / 430e9},
        ),
        Row(
            "9",
            "flash_attention_v2_fwd",
            "D=64 causal",
            "N=16384",
            16384,
            key_ms=fa_causal / 380e9,
            baseline="scaled_dot_product_attention",
            baseline_ms=fa_causal / 380e9,
            bytes=1e9,
            flops=fa_causal,
            check="ok",
            others={"sdpa flash": 1.2 * fa_causal / 380e9},
        ),
        Row(
            "8",
            "flash_attention_v1",
            "D=64",
            "N=16384",
            16384,
            key_ms=fa / 200e9,
            baseline="scaled_dot_product_attention",
            baseline_ms=fa / 300e9,
            bytes=1e9,
            flops=fa,
            check="ok",
        ),
        Row(
            "10",
            "flash_attention_v2_bwd",
            "D=64 causal",
            "N=4096",
            4096,
            key_ms=2.0,
            baseline="scaled_dot_product_attention",
            baseline_ms=2.2,
            bytes=1e9,
            flops=attention_flops(4096, 64, True, backward=True),
            check="ok",
            others={"sdpa cudnn": 1.5},
        ),  # 0.75x
        # the atomic-dQ variant of the backward at the same point, timed against the answer key: 2.0 / 1.6 = 1.25x
        Row(
            "10",
            "flash_attention_v2_bwd",
            "D=64 causal",
            "N=4096",
            4096,
            key_ms=1.6,
            baseline=ANSWER_KEY,
            baseline_ms=2.0,
            bytes=1e9,
            flops=attention_flops(4096, 64, True, backward=True),
            check="ok",
            variant="atomic dQ",
        ),
    ]
    for row in rows:
        if row.ok:
            row.roofline = roofline_share(row.bytes, row.flops, row.key_ms, PEAKS)
    return rows


def test_row_arithmetic():
    rows = fake_rows()
    assert rows[0].ratio == pytest.approx(1.0 / 1.1)
    assert rows[0].metric == "GB/s" and rows[0].key_rate == pytest.approx(12 * 2**28 / 1.1e6)
    assert rows[2].metric == "TFLOPS" and rows[2].key_rate == pytest.approx(2 * 4096**3 / 0.19e9)
    assert not rows[3].ok and rows[3].ratio is None and rows[3].key_rate is None
    assert rows[4].ratio == pytest.approx(0.9) and rows[4].ratio_to("sdpa flash") == pytest.approx(1.6)
    assert rows[4].ratio_to("sdpa cudnn") is None


@pytest.mark.parametrize("puzzle", BENCHED, ids=lambda p: str(p.number))
def test_plan_comes_from_the_registry(puzzle):
    sweep = puzzle.sweep
    full, quick, smoke = (bench.plan(puzzle, mode) for mode in ("full", "quick", "smoke"))
    assert len(full) == len(sweep.series) * len(sweep.sizes) * (1 + len(sweep.variants))
    assert {p["series"] for p in full} == set(sweep.series) and {p["size"] for p in full} == set(sweep.sizes)
    assert 0 < len(quick) <= len(full) and {p["size"] for p in smoke} == set(sweep.smoke)
    assert sum(p["timing"] for p in full) >= 1, "the grader's timing case is one of the sweep's points"
    assert all(p["x"] > 0 for p in full + smoke) and sweep.plot and sweep.x_label and sweep.cap_s > 0
    firsts = [p["first"] for p in full]
    assert firsts == sorted(firsts, reverse=True), "the points a target needs come first"


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
def test_every_target_is_planned_first(quick):
    for puzzle in BENCHED:
        planned = {
            (p["series"], p["size"]): p for p in bench.plan(puzzle, "quick" if quick else "full") if not p["variant"]
        }
        for target in bench.targets(puzzle):
            assert planned[(target.series, target.size)]["first"], target.label


def test_plan_times_each_variant_as_its_own_series():
    """A sweep's variants: every (series, size) of the answer key once more per variant, after the answer key's."""
    puzzle = get_puzzle(10)
    assert bench.variant_files(puzzle) == {"atomic dQ": ROOT / "solutions" / "variants" / "10_atomic_dq.py"}
    for mode in ("full", "quick", "smoke"):
        points = bench.plan(puzzle, mode)
        key = [(p["series"], p["size"], p["x"]) for p in points if not p["variant"]]
        variant = [(p["series"], p["size"], p["x"]) for p in points if p["variant"] == "atomic dQ"]
        assert variant and sorted(variant) == sorted(key), mode
        assert {p["variant"] for p in points} == {"", "atomic dQ"}
        first_variant = next(i for i, p in enumerate(points) if p["variant"])
        assert all(p["variant"] for p in points[first_variant:]), "a variant's points come after the answer key's"
        assert not any(p["timing"] or p["first"] for p in points if p["variant"]), "targets are the answer key's"


@pytest.mark.parametrize(("puzzle", "label", "path"), VARIANTS, ids=lambda v: getattr(v, "number", str(v)))
def test_a_variant_file_defines_the_puzzle_function(puzzle, label, path, tmp_path):
    assert path.is_file(), label
    if path.name.endswith(EDIT_SUFFIX):  # a known-wrong kernel of this puzzle, kept as an edit of its answer key
        assert path.parent == puzzle.wrong_dir, label
        path = materialize(puzzle, path, tmp_path)
    else:
        assert path.is_relative_to(ROOT / "solutions" / "variants"), label
    assert f"def {puzzle.name}(" in path.read_text(encoding="utf-8")


# the rules a variant that computes the right values another way may break: how, never what (a puzzle asks for them)
METHOD_RULES = rulebook.names(applies=rulebook.ON_REQUEST)


# graded again here only by `make test-all`: a variant kept as a known-wrong kernel's edit (graded in `make test` as
# that kernel, tests/test_answer_key.py), 10's atomic dQ (the right-answer style 10_one_kernel_atomic_dq) and 4's
# tensor descriptors (9's tensor-descriptor variant passes here)
COVERED_ELSEWHERE = {"10_atomic_dq.py", "04_tensor_descriptors.py"}
GRADED_VARIANTS = [
    pytest.param(
        *v,
        marks=pytest.mark.exhaustive if v[2].name.endswith(EDIT_SUFFIX) or v[2].name in COVERED_ELSEWHERE else (),
    )
    for v in VARIANTS
]


@pytest.mark.slow
@pytest.mark.parametrize(("puzzle", "label", "path"), GRADED_VARIANTS, ids=lambda v: getattr(v, "number", str(v)))
def test_a_variant_passes_the_grader_or_breaks_only_a_method_rule(puzzle, label, path, tmp_path):
    """A variant is timed as another right answer to its puzzle: it passes the grader, or (a known-wrong
    kernel kept to show what a method buys) computes every value right and breaks only a method rule."""
    from checks.engine.grade import grade
    from checks.verdict import format_verdict

    wrong = path.name.endswith(EDIT_SUFFIX)
    graded = materialize(puzzle, path, tmp_path) if wrong else path
    verdict = grade(puzzle, graded, time_it=False)
    if wrong:
        assert verdict.rule in METHOD_RULES, f"{label}:\n{format_verdict(verdict)}"
        assert all(c.passed or c.rule in METHOD_RULES for c in verdict.cases), f"{label}:\n{format_verdict(verdict)}"
    else:
        assert verdict.passed, f"{label}:\n{format_verdict(verdict)}"


def test_a_variant_kept_as_an_edit_is_loaded_as_the_edited_answer_key():
    puzzle = get_puzzle(4)
    path = bench.variant_files(puzzle)["row-major order"]
    fn = bench.load_variant(puzzle, path, "variant_test_04")
    source = Path(inspect.getsourcefile(fn)).read_text(encoding="utf-8")
    assert fn.__name__ == puzzle.name and "pid_m = pid // num_pid_n" in source


def test_plan_sizes():
    assert bench.plan(get_puzzle(1))[0]["x"] == 1 << 28 and bench.plan(get_puzzle(1))[0]["case"] == {"n": 1 << 28}
    assert {p["case"]["D"] for p in bench.plan(get_puzzle(9))} == {64, 128}
    assert {p["case"]["causal"] for p in bench.plan(get_puzzle(10))} == {False, True}
    assert {p["size"] for p in bench.plan(get_puzzle(4))} >= {"4096x4096x4096", "8192x8192x8192"}
    assert {p["x"] for p in bench.plan(get_puzzle(2))} == {s * s for s in (1024, 2048, 4096, 8192)}
    assert bench.plan(get_puzzle(5), "smoke")[0]["case"] == {"dtype": "float32", "shape": [8, 100]}


def test_one_speed_bar_per_puzzle():
    """A puzzle's speed_bar is its benchmark's ratio target, at the grader's timing case."""
    for puzzle in BENCHED:
        bars = [t for t in bench.targets(puzzle) if t.label.endswith("(speed_bar)")]
        assert len(bars) == (1 if puzzle.speed_bar else 0)
        for bar in bars:
            assert bar.kind == "ratio" and bar.value == puzzle.speed_bar.min_ratio and bar.size == "4096x4096x4096"


def test_targets_are_judged_from_the_rows():
    verdicts = goals()
    assert verdicts[("Vector add, fp32, n=2^28", ">= 0.95x")][1:] == ("0.91x torch.add", "missed")
    speed_bar = ("Fast matmul (grouped launch order, autotune), fp16, 4096x4096x4096 (speed_bar)", ">= 0.8x")
    assert verdicts[speed_bar][2] == "met"
    matmul = ("Fast matmul (grouped launch order, autotune), fp16, 4096x4096x4096", ">= 1x")
    assert verdicts[matmul][1:] == ("0.95x torch.matmul", "missed")  # the same row: 0.8x met, 1x missed
    assert verdicts[("FlashAttention-2 forward, D=64, N=16384", ">= 1.5x sdpa flash")][1:] == (
        "1.60x sdpa flash",
        "met",
    )
    assert verdicts[("FlashAttention-2 forward, D=64 causal, N=16384", ">= 1.5x sdpa flash")][2] == "missed"
    assert verdicts[("FlashAttention-2 forward, D=128, N=16384", ">= 1.5x sdpa flash")][2] == "not measured"
    rate = Target("FA2 D=64 rate", "9", "D=64", "N=16384", "tflops", 424.0)  # a rate target, as puzzles.yaml allows
    assert evaluate(rate, fake_rows()) == ("430.0 TFLOPS", "0.90x scaled_dot_product_attention", "met")
    assert evaluate(replace(rate, value=440.0), fake_rows())[2] == "missed"
    assert fake_rows()[-1].ratio == pytest.approx(1.25), "a variant's ratio: the answer key's time over its own"


def test_csv_holds_the_numbers(tmp_path):
    rows = fake_rows()
    path = write_data(rows, META, tmp_path)
    with open(path, newline="", encoding="utf-8") as f:
        records = list(csv.DictReader(f))
    assert len(records) == len(rows) and list(records[0]) == CSV_COLUMNS
    first = records[0]
    assert (first["puzzle"], first["series"], first["size"], first["status"]) == ("1", "fp32", "n=2^28", "ok")
    assert float(first["key_ms"]) == pytest.approx(1.1) and float(first["ratio"]) == pytest.approx(1 / 1.1, rel=1e-3)
    assert float(first["key_rate"]) == pytest.approx(12 * 2**28 / 1.1e6, rel=1e-4)
    assert float(first["roofline"]) == pytest.approx(12 * 2**28 / 3e9 / 1.1, rel=1e-2)
    assert records[3]["status"] == "failed: out of memory" and records[3]["key_ms"] == records[3]["ratio"] == ""
    again = read_csv(path)
    assert [(r.puzzle, r.series, r.size, r.status) for r in again] == [
        (r.puzzle, r.series, r.size, r.status) for r in rows
    ]
    assert again[4].others == pytest.approx(rows[4].others, rel=1e-5) and again[0].key_ms == pytest.approx(1.1)
    assert [r.variant for r in again] == [""] * (len(rows) - 1) + ["atomic dQ"] and again[-1].baseline == ANSWER_KEY
    assert records[-1]["variant"] == "atomic dQ" and records[0]["variant"] == ""


def test_a_csv_without_the_variant_column_reads_as_answer_keys(tmp_path):
    path = write_data(fake_rows()[:2], META, tmp_path)
    with open(path, newline="", encoding="utf-8") as f:
        records = list(csv.DictReader(f))
    with open(path, "w", newline="", encoding="utf-8") as f:  # as written before the column existed
        writer = csv.DictWriter(f, fieldnames=[c for c in CSV_COLUMNS if c != "variant"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)
    assert [(r.series, r.size, r.variant) for r in read_csv(path)] == [("fp32", "n=2^28", ""), ("fp32", "n=2^24", "")]


@pytest.mark.slow
def test_plots_are_pngs(tmp_path):
    (tmp_path / "matrix_add.png").write_bytes(b"stale")  # drawn from rows no longer there
    written = bench.write_outputs(fake_rows(), META, tmp_path, [])["plots"]
    assert sorted(p.stem for p in written) == ["attention_bwd", "attention_fwd", "matmul", "vector_add"]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    assert not (tmp_path / "matrix_add.png").exists()


def test_markdown_report():
    targets = [t for p in BENCHED for t in bench.targets(p)]
    text = markdown_report(fake_rows(), META, ["bench/vector_add.png"], targets)
    for fact in ("NVIDIA H100 80GB HBM3", "2.11.0", "3.6.0", "12.8", "2026-01-02 03:04 UTC", "3000 GB/s", "700 TFLOPS"):
        assert fact in text
    assert "| Vector add, fp32, n=2^28 | >= 0.95x | 2928.4 GB/s | 0.91x torch.add | missed |" in text
    assert "| FlashAttention-2 forward, D=128 causal, N=16384 | >= 1.5x sdpa flash | - | - | not measured |" in text
    assert "2 of 27 targets met." in text  # the speed bar and FA2 D=64 against SDPA flash
    failed = "| 4 | matmul_fast | fp16 | 1024x1024x1024 |" + " - |" * 10 + " failed: out of memory |"
    assert failed in text and "sdpa cudnn 0.75x" in text
    variant = "| 10 | flash_attention_v2_bwd, variant: atomic dQ | D=64 causal | N=4096 | 1.6000 | answer key |"
    assert variant + " 2.0000 | 1.25x |" in text
    assert "![vector add](bench/vector_add.png)" in text and "- a note" in text


@pytest.mark.slow
def test_write_outputs_puts_everything_in_the_run_folder(tmp_path):
    run = tmp_path / "run"
    assert write_data(fake_rows(), META, run) == run / "results.csv"
    (run / "notes.md").write_text("What this run shows.")
    written = write_outputs(fake_rows(), META, run, [])
    assert written["markdown"] == run / "BENCHMARKS.md"
    text = written["markdown"].read_text(encoding="utf-8")
    assert "](matmul.png)" in text and "## Reading these figures\n\nWhat this run shows." in text
    assert all(p.parent == run for p in written["plots"])
    elsewhere = write_outputs(fake_rows(), META, run, [], report=tmp_path / "BENCHMARKS.md")["markdown"]
    assert "](run/matmul.png)" in elsewhere.read_text(encoding="utf-8")


def test_a_run_under_bench_results_reports_to_the_course_root(tmp_path):
    """BENCHMARKS.md of a run folder under bench/results/ is the course root's, its plots linked from there."""
    from checks.bench_results import RESULTS

    assert bench.report_path(RESULTS / "2026-01-02-h100-make-bench") == ROOT / "BENCHMARKS.md"
    assert bench.report_path(tmp_path) == tmp_path / "BENCHMARKS.md"
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    plots = re.findall(r"!\[[^]]*\]\(([^)]+)\)", text)
    assert plots and all((ROOT / p).exists() and p.startswith("bench/results/") for p in plots), plots


def test_the_recorded_run_is_the_newest_whole_make_bench_run(tmp_path):
    from checks.bench_results import RESULTS, recorded_run, run_folder_name

    for name in ("2026-01-01-h100-make-bench", "2026-01-03-h200-make-bench-only-9", "2026-01-02-h100-make-bench-b",
                 "2026-01-04-h100-tutorial06", "2026-01-05-h100-make-bench"):  # fmt: skip
        (tmp_path / name).mkdir()
        if name != "2026-01-05-h100-make-bench":  # a folder without results.csv is no run
            (tmp_path / name / "results.csv").write_text("puzzle\n")
    assert recorded_run(tmp_path).name == "2026-01-02-h100-make-bench-b"
    assert recorded_run().parent == RESULTS and (recorded_run() / "meta.json").exists()
    with pytest.raises(FileNotFoundError):
        recorded_run(tmp_path / "2026-01-05-h100-make-bench")
    assert run_folder_name("2026-01-02", "NVIDIA H100 80GB HBM3", "make-bench") == "2026-01-02-h100-make-bench"
    taken = {"2026-01-02-h100-make-bench"}
    assert run_folder_name("2026-01-02", "NVIDIA H100 80GB HBM3", "make-bench", taken) == "2026-01-02-h100-make-bench-b"


def test_without_cuda_it_says_so_and_exits_1(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench.main([]) == 1
    out = capsys.readouterr()
    assert out.err.strip() == bench.NO_GPU and out.out == "" and "needs a CUDA GPU" in bench.NO_GPU


@pytest.mark.slow
def test_render_redraws_the_recorded_run(tmp_path):
    """The committed run (results.csv and meta.json of the recorded run) still renders, with its GPU and verdicts."""
    from checks.bench_results import recorded_run

    record = recorded_run()
    recorded = (record / "results.csv").read_bytes()
    (tmp_path / "notes.md").write_text((record / "notes.md").read_text(encoding="utf-8"), encoding="utf-8")
    assert bench.main(["--render", str(record), "--out", str(tmp_path)]) == 0
    assert (record / "results.csv").read_bytes() == recorded, "--render measures and writes no data"
    text = (tmp_path / "BENCHMARKS.md").read_text(encoding="utf-8")
    gpu = json.loads((record / "meta.json").read_text(encoding="utf-8"))["gpu"]
    assert gpu in text and re.search(r"\b\d+ of \d+ targets met\.", text) and "## Reading these figures" in text
    assert (tmp_path / "attention_fwd.png").exists()
    assert bench.main(["--render", str(tmp_path / "nothing")]) == 2


@pytest.mark.slow
def test_smoke_run_end_to_end(tmp_path):
    """The whole pipeline (the puzzle's process, spec inputs and baseline, answer key, writers) on vector add."""
    assert bench.main(["--smoke", "--only", "1", "--out", str(tmp_path)]) == 0
    rows = read_csv(tmp_path / "results.csv")
    assert [(r.puzzle, r.size, r.status, r.check) for r in rows] == [("1", "n=3000", "ok", "ok")]
    assert rows[0].key_ms > 0 and rows[0].baseline_ms > 0 and rows[0].bytes == 3 * 3000 * 4
    assert "--smoke" in (tmp_path / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert (tmp_path / "vector_add.png").exists()


STAND_IN_TUTORIAL = """
import torch


def attention(q, k, v, causal, sm_scale, warp_specialize=True):
    if warp_specialize and causal:
        raise RuntimeError("PassManager::run failed")
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm_scale)
"""


@pytest.mark.slow
def test_a_tutorial_file_adds_its_forward_and_backward_as_baselines(tmp_path):
    """`--tutorial`: the file's attention() timed per warp-specialisation setting that ran, beside 9 and 10."""
    import torch

    from checks.instructor import tutorial
    from checks.memory import Arena

    (path := tmp_path / "06-fused-attention.py").write_text(STAND_IN_TUTORIAL, encoding="utf-8")
    module = tutorial.load(path)
    assert tutorial.describe(path).startswith("06-fused-attention.py (sha256 ")
    puzzle, case = get_puzzle("9"), {"B": 1, "H": 2, "N": 32, "D": 16, "causal": False}
    inputs = bench.spec_module(puzzle).make_inputs(case_from(case), Arena("cpu", torch.Generator().manual_seed(0)))
    shape = bench.tutorial_shape(case)
    assert set(tutorial.forward_calls(module, inputs, {(shape, False)})) == {"tutorial 06"}
    assert set(tutorial.forward_calls(module, inputs, {(shape, False), (shape, True)})) == set(tutorial.FORWARD)
    expected = torch.nn.functional.scaled_dot_product_attention(
        inputs["q"].float(), inputs["k"].float(), inputs["v"].float(), scale=inputs["sm_scale"]
    )
    assert torch.allclose(tutorial.forward_calls(module, inputs)["tutorial 06"]().float(), expected, atol=1e-2)
    point = {"variant": "", "series": "D=16", "size": "N=32", "x": 32.0, "case": case}
    key = getattr(bench.load_module(puzzle.solution, "tutorial_test_key"), puzzle.name)
    row = bench.measure(point, puzzle, {"": key}, "cpu", (module, {(shape, False)}))
    assert row.status == "ok" and row.check == "ok" and row.others["tutorial 06"] > 0
    assert "tutorial 06 ws" not in row.others and row.ratio_to("tutorial 06") > 0

    backward = get_puzzle("10")
    grads = bench.spec_module(backward).make_inputs(case_from(case), Arena("cpu", torch.Generator().manual_seed(0)))
    assert tutorial.backward_calls(module, grads, set()) == {}
    (dq, dk, dv) = tutorial.backward_calls(module, grads)["tutorial 06"]()
    assert dq.shape == dk.shape == dv.shape == grads["q"].shape

    (other := tmp_path / "not_the_tutorial.py").write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="is it tutorial 06"):
        tutorial.load(other)
    assert bench.main(["--tutorial", str(tmp_path / "missing.py"), "--smoke", "--only", "9"]) == 2


def test_a_baseline_that_runs_out_of_memory_leaves_the_row_and_the_other_baselines(monkeypatch):
    import torch

    puzzle = get_puzzle("1")
    spec = bench.spec_module(puzzle)

    def too_big() -> None:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB")

    monkeypatch.setattr(spec, "baselines", lambda inputs: {"too big": too_big, "fits": lambda: None}, raising=False)
    point = {"variant": "", "series": "fp32", "size": "n=3000", "x": 3000.0, "case": {"n": 3000}}
    key = getattr(bench.load_module(puzzle.solution, "oom_test_key"), puzzle.name)
    row = bench.measure(point, puzzle, {"": key}, "cpu")
    assert row.status == "ok" and row.key_ms and row.ratio  # the answer key and the grader's baseline: measured
    assert set(row.others) == {"fits"} and row.check == "ok (too big: out of memory)"


def _merge_run_module():
    from bench import merge_run

    return merge_run


def _write_run(folder: Path, rows: list[dict], meta: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "results.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["puzzle", "variant", "size", "key_ms"])
        writer.writeheader()
        writer.writerows(rows)
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")


@pytest.mark.parametrize("variant", [None, "tensor descriptors"])
def test_a_later_run_replaces_the_rows_it_measured_in_place(tmp_path, variant):
    """merge-run: the later run's rows of a puzzle (or of one variant) replace the earlier ones where they
    stood, the rest stay, and meta.json says which run each merged (puzzle, variant) came from."""
    merge_run = _merge_run_module()
    earlier = [
        {"puzzle": "8", "variant": "", "size": "N=1024", "key_ms": "1.0"},
        {"puzzle": "9", "variant": "", "size": "N=1024", "key_ms": "2.0"},
        {"puzzle": "9", "variant": "tensor descriptors", "size": "N=1024", "key_ms": "3.0"},
        {"puzzle": "10", "variant": "", "size": "N=1024", "key_ms": "4.0"},
    ]
    later = [
        {"puzzle": "9", "variant": "", "size": "N=4096", "key_ms": "20.0"},
        {"puzzle": "9", "variant": "tensor descriptors", "size": "N=4096", "key_ms": "30.0"},
    ]
    _write_run(tmp_path / "bench", earlier, {"gpu": "first", "notes": []})
    _write_run(tmp_path / "run", later, {"gpu": "later", "date": "today", "notes": ["about every row of the run"]})
    assert merge_run.merge(tmp_path / "run", tmp_path / "bench", variant=variant) == ["9"]
    with open(tmp_path / "bench" / "results.csv", newline="", encoding="utf-8") as f:
        merged = [(r["puzzle"], r["variant"], r["key_ms"]) for r in csv.DictReader(f)]
    if variant is None:
        assert merged == [("8", "", "1.0"), ("9", "", "20.0"), ("9", "tensor descriptors", "30.0"), ("10", "", "4.0")]
    else:
        assert merged == [("8", "", "1.0"), ("9", "", "2.0"), ("9", "tensor descriptors", "30.0"), ("10", "", "4.0")]
    meta = json.loads((tmp_path / "bench" / "meta.json").read_text(encoding="utf-8"))
    assert meta["gpu"] == "first"
    runs = {(r["puzzle"], r["variant"]): r["gpu"] for r in meta["merged"]}
    assert runs == (
        {("9", ""): "later", ("9", "tensor descriptors"): "later"}
        if variant is None
        else {("9", "tensor descriptors"): "later"}
    )
    # the later run's own notes speak of all its rows: kept only when all its rows of the puzzle came in
    assert ("about every row of the run" in meta["notes"]) == (variant is None)


def test_a_series_has_one_colour_in_every_panel_of_a_plot(tmp_path, monkeypatch):
    from matplotlib.axes import Axes

    drawn: dict[tuple[int, str], set[str]] = {}
    figures = []  # held, so that no two plots share an id
    plot = Axes.plot

    def recording(self, *args, **kwargs):
        figures.append(self.figure)
        drawn.setdefault((id(self.figure), kwargs.get("label")), set()).add(kwargs.get("color"))
        return plot(self, *args, **kwargs)

    monkeypatch.setattr(Axes, "plot", recording)
    bench.write_outputs(fake_rows(), META, tmp_path, [])
    assert drawn and all(len(colours) == 1 for colours in drawn.values()), drawn
    assert len(drawn) > 4  # several series, some of them in some panels only (8's line is not in the causal ones)


def test_the_decoding_sweeps_time_graph_replays_and_keep_the_python_call_beside_them(tmp_path):
    """bench.sweep.graphs: on a GPU, every call a CUDA graph's replay (kernel time) and the key without a graph in
    call_ms; results.csv carries call_ms back, and the figures' hash of a row does not depend on it."""
    from checks.bench_results import csv_record

    assert all(get_puzzle(p).sweep.graphs for p in ("11", "12", "13"))
    assert not get_puzzle("9").sweep.graphs
    timed = Row("12", "gqa_decoding", "B=1", "N=4096", 4096.0, key_ms=0.015, baseline="sdpa", baseline_ms=0.017,
                call_ms=0.105)  # fmt: skip
    plain = Row("12", "gqa_decoding", "B=1", "N=4096", 4096.0, key_ms=0.015, baseline="sdpa", baseline_ms=0.017)
    assert csv_record(timed) == csv_record(plain)
    path = write_data([timed, plain], {}, tmp_path)
    back = read_csv(path)
    assert back[0].call_ms == pytest.approx(0.105) and back[1].call_ms is None
