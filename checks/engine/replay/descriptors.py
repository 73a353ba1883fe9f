"""The replay's own Gluon tensor descriptors, built from a plan's descriptor values over the replay's tensors.

The plan holds a descriptor as its constructor arguments over a plan tensor (`checks.engine.record.descriptors`);
the replay builds the view those shape and strides make of that tensor (which `Performer.tensor` checks lies inside
the tensor's own allocation, guard bands included, as any view of a plan must), and a fresh `TensorDescriptor` over
it, with a fresh NVMMASharedLayout of the recorded fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from checks.engine.contract.plan import PlanError


def build_descriptor(body: dict[str, Any], view_of: Callable[[dict[str, Any]], torch.Tensor]) -> Any:
    """A TensorDescriptor for the plan's descriptor value `body`; `view_of(ref)` is the replay's view of a plan
    reference (checked to lie inside its storage)."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    base = dict(body["base"])
    base.update(shape=list(body["shape"]), strides=list(body["strides"]))
    view = view_of(base)  # the whole extent TMA may reach
    try:
        layout = gl.NVMMASharedLayout(**body["layout"])
        return TensorDescriptor(
            view, list(body["shape"]), list(body["strides"]), list(body["block_shape"]), layout, body["padding"]
        )
    except (AssertionError, TypeError, ValueError) as exc:
        raise PlanError(f"a tensor descriptor TMA cannot use ({exc or type(exc).__name__})") from None
