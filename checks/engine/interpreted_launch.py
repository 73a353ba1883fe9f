"""One launch as Triton's interpreter prepares it (`GridExecutor.__call__`): the arguments bound to the kernel's
parameters by name (keywords it does not take dropped), each non-constexpr argument converted as the interpreter
converts it, the grid resolved and padded to three dimensions, and the language patched for the kernel while its
programs run. The grader runs a launch's programs in orders of its own from here: interleaved at their atomics
(`checks.engine.access.interleaving`), or only the grid's ends (`checks.engine.replay.overflow`).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

Grid = tuple[int, int, int]


def taken_keywords(executor: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keywords the kernel has parameters for (Triton drops the launch options, `num_warps` and the like, here)."""
    names = inspect.getfullargspec(executor.fn).args
    return {k: v for k, v in kwargs.items() if k in names}


@contextlib.contextmanager
def bound_launch(executor: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[tuple[dict[str, Any], Grid]]:
    """Inside the block: the kernel's arguments by name and the launch's grid, with the interpreter's builder set to
    that grid and the language patched for the kernel (`interpreter._patch_lang` as it is when the block starts);
    the language is put back when the block ends. Each program is then `set_grid_idx(...)`, `executor.fn(**bound)`."""
    from triton.runtime import interpreter

    scope = interpreter._patch_lang(executor.fn)
    try:
        bound = inspect.getcallargs(executor.fn, *args, **taken_keywords(executor, kwargs))
        bound = {k: v if k in executor.constexprs else interpreter._implicit_cvt(v) for k, v in bound.items()}
        grid = executor.grid(bound) if callable(executor.grid) else executor.grid
        grid = tuple(grid) + (1,) * (3 - len(grid))
        interpreter.interpreter_builder.set_grid_dim(*grid)
        yield bound, grid
    finally:
        scope.restore()
