"""What a ``filter`` keeps: the positions of its upstream's elements whose predicate is true,
found by one loop over them all. Built once per initialization of an iterator (or a one-shot
iterator's first use), through ``Capture.materialize``; this module does not depend on the
``Dataset`` class (the upstream is read through ``_size``/``_element``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensorgrid import math as math_ops
from tensorgrid.core import dtypes
from tensorgrid.core.shapes import TensorShape
from tensorgrid.framework.array_ops import reshape
from tensorgrid.framework.convert import convert_to_tensor
from tensorgrid.framework.core_ops import identity
from tensorgrid.framework.debug_ops import Assert
from tensorgrid.framework.graph import Tensor, get_default_graph
from tensorgrid.framework.math_ops import where
from tensorgrid.framework.tensor_array_ops import TensorArray
from tensorgrid.framework.while_loop_ops import while_loop

__all__ = ["kept_positions"]


def call(fn: Callable[..., Any], element: Any) -> Any:
    """``fn`` applied to an element as ``map`` applies it (a tuple is passed as arguments)."""
    return fn(*element) if isinstance(element, tuple) else fn(element)


def _as_flag(value: Any) -> Tensor:
    flag = convert_to_tensor(value)
    if flag.dtype is not dtypes.bool_ or flag.shape.rank not in (None, 0):
        raise ValueError(f"filter: the predicate must return a bool scalar, got "
                         f"{flag.dtype.name} {flag.shape}")
    return flag


def kept_positions(upstream: Any, predicate: Callable[..., Any], capture: Any) -> Tensor:
    """The positions (an int64 vector, in order) of the upstream's elements, in its first pass,
    for which ``predicate`` is true.

    Raises:
      ValueError: the predicate does not return a bool scalar.
      InvalidArgumentError (when run): an endless upstream.
    """
    size = upstream._size(capture)
    check = Assert(math_ops.greater_equal(size, 0), [
        "filter needs a finite upstream: its elements are scanned when the iterator is "
        "initialized (put repeat() after filter())"])
    with get_default_graph().control_dependencies([check]):
        n = identity(size)
    zero = math_ops.cast(0, dtypes.int64)

    def body(i: Tensor, flags: TensorArray) -> tuple[Tensor, TensorArray]:
        flag = _as_flag(call(predicate, upstream._element(i, zero, capture)))
        return math_ops.add(i, 1), flags.write(math_ops.cast(i, dtypes.int32), flag)

    flags = TensorArray(dtypes.bool_, size=math_ops.cast(n, dtypes.int32), element_shape=[])
    _, flags = while_loop(lambda i, _: math_ops.less(i, n), body, [zero, flags])
    kept = reshape(where(flags.stack()), [-1])
    kept.set_shape(TensorShape([None]))
    return kept
