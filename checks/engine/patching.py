"""Attributes replaced for the length of a block, and put back after it: how the grader patches Triton's classes and
its own objects while it watches a submission (`checks.engine.record.plan_recorder`,
`checks.engine.replay.launches`, `checks.engine.access.patches`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any
from unittest import mock

Replacement = tuple[object, str, Any]  # (owner, attribute, the value it has inside the block)


@contextlib.contextmanager
def replaced(replacements: Iterable[Replacement]) -> Iterator[None]:
    """Inside the block each `owner.attribute` is the value given; after it, whatever happens inside, each is what it
    was before, put back in the reverse order (one the owner only inherited, from a base class or from its class, is
    removed again). The replacements are all read before the first is set, so a value computed from an attribute
    sees the original."""
    replacements = list(replacements)
    with contextlib.ExitStack() as stack:
        for owner, attribute, value in replacements:
            stack.enter_context(mock.patch.object(owner, attribute, value))
        yield


def kernel_classes() -> list[type]:
    """Triton's kernel classes whose `run` every launch goes through: compiled, and interpreted where there is one."""
    import triton.runtime.jit as jit

    classes: list[type] = [jit.JITFunction]
    with contextlib.suppress(ImportError, AttributeError):
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    return classes
