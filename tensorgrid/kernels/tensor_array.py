"""Kernels of the TensorArray ops: a step's array of tensors, made by each run of TensorArrayV3.

The handle a kernel passes on is the ``TensorArray`` object itself (it never leaves the process:
a partition boundary would need a resource handle, which no test ships yet). Flows are float32
zeros: they only order the ops. Gradient arrays (``TensorArrayGradV3``) hang off their forward
array by source name, and writes to them add up, as TensorFlow's do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tensorgrid.core import errors
from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.core.shapes import as_shape

_FLOW = np.float32(0.0)


class TensorArray:
    """The state of one TensorArray during one step."""

    __slots__ = ("accumulate", "closed", "dtype", "dynamic", "element_shape", "forward", "grads",
                 "items", "name", "size")

    def __init__(self, name: str, size: int, dtype: Any, dynamic: bool,
                 accumulate: bool = False, element_shape: tuple[int, ...] | None = None) -> None:
        self.name = name
        self.size = size
        self.dtype = dtype
        self.dynamic = dynamic
        self.items: list[Any] = [None] * size
        self.grads: dict[str, TensorArray] = {}
        self.closed = False
        self.accumulate = accumulate  # a gradient array: writes to one index add up
        self.forward: TensorArray | None = None  # a gradient array's forward array
        self.element_shape = element_shape  # when fully defined

    def write(self, index: int, value: Any, ctx: KernelContext) -> None:
        if index < 0 or (index >= len(self.items) and not self.dynamic):
            raise ctx.error(errors.InvalidArgumentError,
                            f"TensorArray {self.name!r}: index {index} is out of range "
                            f"(size {len(self.items)})")
        if index >= len(self.items):
            self.items.extend([None] * (index + 1 - len(self.items)))
        old = self.items[index]
        if old is not None and self.accumulate:
            value = old + value
        self.items[index] = np.asarray(value)

    def read(self, index: int, ctx: KernelContext) -> Any:
        if not 0 <= index < len(self.items):
            raise ctx.error(errors.InvalidArgumentError,
                            f"TensorArray {self.name!r}: read index {index} is out of range "
                            f"(size {len(self.items)})")
        value = self.items[index]
        if value is None and self.forward is not None and index < len(self.forward.items) \
                and self.forward.items[index] is not None:
            # a gradient nobody wrote is zero (the element did not reach the differentiated
            # output)
            return np.zeros_like(self.forward.items[index])
        if value is None and self.forward is not None and self.element_shape is not None:
            # the same, before the forward element is there (TensorFlow's rule: an unwritten
            # gradient of a fully defined element shape reads as zeros)
            return np.zeros(self.element_shape, self.dtype.np)
        if value is None:
            raise ctx.error(errors.InvalidArgumentError,
                            f"TensorArray {self.name!r}: index {index} was never written")
        return value


def _array(handle: Any, ctx: KernelContext) -> TensorArray:
    if not isinstance(handle, TensorArray):
        raise ctx.error(errors.InvalidArgumentError, "The handle is not a TensorArray")
    if handle.closed:
        raise ctx.error(errors.InvalidArgumentError, f"TensorArray {handle.name!r} is closed")
    return handle


@kernel("TensorArrayV3")
def _tensor_array(ctx: KernelContext) -> Callable[[Any], tuple[Any, Any]]:
    name = ctx.attr("tensor_array_name") or ctx.name
    dtype = ctx.attr("dtype")
    dynamic = bool(ctx.attr("dynamic_size"))
    shape = ctx.attr("element_shape")
    shape = None if shape is None else as_shape(shape)
    dims = None if shape is None or not shape.is_fully_defined() else \
        tuple(int(d or 0) for d in shape.as_list())
    return lambda size: (TensorArray(name, int(np.asarray(size)), dtype, dynamic,
                                     element_shape=dims), _FLOW)


@kernel("TensorArrayWriteV3")
def _write(ctx: KernelContext) -> Callable[..., Any]:
    def run(handle: Any, index: Any, value: Any, flow: Any) -> Any:
        _array(handle, ctx).write(int(np.asarray(index)), value, ctx)
        return _FLOW

    return run


@kernel("TensorArrayReadV3")
def _read(ctx: KernelContext) -> Callable[..., Any]:
    return lambda handle, index, flow: _array(handle, ctx).read(int(np.asarray(index)), ctx)


@kernel("TensorArrayGatherV3")
def _gather(ctx: KernelContext) -> Callable[..., Any]:
    dtype = ctx.attr("dtype")

    def run(handle: Any, indices: Any, flow: Any) -> Any:
        ta = _array(handle, ctx)
        idx = [int(i) for i in np.asarray(indices).reshape(-1)]
        if not idx:
            return np.zeros((0,), dtype=dtype.np)
        return np.stack([ta.read(i, ctx) for i in idx])

    return run


@kernel("TensorArrayScatterV3")
def _scatter(ctx: KernelContext) -> Callable[..., Any]:
    def run(handle: Any, indices: Any, value: Any, flow: Any) -> Any:
        ta = _array(handle, ctx)
        value = np.asarray(value)
        idx = [int(i) for i in np.asarray(indices).reshape(-1)]
        if value.shape[:1] != (len(idx),):
            raise ctx.error(errors.InvalidArgumentError,
                            f"Scatter of {len(idx)} indices got a value of shape "
                            f"{list(value.shape)}")
        for k, i in enumerate(idx):
            ta.write(i, value[k], ctx)
        return _FLOW

    return run


@kernel("TensorArraySizeV3")
def _size(ctx: KernelContext) -> Callable[..., Any]:
    return lambda handle, flow: np.int32(len(_array(handle, ctx).items))


@kernel("TensorArrayCloseV3")
def _close(ctx: KernelContext) -> Callable[[Any], None]:
    def run(handle: Any) -> None:
        _array(handle, ctx).closed = True

    return run


@kernel("TensorArrayConcatV3")
def _concat(ctx: KernelContext) -> Callable[..., Any]:
    dtype = ctx.attr("dtype")

    def run(handle: Any, flow: Any) -> tuple[Any, Any]:
        ta = _array(handle, ctx)
        parts = [ta.read(i, ctx) for i in range(len(ta.items))]
        lengths = np.array([p.shape[0] for p in parts], dtype=np.int64)
        value = np.concatenate(parts) if parts else np.zeros((0,), dtype=dtype.np)
        return value, lengths

    return run


@kernel("TensorArraySplitV3")
def _split(ctx: KernelContext) -> Callable[..., Any]:
    def run(handle: Any, value: Any, lengths: Any, flow: Any) -> Any:
        ta = _array(handle, ctx)
        value = np.asarray(value)
        start = 0
        for i, n in enumerate(int(v) for v in np.asarray(lengths).reshape(-1)):
            ta.write(i, value[start:start + n], ctx)
            start += n
        if start != value.shape[0]:
            raise ctx.error(errors.InvalidArgumentError,
                            f"Split lengths add up to {start}, the value has {value.shape[0]} rows")
        return _FLOW

    return run


@kernel("TensorArrayGradV3")
def _grad(ctx: KernelContext) -> Callable[..., tuple[Any, Any]]:
    source = ctx.attr("source")

    def run(handle: Any, flow: Any) -> tuple[Any, Any]:
        ta = _array(handle, ctx)
        g = ta.grads.get(source)
        if g is None:
            g = ta.grads[source] = TensorArray(f"{ta.name}@{source}", len(ta.items), ta.dtype,
                                               ta.dynamic, accumulate=True,
                                               element_shape=ta.element_shape)
            g.forward = ta
        return g, _FLOW

    return run
