"""Record a submission's access log in a process of its own (`python -m checks.engine.grading_process.recording`), for a
map or for the answer key's memory traffic: the learner's code never runs in the caller's process."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from checks.registry import ROOT


class MapError(RuntimeError):
    """Something to tell the learner instead of a picture."""


def record_in_own_process(
    number: int | str, path: Path, case: int, timeout: float, earlier: Path | None = None, seed: int = 1
) -> dict[str, Any]:
    """Run `path` on one CPU case (its index; drawn with `seed`) in a process of its own and return its recording (see
    grading_process.recording.record_file); `earlier` is the code of the step the puzzle builds on, where the submission
    uses it (checks.engine.submission.earlier_step)."""
    import torch

    with tempfile.TemporaryDirectory(prefix="checks-map-") as tmp:
        out = Path(tmp) / "log.pt"
        command = [
            sys.executable,
            "-m",
            "checks.engine.grading_process.recording",
            str(number),
            str(path),
            str(case),
            str(out),
            str(seed),
        ]
        command += [str(earlier)] if earlier else []
        try:
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise MapError(f"{path.name} ran past the {timeout:g} s limit; fix it with `make check` first.") from exc
        if done.returncode != 0 or not out.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            if tail and tail[-1].startswith("NotImplementedError"):
                raise MapError("Your code is still the stub: fill in the FILL ME IN parts, then draw the map.")
            raise MapError(f"{path.name} could not be recorded: " + " / ".join(tail))
        return torch.load(out, weights_only=True)
