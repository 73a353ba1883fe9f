"""What class grading records about each submission: the submission found in the folder, the copy of it
that is graded, its result, and the notices about the folder. Shared by `checks.instructor.classroom` (which
finds and grades) and `checks.instructor.shards` (which slices a class and merges the slices' reports)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from checks import verdict as V
from checks.registry import Puzzle

NOT_GRADED = "not-graded"  # merged reports: the shard that held this submission never finished


@dataclass
class Notice:
    """A warning about the folder: a name that does not fit ('name') or a second submission ('doubled')."""

    kind: str
    text: str


@dataclass
class Submission:
    learner: str
    puzzle: Puzzle
    path: Path
    earlier: Path | None = None  # the same learner's file for the step this puzzle builds on (9a for 9), if any
    copy: Copy | None = None  # what is graded: read from path before any submission runs (see `take_copies`)


@dataclass
class Copy:
    """A submission as read before any learner's code ran: a .py file's bytes, or a notebook's graded cell;
    and the bytes of the same learner's file for the earlier step it builds on, if any."""

    data: bytes = b""
    source: tuple[str, str] | None = None  # a notebook's graded cell as a module, and how messages name it
    error: str | None = None  # why the file could not be read as a submission
    earlier: bytes | None = None


@dataclass
class Result:
    submission: Submission
    status: str
    summary: str
    seconds: float
    details: list[str] = field(default_factory=list)
    unsealed: str = ""  # why the kernel did not seal the process that ran the submission's code; "" when it did

    @property
    def passed(self) -> bool:
        return self.status == V.PASSED
