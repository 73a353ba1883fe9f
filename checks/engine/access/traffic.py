"""Memory traffic from an access log: bytes loaded and stored per tensor, as multiples of its size.

    traffic_lines(log, key=None) -> list[str]

One line per tensor, beside the answer key's log of the same case and the minimum (an input read
once, an output written once, a scratch buffer never touched), then the number of programs. The kernels' loads,
stores and atomics (an atomic reads and writes its element) count, and so do the copies the host function made (a
cast, `.contiguous()`: torch's own kernel on a GPU, which reads its source once and writes its result once), so that
an output made by casting a buffer the kernels summed into by atomics is written, as it is on a GPU. A figure below
the minimum says in words what it means:

    k      read 32.0x — answer key 1.0x, minimum 1.0x
    o      written 0.8x — answer key 1.0x, minimum 1.0x: below the minimum, so part of o is never written
    programs: 16 in 1 launch — answer key 16 in 1 launch
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from checks.engine.access.log import AccessLog


def _log(data: AccessLog | dict[str, Any] | None) -> AccessLog | None:
    if data is None or isinstance(data, AccessLog):
        return data
    return AccessLog.from_dict(data)


def _times(lanes: int, numel: int) -> float:
    return lanes / max(1, numel)


def display_name(region: dict[str, Any]) -> str:
    """An input's or output's name; 'scratch (4, 100) float32' for any other buffer."""
    name, label = region["name"], region["label"]
    if region["role"] == "input" or name != label:
        return name
    if label.startswith("a (") and label.endswith(" tensor you allocated"):
        return "scratch " + label[2 : -len(" tensor you allocated")]
    return f"scratch {label}"


def tensor_traffic(log: AccessLog) -> dict[str, tuple[float, float, str]]:
    """name -> (times read, times written, role); role is input, output or scratch.

    Regions never touched are left out, and so are scratch regions outside the arena.
    """
    found: dict[str, tuple[float, float, str]] = {}
    copied_from, copied_into = copy_lanes(log)
    for region, loaded, stored, read_by_copy, written_by_copy in zip(
        log.regions, log.loaded, log.stored, copied_from, copied_into, strict=True
    ):
        loaded, stored = loaded + read_by_copy, stored + written_by_copy
        if region["role"] == "scratch" and not (loaded or stored):
            continue
        name = display_name(region)
        n = 1
        while (name if n == 1 else f"{name} #{n}") in found:  # scratch buffers of the same shape
            n += 1
        role = "input" if region["role"] == "input" else "output" if region["name"] != region["label"] else "scratch"
        found[name if n == 1 else f"{name} #{n}"] = (
            _times(loaded, region["numel"]), _times(stored, region["numel"]), role,
        )  # fmt: skip
    return found


def copy_lanes(log: AccessLog) -> tuple[list[int], list[int]]:
    """Per region: the elements the plan's copies read from it, and those they wrote into it."""
    read, written = [0] * len(log.regions), [0] * len(log.regions)
    for copy in log.copies:
        elements = math.prod(copy["shape"])
        read[copy["src"]["region"]] += elements
        written[copy["dst"]["region"]] += elements
    return read, written


def _minimum(role: str, output: bool) -> tuple[float, float]:
    """(times read, times written) at least: an input once, an output once, anything else never."""
    if role == "input":
        return 1.0, 0.0
    return (0.0, 1.0) if output else (0.0, 0.0)


def _programs(log: AccessLog) -> str:
    launches = len(log.launches)
    return f"{log.programs()} in {launches} launch{'' if launches == 1 else 'es'}"


def traffic_lines(
    log: AccessLog | dict[str, Any], key: AccessLog | dict[str, Any] | None = None, outputs: tuple[str, ...] = ()
) -> list[str]:
    """Bytes read and written per tensor as multiples of its size, beside the answer key and the minimum.

    Outputs are the regions `AccessRecorder.name_outputs` named, and any listed in `outputs`.
    """
    mine, theirs = _log(log), _log(key)
    assert mine is not None
    ours = tensor_traffic(mine)
    ref = tensor_traffic(theirs) if theirs is not None else {}
    width = max((len(n) for n in ours), default=4)
    lines = []
    for name, (read, written, role) in ours.items():
        their = ref.get(name)
        low_read, low_write = _minimum(role, name in outputs or role == "output")
        for verb, value, index, low in (("read", read, 0, low_read), ("written", written, 1, low_write)):
            if not value and not low and not (their and their[index]):
                continue
            text = f"{name:<{width}}  {verb} {value:.1f}x"
            if theirs is not None:
                text += f" — answer key {their[index]:.1f}x" if their else " — answer key: no such tensor"
                text += f", minimum {low:.1f}x"
            else:
                text += f" — minimum {low:.1f}x"
            if value < low - 1e-9:
                text += f": below the minimum, so part of {name} is never {verb}"
                if their and their[index] < low - 1e-9:
                    text += ", as in the answer key"
            lines.append(text)
    for name, (read, written, _) in ref.items():
        if name not in ours and (read or written):
            lines.append(f"{name:<{width}}  (not in yours) — answer key read {read:.1f}x, written {written:.1f}x")
    programs = f"programs: {_programs(mine)}"
    if theirs is not None:
        programs += f" — answer key {_programs(theirs)}"
    lines.append(programs)
    return lines


KEY_LOGS = Path(__file__).resolve().parents[3] / "build" / "traffic"
_recordings: dict[Path, Future] = {}  # a key's log being recorded now (its file) -> the log, once recorded
_recordings_lock = threading.Lock()


def key_log_path(puzzle: Any) -> Path | None:
    """Where the answer key's access log on the puzzle's first CPU case is kept (None: the puzzle has no key)."""
    import hashlib

    if not puzzle.solution.exists():
        return None
    digest = hashlib.sha1(puzzle.solution.read_bytes() + repr(puzzle.cases.cpu[0]).encode()).hexdigest()[:16]
    return KEY_LOGS / f"{puzzle.stem}-{digest}.pt"


def answer_key_log(puzzle: Any, timeout: float = 120.0) -> dict[str, Any] | None:
    """The answer key's access log on the puzzle's first CPU case, recorded once and kept under build/traffic (the
    recording already under way, if `record_answer_key_log_ahead` started it)."""
    path = key_log_path(puzzle)
    if path is None:
        return None
    kept = _kept_log(path)
    if kept is not None:
        return kept
    return _recording(puzzle, path, timeout).result()


def record_answer_key_log_ahead(puzzle: Any, timeout: float = 120.0) -> None:
    """Start recording the answer key's access log now, beside the check, where none is kept yet: a passing verdict
    shows it, and on a GPU machine the process that records it takes seconds to start."""
    path = key_log_path(puzzle)
    if path is not None and not path.exists():
        _recording(puzzle, path, timeout)


def _kept_log(path: Path) -> dict[str, Any] | None:
    import torch

    try:
        return torch.load(path, weights_only=True)
    except Exception:  # noqa: BLE001 - no usable copy yet: record it
        return None


def _recording(puzzle: Any, path: Path, timeout: float) -> Future:
    with _recordings_lock:
        found = _recordings.get(path)
        if found is not None:
            return found
        found = _recordings[path] = Future()
    threading.Thread(target=_record, args=(found, puzzle, path, timeout), daemon=True, name="key-log").start()
    return found


def _record(found: Future, puzzle: Any, path: Path, timeout: float) -> None:
    import torch

    from checks.engine.processes.access_recording import MapError, record_in_own_process

    try:
        log = record_in_own_process(puzzle.number, puzzle.solution, 0, timeout)["log"]
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(log, path)
        found.set_result(log)
    except MapError:
        found.set_result(None)
    except BaseException as exc:  # noqa: BLE001 - raised where the log is asked for
        found.set_exception(exc)
    finally:
        with _recordings_lock:
            _recordings.pop(path, None)
