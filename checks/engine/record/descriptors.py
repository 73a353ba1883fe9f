"""Gluon's tensor descriptors (the Hopper track) as plan values: what TMA is told about a plan tensor.

A `TensorDescriptor` (`triton.experimental.gluon.nvidia.hopper`) is plain data built on the host over a tensor: the
tensor, the shape and strides TMA sees, the box every copy moves and the box's shared layout (an NVMMASharedLayout,
itself plain data). The plan holds it as those constructor arguments over a plan tensor, so that the replay builds
its own descriptor over its own tensors (`checks.engine.replay.descriptors`); nothing of the learner's object
reaches the replay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

DESCRIPTOR_MODULE = "triton.experimental.gluon.nvidia.hopper"
LAYOUT_MODULE = "triton.experimental.gluon.language._layouts"


def is_descriptor(value: Any) -> bool:
    """Whether `value` is Gluon's Hopper tensor descriptor (its own class, not one that looks like it)."""
    kind = type(value)
    return kind.__name__ == "TensorDescriptor" and kind.__module__ == DESCRIPTOR_MODULE


def descriptor_value(descriptor: Any, value_of: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """The plan value of a descriptor: {"descriptor": {base, shape, strides, block_shape, layout, padding}}, its base
    as the plan holds that tensor (`value_of`). A base that is no plan tensor (computed on the host, say) is returned
    as that tensor's own value, which the plan's rules then judge as they judge the tensor."""
    base = value_of(descriptor.base)
    if "tensor" not in base:
        return base
    layout = descriptor.layout
    if type(layout).__name__ != "NVMMASharedLayout" or type(layout).__module__ != LAYOUT_MODULE:
        return {"unsupported": f"a tensor descriptor with a {type(layout).__name__} layout"}
    return {
        "descriptor": {
            "base": base["tensor"],
            "shape": [int(s) for s in descriptor.shape],
            "strides": [int(s) for s in descriptor.strides],
            "block_shape": [int(s) for s in descriptor.block_shape],
            "layout": {f.name: _plain(getattr(layout, f.name)) for f in dataclasses.fields(layout)},
            "padding": str(descriptor.padding),
        }
    }


def _plain(value: Any) -> Any:
    """A layout field as JSON holds it: numbers and booleans, lists of them (a CGA layout's bases)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if isinstance(value, (bool, int)) else str(value)
