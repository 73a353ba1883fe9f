"""Every message between the course's processes is a dataclass read through the one typed reader (checks.typed_reader):
the job and the events of the grading processes, the fork server's requests and answers, the warm grader's request
and reply. A message that does not fit names the field, and a server answers or logs it and serves on."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import Literal

import pytest

from checks import warm, warm_server
from checks.engine.contract import protocol
from checks.engine.contract.kernel_source import KernelSource, SourceFile
from checks.engine.contract.messages import Ended, Forked, ForkRequest, Refused, Stopped, decode, encode
from checks.engine.contract.observations import CaseObservation
from checks.engine.contract.protocol import REPLAY, Job
from checks.registry import ROOT
from checks.typed_reader import RecordError, build


@dataclass
class Inner:
    count: int
    mode: Literal["gpu", "interpreter"] = "gpu"


@dataclass
class Outer:
    name: str
    inner: Inner
    items: list[Inner] = field(default_factory=list)
    sizes: tuple[int, ...] = ()
    by_name: dict[str, Inner] = field(default_factory=dict)
    either: Inner | dict[str, Inner] | None = None


def refused(cls: type, data: object) -> RecordError:
    with pytest.raises(RecordError) as caught:
        build(cls, data, "outer")
    return caught.value


def test_the_reader_builds_nested_records_lists_tuples_and_literals():
    data = {"name": "a", "inner": {"count": 1}, "items": [{"count": 2, "mode": "interpreter"}], "sizes": [3, 4]}
    built = build(Outer, {**data, "either": {"x": {"count": 5}}})
    assert built == Outer("a", Inner(1), [Inner(2, "interpreter")], (3, 4), {}, {"x": Inner(5)})
    assert build(Outer, {**data, "either": {"count": 6}}).either == Inner(6)  # the record whose fields it uses


GOOD = {"name": "a", "inner": {"count": 1}}


@pytest.mark.parametrize(
    "data, message",
    [
        ({**GOOD, "name": 1}, "outer.name is a whole number, not text"),
        ({**GOOD, "inner": {"count": "1"}}, "outer.inner.count is text, not a whole number"),
        ({**GOOD, "inner": {"count": True}}, "outer.inner.count is true or false, not a whole number"),
        (
            {**GOOD, "inner": {"count": 1, "mode": "gpuu"}},
            "outer.inner.mode is 'gpuu', not one of 'gpu', 'interpreter'",
        ),
        ({**GOOD, "inner": {}}, "outer.inner lacks its field 'count'"),
        ({**GOOD, "inner": {"count": 1, "cuont": 1}}, "outer.inner has an unknown field 'cuont'"),
        ({**GOOD, "items": [{"count": 1}, {"count": 1.5}]}, "outer.items[1].count is a number, not a whole number"),
        ({**GOOD, "sizes": [1, "2"]}, "outer.sizes[1] is text, not a whole number"),
        ({**GOOD, "by_name": {"x": {"count": []}}}, "outer.by_name['x'].count is a list, not a whole number"),
        ({**GOOD, "either": {"x": {"cnt": 1}}}, "outer.either['x'] has an unknown field 'cnt'"),
        ({**GOOD, "either": 3}, "outer.either is a whole number, not an object or null"),
    ],
)
def test_a_value_that_does_not_fit_is_named_by_its_field(data, message):
    assert str(refused(Outer, data)) == message


def test_a_mismatch_carries_its_path_for_a_file_to_name_the_line():
    error = refused(Outer, {"name": "a", "inner": {"count": 1}, "items": [{"count": 1}, {"count": "x"}]})
    assert error.mismatch.kind == "type" and error.mismatch.path == ("items", 1, "count")
    unknown = refused(Outer, {"name": "a", "inner": {"count": 1, "cuont": 1}}).mismatch
    assert unknown.kind == "unknown" and unknown.path == ("inner",) and unknown.guess() == "count"


def test_a_job_with_a_field_of_the_wrong_type_names_it():
    job = Job("1", "p1.py", {}, seed=1)
    assert Job.from_json(job.to_json()) == job
    with pytest.raises(RecordError, match=r"^job\.seed is text, not a whole number$"):
        Job.from_json(json.dumps({**json.loads(job.to_json()), "seed": "1"}))


def test_a_jobs_role_and_kernel_source_are_typed():
    source = KernelSource([SourceFile("/p1.py", "p1.py", "def k(x):\n    pass\n")], kernels=["k"])
    job = Job("1", "p1.py", {}, seed=1, role=REPLAY, kernel_source=source)
    back = Job.from_json(job.to_json())
    assert back == job and isinstance(back.kernel_source, KernelSource) and back.kernel_source.files[0].label == "p1.py"
    with pytest.raises(RecordError, match=r"^job\.role is 'judge', not one of 'record', 'replay'$"):
        Job.from_json(json.dumps({**json.loads(job.to_json()), "role": "judge"}))


class RecorderOps(list):
    """A list of its own kind, as the plan recorder's operations are: its constructor takes no items."""

    def __init__(self, owner: object) -> None:
        super().__init__()
        self.owner = owner


MACHINE = protocol.Machine("interpreter", "cpu", "CPU (Triton interpreter)", "2", "3", "1")


def test_the_one_events_writer_sends_the_protocols_dataclasses_as_the_grader_reads_them(tmp_path):
    """`Events.send` writes each event's dataclass as a line the grader's checked streams read back equal, a plan's
    operations whole even in a list of the recorder's own kind; the audit hook's refusal writer is read as refused."""
    ops = RecorderOps(owner=None)
    ops.append({"op": "launch", "kernel": "k"})
    plan = protocol.CasePlan(plans=[{"ops": ops}], raised="", raised_where=[], stub=False, printed="", seconds=0.5,
                             index=0)  # fmt: skip
    recorded = [MACHINE, plan, protocol.Observed()]
    observation = CaseObservation(index=0, returned="tensor", launches=[], raised_where=["p1.py, line 3: x"])
    replayed = [MACHINE, protocol.CaseStart(0), observation, protocol.Observed()]
    for name, events, stream in (("record", recorded, protocol.RecordStream([0], token="t")),
                                 ("replay", replayed, protocol.Stream([0], token="t"))):  # fmt: skip
        path = tmp_path / f"events-{name}.jsonl"
        writer = protocol.Events.open(path, "t")
        for event in events:
            writer.send(event)
        read = [stream.feed_line(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert not stream.tampered and stream.complete and read == events
    assert stream.cases == [observation]
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[1]) == {
        "event": "case_start",
        "index": 0,
        "token": "t",
    }
    path = tmp_path / "events-refused.jsonl"
    writer = protocol.Events.open(path, "t")
    writer.send(MACHINE)
    writer.refusals()("os.system")  # bound before the learner's code runs, as the audit hook takes it
    stream = protocol.Stream([0], token="t")
    for line in path.read_text(encoding="utf-8").splitlines():
        stream.feed_line(line)
    assert "your code tried os.system" in stream.tampered


def test_the_fork_servers_messages_go_and_come_back_typed():
    for message in (ForkRequest(1, ["--preload"], {"A": "1"}), Forked(1, 99), Refused(None, "why"), Ended(9, 0)):
        assert decode(encode(message), type(message)) == message
    assert decode(encode(Stopped("no")), Forked, Refused, Ended, Stopped) == Stopped("no")


@pytest.mark.parametrize(
    "data, expected, message",
    [
        ({"kind": "request", "id": 1, "args": "--preload", "env": {}}, ForkRequest, "request.args is text, not a list"),
        ({"kind": "request", "id": 1, "args": [], "env": {"A": 1}}, ForkRequest, "request.env['A'] is a whole number, "
         "not text"),
        ({"kind": "request", "args": [], "env": {}}, ForkRequest, "request lacks its field 'id'"),
        ({"kind": "forked", "id": 1, "pid": "12"}, Forked, "forked.pid is text, not a whole number"),
        ({"kind": "ended", "pid": 3, "status": 0, "signal": 9}, Ended, "ended has an unknown field 'signal'"),
        ({"kind": "fork", "id": 1}, ForkRequest, "message.kind is 'fork', not one of 'request'"),
        ([1, 2], ForkRequest, "message is a list, not an object"),
    ],
)  # fmt: skip
def test_a_fork_server_message_that_does_not_fit_names_the_field(data, expected, message):
    with pytest.raises(RecordError) as caught:
        decode(json.dumps(data).encode(), expected)
    assert str(caught.value) == message


SERVER = """
import os, socket, sys
from checks.engine.grading_process.fork_server import Server
sock = socket.socket(fileno=int(sys.argv[1]))
print(Server(sock, dict(os.environ)).serve(), flush=True)
"""


def test_the_fork_server_refuses_a_malformed_request_and_serves_on():
    """A server (without the imports of a real one: it forks nothing here) answers each request it cannot serve with
    the field that is wrong, and ends when the grader's end closes."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with theirs:
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(theirs.fileno())],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            pass_fds=[theirs.fileno()],
            stdout=subprocess.PIPE,
            text=True,
        )
    answers = []
    with ours:
        read, write = os.pipe()
        try:
            for request in (
                b'{"kind": "request", "id": 1, "args": "--preload", "env": {}}',
                b"not json",
                encode(ForkRequest(3, [], {"ANOTHER": "environment"})),
            ):
                socket.send_fds(ours, [request], [read, write])
                ours.settimeout(30)
                answers.append(decode(ours.recv(1 << 16), Refused))
        finally:
            os.close(read)
            os.close(write)
    assert server.wait(timeout=30) == 0 and server.stdout.read().strip() == "None"
    assert answers[0] == Refused(None, "a malformed request (request.args is text, not a list)")
    assert answers[1].id is None and answers[1].why.startswith("a malformed request (")
    assert answers[2] == Refused(3, "an environment other than the one the server imported torch and Triton with")


def test_the_warm_graders_messages_go_and_come_back_typed():
    request = warm.WarmRequest(["9", "--solution"], "/tmp", "utf-8")
    assert warm.decode_request(warm.encode(request)) == request
    assert warm.decode_reply(warm.encode(warm.WarmReply(1))) == warm.WarmReply(1)
    with pytest.raises(RecordError, match=r"^request\.argv is a whole number, not a list$"):
        warm.decode_request(b'{"argv": 1, "cwd": "/tmp"}\n')
    with pytest.raises(RecordError, match=r"^reply\.status is text, not a whole number$"):
        warm.decode_reply(b'{"status": "0"}\n')


def test_the_warm_grader_logs_a_request_that_is_not_a_check_and_serves_on(capfd):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    served: list[bool] = []
    thread = threading.Thread(target=lambda: served.append(warm_server.serve_one(theirs)))
    thread.start()
    with ours:
        assert ours.recv(len(warm.READY)) == warm.READY
        socket.send_fds(ours, [b'{"argv": ["1"], "cwd": 7}\n'], [0, 1, 2])
        thread.join(timeout=30)
    theirs.close()
    assert served == [True]  # the next connection is served
    log = capfd.readouterr().out
    assert f"{os.getpid()} refused a message that is not a check: request.cwd is a whole number, not text" in log
