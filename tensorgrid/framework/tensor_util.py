"""Values of tensors that are known while the graph is being built."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tensorgrid.core import dtypes

if TYPE_CHECKING:
    from tensorgrid.framework.graph import Tensor


def constant_value(tensor: Tensor) -> np.ndarray | None:
    """The value of a tensor when it is known while building (constants and simple shape math)."""
    op = tensor.op
    t = op.type
    if t == "Const":
        return op._attrs["value"]
    if t == "Identity" or t == "StopGradient":
        return constant_value(op.inputs[0])
    if t == "Shape":
        shape = op.inputs[0].shape
        if shape.is_fully_defined():
            return np.array(shape.as_list(), dtype=op._attrs.get("out_type", dtypes.int32).np)
        return None
    if t == "Size":
        n = op.inputs[0].shape.num_elements()
        return None if n is None else np.array(n, dtype=op._attrs.get("out_type", dtypes.int32).np)
    if t == "Rank":
        r = op.inputs[0].shape.rank
        return None if r is None else np.array(r, dtype=np.int32)
    if t == "Pack":
        vals = [constant_value(i) for i in op.inputs]
        if any(v is None for v in vals):
            return None
        return np.stack(vals, axis=op._attrs.get("axis", 0))  # type: ignore[arg-type]
    if t == "Cast":
        v = constant_value(op.inputs[0])
        return None if v is None else v.astype(op._attrs["DstT"].np)
    return None
