"""Batches of ``tf.data`` elements: ``batch`` and ``padded_batch``.

Batch ``i`` holds the upstream's elements ``i*n .. i*n+n-1``; the last one is cut to what is
left (unless ``drop_remainder``). ``padded_batch`` pads each component of each element, with
its padding value, to the batch's shape: per dimension the size ``padded_shapes`` gives, or the
largest in the batch where it gives None or -1. The upstream is any dataset (read through its
``_size``/``_element``/``_elements``; this module does not depend on the ``Dataset`` class).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tensorgrid import math as math_ops
from tensorgrid.core import dtypes
from tensorgrid.core.shapes import TensorShape
from tensorgrid.data import structure
from tensorgrid.framework import array_create_ops as array_create
from tensorgrid.framework import array_ops
from tensorgrid.framework.convert import convert_to_tensor
from tensorgrid.framework.debug_ops import Assert
from tensorgrid.framework.graph import Tensor, get_default_graph
from tensorgrid.framework.math_reduce_ops import reduce_max

__all__ = ["Padding", "batch_count", "batch_element", "batch_spec", "padding_for"]

# per component of an element: the padded shape (None: the batch's largest) and the value
Padding = tuple[Any, Any]


def _i64(value: Any) -> Tensor:
    return math_ops.cast(convert_to_tensor(value), dtypes.int64)


def padding_for(spec: Any, padded_shapes: Any, padding_values: Any) -> Padding:
    """The padded shapes and padding values of each component of elements of ``spec``.

    ``padded_shapes``: None (every dimension to the batch's largest), or a shape per component
    in the element's structure (None or -1 entries: the batch's largest). ``padding_values``:
    None (0, False or b""), one value for every component, or one per component.

    Raises:
      ValueError: a component of unknown rank, or a padded shape of another rank.
    """
    specs = structure.flatten(spec)
    shapes = [None] * len(specs) if padded_shapes is None else _paired(spec, padded_shapes)
    values: list[Any] = [None] * len(specs) if padding_values is None else (
        _paired(spec, padding_values) if isinstance(padding_values, tuple | Mapping)
        else [padding_values] * len(specs))
    out_shapes, out_values = [], []
    for k, (s, shape, value) in enumerate(zip(specs, shapes, values, strict=True)):
        if s.shape.rank is None:
            raise ValueError(f"padded_batch: component {k} has an unknown rank; its rank must "
                             "be known to pad it")
        dims = [None] * s.shape.rank if shape is None else \
            [None if d is None or d < 0 else int(d) for d in TensorShape(shape).as_list()]
        if len(dims) != s.shape.rank:
            raise ValueError(f"padded_batch: padded shape {dims} of component {k} does not have "
                             f"the rank of its elements, {s.shape}")
        default = b"" if s.dtype is dtypes.string else 0
        out_shapes.append(dims)
        out_values.append(convert_to_tensor(default if value is None else value, dtype=s.dtype))
    return out_shapes, out_values


def _paired(spec: Any, value: Any) -> list[Any]:
    """The parts of ``value`` paired with the leaves of ``spec`` (a leaf takes its part whole,
    so a shape written as a list or tuple stays one shape)."""
    if isinstance(spec, Mapping):
        return [x for k in sorted(spec) for x in _paired(spec[k], value[k])]
    if isinstance(spec, tuple):
        if len(value) != len(spec):
            raise ValueError(f"expected {len(spec)} entries to match the elements, got {value!r}")
        return [x for s, v in zip(spec, value, strict=True) for x in _paired(s, v)]
    return [value]


def batch_spec(spec: Any, n: int, drop: bool, padding: Padding | None) -> Any:
    """The spec of a batch of elements of ``spec``."""
    lead = TensorShape([n if drop else None])
    if padding is None:
        return structure.map_structure(
            lambda s: structure.Spec(s.dtype, lead.concatenate(s.shape)), spec)
    leaves = [structure.Spec(s.dtype, lead.concatenate(TensorShape(dims)))
              for s, dims in zip(structure.flatten(spec), padding[0], strict=True)]
    return structure.pack_as(spec, leaves)


def batch_count(up: Tensor, n: int, drop: bool) -> Tensor:
    """The number of batches of ``n`` of ``up`` elements (-1 for an endless upstream)."""
    full = math_ops.floordiv(up, _i64(n)) if drop else \
        math_ops.floordiv(math_ops.add(up, _i64(n - 1)), _i64(n))
    return math_ops.where(math_ops.less(up, 0), up, full)


def _pad_and_stack(parts: list[Tensor], dims: list[int | None], value: Tensor) -> Tensor:
    """One component of the elements of a batch, padded to one shape and stacked."""
    if not dims:  # scalars: nothing to pad
        return array_ops.stack(parts)
    shapes = [array_ops.shape(p, out_type=dtypes.int64) for p in parts]
    checks = []
    padded = []
    targets = []
    for d, fixed in enumerate(dims):
        largest = reduce_max(array_ops.stack([s[d] for s in shapes]))
        if fixed is None:
            targets.append(largest)
            continue
        targets.append(_i64(fixed))
        checks.append(Assert(math_ops.less_equal(largest, fixed), [
            f"Attempted to pad to a smaller size than the input element: dimension {d} is "
            f"padded to {fixed}, an element has", largest]))
    with get_default_graph().control_dependencies(checks):
        for p, s in zip(parts, shapes, strict=True):
            after = [math_ops.subtract(t, s[d]) for d, t in enumerate(targets)]
            pads = array_ops.stack([array_ops.stack([_i64(0), a]) for a in after])
            padded.append(array_create.pad(p, pads, constant_values=value))
    out = array_ops.stack(padded)
    out.set_shape(TensorShape([len(parts), *list(dims)]))
    return out


def batch_element(upstream: Any, index: Tensor, epoch: Tensor, capture: Any, n: int, drop: bool,
                  padding: Padding | None) -> Any:
    """Batch ``index``: the upstream's elements ``index*n ..`` combined (stacked, or padded
    and stacked), the last batch cut to what is left unless ``drop``."""
    up_size = upstream._size(capture)
    start = math_ops.multiply(index, n)
    indices = math_ops.add(start, array_create.range(0, n, dtype=dtypes.int64))
    if not drop:  # the last batch: repeat the last element, then cut to size
        last = math_ops.where(math_ops.less(up_size, 0), reduce_max(indices),
                              math_ops.subtract(up_size, 1))
        indices = math_ops.minimum(indices, last)
    epochs = math_ops.add(math_ops.multiply(indices, 0), epoch)
    if padding is None and upstream._vectorized:
        batched = upstream._elements(indices, epochs, capture)
    else:
        per_element = [upstream._element(indices[k], epochs[k], capture) for k in range(n)]
        columns = [list(parts) for parts in zip(*(structure.flatten(e) for e in per_element),
                                                strict=True)]
        stacked = [array_ops.stack(c) for c in columns] if padding is None else [
            _pad_and_stack(c, dims, value)
            for c, dims, value in zip(columns, padding[0], padding[1], strict=True)]
        batched = structure.pack_as(per_element[0], stacked)
    if drop:
        return structure.map_structure(lambda t: _with_batch_dim(t, n), batched)
    count = math_ops.where(math_ops.less(up_size, 0), _i64(n), math_ops.minimum(
        _i64(n), math_ops.subtract(up_size, start)))
    return structure.map_structure(lambda t: _with_batch_dim(t[:count], None), batched)


def _with_batch_dim(t: Tensor, n: int | None) -> Tensor:
    if t.shape.rank is not None:
        t.set_shape(TensorShape([n]).concatenate(t.shape[1:]))
    return t
