"""A submission cannot write or sway its own verdict: forged reports, reaching into the grader, early exits.

The protocol checks run in-process on hand-written event lines; the submissions under
tests/submissions/tampering/ are graded for real, in grading processes forked by the fork server (`make grade`'s) and,
in `make test-all`, in processes started afresh (`make check`'s on a CPU, and every one on a GPU).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from checks import verdict as V
from checks.engine.contract.protocol import Job, RecordStream, Stream
from checks.engine.grade import grade
from checks.engine.judging.wording import grader_error_verdict
from checks.engine.processes import forking, landlock, spawn
from checks.engine.processes.forking import ForkedProcess
from checks.registry import get_puzzle
from checks.typed_reader import RecordError
from tests.helpers import submission

TAMPERING = Path(__file__).parent / "submissions" / "tampering"
TOKEN = "s3cret"


def line(event: str, token: str = TOKEN, **data) -> str:
    return json.dumps({"event": event, **data, "token": token})


def observation(index: int, **data) -> str:
    return line("case", index=index, returned="tensor", outputs_file=f"case_{index}.pt", **data)


def machine(mode: str = "interpreter", **data) -> str:
    """The machine event, with every field a grading process writes."""
    versions = {"torch_version": "2.11", "triton_version": "3.6", "numpy_version": "2.3"}
    fields = {"device": "cpu", "name": "CPU (Triton interpreter)", **versions, **data}
    return line("machine", mode=mode, **fields)


def honest(selection: list[int]) -> list[str]:
    lines = [machine()]
    for index in selection:
        lines += [line("case_start", index=index), observation(index)]
    return [*lines, line("observed")]


def feed(lines: list[str], selection: list[int] | None = None, kind: type = Stream):
    """A grading process's report (kind Stream) or a recording (RecordStream), fed these lines."""
    stream = kind(selection or [0, 1], token=TOKEN)
    for text in lines:
        stream.feed_line(text)
    return stream


def test_an_honest_report_is_accepted():
    stream = feed(honest([0, 1]))
    assert not stream.tampered and stream.complete and [c.index for c in stream.cases] == [0, 1]


FORGED = {
    "a verdict event": lambda h: [h[0], line("verdict", status="passed"), *h[1:]],
    "a line without the token": lambda h: [h[0], json.dumps({"event": "case_start", "index": 0}), *h[1:]],
    "a wrong token": lambda h: [h[0], line("case_start", token="guess", index=0), *h[2:]],
    "a line that is not JSON": lambda h: [h[0], "{not json", *h[1:]],
    "a second machine event": lambda h: [h[0], h[0], *h[1:]],
    "a case out of order": lambda h: [h[0], line("case_start", index=1), observation(1), *h[1:]],
    "a repeated case": lambda h: [*h[:3], h[2], *h[3:]],
    "the end before every case": lambda h: [h[0], line("observed")],
    "timings nobody asked for": lambda h: [*h, line("timings", times={"yours": 1.0})],
    "a field of the wrong type": lambda h: [h[0], h[1], line("case", index=0, launches="all of them"), *h[3:]],
    "an event before the machine": lambda h: [h[1], *h],
    "a refusal of the audit hook": lambda h: [*h[:3], line("refused", reason="starting a process (os.fork)"), *h[3:]],
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_a_forged_report_is_refused(name):
    stream = feed(FORGED[name](honest([0, 1])))
    assert stream.tampered, name


# a line whose fields do not fit its kind of event (checks.typed_reader), and how the tampered report names
# the field
MISFIT = {
    "a field of the wrong type": (
        lambda h: [h[0], line("case_start", index="0"), *h[2:]],
        "case_start.index is text, not a whole number",
    ),
    "a nested field of the wrong type": (
        lambda h: [*h[:2], observation(0, launches=[{"kernel": "k", "own": "yes"}]), *h[3:]],
        "case.launches[0].own is text, not true or false",
    ),
    "an item of the wrong type": (
        lambda h: [*h[:2], observation(0, raised_where=["p1.py, line 3", 3]), *h[3:]],
        "case.raised_where[1] is a whole number, not text",
    ),
    "an unknown field": (lambda h: [machine(verdict="passed"), *h[1:]], "machine has an unknown field 'verdict'"),
    "an unknown field of an observation": (
        lambda h: [*h[:2], observation(0, passed=True), *h[3:]],
        "case has an unknown field 'passed'",
    ),
    "a missing field": (lambda h: [h[0], line("case_start"), *h[2:]], "case_start lacks its field 'index'"),
    "a machine event without its device": (
        lambda h: [line("machine", mode="gpu"), *h[1:]],
        "machine lacks its field 'device'",
    ),
    "a refusal without its reason": (lambda h: [*h[:3], line("refused")], "refused lacks its field 'reason'"),
}


@pytest.mark.parametrize("name", sorted(MISFIT))
def test_an_event_that_does_not_fit_its_kind_is_refused_naming_the_field(name):
    forge, named = MISFIT[name]
    stream = feed(forge(honest([0, 1])))
    assert stream.tampered == f"a malformed event ({named})", name


RECORDED = {"raised": "", "raised_where": [], "stub": False, "printed": "", "seconds": 0.25}


def plan(index: int, **data) -> str:
    """A plan event as the recording process writes it (its plans only claims: the replay makes them true or not)."""
    return line("plan", index=index, **{"plans": [{"ops": []}, {"ops": []}], **RECORDED, **data})


def timing_plan(**data) -> str:
    return line("timing_plan", **{"plans": [{"ops": []}], **RECORDED, **data})


def record(lines: list[str], selection: list[int] | None = None) -> RecordStream:
    return feed(lines, selection, RecordStream)


def test_an_honest_recording_is_accepted():
    stream = record([machine("gpu"), plan(0), plan(1), timing_plan(seconds=2e-05), line("observed")])
    assert not stream.tampered and stream.complete and [p.index for p in stream.plans] == [0, 1]
    assert stream.machine is not None and stream.machine.mode == "gpu"
    # the plan itself stays JSON: checks.engine.contract.plan
    assert stream.plans[0].plans == [{"ops": []}, {"ops": []}]
    assert stream.timing_plan is not None and stream.timing_plan.seconds == 2e-05
    stub = record([machine(), plan(0, raised="NotImplementedError (fill me in)", stub=True), line("observed")])
    assert not stub.tampered and stub.complete
    missing = record([machine(), line("missing", names=["vector_add"])])
    assert not missing.tampered and missing.ending is not None and missing.complete


FORGED_RECORDINGS = {
    "a plan field of the wrong type": (
        [machine(), plan(0, raised_where="p1.py, line 3")],
        "a malformed event (plan.raised_where is text, not a list)",
    ),
    "a plan that is not an object": (
        [machine(), plan(0, plans=["ops"])],
        "a malformed event (plan.plans[0] is text, not an object)",
    ),
    "an unknown plan field": (
        [machine(), plan(0, passed=True)],
        "a malformed event (plan has an unknown field 'passed')",
    ),
    "a missing plan field": (
        [machine(), line("plan", index=0, plans=[], raised="", raised_where=[], printed="", seconds=0)],
        "a malformed event (plan lacks its field 'stub')",
    ),
    "a timing plan of the wrong type": (
        [machine(), plan(0), plan(1), timing_plan(seconds="fast")],
        "a malformed event (timing_plan.seconds is text, not a number)",
    ),
    "a plan out of order": ([machine(), plan(1)], "a plan for case 1 out of order"),
    "a plan without the token": ([machine(), plan(0, token="guess")], "a plan event the grading process did not write"),
    "a plan before the machine": ([plan(0)], "plan out of order"),
    "the end before every case": ([machine(), plan(0), line("observed")], "the end of the report before every case"),
}


@pytest.mark.parametrize("name", sorted(FORGED_RECORDINGS))
def test_a_forged_recording_is_refused(name):
    lines, why = FORGED_RECORDINGS[name]
    stream = record(lines)
    assert stream.tampered.startswith(why), (name, stream.tampered)


def test_a_job_that_does_not_fit_is_refused_naming_the_field():
    job = Job("1", "p1.py", {"/home/ann/p1.py": "p1.py"}, seed=1, cases=[0, 2], replays=[{"plan": {"ops": []}}])
    assert Job.from_json(job.to_json()) == job
    sent = json.loads(job.to_json())
    for change, named in [
        ({"seed": "1"}, "job.seed is text, not a whole number"),
        ({"seed": True}, "job.seed is true or false, not a whole number"),
        ({"cases": [0, "2"]}, "job.cases[1] is text, not a whole number"),
        ({"puzzle": [1]}, "job.puzzle is a list, not a whole number or text"),
        ({"names": {"/home/ann/p1.py": 1}}, "job.names['/home/ann/p1.py'] is a whole number, not text"),
        ({"verdict": "passed"}, "job has an unknown field 'verdict'"),
        ({"file": None}, "job lacks its field 'file'"),
    ]:
        data = {k: v for k, v in {**sent, **change}.items() if v is not None}
        with pytest.raises(RecordError) as refused:
            Job.from_json(json.dumps(data))
        assert str(refused.value) == named


def test_a_refusal_names_what_the_learners_code_tried():
    stream = feed([*honest([0, 1])[:2], line("refused", reason="starting or signalling a process (os.fork)")])
    refused = "your code tried starting or signalling a process (os.fork), which the grading process refuses"
    assert stream.tampered == refused


GRADER_TRACEBACK = """Traceback (most recent call last):
  File "/course/checks/engine/grading_process/main.py", line 120, in main
    fn = observe_all(job, events, machine, Path(args[0]).parent)
  File "/course/checks/puzzles/p13_paged_decoding.py", line 35, in page_layout
    order = torch.randperm(num_pages, generator=generator)
RuntimeError: Expected a 'cpu' device type for generator but found 'cuda'
"""


def test_an_error_in_the_grading_process_own_code_is_the_graders_internal_error():
    stream = feed([*honest([0, 1])[:2], line("grader_error", text=GRADER_TRACEBACK)])
    assert not stream.tampered and "Expected a 'cpu' device type" in stream.grader_error
    verdict = V.Verdict(13, V.FAILED, "")
    grader_error_verdict(verdict, stream.grader_error, {"/home/ann/p13.py": "p13.py"})
    assert verdict.status == V.INTERNAL and "not in your code" in verdict.summary
    assert "RuntimeError: Expected a 'cpu' device type" in verdict.summary and verdict.details
    assert "exit()" not in verdict.summary  # not blamed on the learner's code
    # the same exception raised through the learner's code is the learner's, and names its line
    through = GRADER_TRACEBACK.replace(
        '  File "/course/checks/puzzles',
        '  File "/home/ann/p13.py", line 7, in __len__\n    x\n  File "/c/checks/puzzles',
    )
    verdict = V.Verdict(13, V.FAILED, "")
    grader_error_verdict(verdict, through, {"/home/ann/p13.py": "p13.py"})
    assert verdict.status == V.ERROR and "p13.py, line 7 (in __len__)" in verdict.summary
    # a second one is not the grading process's own
    assert feed([*honest([0, 1])[:2], *[line("grader_error", text="x")] * 2]).tampered


def test_the_stub_or_a_gpu_error_may_end_the_report_early():
    stub = [machine(), line("case_start", index=0), observation(0, stub=True, raised="x")]
    assert feed([*stub, line("observed")]).complete and not feed([*stub, line("observed")]).tampered
    gpu = [machine("gpu"), line("case_start", index=0), observation(0, raised="RuntimeError: CUDA")]
    assert not feed([*gpu, line("observed")]).tampered
    cpu = [machine(), line("case_start", index=0), observation(0, raised="RuntimeError")]
    assert feed([*cpu, line("observed")]).tampered


# (file, puzzle, status): each must end in that non-passing verdict
SUBMISSIONS = [
    ("appends_verdict", 1, V.TAMPERED),
    ("emits_through_gc", 1, V.TAMPERED),
    ("patches_the_grader", 1, V.FAILED),
    ("patches_the_observer", 1, V.FAILED),
    ("forges_case_reports", 1, V.TAMPERED),
    ("ends_report_early", 1, V.TAMPERED),
    ("garbage_outputs_file", 1, V.TAMPERED),
    ("softmax_appends_verdict", 5, V.TAMPERED),
    ("walks_the_stack", 1, V.TAMPERED),
    ("forks_a_lingering_process", 1, V.TAMPERED),
    ("leaves_a_process_through_a_library", 1, V.TAMPERED),
    ("traces_the_grader", 1, V.TAMPERED),
    ("uses_ctypes", 1, V.TAMPERED),
    ("reads_its_own_memory", 1, V.TAMPERED),
    ("plants_a_kernel_file", 1, V.TAMPERED),
    ("detaches_through_a_library", 1, V.TAMPERED),
    ("writes_the_progress_record", 1, V.TAMPERED),
    ("spawns_through_multiprocessing", 1, V.ERROR),  # no audit event: the seccomp filter makes the call fail
    # writers in C, which no audit event shows: the kernel's seal makes the write fail and the wrong kernel is judged;
    # where the kernel has no Landlock, the replay finds the grader's files changed (its digest) and grades nothing
    ("saves_into_the_grader", 1, V.FAILED if landlock.abi() else V.TAMPERED),
    ("writes_the_grader_through_sqlite", 1, V.FAILED if landlock.abi() else V.TAMPERED),
]
WRITES_IN_C = ("saves_into_the_grader", "writes_the_grader_through_sqlite")  # stopped by the kernel's seal alone
# what the report must name, for the submissions the audit hook stops (checks.engine.processes.hardening)
REASONS = {
    "emits_through_gc": "gc.get_objects",
    "walks_the_stack": "sys._getframe",
    "forks_a_lingering_process": "os.fork",
    "leaves_a_process_through_a_library": "starting or signalling a process (subprocess)",  # sealed, whoever asks
    "traces_the_grader": "sys.settrace",
    "uses_ctypes": "ctypes",
    # whichever check's events file is newest (tests run side by side), the write is refused the same way
    "appends_verdict": "writing outside the grading process's own folder (events-",
    "reads_its_own_memory": "own memory or open files",
    # the recording process is sealed: it writes only in its own folder and starts no process, whoever asks
    "plants_a_kernel_file": "writing outside the grading process's own folder",
    "detaches_through_a_library": "starting or signalling a process (subprocess)",
    "writes_the_progress_record": "writing outside the grading process's own folder",
    "spawns_through_multiprocessing": "tried to start a process (multiprocessing, subprocess, os.fork)",
    **(
        {}
        if landlock.abi()
        else dict.fromkeys(["saves_into_the_grader", "writes_the_grader_through_sqlite"], "changing the grader's files")
    ),
}


# Each attack is graded in grading processes forked by the fork server (as `make grade` starts them, and every other
# grading of the suite); `make test-all` grades each again in processes started afresh, as `make check` starts them.
STARTS = [pytest.param("forked", id="forked"), pytest.param("started", id="started", marks=pytest.mark.exhaustive)]


@pytest.mark.slow
@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize(("name", "number", "status"), SUBMISSIONS, ids=[s[0] for s in SUBMISSIONS])
def test_tampering_submissions_never_pass(name, number, status, start, monkeypatch, tmp_path):
    if name in WRITES_IN_C and not landlock.abi():
        # the writes would go through, into the tree the other tests grade from; the report says the grading was not
        # sealed, and test_a_replay_refuses_when_the_graders_files_changed shows what the replay does then
        pytest.skip("no Landlock here: the grading says it was not sealed")
    if start == "started":
        monkeypatch.delenv(forking.ENV, raising=False)
    verdict = grade(get_puzzle(number), submission(TAMPERING, name, tmp_path), timeout=60)
    started_as = subprocess.Popen if start == "started" or not forking.wanted() else ForkedProcess
    assert isinstance(spawn.started[-1], started_as)
    report = V.format_verdict(verdict)
    assert verdict.status == status, report
    if status == V.TAMPERED:
        assert "incomplete or forged" in report and "this submission was not graded" in report
        assert "starts a process that outlives the grading" in report  # the advice covers what sealing finds
    assert REASONS.get(name, "") in report


def test_the_grading_process_reports_its_own_exception_as_a_grader_error(tmp_path, monkeypatch):
    import io

    from checks.engine.contract.protocol import Job
    from checks.engine.grading_process import main as grading_main

    job = Job("1", str(tmp_path / "p1.py"), {}, seed=1)
    events = tmp_path / f"events-{job.role}.jsonl"

    def broken(*args, **kwargs):
        raise RuntimeError("Expected a 'cpu' device type for generator but found 'cuda'")

    monkeypatch.setattr(grading_main, "observe_job", broken)
    monkeypatch.setattr("sys.stdin", io.StringIO(TOKEN + "\n" + job.to_json() + "\n"))  # the job on the pipe
    assert grading_main.main([str(tmp_path / "job.json"), str(tmp_path / "events.jsonl")]) == 1
    stream = Stream([0], token=TOKEN)
    for text in events.read_text(encoding="utf-8").splitlines():
        stream.feed_line(text)
    assert not stream.tampered and "RuntimeError: Expected a 'cpu' device type" in stream.grader_error
    assert "in broken" in stream.grader_error  # the traceback, to show the instructor


def test_a_replay_refuses_when_the_graders_files_changed(monkeypatch, tmp_path):
    """Where the kernel cannot seal the recording process, a writer in C can change the grader's files: the replay
    compares their digest with the one the grader took before the recording ran, and grades nothing."""
    from checks.engine.processes import run

    taken = run._digest
    monkeypatch.setattr(run, "_digest", lambda role, workdir: taken(role, workdir) if role == "record" else "0" * 64)
    verdict = grade(get_puzzle(1), None, solution=True, timeout=60)
    report = V.format_verdict(verdict)
    assert verdict.status == V.TAMPERED and "changing the grader's files" in report, report
