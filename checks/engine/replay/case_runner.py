"""The grading process's side of a graded call: run the learner's function, watched, and report what happened.

Nothing here decides whether the call was right. It draws the case's inputs from the seed, calls
the function inside the watchers (launches, allocations, loads, torch operations), and turns what
they saw into a `CaseObservation`; the returned tensors go to a file the grader names.
"""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path
from typing import Any

import torch

from checks.engine.access.patches import record_access
from checks.engine.access.recorder import AccessRecorder
from checks.engine.contract.observations import BufferObs, CaseObservation, LaunchObs
from checks.engine.contract.protocol import Machine, access_path
from checks.engine.inputs import draw
from checks.engine.learner_output import captured, explain_exception
from checks.engine.replay.launches import Tracker, watch_launches
from checks.memory import Arena
from checks.registry import Case


class Observer:
    """Runs graded calls of one learner function and reports each as an observation."""

    def __init__(self, machine: Machine, names: dict[str, str], workdir: Path) -> None:
        self.machine = machine
        self.names = {str(Path(k).resolve()): v for k, v in names.items()}
        self.own_files = set(self.names)
        self.workdir = workdir

    def call(self, replay: Any, inputs: dict[str, Any], arena: Arena) -> tuple[Any, Tracker, Any]:
        """Perform the plan (`replay(inputs, arena, on_copy)`); its launches and (interpreter) every access recorded."""
        tracker = Tracker(self.own_files)
        recorder = None
        with contextlib.ExitStack() as stack:
            stack.enter_context(watch_launches(tracker))
            if self.machine.mode == "interpreter":
                recorder = stack.enter_context(record_access(arena, inputs))
            result = replay(inputs, arena, copies_of_inputs(recorder, inputs))
            if self.machine.device == "cuda":
                torch.cuda.synchronize()
        return result, tracker, recorder

    def observe(
        self, replay: Any, spec: Any, case: Case, seed: int, index: int, out: Path, data_seed: int
    ) -> CaseObservation:
        """One replay of the case's plan on inputs drawn here (values from `data_seed`); outputs saved to `out`."""
        arena, inputs = draw(spec, case, seed, index, self.machine.device, data_seed)
        arena.freeze_inputs()
        obs = CaseObservation(index=index)
        start = time.perf_counter()
        printed = io.StringIO()
        try:
            with captured(printed):
                returned, tracker, recorder = self.call(replay, inputs, arena)
        except NotImplementedError as exc:
            obs.raised, obs.stub = f"NotImplementedError ({exc})", True
            return obs
        except Exception as exc:  # noqa: BLE001 - any error in learner code is an observation
            obs.raised, obs.raised_where = explain_exception(exc, self.names)
            return obs
        finally:
            obs.seconds = time.perf_counter() - start
            obs.printed = printed.getvalue()[-PRINTED_LIMIT:]
        outputs = list(returned)
        torch.save([t if isinstance(t, torch.Tensor) else None for t in outputs], out)
        obs.outputs_file = out.name
        obs.launches = [LaunchObs(x.kernel, tracker.own(x), x.blocks) for x in tracker.launches]
        obs.buffers = buffer_observations(arena, outputs)
        if recorder is not None:
            recorder.name_outputs(outputs, [f"output {i}" for i in range(len(outputs))])
            torch.save(recorder.log().to_dict(), access_path(self.workdir, index))
            obs.access = {"saved": True}  # the grader reads the log from the file it names itself
            obs.masked_poison = poison_suspects(recorder, outputs)
            obs.ordered_by_atomics = bool(recorder.races.ordered)
        return obs


PRINTED_LIMIT = 3000


def poison_suspects(recorder: AccessRecorder, outputs: list[Any]) -> list[dict[str, Any]]:
    """The loads whose masked-off lanes read poison (no `other=`), when an output holds NaN: the suspects that the
    same call with those lanes read as 0 clears or not (`checks.engine.replay.replay_job.masked_poison_reached`).
    An output with no data (on torch's meta device: the wrong device, which `output_form` reports) holds no NaN."""
    if not recorder.masked_poison:
        return []
    floats = [t for t in outputs if isinstance(t, torch.Tensor) and t.is_floating_point() and not t.is_meta]
    if not any(bool(torch.isnan(t).any()) for t in floats):
        return []
    return [dict(site) for site in recorder.masked_poison]


def copies_of_inputs(recorder: AccessRecorder | None, inputs: dict[str, Any]) -> Any:
    """For the plan's copies: a copy the learner makes of an input (or of a copy) is named as that input, and every
    copy between two regions is noted in the access log, which the judge reads the kernels' work through."""
    if recorder is None:
        return None
    sources = {t.untyped_storage().data_ptr(): name for name, t in inputs.items() if isinstance(t, torch.Tensor)}

    def on_copy(source: torch.Tensor, result: torch.Tensor) -> None:
        name = sources.get(source.untyped_storage().data_ptr())
        if name is not None and isinstance(result, torch.Tensor):
            sources[result.untyped_storage().data_ptr()] = name
            recorder.add_region(f"{name} copy", result, label=f"a copy of {name} you made")
        if isinstance(result, torch.Tensor):
            recorder.note_copy(source, result)  # the judge sees the kernels' loads and stores through every copy

    return on_copy


def buffer_observations(arena: Arena, outputs: list[Any]) -> list[BufferObs]:
    """Each guarded buffer after the call: inputs compared with their snapshots, guards checked."""
    found = []
    owners = {t.untyped_storage().data_ptr(): i for i, t in enumerate(outputs) if isinstance(t, torch.Tensor)}
    for entry in arena.buffers:
        before, after, first_after, after_spans = entry.guard_damage()
        found.append(
            BufferObs(
                label=entry.label,
                role=entry.role,
                numel=entry.size,
                element_size=entry.buf.element_size(),
                changed=entry.changed() if entry.role == "input" else 0,
                before=before,
                after=after,
                first_after=first_after,
                after_spans=after_spans,
                output=owners.get(entry.buf.data_ptr()) if entry.role == "allocated" else None,
                poisoned=entry.poisoned() if entry.role == "allocated" else 0,
            )
        )
    return found
