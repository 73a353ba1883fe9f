"""The fork server's messages: what the grader asks of it and what it answers, each a dataclass read through the one
typed reader (`checks.typed_reader.build`).

The grader (`checks.engine.processes.forking`) sends a `ForkRequest`, with the grading process's standard input and
output log as two file descriptors beside it; the server (`checks.engine.grading_process.fork_server`) answers
`Forked` or `Refused` to it, and sends `Ended` once a grading process it forked is reaped, or `Stopped` when it cannot
serve at all. On the socket each is one JSON object whose "kind" names its class. A message that does not fit its
class (a field unknown, missing or of another type, an unknown kind, or no JSON) raises `RecordError` (a TypeError) or
ValueError, whose message names the field: the server refuses such a request, and the grader stops using a server
that sends such an answer.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeVar

from checks.typed_reader import Mismatch, RecordError, build

T = TypeVar("T")


@dataclass
class ForkRequest:
    """A grading process to fork: `python -m checks.engine.grading_process.main ARGS` with the environment `env`, or
    with `program` "map", `python -m checks.engine.grading_process.recording ARGS` (an access log for a map)."""

    id: int  # the request's number, repeated in its answer
    args: list[str]
    env: dict[str, str]
    program: Literal["grading", "map"] = "grading"


@dataclass
class Forked:
    """The grading process of request `id` runs, as process `pid`."""

    id: int
    pid: int


@dataclass
class Refused:
    """Request `id` (None: a request too malformed to have one) was not forked, for the reason `why`."""

    id: int | None
    why: str


@dataclass
class Ended:
    """The grading process `pid` ended and was reaped, with the wait status `status`."""

    pid: int
    status: int


@dataclass
class Stopped:
    """The server cannot serve (`why`) and ends."""

    why: str


Answer = Forked | Refused | Ended | Stopped
KINDS: dict[str, type] = {
    "request": ForkRequest,
    "forked": Forked,
    "refused": Refused,
    "ended": Ended,
    "stopped": Stopped,
}
_KIND_OF = {cls: kind for kind, cls in KINDS.items()}


def encode(message: ForkRequest | Answer) -> bytes:
    """A message as it goes on the socket: one JSON object, its "kind" first."""
    return json.dumps({"kind": _KIND_OF[type(message)], **asdict(message)}).encode()


def decode(data: bytes, *expected: type[T]) -> T:
    """The message in `data`, which must be one of the classes `expected`; ValueError for data that is no JSON,
    RecordError (naming the field) for a message of another kind or whose fields do not fit its class."""
    value: Any = json.loads(data)
    if not isinstance(value, dict):
        raise RecordError("message", Mismatch("type", (), "", value, "an object"))
    kind = value.pop("kind", None)
    allowed = tuple(_KIND_OF[cls] for cls in expected)
    if kind not in allowed:
        wanted = "one of " + ", ".join(map(repr, allowed))
        raise RecordError("message", Mismatch("value", ("kind",), ".kind", kind, wanted, allowed))
    return build(KINDS[kind], value, kind)
