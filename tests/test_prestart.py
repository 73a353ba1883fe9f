"""Grading processes started before the grader imports torch: taken over by the stage, or stopped."""

from __future__ import annotations

from checks import verdict as V
from checks.engine import process
from checks.engine.grade import grade
from checks.registry import get_puzzle


def test_a_prestarted_grading_process_is_taken_over(tmp_path) -> None:
    process.prestart_for(tmp_path, interpret=True)
    proc = process._prestarted[(str(tmp_path), True)]
    verdict = grade(get_puzzle("1"), solution=True, interpret=True, time_it=False, workdir=tmp_path)
    assert verdict.status == V.PASSED, verdict.summary
    assert not process._prestarted  # the stage took it over instead of starting another
    assert proc.wait(timeout=30) == 0  # ... and it ran to its end, not killed


def test_an_unused_prestarted_process_is_stopped(tmp_path) -> None:
    process.prestart(tmp_path, interpret=True)
    proc = process._prestarted[(str(tmp_path), True)]
    process.discard_prestarted()
    assert not process._prestarted
    assert proc.poll() is not None


def test_the_mode_is_guessed_without_torch(monkeypatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert process.likely_gpu(interpret=True) is False
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert process.likely_gpu(interpret=False) is False
    monkeypatch.delenv("TRITON_INTERPRET")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert process.likely_gpu(interpret=False) is False


def test_only_a_gpu_grading_process_keeps_autotuning_results(monkeypatch) -> None:
    monkeypatch.delenv("TRITON_CACHE_AUTOTUNING", raising=False)
    assert process.child_env(interpret=False).get("TRITON_CACHE_AUTOTUNING") == "1"
    assert "TRITON_CACHE_AUTOTUNING" not in process.child_env(interpret=True)
