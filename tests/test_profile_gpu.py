"""`make profile` on a GPU (skipped elsewhere; tests/test_profile.py covers the rest without one): the table of a
puzzle's kernels for yours, the key and the baseline, and on a Hopper GPU the timeline of each Hopper key's warps."""

from __future__ import annotations

import json

import pytest

from bench import profile
from checks.engine.hopper import hopper_here
from checks.registry import get_puzzle


def cuda_here() -> bool:
    import torch

    return torch.cuda.is_available()


pytestmark = [pytest.mark.slow, pytest.mark.skipif(not cuda_here(), reason="make profile runs on a CUDA GPU only")]


def test_a_file_the_key_and_the_baseline_are_each_timed_kernel_by_kernel(tmp_path, capsys):
    puzzle = get_puzzle("4")
    assert profile.main(["4", "--file", str(puzzle.solution), "--out", str(tmp_path), "--calls", "5"]) == 0
    data = json.loads((tmp_path / "profile.json").read_text(encoding="utf-8"))
    by_name = {c["name"]: c for c in data["contenders"]}
    assert list(by_name) == ["yours", "answer key", puzzle.baseline]
    for contender in by_name.values():
        assert contender["kernels"] and not contender["problem"], contender
        assert all(k["us"] > 0 for k in contender["kernels"])
    assert data["times_from"] in (profile.PROTON, profile.DO_BENCH)
    text = capsys.readouterr().out
    assert (tmp_path / "profile.txt").read_text(encoding="utf-8") in text + "\n"
    assert text.count("%") >= 3 and "roofline" in text
    if data["times_from"] == profile.PROTON:  # the key's Triton kernel is named in the table
        assert any("matmul" in k["name"] for k in by_name["answer key"]["kernels"])
        assert (tmp_path / "profile.hatchet").exists()


def test_do_bench_times_each_call_whole_when_asked(tmp_path, capsys):
    assert profile.main(["1", "--solution", "--out", str(tmp_path), "--no-proton"]) == 0
    data = json.loads((tmp_path / "profile.json").read_text(encoding="utf-8"))
    assert data["times_from"] == profile.DO_BENCH
    assert [k["name"] for c in data["contenders"] for k in c["kernels"]] == [profile.WHOLE] * 2


@pytest.mark.skipif(not hopper_here(), reason="the instrumented Hopper keys need a Hopper GPU")
@pytest.mark.parametrize("step", ["16a", "16b", "16"])
def test_a_hopper_keys_warps_are_drawn_on_a_timeline(step, tmp_path, capsys):
    assert profile.main([step, "--solution", "--out", str(tmp_path), "--calls", "3"]) == 0
    text = capsys.readouterr().out
    assert "No timeline" not in text, text
    assert (tmp_path / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    phases = (tmp_path / "phases.txt").read_text(encoding="utf-8")
    if step == "16":
        assert all(part in phases for part in ("producer", "consumer 0", "consumer 1")), phases
