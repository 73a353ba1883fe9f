"""The benchmark's writers, fed with made-up rows, and its refusal to run without a GPU."""

from __future__ import annotations

import csv

import pytest

from checks import bench
from checks.bench import TARGETS, Row, attention_flops, evaluate, format_table, markdown_report, plan
from checks.registry import get_puzzle
from checks.timing import Peaks

PEAKS = Peaks(copy_gbps=3000.0, matmul_tflops=700.0, matmul_side=8192)
META = {"gpu": "NVIDIA H100 80GB HBM3", "torch": "2.11.0", "triton": "3.6.0", "cuda": "12.8",
        "date": "2026-01-02 03:04 UTC", "command": "python -m checks.bench",
        "peaks": {"copy_gbps": 3000.0, "matmul_tflops": 700.0, "matmul_side": 8192}, "notes": ["a note"]}


def fake_rows() -> list[Row]:
    n = 1 << 28
    fa = attention_flops(4, 32, 16384, 64, causal=False)
    fa_causal = attention_flops(4, 32, 16384, 64, causal=True)
    rows = [
        # vector add: 3.2 GB in 1.1 ms against torch's 1.0 ms -> 0.909x, below the 0.95x target
        Row(1, "vector_add", "fp32", "n=2^28", n, key_ms=1.1, baseline="torch.add", baseline_ms=1.0,
            bytes=12.0 * n, check="ok"),
        Row(1, "vector_add", "fp32", "n=2^24", 1 << 24, key_ms=0.08, baseline="torch.add", baseline_ms=0.08,
            bytes=12.0 * (1 << 24), check="ok"),
        # matmul_fast: 0.19 ms against cuBLAS 0.18 ms -> 0.947x, meets 0.9x
        Row(4, "matmul_fast", "fp16", "4096x4096x4096", 4096, key_ms=0.19, baseline="torch.matmul",
            baseline_ms=0.18, bytes=6.0 * 4096**2, flops=2.0 * 4096**3, check="ok"),
        Row(4, "matmul_fast", "fp16", "1024x1024x1024", 1024, status="failed: out of memory"),
        # FA2 forward D=64: fa / 2.5 ms -> TFLOPS; SDPA 3.5 ms -> 1.4x
        Row(9, "flash_attention_v2_fwd", "D=64", "N=16384", 16384, key_ms=fa / 430e9, baseline="sdpa flash",
            baseline_ms=1.4 * fa / 430e9, bytes=1e9, flops=fa, check="ok"),
        Row(9, "flash_attention_v2_fwd", "D=64 causal", "N=16384", 16384, key_ms=fa_causal / 380e9,
            baseline="sdpa flash", baseline_ms=1.2 * fa_causal / 380e9, bytes=1e9, flops=fa_causal, check="ok"),
        Row(8, "flash_attention_v1", "D=64", "N=16384", 16384, key_ms=fa / 200e9, baseline="sdpa flash",
            baseline_ms=fa / 300e9, bytes=1e9, flops=fa, check="ok"),
        Row(10, "flash_attention_v2_bwd", "D=64 causal", "N=4096", 4096, key_ms=2.0, baseline="sdpa flash",
            baseline_ms=2.2, bytes=1e9, flops=attention_flops(4, 32, 4096, 64, True, backward=True), check="ok"),
    ]
    for row in rows:
        if row.ok:
            row.roofline = bench.roofline_share(row.bytes, row.flops, row.key_ms, PEAKS)
    return rows


def test_attention_flops():
    assert attention_flops(4, 32, 1024, 64, causal=False) == 4 * 4 * 32 * 1024**2 * 64
    assert attention_flops(4, 32, 1024, 64, causal=True) == 2 * 4 * 32 * 1024**2 * 64
    assert attention_flops(1, 1, 10, 16, causal=True, backward=True) == pytest.approx(2.5 * 2 * 100 * 16)


def test_row_arithmetic():
    row = fake_rows()[0]
    assert row.ratio == pytest.approx(1.0 / 1.1)
    assert row.metric == "GB/s" and row.key_rate == pytest.approx(12 * 2**28 / 1.1e6)
    assert fake_rows()[2].metric == "TFLOPS" and fake_rows()[2].key_rate == pytest.approx(2 * 4096**3 / 0.19e9)
    failed = fake_rows()[3]
    assert not failed.ok and failed.ratio is None and failed.key_rate is None


def test_targets_are_judged_from_the_rows():
    rows = fake_rows()
    verdicts = {t.label: evaluate(t, rows) for t in TARGETS}
    assert verdicts["vector add vs torch.add, 2^28 fp32"][1:] == ("0.91x torch.add", "missed")
    assert verdicts["matmul_fast vs cuBLAS, 4096^3 fp16"][2] == "met"
    measured, ratio, met = verdicts["FA2 forward, N=16384, D=64"]
    assert measured == "430.0 TFLOPS" and ratio == "1.40x sdpa flash" and met == "met"
    assert verdicts["FA2 forward vs SDPA flash, N=16384, D=64"][2] == "met"  # 1.4x >= 1.3x
    assert verdicts["FA2 forward causal, N=16384, D=64"][2] == "missed"  # 380 < 391
    assert verdicts["FA2 forward causal vs SDPA flash, N=16384, D=64"][2] == "missed"  # 1.2x < 1.3x
    assert verdicts["FA2 forward, N=16384, D=128"][2] == "not measured"
    assert verdicts["FA2 backward causal vs SDPA flash, N=16384, D=64"][2] == "not measured"


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
def test_every_target_size_is_planned_first(quick):
    for target in TARGETS:
        points = plan(target.puzzle, quick)
        matching = [p for p in points if (p.series, p.size) == (target.series, target.size)]
        assert matching, f"{target.label}: no planned point {target.series} {target.size}"
        assert matching[0].target
        first_other = next((i for i, p in enumerate(points) if not p.target), len(points))
        assert points.index(matching[0]) < first_other


def test_plan_sizes():
    assert max(p.x for p in plan(1)) == 1 << 28 and plan(1)[0].x == 1 << 28
    assert {p.params["D"] for p in plan(9)} == {64, 128}
    assert {p.params["causal"] for p in plan(10)} == {True}
    assert {p.params["causal"] for p in plan(8)} == {False}
    assert max(p.params["N"] for p in plan(9)) == 16384 and min(p.params["N"] for p in plan(9)) == 1024
    assert len(plan(9, quick=True)) < len(plan(9))


def test_csv_holds_the_numbers(tmp_path):
    rows = fake_rows()
    path = bench.write_csv(rows, tmp_path / "bench" / "results.csv")
    with open(path, newline="", encoding="utf-8") as f:
        records = list(csv.DictReader(f))
    assert len(records) == len(rows)
    assert list(records[0]) == bench.CSV_COLUMNS
    first = records[0]
    assert (first["puzzle"], first["series"], first["size"], first["status"]) == ("1", "fp32", "n=2^28", "ok")
    assert float(first["key_ms"]) == pytest.approx(1.1)
    assert float(first["ratio"]) == pytest.approx(1 / 1.1, rel=1e-3)
    assert float(first["key_rate"]) == pytest.approx(12 * 2**28 / 1.1e6, rel=1e-4)
    assert float(first["roofline"]) == pytest.approx(12 * 2**28 / 3e9 / 1.1, rel=1e-2)
    failed = records[3]
    assert failed["status"] == "failed: out of memory" and failed["key_ms"] == "" and failed["ratio"] == ""


def test_plots_are_pngs(tmp_path):
    names = {n: get_puzzle(n).slug for n in (1, 4, 8, 9, 10)}
    written = bench.write_plots(fake_rows(), tmp_path, names)
    stems = sorted(p.stem for p in written)
    assert stems == ["attention_bwd", "attention_fwd", "matmul", "vector_add"]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_markdown_report(tmp_path):
    rows = fake_rows()
    text = markdown_report(rows, META, ["bench/vector_add.png"])
    for fact in ("NVIDIA H100 80GB HBM3", "2.11.0", "3.6.0", "12.8", "2026-01-02 03:04 UTC", "3000 GB/s", "700 TFLOPS"):
        assert fact in text
    target_lines = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    vector_add = target_lines["vector add vs torch.add, 2^28 fp32"]
    assert vector_add.endswith("| >= 0.95x | 2928.4 GB/s | 0.91x torch.add | missed |")
    assert target_lines["FA2 forward, N=16384, D=64"].endswith("| 430.0 TFLOPS | 1.40x sdpa flash | met |")
    assert "| FA2 forward causal, N=16384, D=128 | >= 508 TFLOPS | - | - | not measured |" in text
    assert "3 of 13 targets met." in text  # matmul_fast, FA2 D=64 TFLOPS, FA2 D=64 vs SDPA
    failed = "| 4 | matmul_fast | fp16 | 1024x1024x1024 | - | - | - | - | - | - | - | - | failed: out of memory |"
    assert failed in text
    assert "![vector add](bench/vector_add.png)" in text and "- a note" in text


def test_write_outputs_puts_everything_under_out(tmp_path):
    written = bench.write_outputs(fake_rows(), META, tmp_path)
    assert written["csv"] == tmp_path / "bench" / "results.csv" and written["csv"].exists()
    assert written["markdown"] == tmp_path / "BENCHMARKS.md"
    assert "](bench/matmul.png)" in written["markdown"].read_text(encoding="utf-8")
    assert all(p.parent == tmp_path / "bench" for p in written["plots"])


def test_format_table():
    text = format_table(fake_rows())
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["#", "puzzle", "series", "size"]
    assert len(lines) == 1 + len(fake_rows())
    assert "0.91x" in lines[1] and "2928.4" in lines[1] and "failed: out of memory" in lines[4]


def test_without_cuda_it_says_so_and_exits_1(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench.main([]) == 1
    out = capsys.readouterr()
    assert out.err.strip() == bench.NO_GPU and out.out == ""
    assert "needs a CUDA GPU" in bench.NO_GPU


def test_smoke_run_end_to_end(tmp_path):
    """The whole pipeline (child process, answer key, baseline, writers) on vector add at a tiny size."""
    assert bench.main(["--smoke", "--only", "1", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "bench" / "results.csv", newline="", encoding="utf-8") as f:
        records = list(csv.DictReader(f))
    assert [(r["puzzle"], r["status"], r["check"]) for r in records] == [("1", "ok", "ok")]
    assert float(records[0]["key_ms"]) > 0 and float(records[0]["baseline_ms"]) > 0
    assert "--smoke" in (tmp_path / "BENCHMARKS.md").read_text(encoding="utf-8")


def test_render_redraws_a_finished_run(tmp_path):
    rows = fake_rows()
    bench.write_data(rows, META, tmp_path)
    assert [(r.puzzle, r.series, r.size, r.status) for r in bench.read_csv(tmp_path / "bench" / "results.csv")] == [
        (r.puzzle, r.series, r.size, r.status) for r in rows]
    again = bench.read_csv(tmp_path / "bench" / "results.csv")[0]
    assert again.key_ms == pytest.approx(1.1) and again.ratio == pytest.approx(1 / 1.1)
    assert bench.main(["--render", str(tmp_path)]) == 0
    assert (tmp_path / "bench" / "attention_fwd.png").exists()
    assert "NVIDIA H100 80GB HBM3" in (tmp_path / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert bench.main(["--render", str(tmp_path / "nothing")]) == 2


def test_without_matplotlib_the_report_says_how_to_get_plots(tmp_path, monkeypatch):
    def no_matplotlib(*args, **kwargs):
        raise ImportError("No module named 'matplotlib'")

    monkeypatch.setattr(bench, "write_plots", no_matplotlib)
    written = bench.write_outputs(fake_rows(), META, tmp_path)
    assert written["plots"] == [] and written["csv"].exists()
    assert "--render DIR" in written["markdown"].read_text(encoding="utf-8")
