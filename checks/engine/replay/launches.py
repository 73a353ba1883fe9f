"""Watch a submission while it runs: which Triton kernels it launches and what it allocates.

Launches are counted by wrapping the `run` method of Triton's kernel classes (the compiled
`JITFunction` and the interpreter's `InterpretedFunction`); both paths, `kernel[grid](...)` and
autotuned kernels, end there. The replay watches the launches it makes itself, so that the verdict can
say which kernel ran and with which blocks.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from checks.engine.patching import kernel_classes, replaced


@dataclass
class Launch:
    kernel: str
    filename: str
    blocks: dict[str, int] = field(default_factory=dict)  # BLOCK_* constants passed by keyword


@dataclass
class Tracker:
    """What the submission did during one graded call."""

    own_files: set[str]
    launches: list[Launch] = field(default_factory=list)

    def own(self, launch: Launch) -> bool:
        return launch.filename in self.own_files

    @property
    def own_launches(self) -> list[Launch]:
        return [launch for launch in self.launches if self.own(launch)]


def _source_file(kernel: object) -> str:
    fn = getattr(kernel, "fn", None)
    code = getattr(fn, "__code__", None)
    return str(Path(code.co_filename).resolve()) if code is not None else "?"


@contextlib.contextmanager
def watch_launches(tracker: Tracker) -> Iterator[Tracker]:
    """Record every Triton kernel launch inside the block."""

    def wrap(original: Callable) -> Callable:
        @functools.wraps(original)
        def run(self, *args, **kwargs):
            bound = dict(zip(getattr(self, "arg_names", []), args, strict=False))
            bound.update(kwargs)
            blocks = {k: int(v) for k, v in bound.items() if k.startswith("BLOCK") and isinstance(v, int)}
            launch = Launch(getattr(getattr(self, "fn", None), "__name__", "?"), _source_file(self), blocks)
            tracker.launches.append(launch)
            return original(self, *args, **kwargs)

        return run

    with replaced([(cls, "run", wrap(cls.run)) for cls in kernel_classes()]):
        yield tracker
