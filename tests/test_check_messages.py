"""The messages around a check: --case in `make check`, a check that graded nothing beside a recorded pass, the
sentence after the last puzzle, a crash's stack dump, commands in a case's lines, and the roofline as a ceiling."""

from __future__ import annotations

import pytest

from checks import cli
from checks import verdict as V
from checks.engine.contract.protocol import Stream
from checks.engine.judging import timing
from checks.engine.judging.wording import unfinished_verdict, without_fault_dump
from checks.engine.processes.run import ProcessEnd
from checks.engine.timing import Peaks
from checks.learner import progress
from checks.learner.session import what_next
from checks.registry import ROOT, get_puzzle, load_puzzles


def test_check_takes_case_as_map_does(capsys):
    assert cli.parser().parse_args(["4", "--case", "4"]).case == 4
    count = max(len(get_puzzle("4").cases.cpu), len(get_puzzle("4").cases.gpu))
    assert cli.main(["4", "--solution", "--case", str(count + 1)]) == 2
    assert f"Puzzle 4 has cases 1 to {count}: give --case a number among them." in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.exhaustive
def test_a_check_of_one_case_grades_that_case_repeats_it_and_is_not_recorded(tmp_path, monkeypatch, capsys):
    from checks.authoring.wrong import source_of

    monkeypatch.setenv(progress.ENV_FILE, str(tmp_path / "progress.json"))
    puzzle = get_puzzle("1")
    graded = tmp_path / "off_by_one.py"
    graded.write_text(source_of(puzzle, puzzle.wrong_dir / "off_by_one.edit.yaml"), encoding="utf-8")
    assert cli.main(["1", "--file", str(graded), "--case", "2"]) == 1
    out = capsys.readouterr().out
    assert "case 2:" in out and "case 1:" not in out, out
    assert "--case 2 --seed" in out, out  # the command that runs it again repeats the case
    assert "Not recorded in `make progress`: only case 2 was graded" in out, out
    assert progress.load(tmp_path / "progress.json")["puzzles"] == {}


def verdict(status: str, cases: list[V.CaseResult] | None = None) -> V.Verdict:
    return V.Verdict("9", status, "summary", mode="interpreter", cases=cases or [])


def test_a_check_that_graded_nothing_never_replaces_a_recorded_pass(tmp_path):
    path = tmp_path / "progress.json"
    assert progress.record(verdict(V.PASSED, [V.CaseResult(0, "case", True)]), path)
    missing_earlier = verdict(V.ERROR)  # the step 9a still the stub: no case graded
    assert progress.keeps_pass(missing_earlier, path)
    assert not progress.record(missing_earlier, path)
    assert progress.load(path)["puzzles"]["9"]["status"] == V.PASSED
    failed = verdict(V.FAILED, [V.CaseResult(0, "case", False)])  # a graded failure replaces it, as it should
    assert not progress.keeps_pass(failed, path)
    assert progress.record(failed, path)
    assert progress.load(path)["puzzles"]["9"]["status"] == V.FAILED
    assert progress.record(missing_earlier, path)  # without a pass to keep, it is recorded as before


def test_after_the_last_puzzle_the_report_counts_what_is_left(tmp_path, monkeypatch):
    monkeypatch.setenv(progress.ENV_FILE, str(tmp_path / "progress.json"))
    ready = [p for p in load_puzzles() if p.ready]
    last, left = ready[-1], ready[-3]
    for p in ready:
        if p is not left:
            progress.record(V.Verdict(p.number, V.PASSED, "", cases=[V.CaseResult(0, "case", True)]))
    said = what_next(last.number)
    assert said.startswith(
        f"That was the last puzzle of the course; 1 of {len(ready)} is not passed yet ({left.number})"
    )
    progress.record(V.Verdict(left.number, V.PASSED, "", cases=[V.CaseResult(0, "case", True)]))
    assert "you have passed every one" in what_next(last.number)


DUMP = """my own print
Fatal Python error: Segmentation fault

Current thread 0x00007f3a (most recent call first):
  File "/course/checks/engine/replay/perform.py", line 88 in run
  File "/course/checks/engine/grading_process/main.py", line 301 in main

Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)
"""


def test_a_crash_dump_is_not_what_the_code_printed_and_a_crash_in_the_grader_says_so():
    assert without_fault_dump(DUMP) == "my own print\n"
    assert without_fault_dump(DUMP.split("\n", 4)[4]) == ""  # a tail that starts inside the dump
    v = verdict(V.FAILED)
    end = ProcessEnd(Stream(selection=[0]), -11, False, 1.0, DUMP)
    unfinished_verdict(v, end, Stream(selection=[0], started=0), 120.0, names={})
    assert "It died inside the grader's own code" in v.summary, v.summary
    mine = DUMP.replace("/course/checks/engine/replay/perform.py", "/work/p9.py")
    unfinished_verdict(v, ProcessEnd(Stream(selection=[0]), -11, False, 1.0, mine), Stream(selection=[0], started=0),
                       120.0, names={"/work/p9.py": "p9.py"})  # fmt: skip
    assert "Your code was at p9.py, line 88 (in run) when it died." in v.summary, v.summary


def test_every_command_of_a_case_line_repeats_the_earlier_file():
    case = V.CaseResult(1, "case", False, details=["look: make map PUZZLE=9 FILE=p9.py ARGS='--case 4 --seed 3'."])
    v = V.Verdict("9", V.FAILED, "", cases=[case])
    V.repeat_earlier(v, "p9a.py")
    assert "make map PUZZLE=9 FILE=p9.py ARGS='--earlier p9a.py --case 4 --seed 3'." in case.details[0]


MATMUL = {"M": 8192, "N": 8192, "K": 8192}
FLOPS, BYTES = 2.0 * 8192**3, 3 * 2.0 * 8192**2


def test_the_roofline_is_the_data_sheet_peak_of_a_known_gpu_and_never_below_a_rate_of_the_run():
    measured = Peaks(copy_gbps=2600.0, matmul_tflops=690.0, matmul_side=8192)
    times = {"yours": FLOPS / 765e9, "torch.matmul": FLOPS / 795e9}  # 765 and 795 TFLOPS: above what was measured
    lines = timing.timing_table(MATMUL, times, BYTES, FLOPS, measured, device="NVIDIA H100 80GB HBM3")
    assert "989 TFLOPS (NVIDIA H100 80GB HBM3's dense float16 tensor-core peak, from its data sheet)" in lines[-1]
    shares = [float(line.split("%")[0].split()[-1]) for line in lines[1:3]]
    assert all(share <= 100.0 for share in shares), lines
    unknown = timing.timing_table(MATMUL, times, BYTES, FLOPS, measured, device="a GPU of the future")
    assert "795 TFLOPS (the rate of torch.matmul in this run, above the peak it replaces)" in unknown[-1], unknown
    assert all(float(line.split("%")[0].split()[-1]) <= 100.0 for line in unknown[1:3]), unknown
    result = timing.judge(MATMUL, times, "torch.matmul", None, BYTES, FLOPS, measured, device="NVIDIA H200")
    assert result["roofline_share"] == pytest.approx(765 / 989, rel=1e-6)


def test_make_check_passes_case_through_args():
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "$(ARGS)" in text.split("\ncheck:", 1)[1].split("\n\n", 1)[0]
