"""What the learner's code said, as a report shows it: an exception as one line and the learner's own lines it passed
through (`explain_exception`), and what a call printed and warned (`captured`). The recording process and the replay
process both report calls with them, so they stand below both rooms.
"""

from __future__ import annotations

import contextlib
import io
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path

from checks.engine.machine import NUMPY_PITFALL_TEXT


def explain_exception(exc: BaseException, names: dict[str, str]) -> tuple[str, list[str]]:
    """One line for the exception and the lines of the learner's own code it passed through."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    root = chain[-1]
    text = f"{type(root).__name__}: {root}".strip()
    if NUMPY_PITFALL_TEXT in str(exc) or NUMPY_PITFALL_TEXT in text:
        return text, [
            "This is the Triton-interpreter/numpy incompatibility: run `pip install 'numpy<2.4'` and check again."
        ]
    where: list[str] = []
    if "illegal memory access" in text or "misaligned address" in text:
        where.append("A CUDA memory fault is an out-of-bounds load or store: check your masks, offsets and strides.")
    for link in reversed(chain):
        for frame in traceback.extract_tb(link.__traceback__):
            shown = names.get(str(Path(frame.filename).resolve()))
            if shown:
                entry = f"{shown}, line {frame.lineno}: {(frame.line or '').strip()}"
                if entry not in where:
                    where.append(entry)
    return text, where[-4:]


@contextlib.contextmanager
def captured(buffer: io.StringIO) -> Iterator[None]:
    """What the call prints, and the warnings it raises (one line each), go to `buffer`."""
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(buffer):
        warnings.simplefilter("ignore")  # the libraries' own deprecation notes are not the learner's business
        warnings.simplefilter("always", RuntimeWarning)  # numeric trouble: NaN, overflow, division by zero
        with contextlib.redirect_stderr(buffer):
            try:
                yield
            finally:
                lines = [
                    f"{w.category.__name__}: {w.message} ({Path(w.filename).name}, line {w.lineno})" for w in caught
                ]
                buffer.writelines(f"{line}\n" for line in dict.fromkeys(lines))
