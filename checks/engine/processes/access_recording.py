"""Record a submission's access log in a process of its own (`python -m checks.engine.grading_process.recording`), for a
map or for the answer key's memory traffic: the learner's code never runs in the caller's process."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

from checks.engine.processes import process_table
from checks.engine.processes.forking import server_pids
from checks.engine.processes.sealing import left_behind
from checks.engine.processes.spawn import forget, kill, own_processes, start_map_recording


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
        out, log = Path(tmp) / "log.pt", Path(tmp) / "output.log"
        args = [str(number), str(path), str(case), str(out), str(seed)] + ([str(earlier)] if earlier else [])
        proc = start_map_recording(args, log)  # the start path of every grading process: known, and sealed after
        since = process_table.lookup(proc.pid)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            kill(proc)
            raise MapError(f"{path.name} ran past the {timeout:g} s limit; fix it with `make check` first.") from exc
        finally:
            left = left_behind(proc.pid, own_processes, server_pids(), since.started if since else None)
            forget(proc)
        if left:
            raise MapError(f"{path.name} started a process that outlived the recording ({left[0]}); remove it.")
        if proc.returncode != 0 or not out.exists():
            text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
            tail = text.strip().splitlines()[-3:]
            if tail and tail[-1].startswith("NotImplementedError"):
                raise MapError("Your code is still the stub: fill in the FILL ME IN parts, then draw the map.")
            raise MapError(f"{path.name} could not be recorded: " + " / ".join(tail))
        return torch.load(out, weights_only=True)
