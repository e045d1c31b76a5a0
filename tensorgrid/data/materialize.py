"""What ``filter`` and ``interleave``/``flat_map`` compute of their whole upstream, once per
initialization of an iterator (or a one-shot iterator's first use, through
``Capture.materialize``), by one loop over its elements:

* a filter: the positions of the elements whose predicate is true;
* an interleave: the size of the dataset its function makes of each element, and from them the
  (element, position in its dataset) of each output position, in TensorFlow's order.

The upstream is read through ``_size``/``_element`` (no dependence on the ``Dataset`` class).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from tensorgrid import math as math_ops
from tensorgrid.core import dtypes
from tensorgrid.core.shapes import TensorShape
from tensorgrid.data import structure
from tensorgrid.data.base import DatasetBase
from tensorgrid.framework import array_index_ops as array_index
from tensorgrid.framework.array_ops import reshape
from tensorgrid.framework.convert import convert_to_tensor, make_op
from tensorgrid.framework.core_ops import identity, placeholder
from tensorgrid.framework.debug_ops import Assert
from tensorgrid.framework.graph import Tensor, get_default_graph
from tensorgrid.framework.math_ops import where
from tensorgrid.framework.tensor_array_ops import TensorArray
from tensorgrid.framework.while_loop_ops import while_loop

__all__ = ["cycle_and_block", "interleave_element", "interleave_table", "kept_positions", "probe"]


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
    n = _finite(upstream._size(capture), "filter")
    zero = math_ops.cast(0, dtypes.int64)

    def body(i: Tensor, flags: TensorArray) -> tuple[Tensor, TensorArray]:
        flag = _as_flag(call(predicate, upstream._element(i, zero, capture)))
        return math_ops.add(i, 1), flags.write(math_ops.cast(i, dtypes.int32), flag)

    flags = TensorArray(dtypes.bool_, size=math_ops.cast(n, dtypes.int32), element_shape=[])
    _, flags = while_loop(lambda i, _: math_ops.less(i, n), body, [zero, flags])
    kept = reshape(where(flags.stack()), [-1])
    kept.set_shape(TensorShape([None]))
    return kept


class _Inner:
    """The capture of the datasets an interleave's function makes: sources as the outer
    capture gives them; nothing of theirs can be materialized (they are made per element)."""

    def __init__(self, capture: Any) -> None:
        self._capture = capture

    def __call__(self, t: Tensor) -> Tensor:
        return self._capture(t)  # type: ignore[no-any-return]

    def materialize(self, key: int, build: Callable[[Any], Tensor]) -> Tensor:
        raise ValueError("interleave/flat_map: the datasets map_func makes cannot filter or "
                         "interleave (their values would be computed once per element)")


def cycle_and_block(cycle_length: int | None, block_length: int) -> tuple[int, int]:
    """``interleave``'s lengths (a cycle of None or -1, AUTOTUNE: the number of CPUs).

    Raises:
      ValueError: a length below 1.
    """
    cycle = (os.cpu_count() or 1) if cycle_length is None or cycle_length == -1 else \
        int(cycle_length)
    if cycle < 1 or int(block_length) < 1:
        raise ValueError(f"cycle_length and block_length must be positive, got {cycle_length} "
                         f"and {block_length}")
    return cycle, int(block_length)


def probe(upstream: Any, map_func: Callable[..., Any]) -> tuple[Any, Any]:
    """``map_func`` applied to placeholders of the upstream's elements: (the placeholders,
    the dataset it returns).

    Raises:
      TypeError: ``map_func`` does not return a dataset.
    """
    with get_default_graph().name_scope("interleave_argument"):
        argument = structure.map_structure(lambda s: placeholder(s.dtype, s.shape),
                                           upstream._spec())
    inner = call(map_func, argument)
    if not isinstance(inner, DatasetBase):
        raise TypeError(f"interleave/flat_map: map_func must return a Dataset, got "
                        f"{type(inner).__name__}")
    return argument, inner


def interleave_table(upstream: Any, map_func: Callable[..., Any], cycle_length: int,
                     block_length: int, capture: Any) -> Tensor:
    """For each output position of the interleave, (upstream position, position in the
    dataset ``map_func`` makes of that element): an int64 [total, 2].

    Raises:
      InvalidArgumentError (when run): an endless upstream or made dataset.
    """
    n = _finite(upstream._size(capture), "interleave/flat_map")
    zero = math_ops.cast(0, dtypes.int64)

    def body(u: Tensor, sizes: TensorArray) -> tuple[Tensor, TensorArray]:
        inner = call(map_func, upstream._element(u, zero, capture))
        size = inner._size(_Inner(capture))
        return math_ops.add(u, 1), sizes.write(math_ops.cast(u, dtypes.int32), size)

    sizes = TensorArray(dtypes.int64, size=math_ops.cast(n, dtypes.int32), element_shape=[])
    _, sizes = while_loop(lambda u, _: math_ops.less(u, n), body, [zero, sizes])
    return make_op("DatasetInterleaveOrder", [sizes.stack()],  # type: ignore[no-any-return]
                   {"cycle_length": cycle_length, "block_length": block_length})


def interleave_element(upstream: Any, map_func: Callable[..., Any], table: Tensor,
                       index: Tensor, capture: Any) -> Any:
    """Element ``index`` of the interleave whose ``interleave_table`` is ``table``."""
    row = array_index.gather(table, index)
    zero = math_ops.cast(0, dtypes.int64)
    inner = call(map_func, upstream._element(row[0], zero, capture))
    return inner._element(row[1], zero, _Inner(capture))


def _finite(size: Tensor, what: str) -> Tensor:
    check = Assert(math_ops.greater_equal(size, 0), [
        f"{what} needs a finite upstream: its elements are scanned when the iterator is "
        f"initialized (put repeat() after {what.split('/')[0]}())"])
    with get_default_graph().control_dependencies([check]):
        return identity(size)
