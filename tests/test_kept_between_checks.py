"""The answer key's plan at the timing size, recorded once in the grader's own process and kept between checks
(checks.engine.answer_key): recorded only where it depends on shapes alone, sent in the replay's job, performed there
with no Python of the key, and out of every submission's reach; the key's autotuning choice is its own."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from checks import verdict as V
from checks.engine import answer_key
from checks.engine.answer_key import KeptPlan, kept_plan, key_plan_here, key_source, parameters_of
from checks.engine.record.plan_recorder import PlanRecorder
from checks.puzzles import spec_module
from checks.registry import Bench, get_puzzle, load_puzzles

TIMED = [
    p.number for p in load_puzzles() if p.ready and not p.needs_hopper and p.timing_case is not None
]  # interpreted
SMALL_ADD = Bench(n=4099, baseline="torch.add")  # puzzle 1 with a timing size a CPU draws in a moment


@pytest.fixture(autouse=True)
def no_kept_plans():
    answer_key.forget_kept_plans()
    yield
    answer_key.forget_kept_plans()


def small(puzzle, solution: Path | None = None):
    """`puzzle` with a small timing size (and another answer key, when given)."""
    changes = {"bench": SMALL_ADD} if puzzle.number == "1" else {"bench": Bench(**puzzle.cases.cpu[-1].given())}
    return dataclasses.replace(puzzle, **changes, **({"solution": solution} if solution else {}))


def vector_add_key(folder: Path, body: str = "", name: str = "key.py") -> Path:
    """An answer key of puzzle 1, with `body` run on its inputs before its launch."""
    key = folder / name
    key.write_text(
        "import torch\nimport triton\nimport triton.language as tl\n\n\n"
        "@triton.jit\ndef add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)\n"
        "    mask = offs < n\n"
        "    x = tl.load(x_ptr + offs, mask=mask)\n"
        "    y = tl.load(y_ptr + offs, mask=mask)\n"
        "    tl.store(out_ptr + offs, x SIGN y, mask=mask)\n\n\n"
        "def vector_add(x, y):\n"
        f"    {body or 'pass'}\n"
        "    out = torch.empty_like(x)\n"
        "    n = x.numel()\n"
        "    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)\n"
        "    return out\n".replace("SIGN", "-" if "minus" in name else "+"),
        encoding="utf-8",
    )
    return key


# -- what may be kept: a plan that depends on shapes alone ---------------------------------------------------------
READS = {
    "item": "int(x[0].item())",
    "a torch op on an input": "torch.cumsum(y, 0)",
    "bool of a comparison": "bool((x > 0).any())",
    "a copy, then a read": "x.clone().sum()",
}
NO_READS = {
    "shapes and strides": "x.shape, x.stride(), x.numel(), x.dtype, x.is_contiguous()",
    "an allocation like an input": "torch.empty_like(y)",
    "a view": "x.view(-1)[:3]",
}


@pytest.mark.parametrize("name", sorted(READS) + sorted(NO_READS))
def test_the_recorder_notes_a_call_that_reads_its_inputs_values(name):
    x, y = torch.randn(8), torch.randn(8)
    recorder = PlanRecorder({"x": x, "y": y}, {})
    with recorder:
        eval(READS.get(name) or NO_READS[name])
    assert bool(recorder.read_inputs) is (name in READS), recorder.read_inputs


def test_a_copy_of_an_input_off_the_device_is_a_read_of_its_values():
    """On a GPU an input's values reach Python only through torch: `.item()`, or a copy to the host (`.cpu()`,
    `.tolist()`, `.numpy()` make one). A copy on the device reads nothing there."""
    on_device = torch.empty(8, device="meta")  # stands in for a GPU tensor: another device than the host's
    recorder = PlanRecorder({"x": on_device}, {})
    recorder._carried(on_device, torch.empty(8, device="meta"), "clone")
    assert recorder.read_inputs == []
    recorder._carried(on_device, torch.empty(8), "_to_copy")
    assert recorder.read_inputs == ["aten._to_copy to the host"]


@pytest.mark.parametrize("number", TIMED)
def test_every_answer_keys_plan_depends_on_shapes_alone(number):
    """Each key's plan, recorded twice on fresh inputs of one size, is the same plan, and reads no input's values:
    the grader may keep it for the next check's fresh inputs."""
    puzzle = get_puzzle(number)
    case = puzzle.cases.cpu[-1]
    first, second = key_plan_here(puzzle, "cpu", case), key_plan_here(puzzle, "cpu", case)
    assert first is not None and first == second
    assert first["kernel_source"] == key_source(puzzle).to_dict()


@pytest.mark.parametrize("name", sorted(READS))
def test_a_key_whose_plan_reads_its_inputs_values_is_not_kept(name, tmp_path):
    puzzle = small(get_puzzle(1), vector_add_key(tmp_path, READS[name]))
    assert key_plan_here(puzzle, "cpu") is None
    plain = small(get_puzzle(1), vector_add_key(tmp_path, name="plain.py"))
    assert key_plan_here(plain, "cpu") is not None


# -- kept in the grader: recorded once ------------------------------------------------------------------------------
def settled(kept: KeptPlan) -> dict | None:
    kept.settle(timeout=60)
    return kept.ready()


def test_the_grader_records_a_keys_plan_once_and_keeps_it(monkeypatch, tmp_path):
    recorded: list[str] = []
    record = answer_key.key_plan_here
    monkeypatch.setattr(answer_key, "key_plan_here", lambda p, d: recorded.append(p.number) or record(p, d))
    key = vector_add_key(tmp_path)
    puzzle = small(get_puzzle(1), key)
    first = settled(kept_plan(puzzle, "cpu"))
    assert first is not None and settled(kept_plan(puzzle, "cpu")) is first and recorded == ["1"]
    key.write_text(key.read_text(encoding="utf-8").replace("x + y", "y + x"), encoding="utf-8")
    changed = settled(kept_plan(puzzle, "cpu"))  # the key's text changed: recorded anew
    assert recorded == ["1", "1"] and changed is not None and "y + x" in json.dumps(changed["kernel_source"])


def test_a_failed_recording_is_not_kept_and_the_next_check_records_again(monkeypatch, tmp_path):
    calls: list[int] = []

    def fails_once(puzzle, device):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("out of memory")
        return {"plan": {}, "kernel_source": {}}

    monkeypatch.setattr(answer_key, "key_plan_here", fails_once)
    puzzle = small(get_puzzle(1))
    assert settled(kept_plan(puzzle, "cpu")) is None  # this check's replay records the key itself
    assert settled(kept_plan(puzzle, "cpu")) == {"plan": {}, "kernel_source": {}} and len(calls) == 2


def test_a_check_takes_the_kept_plan_only_once_it_is_recorded(monkeypatch):
    release = threading.Event()

    def slow(puzzle, device):
        release.wait(30)
        return {"plan": {}, "kernel_source": {}}

    monkeypatch.setattr(answer_key, "key_plan_here", slow)
    kept = kept_plan(small(get_puzzle(1)), "cpu")
    started = time.monotonic()
    assert kept.ready() is None and time.monotonic() - started < 1  # not waited for: the replay records the key
    release.set()
    assert settled(kept) == {"plan": {}, "kernel_source": {}}


# -- sent in the replay's job, and performed there with no Python of the key ---------------------------------------
class Replayer:
    """Stands in for the replay process: keeps the job it is given and reports nothing."""

    jobs: list = []

    def __init__(self, job, stream, timeout, workdir, stop, process=None) -> None:
        Replayer.jobs.append(job)
        self.stream = stream

    def events(self):
        return iter(())

    def end(self):
        from checks.engine.processes.run import ProcessEnd

        return ProcessEnd(self.stream, 0, False, 0.0, "")


@pytest.mark.parametrize("ready", [True, False])
def test_the_replay_job_carries_the_plan_the_grader_keeps(ready, monkeypatch, tmp_path):
    from checks.engine.contract.protocol import CasePlan, Job, RecordStream, TimingPlan
    from checks.engine.judging import stage as staging

    puzzle = get_puzzle(1)
    kept = key_plan_here(puzzle, "cpu", puzzle.cases.cpu[0])
    plan = kept["plan"]  # the key's own plan stands in for a submission's
    said = {"raised": "", "raised_where": [], "stub": False, "printed": "", "seconds": 0.0}
    recording = RecordStream([0], plans=[CasePlan(index=0, plans=[plan, plan], **said)], observed=True,
                             timing_plan=TimingPlan(plans=[plan], **said))  # fmt: skip
    stage = staging.Stage(puzzle, Job(puzzle.number, "x.py", {}, 1, cases=[0]), "gpu", tmp_path, time_it=True)
    stage.key_plan = SimpleNamespace(ready=lambda: kept if ready else None)
    monkeypatch.setattr(staging, "GradingProcess", Replayer)
    monkeypatch.setattr(stage, "recorded", lambda recording, end: True)
    stage.replay(recording, None, key_source(puzzle), stage.job, None, 10.0)
    sent = Replayer.jobs[-1]
    assert sent.role == "replay" and sent.timing_plan == plan
    assert (Job.from_json(sent.to_json()).key_plan == kept) is ready and (sent.key_plan is None) is not ready


def test_the_grader_waits_for_a_key_plan_still_recording_before_it_asks_for_the_timing(tmp_path):
    from checks.engine.contract.protocol import TIME_COMMAND, Job, Observed
    from checks.engine.judging.stage import Stage

    puzzle = get_puzzle(1)
    stage = Stage(puzzle, Job(puzzle.number, "x.py", {}, 1), "gpu", tmp_path, time_it=True)
    stage.results = [SimpleNamespace(passed=True)] * len(stage.selection)
    waited: list[bool] = []
    stage.key_plan = SimpleNamespace(settle=lambda: waited.append(True))
    assert stage.judge_event(Observed()) == TIME_COMMAND and waited == [True]


def test_the_replay_performs_the_kept_plan_and_runs_none_of_the_keys_python(machine_mode, monkeypatch, tmp_path):
    """A plan kept from another key (one that subtracts) is what the replay performs: it takes the plan it is sent,
    and never loads the answer key's file."""
    from checks.engine import submission
    from checks.engine.answer_key import replayed_answer_key

    device = "cuda" if machine_mode == "gpu" else "cpu"
    puzzle = small(get_puzzle(1))
    minus = key_plan_here(small(puzzle, vector_add_key(tmp_path, name="minus.py")), device)

    def no_python(*args, **kwargs):
        raise AssertionError("the replay loaded the answer key's Python")

    monkeypatch.setattr(submission, "load_module", no_python)
    key = replayed_answer_key(puzzle, parameters_of(puzzle), device, tmp_path, minus)
    x, y = torch.randn(4099, device=device), torch.randn(4099, device=device)
    assert torch.equal(key(x, y), x - y)


def test_without_a_kept_plan_the_replay_records_the_keys_plan_on_its_first_call(machine_mode, tmp_path):
    """The replay's own recording (no plan kept yet, or one that reads its inputs' values) gives the plan the grader
    would keep, and the key's answer."""
    from checks.engine.answer_key import replayed_answer_key

    device = "cuda" if machine_mode == "gpu" else "cpu"
    puzzle = small(get_puzzle(1))
    key = replayed_answer_key(puzzle, parameters_of(puzzle), device, tmp_path)
    assert key.plan is None
    x, y = torch.randn(4099, device=device), torch.randn(4099, device=device)
    assert torch.equal(key(x, y), x + y)
    assert json.loads(json.dumps(key.plan)) == key_plan_here(puzzle, device)["plan"]


def test_the_timing_times_the_kept_plan(machine_mode, tmp_path):
    """The timing's key side is the kept plan's replay: its outputs are the ones the grader compares."""
    from checks.engine.answer_key import replayed_answer_key
    from checks.engine.judging.judge import load_timing_outputs
    from checks.engine.replay.measure import TimingRun
    from tests.test_timing import FakeClock

    device = "cuda" if machine_mode == "gpu" else "cpu"
    puzzle = small(get_puzzle(1))
    kept = key_plan_here(puzzle, device)
    key = replayed_answer_key(puzzle, parameters_of(puzzle), device, tmp_path, kept)
    yours = replayed_answer_key(puzzle, parameters_of(puzzle), device, tmp_path, kept)  # a replayed plan, as yours is
    raw = TimingRun(puzzle, spec_module(puzzle), yours, key, tmp_path, device=device).rounds(
        timer=FakeClock(1.0), rounds_count=3
    )
    assert set(raw["rounds"]) == {"yours", "answer key", "torch.add"} and key.plan is kept["plan"]
    yours, theirs = load_timing_outputs(tmp_path, SimpleNamespace(**raw))
    assert torch.equal(yours[0], theirs[0])


# -- the key's autotuning choice is its own ---------------------------------------------------------------------------
def test_a_kernel_named_like_the_keys_does_not_choose_the_keys_config(own_gpu_lock, monkeypatch):
    """On a GPU a replay times each config of an autotuned launch once and keeps the fastest for later launches. A
    submission's kernel with the name of one of the key's kernels chooses for itself alone."""
    import triton.testing

    from checks.engine.replay import perform

    monkeypatch.setattr(perform, "_chosen", {})
    ran: list[tuple[str, int]] = []

    class Kernel:
        def __init__(self, owner: str, fast: int) -> None:
            self.owner, self.fast = owner, fast

        def __getitem__(self, grid):
            return lambda config, **options: ran.append((self.owner, config))

    def clock(fn, **kwargs) -> float:
        assert held(timing=False)  # timed with the GPU to itself
        fn()
        owner, config = ran[-1]
        kernel = submissions if owner == "submission" else key
        return 1.0 if config == kernel.fast else 5.0

    monkeypatch.setattr(triton.testing, "do_bench", clock)
    submissions, key = Kernel("submission", 1), Kernel("key", 0)
    op = {
        "kernel": "_attn_fwd",
        "alternatives": [{"grid": [1], "args": {"config": {"scalar": c}}, "options": {}} for c in (0, 1)],
    }
    performer = perform.Performer({"ops": []}, {}, {}, None, "cuda", False)
    assert performer._fastest(op, submissions) == 1
    assert performer._fastest(op, key) == 0  # timed for itself, not the submission's choice


# -- out of the submission's reach ----------------------------------------------------------------------------------
HOSTILE = {
    "writes into the answer key's file": (
        "from pathlib import Path\n"
        "Path(__import__('checks').__file__).parents[1].joinpath('solutions', '01_vector_add.py').open('a')"
        ".write('\\n# changed\\n')\n"
    ),
    "writes into Triton's compile cache": (
        "import os\nfrom pathlib import Path\n"
        "home = Path(os.environ.get('TRITON_CACHE_DIR') or Path.home() / '.triton' / 'cache')\n"
        "home.mkdir(parents=True, exist_ok=True)\n(home / 'forged.json').write_text('{}')\n"
    ),
    "changes the grader's kept plans in its own process": (
        "import checks.engine.answer_key as k\nk._kept.clear()\nk.key_plan_here = lambda *a: {'plan': {}}\n"
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_submission_cannot_change_the_kept_plan(name, tmp_path):
    """The kept plan lives in the grader's process; the learner's host code runs in a sealed recording process that
    writes only its own folder. Whatever a submission does there, the grader's kept plan is the plan it recorded,
    and the key's file (which any later recording reads) is as it was."""
    from checks.engine.grade import grade

    puzzle = small(get_puzzle(1))
    kept = kept_plan(puzzle, "cpu")
    before = json.dumps(settled(kept), sort_keys=True)
    solution = get_puzzle(1).solution
    key_text = solution.read_text(encoding="utf-8")
    hostile = tmp_path / "hostile.py"
    hostile.write_text(key_text + "\n\n" + HOSTILE[name], encoding="utf-8")  # the key, and more at its import
    try:
        verdict = grade(get_puzzle(1), hostile, interpret=True)
        assert solution.read_text(encoding="utf-8") == key_text
    finally:  # put back only if changed: a rewrite races the other workers' checks, which read the key's file
        if solution.read_text(encoding="utf-8") != key_text:
            solution.write_text(key_text, encoding="utf-8")
    if name.startswith("writes"):
        assert verdict.status == V.TAMPERED and "refuses" in verdict.summary, verdict.summary
    else:
        assert verdict.passed, verdict.summary
    assert kept_plan(puzzle, "cpu").found is kept.found and json.dumps(kept.ready(), sort_keys=True) == before
    assert before == json.dumps(key_plan_here(puzzle, "cpu"), sort_keys=True)


# -- the answer key's access log (the traffic a passing verdict shows beside yours) -----------------------------------
def test_the_keys_access_log_is_recorded_once_ahead_and_waited_for(monkeypatch, tmp_path):
    """Started ahead (a GPU check starts it as it begins), the key's log is recorded by one process; a verdict that
    asks for it meanwhile waits for that recording, and a later check reads the kept file."""
    from checks.engine.access import traffic
    from checks.engine.processes import access_recording

    monkeypatch.setattr(traffic, "KEY_LOGS", tmp_path)
    release, calls = threading.Event(), []

    def recording(number, path, case, timeout, earlier=None, seed=1):
        calls.append(number)
        release.wait(30)
        return {"log": {"recorded": number}}

    monkeypatch.setattr(access_recording, "record_in_own_process", recording)
    puzzle = get_puzzle(1)
    traffic.record_answer_key_log_ahead(puzzle)
    traffic.record_answer_key_log_ahead(puzzle)  # already under way: not a second process
    asked = ThreadPoolExecutor(1).submit(traffic.answer_key_log, puzzle)
    time.sleep(0.2)
    assert not asked.done()  # waits for the recording started ahead
    release.set()
    assert asked.result(timeout=30) == {"recorded": "1"} and calls == ["1"]
    traffic.record_answer_key_log_ahead(puzzle)  # kept now: nothing starts
    assert traffic.answer_key_log(puzzle) == {"recorded": "1"} and calls == ["1"]


def test_a_gpu_check_starts_the_keys_access_log_before_its_stages(monkeypatch, tmp_path):
    from checks.engine import grade as grading
    from checks.engine.contract.protocol import Job
    from checks.engine.judging.stage import Stage

    class Started(Exception):
        pass

    def ahead(puzzle):
        raise Started(puzzle.number)

    monkeypatch.setattr(grading, "record_answer_key_log_ahead", ahead)
    monkeypatch.setattr(grading, "split_cases", lambda *a: pytest.fail("a stage was set up before the key's log"))
    stage = Stage(get_puzzle(1), Job("1", "m.py", {}, 7), "gpu", tmp_path, time_it=True)
    with pytest.raises(Started, match="1"):
        grading.with_interpreter_stage(stage, tmp_path, 10.0, None)


@pytest.mark.parametrize("later", [True, False])
def test_an_interpreter_stage_beside_a_gpu_stage_judges_without_waiting_for_the_keys_log(later, monkeypatch, tmp_path):
    """The interpreter stage's verdict is what lets the GPU time the submission; the key's traffic it is shown beside
    comes once the timing is done (`traffic_later`), so that no verdict waits for the process that records it."""
    from checks.engine.contract.protocol import Job
    from checks.engine.judging import stage as staging

    asked: list[str] = []
    monkeypatch.setattr(staging, "answer_key_log", lambda puzzle: asked.append(puzzle.number))
    part = staging.Stage(get_puzzle(1), Job("1", "m.py", {}, 7, interpret=True), "interpreter", tmp_path)
    part.traffic_later = later
    part.results = [V.CaseResult(i, f"case {i + 1}", True) for i in part.selection]
    part.judge.first_access = {}
    monkeypatch.setattr(staging, "traffic_lines", lambda access, key: ["programs: 1 in 1 launch"])
    verdict = V.Verdict(1, V.FAILED, "")
    part.finished_verdict(verdict)
    shown = any(line.startswith("Memory traffic of case 1") for line in verdict.details)
    assert verdict.passed and asked == ([] if later else ["1"]) and shown is not later


# -- the GPU to itself while a check is timed ------------------------------------------------------------------------
@pytest.fixture
def own_gpu_lock(monkeypatch, tmp_path):
    """A lock file of this test's own (a made-up CUDA_VISIBLE_DEVICES): other tests' timings never meet it."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"test-{tmp_path.name}")


def held(timing: bool) -> bool:
    """Whether a lock another process or thread would take (exclusive for a timing, shared for a context) waits."""
    import fcntl
    import os

    from checks.engine.timing import quiet_gpu_path

    fd = os.open(quiet_gpu_path(), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if timing else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_a_spare_makes_its_cuda_context_only_once_the_timing_under_way_is_done(own_gpu_lock, monkeypatch):
    from checks.engine import machine
    from checks.engine.timing import quiet_gpu

    made: list[float] = []
    monkeypatch.setattr(machine, "make_cuda_context", lambda: made.append(time.monotonic()))
    with quiet_gpu(timing=True):
        spare = threading.Thread(target=machine.warm_up_gpu)
        spare.start()
        time.sleep(0.3)
        assert made == [] and held(timing=False) and held(timing=True)  # the spare waits, and so would a timing
        released = time.monotonic()
    spare.join(10)
    assert len(made) == 1 and made[0] >= released and not held(timing=True)


def test_a_timing_waits_for_a_context_being_made(own_gpu_lock, monkeypatch):
    from checks.engine import machine
    from checks.engine.timing import quiet_gpu

    making = threading.Event()
    monkeypatch.setattr(machine, "make_cuda_context", lambda: (making.set(), time.sleep(0.4)))
    spare = threading.Thread(target=machine.warm_up_gpu)
    spare.start()
    making.wait(10)
    started = time.monotonic()
    with quiet_gpu(timing=True):
        waited = time.monotonic() - started
    spare.join(10)
    assert waited > 0.2


def test_the_rounds_are_timed_with_the_gpu_to_themselves(own_gpu_lock, machine_mode, tmp_path):
    from checks.engine.answer_key import replayed_answer_key
    from checks.engine.replay.measure import TimingRun

    seen: list[bool] = []

    def clock(fn) -> float:
        seen.append(held(timing=False))  # a spare's context would wait
        return 1.0

    puzzle = small(get_puzzle(1))
    device = "cuda" if machine_mode == "gpu" else "cpu"
    key = replayed_answer_key(puzzle, parameters_of(puzzle), device, tmp_path, key_plan_here(puzzle, device))
    timing = TimingRun(puzzle, spec_module(puzzle), torch.add, key, tmp_path, device=device)
    assert "answer key" in timing.contenders  # the key's side is timed too
    timing.rounds(clock, 2)
    assert seen and all(seen) and not held(timing=True)


def test_a_process_that_holds_the_gpu_takes_it_again_without_waiting(own_gpu_lock):
    from checks.engine.timing import quiet_gpu

    done = threading.Event()

    def nested() -> None:
        with quiet_gpu(timing=True), quiet_gpu(timing=True):  # an autotuner's choice inside the rounds
            done.set()

    worker = threading.Thread(target=nested, daemon=True)
    worker.start()
    worker.join(5)
    assert done.is_set() and not held(timing=True)  # not waiting on itself, and released after


def test_a_timing_stuck_in_its_kernel_holds_the_gpu_no_longer_than_the_wait(own_gpu_lock):
    """A timing that never ends (a kernel stuck until its time limit) never makes another check run past its own:
    after the wait, a spare makes its context and a timing times, without the lock."""
    from checks.engine.timing import quiet_gpu

    stuck, release = threading.Event(), threading.Event()

    def timing_forever() -> None:
        with quiet_gpu(timing=True):
            stuck.set()
            release.wait(30)

    threading.Thread(target=timing_forever, daemon=True).start()
    stuck.wait(10)
    started = time.monotonic()
    with quiet_gpu(timing=False, wait_s=0.3):
        waited = time.monotonic() - started
    release.set()
    assert 0.3 <= waited < 5
