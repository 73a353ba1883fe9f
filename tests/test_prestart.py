"""Grading processes started before the grader imports torch: taken over by the stage, or stopped."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from checks import verdict as V
from checks.engine.contract.protocol import RECORD, REPLAY
from checks.engine.grade import grade
from checks.engine.processes import forking, prestart, spawn
from checks.registry import get_puzzle


@pytest.mark.slow
def test_the_prestarted_grading_processes_are_taken_over(tmp_path) -> None:
    prestart.prestart_for(tmp_path, interpret=True)
    procs = [prestart._prestarted[(str(tmp_path), True, role)] for role in (RECORD, REPLAY)]
    verdict = grade(get_puzzle("1"), solution=True, interpret=True, time_it=False, workdir=tmp_path)
    assert verdict.status == V.PASSED, verdict.summary
    assert not [key for key in prestart._prestarted if key[0] == str(tmp_path)]  # the stage took both over
    assert [proc.wait(timeout=30) for proc in procs] == [0, 0]  # ... and each ran to its end, not killed


def test_an_unused_prestarted_process_is_stopped(tmp_path) -> None:
    prestart.prestart(tmp_path, interpret=True)
    procs = [proc for key, proc in prestart._prestarted.items() if key[0] == str(tmp_path)]
    prestart.discard_prestarted()
    assert len(procs) == 2 and not prestart._prestarted  # the recording's and the replay's
    assert all(proc.poll() is not None for proc in procs)


def test_the_mode_is_guessed_without_torch(monkeypatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert prestart.likely_gpu(interpret=True) is False
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert prestart.likely_gpu(interpret=False) is False
    monkeypatch.delenv("TRITON_INTERPRET")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert prestart.likely_gpu(interpret=False) is False


def test_only_a_gpu_grading_process_keeps_autotuning_results(monkeypatch) -> None:
    monkeypatch.delenv("TRITON_CACHE_AUTOTUNING", raising=False)
    assert spawn.grading_process_env(interpret=False).get("TRITON_CACHE_AUTOTUNING") == "1"
    assert "TRITON_CACHE_AUTOTUNING" not in spawn.grading_process_env(interpret=True)


def test_an_interpreter_grading_process_gets_one_cpu_thread_unless_told_otherwise(monkeypatch):
    from checks.engine.processes import spawn

    for name in spawn.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    env = spawn.grading_process_env(interpret=True)
    assert all(env[name] == "1" for name in spawn.THREAD_VARIABLES)
    assert "OMP_NUM_THREADS" not in spawn.grading_process_env(interpret=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert spawn.grading_process_env(interpret=True)["OMP_NUM_THREADS"] == "4"


@pytest.mark.slow
def test_a_spare_is_taken_by_a_check_of_its_mode_and_dropped_by_another(monkeypatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # a CPU machine: the spare is an interpreter process
    prestart.prestart_spare(interpret=False)
    workdir = prestart.take_spare(interpret=False)
    assert workdir is not None and (str(workdir), True, RECORD) in prestart._prestarted
    assert prestart.take_spare(interpret=False) is None  # one spare, taken once
    prestart.discard_prestarted()
    shutil.rmtree(workdir)
    prestart.prestart_spare(interpret=False)
    proc = next(iter(prestart._prestarted.values()))
    assert prestart.take_spare(interpret=True) is None  # a check of the other mode: the spare is of no use
    assert proc.poll() is not None and not prestart._prestarted


@pytest.mark.slow
def test_stop_all_stops_every_grading_process_started_here(tmp_path) -> None:
    prestart.prestart(tmp_path, interpret=True)
    proc = prestart._prestarted[(str(tmp_path), True, REPLAY)]
    prestart.stop_all()
    assert proc.poll() is not None and not prestart._prestarted and not spawn.started


@pytest.mark.slow
def test_a_prestarted_process_whose_grader_left_ends_quietly(tmp_path) -> None:
    proc = spawn.start_grading_process(tmp_path, interpret=True, preload=True)
    proc.stdin.close()  # the grader is gone before it sent a token
    assert proc.wait(timeout=60) == 0
    assert "Traceback" not in (tmp_path / "output.log").read_text()


@pytest.mark.slow
def test_a_notebook_check_starts_the_next_checks_grading_processes() -> None:
    from checks.learner.session import grade_ahead

    puzzle = get_puzzle("1")
    assert grade_ahead(puzzle, spare=True, solution=True, time_it=False).status == V.PASSED
    ((spare, _),) = prestart._spare
    waiting = dict(prestart._prestarted)  # on a GPU machine: the GPU process and the interpreter parts
    assert waiting and all(Path(folder).is_relative_to(spare) for folder, *_ in waiting)  # for the next check
    assert grade_ahead(puzzle, spare=True, solution=True, time_it=False).status == V.PASSED
    assert all(proc.wait(timeout=30) == 0 for proc in waiting.values())  # taken over and run to its end, not killed
    assert not spare.exists()  # and its folder removed; a new spare waits for the check after
    prestart.stop_all()
    prestart.drop_spare()


def test_the_interpreter_stage_beside_a_gpu_stage_records_as_the_gpu_stage_does(monkeypatch, tmp_path) -> None:
    """The recording process of the interpreter stage on a GPU machine starts with the GPU stage's command line and
    environment (the check's folder comes with the job): the learner's code cannot tell the stages apart, so the
    method the interpreter judges is the one the GPU runs. Its replay stays the interpreter's."""
    started: list[tuple[str, tuple[str, ...], dict[str, str]]] = []

    class Started:
        pid = -1

        def poll(self) -> int:
            return 0

    def start_module(module: str, *args: str, env: dict[str, str], stdout, text: bool = False):
        started.append((module, args, env))
        return Started()

    monkeypatch.setattr(spawn, "start_module", start_module)
    monkeypatch.setenv(forking.ENV, "0")  # started, not forked by the fork server
    for folder in ("gpu", "interpreter"):
        (tmp_path / folder).mkdir()
    spawn.start_grading_process(tmp_path / "gpu", interpret=False, preload=True, role=RECORD)
    spawn.start_grading_process(tmp_path / "interpreter", interpret=True, preload=True, role=RECORD, record_on_gpu=True)
    spawn.start_grading_process(tmp_path / "interpreter", interpret=True, preload=True, role=REPLAY, record_on_gpu=True)
    spawn.started[:] = [p for p in spawn.started if not isinstance(p, Started)]
    (gpu, gpu_args, gpu_env), (interpreter, interpreter_args, interpreter_env), replay = started
    assert (gpu, gpu_args, gpu_env) == (interpreter, interpreter_args, interpreter_env)
    assert not any(str(tmp_path) in arg for arg in gpu_args)  # no folder on the command line
    assert "interpreter" in replay[1] and replay[2]["CHECKS_ROLE"] == "replay-interpreter"


@pytest.mark.slow
def test_on_a_gpu_machine_the_next_spare_starts_as_a_check_takes_one_and_outlives_its_tidying(monkeypatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the processes are interpreter ones: this machine has no GPU
    monkeypatch.setattr(prestart, "spare_ahead", lambda interpret: True)  # as on a GPU machine
    prestart.prestart_spare(interpret=False)
    ready = list(prestart._prestarted.values())
    taken = prestart.take_spare(interpret=False)
    assert taken is not None and prestart._spare and prestart._spare[0][0] != taken
    assert [prestart._prestarted.get((str(taken), True, role)) for role in (RECORD, REPLAY)] == ready, (
        "the check lost the spare it took"
    )
    assert all(proc.poll() is None for proc in ready)
    following = [proc for key, proc in prestart._prestarted.items() if key[0] == str(prestart._spare[0][0])]
    assert len(following) == 2, "the next check's recording and replay processes are under way"
    prestart.discard_prestarted()  # this check's processes no stage took over: stopped ...
    assert not [key for key in prestart._prestarted if key[0] == str(taken)]
    prestart.stop_all()  # ... and every other one it started, when it is over
    assert all(proc.poll() is None for proc in following), "the next check's spare was stopped with this one's"
    prestart.prestart_spare(interpret=False)  # the warm grader's between_checks: the spare under way is kept
    assert [proc for key, proc in prestart._prestarted.items() if key[0] == str(prestart._spare[0][0])] == following
    prestart.drop_spare()
    assert all(proc.wait(timeout=30) is not None for proc in following) and not prestart._prestarted
    shutil.rmtree(taken)
