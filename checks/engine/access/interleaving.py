"""The programs of a launch interleaved at their atomics, as a GPU may run them; the interpreter runs one at a time.

Running a launch's programs first to last (the interpreter's order), or last to first (`patches.programs_reversed`),
finishes each program before the next begins. A program that takes a number from an atomic counter (a ticket) then
arrives in the same place in line in both orders, and the program that draws the last ticket finds every other
program done. On a GPU the others may still be working: the last ticket is not the last to finish.

`programs_interleaved` runs a launch's programs in threads, one running at a time, handing over only at atomics and
at loads that read again what they read before:

1. the programs start first to last; each stops after its first atomic (a ticket drawn, a count made, a lock taken)
   and waits there while the next starts, until `THREAD_LIMIT` are started and unfinished; then the one started last
   runs on, and when it ends the next starts;
2. once every program has started, the one started last that can run goes on, and after each atomic the choice is
   made again, so that a program that waits for a count runs as soon as the count is reached;
3. a program whose atomic returns what its previous atomic at the same line and addresses returned, or whose load
   reads what its previous load at that line read, may be waiting for another (a lock, a flag, a count not yet
   reached): it gives way, to a program not yet started if there is one, else to the others, until an atomic of
   another returns something new (or every program waits, and they take turns).

A program that waits for a count of the programs that have stored (the one that finds the counter at its last value
merges) finds every part stored in this order as in any; one that trusted its ticket merges while the programs paused
after drawing theirs have not stored, however many programs come before them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from checks.engine.interpreted_launch import bound_launch, taken_keywords

THREAD_LIMIT = 256  # programs started and not finished, at most (a thread each)
_running = threading.local()  # in a program's thread: its `schedule` and `program`


class Abandoned(BaseException):
    """The run was left (its time ran out, or a program failed): a program still going stops at its next access."""


class _Schedule:
    """Which program of one launch runs, and the hand-overs at its atomics (the order of the module's docstring)."""

    def __init__(
        self, programs: list[tuple[int, int, int]], set_grid_idx: Callable[[int, int, int], Any],
        run_program: Callable[[], Any],
    ) -> None:  # fmt: skip
        self.programs = programs
        self.set_grid_idx = set_grid_idx
        self.run_program = run_program
        self.turn: int | None = None
        self.next_to_start = 0
        self.live: list[int] = []  # started and not finished, in the order they started
        self.waiting: dict[int, bool] = {}  # its last atomic or load read what the one before it there did
        self.last_atomic: dict[int, tuple] = {}
        self.last_load: dict[int, dict[tuple, tuple]] = {}  # program -> line -> its last load there
        self.lock = threading.Lock()  # held by the thread that changes whose turn it is
        self.condition = threading.Condition(self.lock)  # the launching thread waits on it for the launch's end
        self.turns: dict[int, threading.Condition] = {}  # a program's thread waits on its own for its turn
        self.error: BaseException | None = None
        self.abandoned = False

    @property
    def finished(self) -> bool:
        return self.next_to_start == len(self.programs) and not self.live

    # -- run by the program threads

    def run(self, program: int) -> None:
        _running.schedule = self
        try:
            with self.condition:
                self._wait_for_turn(program)
            self.run_program()
        except Abandoned:
            pass
        except BaseException as error:  # noqa: BLE001 - raised again by the launching thread
            with self.condition:
                self.error = self.error or error
                self.abandon()
        finally:
            with self.condition:
                self.live.remove(program)
                for state in (self.waiting, self.turns, self.last_atomic, self.last_load):
                    state.pop(program, None)
                self._start_or_pick()
                self.condition.notify_all()

    def after_atomic(self, signature: tuple) -> None:
        """Called by the running program after each of its atomics: it goes on, or hands over (see the docstring)."""
        program = _running.program
        with self.condition:
            if self.abandoned:
                raise Abandoned
            first = program not in self.last_atomic
            repeated = self.last_atomic.get(program) == signature
            self.last_atomic[program] = signature
            if first and self._can_start():
                self._start()
            elif repeated:
                self.waiting[program] = True
                self._start_or_pick()
            else:
                self.waiting = dict.fromkeys(self.waiting, False)  # what it returned may be what they wait for
                if self._can_start():
                    return  # programs are still starting: this one runs on
                self._pick()
            self._wait_for_turn(program)

    def after_load(self, signature: tuple) -> None:
        """Called by the running program after each of its loads: one that read, at the same addresses, what its
        previous load at that line read may be waiting (a flag), and gives way; any other goes on."""
        program = _running.program
        with self.condition:
            if self.abandoned:
                raise Abandoned
            seen = self.last_load.setdefault(program, {})
            repeated = seen.get(signature[0]) == signature
            seen[signature[0]] = signature
            if not repeated:
                return
            self.waiting[program] = True
            self._start_or_pick()
            self._wait_for_turn(program)

    def check(self) -> None:
        if self.abandoned:
            raise Abandoned

    def abandon(self) -> None:
        """Leave the run: every program stops at its next access, or as it wakes (called with the condition held)."""
        self.abandoned = True
        for wake in self.turns.values():
            wake.notify()
        self.condition.notify_all()

    # -- the order (called with the condition held)

    def _wait_for_turn(self, program: int) -> None:
        wake = self.turns[program]
        while self.turn != program and not self.abandoned:
            wake.wait()
        if self.abandoned:
            raise Abandoned
        _running.program = program
        self.set_grid_idx(*self.programs[program])

    def _can_start(self) -> bool:
        return self.next_to_start < len(self.programs) and len(self.live) < THREAD_LIMIT

    def _start(self) -> None:
        program = self.next_to_start
        self.next_to_start += 1
        self.live.append(program)
        self.turns[program] = threading.Condition(self.lock)
        self.turn = program
        threading.Thread(target=self.run, args=(program,), daemon=True, name=f"program {program}").start()

    def _start_or_pick(self) -> None:
        if self._can_start():
            self._start()
        else:
            self._pick()

    def _pick(self) -> None:
        """The program started last that is not waiting runs; where all wait, the next after the one running."""
        if not self.live:
            self.turn = None
            self.condition.notify_all()  # the launch has ended, or waits for its next program to start
            return
        newest_first = self.live[::-1]
        ready = [p for p in newest_first if not self.waiting.get(p, False)]
        if not ready:  # every program waits: each may yet see another's atomic, so they take turns
            self.waiting = dict.fromkeys(self.waiting, False)
            at = newest_first.index(self.turn) if self.turn in newest_first else -1
            ready = newest_first[at + 1 :] + newest_first[: at + 1]
        self.turn = ready[0]
        self.turns[self.turn].notify()


def _schedule() -> _Schedule | None:
    """The schedule of the program this thread runs, if it runs one."""
    return getattr(_running, "schedule", None)


def _signature(pointers: Any, result: Any) -> tuple:
    """(the kernel's line, its addresses, what it read): hashes, so that a program's last access at a line costs
    little to keep."""
    from checks.engine.access.recorder import kernel_line

    return kernel_line(), hash(np.asarray(pointers.data).tobytes()), hash(np.asarray(result.data).tobytes())


def _run_interleaved(
    grid: tuple[int, ...], run_program: Callable[[], Any], builder: Any, original_set: Any
) -> None:  # fmt: skip
    programs = [(x, y, z) for x in range(grid[0]) for y in range(grid[1]) for z in range(grid[2])]
    if not programs:
        return
    schedule = _Schedule(programs, lambda x, y, z: original_set(builder, x, y, z), run_program)
    try:
        with schedule.condition:
            schedule._start()
            while not schedule.finished and not schedule.abandoned:
                schedule.condition.wait(0.05)
    finally:
        with schedule.condition:  # a run left by its time limit stops its programs at their next access
            if not schedule.finished:
                schedule.abandon()
    if schedule.error is not None:
        raise schedule.error


@contextlib.contextmanager
def programs_interleaved() -> Iterator[None]:
    """Inside the block, each launch's programs run in the order the module's docstring gives."""
    from triton.runtime import interpreter

    from checks.engine.access.patches import replaced

    builder_type = interpreter.InterpreterBuilder
    original_set = builder_type.set_grid_idx
    original_rmw, original_cas = builder_type.create_atomic_rmw, builder_type.create_atomic_cas
    original_load, original_store = builder_type.create_masked_load, builder_type.create_masked_store

    def handed_over(ptr: Any, result: Any) -> Any:
        schedule = _schedule()
        if schedule is not None:
            schedule.after_atomic(_signature(ptr, result))
        return result

    def atomic_rmw(self, rmw_op, ptr, val, mask, sem, scope):
        return handed_over(ptr, original_rmw(self, rmw_op, ptr, val, mask, sem, scope))

    def atomic_cas(self, ptr, cmp, val, sem, scope):
        return handed_over(ptr, original_cas(self, ptr, cmp, val, sem, scope))

    def masked_load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile):
        schedule = _schedule()
        if schedule is not None:
            schedule.check()
        result = original_load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile)
        if schedule is not None:
            schedule.after_load(_signature(ptrs, result))
        return result

    def masked_store(self, *args, **kwargs):
        schedule = _schedule()
        if schedule is not None:
            schedule.check()
        return original_store(self, *args, **kwargs)

    def call(self: Any, *args_dev: Any, **kwargs: Any) -> None:
        """`GridExecutor.__call__` as Triton's interpreter runs it (arguments copied to the host and back, the
        language patched for the kernel), but with the grid's programs run by `_run_interleaved`."""
        kwargs = taken_keywords(self, kwargs)
        args_hst, kwargs_hst = self._init_args_hst(args_dev, kwargs)
        for hook in self.pre_run_hooks:
            hook(*args_hst, **kwargs_hst)
        with bound_launch(self, args_hst, kwargs_hst) as (bound, grid):
            try:
                _run_interleaved(grid, lambda: self.fn(**bound), interpreter.interpreter_builder, original_set)
            except Exception as error:
                raise interpreter.InterpreterError(repr(error)) from error
        self._restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)

    with replaced([
        (builder_type, "create_atomic_rmw", atomic_rmw),
        (builder_type, "create_atomic_cas", atomic_cas),
        (builder_type, "create_masked_load", masked_load),
        (builder_type, "create_masked_store", masked_store),
        (interpreter.GridExecutor, "__call__", call),
    ]):  # fmt: skip
        yield
