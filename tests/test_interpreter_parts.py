"""The interpreter stage split over several grading processes: which cases each gets, and one verdict back."""

from __future__ import annotations

import pytest

from checks import verdict as V
from checks.engine.judging.interpreter_parts import merge_parts, split_cases
from checks.engine.judging.wording import failure_pattern
from checks.engine.processes.prestart import PARTS_ENV, part_count, part_workdir

PARAMS = [{"N": 100, "causal": c} for c in (False, True, False, True, False, True, False)]


def case(index: int, passed: bool = True, rule: str = "") -> V.CaseResult:
    return V.CaseResult(index, f"case {index + 1}", passed, problem="" if passed else "wrong", rule=rule)


def part(*cases: V.CaseResult, status: str = V.PASSED, summary: str = "", rule: str = "") -> V.Verdict:
    return V.Verdict(9, status, summary or "ok", mode="interpreter", cases=list(cases), rule=rule)


def test_cases_are_dealt_round_robin_and_part_0_has_case_0():
    assert split_cases(7, 3) == [[0, 3, 6], [1, 4], [2, 5]]
    assert split_cases(2, 3) == [[0], [1]] and split_cases(5, 1) == [[0, 1, 2, 3, 4]]
    assert sorted(i for p in split_cases(9, 3) for i in p) == list(range(9))


def test_the_number_of_parts_follows_the_cores_or_the_environment(monkeypatch, tmp_path):
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    monkeypatch.delenv(PARTS_ENV, raising=False)
    assert part_count() == 2  # at most two (checks/engine/processes/prestart.py says why)
    monkeypatch.setattr("os.cpu_count", lambda: 6)
    assert part_count() == 1
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert part_count() == 1  # a laptop or CI: one interpreter process, as before
    monkeypatch.setenv(PARTS_ENV, "1")
    monkeypatch.setattr("os.cpu_count", lambda: 64)
    assert part_count() == 1
    assert part_workdir(tmp_path, 0) == tmp_path / "interpreter" and part_workdir(tmp_path, 2).name == "interpreter-2"


def test_passing_parts_make_one_pass_with_every_case():
    merged = merge_parts([part(case(0), case(3), case(6)), part(case(1), case(4)), part(case(2), case(5))], PARAMS)
    assert merged.passed and [c.index for c in merged.cases] == list(range(7))
    assert merged.summary == "all 7 cases match the reference."


def test_the_lowest_failing_case_wins_and_the_counts_cover_every_part():
    first = part(case(0), case(3, False, "values"), case(6), status=V.FAILED, rule="values",
                 summary="1 of 3 cases failed; start with case 4 (case 4): wrong")  # fmt: skip
    second = part(case(1, False, "no_load_outside"), case(4), status=V.FAILED, rule="no_load_outside",
                  summary="1 of 2 cases failed; start with case 2 (case 2): wrong")  # fmt: skip
    third = part(case(2), case(5, False, "values"), status=V.FAILED, rule="values",
                 summary="1 of 2 cases failed; start with case 6 (case 6): wrong")  # fmt: skip
    merged = merge_parts([first, second, third], PARAMS)
    assert merged.rule == "no_load_outside" and merged.summary.startswith("3 of 7 cases failed; start with case 2")
    assert len(merged.cases) == 7


def test_the_failure_pattern_is_taken_over_every_case():
    causal = [case(i, not PARAMS[i]["causal"]) for i in range(7)]  # every causal case fails
    own = "Every failing case has causal=True"
    parts = [
        part(
            *(causal[i] for i in (0, 3, 6)),
            status=V.FAILED,
            rule="values",
            summary="1 of 3 cases failed; start with case 4 (case 4): wrong",
        ),  # fmt: skip
        part(
            *(causal[i] for i in (1, 4)),
            status=V.FAILED,
            rule="values",
            summary="1 of 2 cases failed; start with case 2 (case 2): wrong",
        ),  # fmt: skip
        part(
            *(causal[i] for i in (2, 5)),
            status=V.FAILED,
            rule="values",
            summary="1 of 2 cases failed; start with case 6 (case 6): wrong",
        ),  # fmt: skip
    ]
    parts[1].details = failure_pattern([PARAMS[1], PARAMS[4]], [False, True]) + ["advice"]  # its own pattern
    merged = merge_parts(parts, PARAMS)
    assert merged.summary.startswith("3 of 7 cases failed; start with case 2")
    assert sum(line.startswith(own) for line in merged.details) == 1 and merged.details[-1] == "advice"


def test_tampering_and_crashes_come_before_cases():
    failing = part(case(1, False, "values"), status=V.FAILED, rule="values", summary="1 of 1 cases failed; x")
    crashed = part(case(2), status=V.CRASHED, rule=V.CRASHED, summary="the grading process ended")
    tampered = part(case(0), status=V.TAMPERED, rule=V.TAMPERED, summary="tampered")
    assert merge_parts([failing, crashed], PARAMS).status == V.CRASHED
    assert merge_parts([crashed, failing, tampered], PARAMS).status == V.TAMPERED
    assert merge_parts([part(case(0)), failing], PARAMS).rule == "values"


@pytest.mark.slow
def test_a_split_interpreter_stage_grades_every_case_and_fails_what_one_process_would(monkeypatch, tmp_path):
    """With_interpreter_stage on a CPU, its first stage standing in for the GPU's: the parts' verdict is merged."""
    from checks.authoring.wrong import materialize
    from checks.engine import grade as grading
    from checks.engine.contract.protocol import Job
    from checks.engine.judging.stage import Stage
    from checks.registry import ROOT, get_puzzle

    monkeypatch.setattr(grading, "part_count", lambda: 3)
    puzzle = get_puzzle("1")

    def run(file, cases: list[int] | None, folder: str) -> V.Verdict:
        workdir = tmp_path / folder
        workdir.mkdir()
        module, names, _ = grading.prepare(puzzle, file, False, workdir)
        job = Job(puzzle.number, str(module), names, 7, interpret=True, cases=cases)
        first = Stage(puzzle, job, "interpreter", workdir)
        first.traffic_later = True  # as a GPU stage, which records no access log: the parts' traffic is shown
        return grading.with_interpreter_stage(first, workdir, 120, None)

    right = run(puzzle.solution, None, "right")
    traffic = [i for i, line in enumerate(right.details) if line.startswith("Memory traffic")]
    assert right.passed and len(traffic) == 1 and "every load stayed inside" in right.details[traffic[0] - 1]
    assert right.details[traffic[0]].startswith("Memory traffic of interpreter case 1: ")
    assert right.details[-1].startswith("  programs: ") and "answer key" in right.details[-1]
    assert [(tmp_path / "right" / name).is_dir() for name in ("interpreter", "interpreter-1", "interpreter-2")] == [
        True
    ] * 3
    edit = ROOT / "solutions" / "wrong" / "01_vector_add" / "no_mask.edit.yaml"
    no_mask = materialize(puzzle, edit, tmp_path)
    wrong = run(no_mask, [3], "wrong")  # n = 1024, a whole number of blocks: the first stage passes
    assert not wrong.passed and wrong.rule == "no_write_outside"
    assert (
        "Every GPU case matched, but in Triton's interpreter" in wrong.summary and "of 5 cases failed" in wrong.summary
    )
    assert "start with case 1 " in wrong.summary, wrong.summary  # n = 3000, in part 0


# -- the verdict before the speed: a GPU stage asks before it times -------------------------------------------------
def _passed_stage(before_timing):
    """A GPU stage whose every case passed, at the event that ends its cases (the replay waits to be told to time)."""
    from checks.engine.contract.protocol import Job
    from checks.engine.judging.stage import Stage
    from checks.registry import ROOT, get_puzzle

    puzzle = get_puzzle("1")
    stage = Stage(puzzle, Job("1", "m.py", {}, 7), "gpu", ROOT, time_it=True)
    stage.results = [case(i) for i in stage.selection]
    stage.before_timing = before_timing
    return stage


@pytest.mark.parametrize("interpreter_passed", [True, False])
def test_a_gpu_stage_times_only_once_the_interpreter_stage_passed(interpreter_passed: bool) -> None:
    from checks.engine.contract.protocol import TIME_COMMAND, Observed

    asked: list[bool] = []
    stage = _passed_stage(lambda: asked.append(True) or interpreter_passed)
    assert stage.judge_event(Observed()) == (TIME_COMMAND if interpreter_passed else None)
    assert asked == [True] and stage.time_it is interpreter_passed  # declined: its verdict gives no speed
    stage.results[0] = case(0, passed=False)  # a failing GPU case: neither asked nor timed
    asked.clear()
    assert stage.judge_event(Observed()) is None and asked == []


def test_the_correctness_verdict_is_said_before_the_timing_and_a_failure_elsewhere_is_never_timed() -> None:
    from concurrent.futures import Future

    from checks.engine import grade as grading

    def said_for(cpu: V.Verdict) -> tuple[bool, list[str]]:
        done: Future = Future()
        done.set_result(cpu)
        events: list[dict] = []
        printed: list[str] = []
        return grading.correct_in_the_interpreter(done, events.append, printed), [e["text"] for e in events]

    timed, lines = said_for(V.Verdict("1", V.PASSED, "ok", mode="interpreter"))
    assert timed and lines == [grading.INTERPRETER_STAGE, grading.CORRECT_NOW_TIMING]
    timed, lines = said_for(part(case(0, passed=False), status=V.FAILED, summary="1 of 5 cases failed"))
    assert not timed and lines == [grading.INTERPRETER_STAGE]  # the failure comes with the verdict, untimed
