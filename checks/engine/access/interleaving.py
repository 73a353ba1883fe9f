"""The programs of a launch interleaved at their atomics, as a GPU may run them; the interpreter runs one at a time.

Running a launch's programs first to last (the interpreter's order), or last to first (`patches.programs_reversed`),
finishes each program before the next begins. A program that takes a number from an atomic counter (a ticket) then
arrives in the same place in line in both orders, and the program that draws the last ticket finds every other
program done. On a GPU the others may still be working: the last ticket is not the last to finish.

`programs_interleaved` runs each launch's programs in threads that hand over only at atomics, one thread running at a
time, in this order:

1. first to last, each program runs up to and including its first atomic, and waits there (every ticket is drawn, in
   the order of the programs);
2. then, last to first, each runs on to its end; a program whose atomic returns what its previous atomic at the same
   line and addresses returned is waiting for another (a lock, a flag, a count not yet reached), and gives way to the
   next program that can run, until any other program's atomic. A volatile load that reads what the program's
   previous one at that line read waits in the same way (a flag read with `volatile=True`).

A program that waits for a count of the programs that have stored (the one that finds the counter at its last value
merges) finds it in either order; one that trusted its ticket merges before the programs with the earlier tickets
store. A launch of more programs than `MOST_PROGRAMS` runs in the interpreter's order.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

MOST_PROGRAMS = 512  # a launch of more programs runs in the interpreter's order (one thread per program)
_running = threading.local()  # in a program's thread: its `schedule` and `program`


class Abandoned(BaseException):
    """The run was left (its time ran out, or a program failed): a program still going stops at its next access."""


class _Schedule:
    """Which program of one launch runs, and the hand-overs at its atomics."""

    def __init__(self, programs: list[tuple[int, int, int]], set_grid_idx: Callable[[int, int, int], Any]) -> None:
        self.programs = programs
        self.set_grid_idx = set_grid_idx
        self.turn: int | None = None
        self.first_pass = True  # step 1: first to last, each up to its first atomic
        self.started = [False] * len(programs)
        self.done = [False] * len(programs)
        self.waiting = [False] * len(programs)  # its last atomic returned what the one before it did
        self.last_atomic: list[tuple | None] = [None] * len(programs)
        self.last_volatile: dict[int, tuple] = {}  # a program's last volatile load (a flag it may be waiting for)
        self.condition = threading.Condition()
        self.error: BaseException | None = None
        self.abandoned = False

    # -- run by the program threads

    def run(self, program: int, body: Callable[[], Any]) -> None:
        _running.schedule = self
        try:
            with self.condition:
                self._wait_for_turn(program)
            body()
        except Abandoned:
            pass
        except BaseException as error:  # noqa: BLE001 - raised again by the launching thread
            with self.condition:
                self.error = self.error or error
                self.abandoned = True
        finally:
            with self.condition:
                self.done[program] = True
                self._hand_over()

    def after_atomic(self, signature: tuple) -> None:
        """Called by the running program after each of its atomics: hand over where the order above says so."""
        program = _running.program
        with self.condition:
            if self.abandoned:
                raise Abandoned
            waiting = self.last_atomic[program] == signature
            self.last_atomic[program] = signature
            if self.first_pass:
                if any(not s for s in self.started):
                    self._give_to(self.started.index(False))
                    self._wait_for_turn(program)
                    return
                self.first_pass = False
            if not waiting:  # an atomic that returned something new may be what the others wait for
                self.waiting = [False] * len(self.programs)
            self.waiting[program] = waiting
            self._hand_over()
            self._wait_for_turn(program)

    def after_volatile_load(self, signature: tuple) -> None:
        """Called by the running program after each of its volatile loads: one that reads what its previous volatile
        load at the same line and addresses read is waiting for another program (a flag), and gives way as a repeated
        atomic does; any other goes on."""
        program = _running.program
        with self.condition:
            if self.abandoned:
                raise Abandoned
            repeated = self.last_volatile.get(program) == signature
            self.last_volatile[program] = signature
            if not repeated:
                return
            if self.first_pass and any(not s for s in self.started):
                self._give_to(self.started.index(False))
            else:
                self.first_pass = False
                self.waiting[program] = True
                self._hand_over()
            self._wait_for_turn(program)

    def check(self) -> None:
        if self.abandoned:
            raise Abandoned

    # -- the order (called with the condition held)

    def _wait_for_turn(self, program: int) -> None:
        while self.turn != program and not self.abandoned:
            self.condition.wait()
        if self.abandoned:
            raise Abandoned
        _running.program = program
        self.set_grid_idx(*self.programs[program])

    def _give_to(self, program: int) -> None:
        self.started[program] = True
        self.turn = program
        self.condition.notify_all()

    def _hand_over(self) -> None:
        if self.first_pass and any(not s for s in self.started):
            self._give_to(self.started.index(False))
            return
        self.first_pass = False
        live = [p for p in reversed(range(len(self.programs))) if not self.done[p]]
        if not live:
            self.turn = None
            self.condition.notify_all()
            return
        ready = [p for p in live if not self.waiting[p]]
        if not ready:  # every program waits: each may yet see another's atomic, so they take turns
            for p in live:
                self.waiting[p] = False
            current = self.turn if self.turn in live else live[0]
            ready = live[live.index(current) + 1 :] + live[: live.index(current) + 1]
        self._give_to(ready[0])


def _schedule() -> _Schedule | None:
    """The schedule of the program this thread runs, if it runs one."""
    return getattr(_running, "schedule", None)


def _signature(pointers: Any, result: Any) -> tuple:
    from checks.engine.access.recorder import kernel_line

    return kernel_line(), np.asarray(pointers.data).tobytes(), np.asarray(result.data).tobytes()


def _run_interleaved(
    grid: tuple[int, int, int], run_program: Callable[[], Any], builder: Any, original_set: Any
) -> None:
    programs = [(x, y, z) for x in range(grid[0]) for y in range(grid[1]) for z in range(grid[2])]
    if not programs:
        return
    schedule = _Schedule(programs, lambda x, y, z: original_set(builder, x, y, z))
    threads = [
        threading.Thread(target=schedule.run, args=(index, run_program), daemon=True, name=f"program {index}")
        for index in range(len(programs))
    ]
    try:
        for thread in threads:
            thread.start()
        with schedule.condition:
            schedule._give_to(0)
            while not all(schedule.done) and not schedule.abandoned:
                schedule.condition.wait(0.05)
    finally:
        with schedule.condition:  # a run left by its time limit stops its programs at their next access
            if not all(schedule.done):
                schedule.abandoned = True
            schedule.condition.notify_all()
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

    def atomic_rmw(self, rmw_op, ptr, val, mask, sem, scope):
        result = original_rmw(self, rmw_op, ptr, val, mask, sem, scope)
        schedule = _schedule()
        if schedule is not None:
            schedule.after_atomic(_signature(ptr, result))
        return result

    def atomic_cas(self, ptr, cmp, val, sem, scope):
        result = original_cas(self, ptr, cmp, val, sem, scope)
        schedule = _schedule()
        if schedule is not None:
            schedule.after_atomic(_signature(ptr, result))
        return result

    def masked_load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile):
        schedule = _schedule()
        if schedule is not None:
            schedule.check()
        result = original_load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile)
        if schedule is not None and is_volatile:
            schedule.after_volatile_load(_signature(ptrs, result))
        return result

    def masked_store(self, *args, **kwargs):
        schedule = _schedule()
        if schedule is not None:
            schedule.check()
        return original_store(self, *args, **kwargs)

    def call(self: Any, *args_dev: Any, **kwargs: Any) -> None:
        """`GridExecutor.__call__` as Triton's interpreter runs it (arguments copied to the host and back, the
        language patched for the kernel), but with the grid's programs run by `_run_interleaved`."""
        names = inspect.getfullargspec(self.fn).args
        kwargs = {k: v for k, v in kwargs.items() if k in names}
        args_hst, kwargs_hst = self._init_args_hst(args_dev, kwargs)
        for hook in self.pre_run_hooks:
            hook(*args_hst, **kwargs_hst)
        scope = interpreter._patch_lang(self.fn)
        try:
            bound = inspect.getcallargs(self.fn, *args_hst, **kwargs_hst)
            bound = {k: v if k in self.constexprs else interpreter._implicit_cvt(v) for k, v in bound.items()}
            grid = self.grid(bound) if callable(self.grid) else self.grid
            grid = tuple(grid) + (1,) * (3 - len(grid))
            builder = interpreter.interpreter_builder
            builder.set_grid_dim(*grid)
            try:
                if grid[0] * grid[1] * grid[2] > MOST_PROGRAMS:
                    for x in range(grid[0]):
                        for y in range(grid[1]):
                            for z in range(grid[2]):
                                builder.set_grid_idx(x, y, z)
                                self.fn(**bound)
                else:
                    _run_interleaved(grid, lambda: self.fn(**bound), builder, original_set)
            except Exception as error:
                raise interpreter.InterpreterError(repr(error)) from error
        finally:
            scope.restore()
        self._restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)

    with replaced([
        (builder_type, "create_atomic_rmw", atomic_rmw),
        (builder_type, "create_atomic_cas", atomic_cas),
        (builder_type, "create_masked_load", masked_load),
        (builder_type, "create_masked_store", masked_store),
        (interpreter.GridExecutor, "__call__", call),
    ]):  # fmt: skip
        yield
