"""Queues and conditional accumulators: ops and their python API (``tf.FIFOQueue``,
``tf.ConditionalAccumulator``), with TensorFlow's op names and attrs.

``FIFOQueueV2`` and ``ConditionalAccumulator`` output a *handle* (dtype ``resource``): a reference to
an object that lives in its device's ``ResourceMgr`` under ``(container, shared_name or node name)``,
so every graph registered on a task shares it by name. Every other op here takes the handle as its
input 0, a reference input, so placement puts it on the device of the queue or accumulator.

Ops that may wait are async kernels (``kernels/data_flow.py``): ``QueueDequeueV2`` and
``QueueDequeueManyV2`` wait for elements, ``QueueEnqueueV2``/``QueueEnqueueManyV2`` for room in a
full bounded queue, ``AccumulatorTakeGradient`` for enough gradients. A wait ends early, taking
nothing, when its step is cancelled or aborted (deadline, failure elsewhere).

``AccumulatorWaitForGradients`` is a tensorgrid extension (TensorFlow has no such op): it waits like
``AccumulatorTakeGradient`` but takes nothing, at most ``timeout_ms`` (-1: no limit), and returns how
many gradients are in. With ``fail_on_timeout`` it fails with ``DeadlineExceededError`` when the time
is up instead, so takes that depend on it run only when none of them can block
(``SyncReplicasOptimizer``'s update does this).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, not_differentiable, op
from tensorgrid.core.shapes import TensorShape, as_shape
from tensorgrid.framework.convert import convert_to_tensor, make_op
from tensorgrid.framework.graph import Operation, Tensor, get_default_graph
from tensorgrid.ops._infer import spec

__all__ = ["QueueBase", "FIFOQueue", "ConditionalAccumulator"]

_HANDLE = (dtypes.resource, ())
_QUEUE_ATTRS = {"shapes": [], "capacity": -1, "container": "", "shared_name": ""}
_TIMEOUT = {"timeout_ms": -1}  # as in TensorFlow, accepted and not supported: use RunOptions


def _expect_handle(ctx: InferContext) -> None:
    if ctx.num_inputs < 1 or ctx.dtype(0) is not dtypes.resource:
        ctx.fail("input 0 must be the handle of a queue or an accumulator (dtype resource)")


def _expect_scalar(ctx: InferContext, i: int, dtype: dtypes.DType, what: str) -> None:
    if ctx.dtype(i) is not dtype:
        ctx.fail(f"{what} must be {dtype.name}, got {ctx.dtype(i).name}")
    if ctx.shape(i).rank not in (None, 0):
        ctx.fail(f"{what} must be a scalar, got shape {ctx.shape(i)}")


# ------------------------------------------------------------------------------ queues


@op("FIFOQueueV2", stateful=True, ref_outputs=(0,), defaults=_QUEUE_ATTRS)
def _fifo_queue(ctx: InferContext) -> Sequence[TensorSpec]:
    types = list(ctx.attr("component_types"))
    shapes = list(ctx.attr("shapes"))
    if not types:
        ctx.fail("a queue needs at least one component type")
    if shapes and len(shapes) != len(types):
        ctx.fail(f"shapes has {len(shapes)} entries but component_types has {len(types)}")
    if int(ctx.attr("capacity")) == 0 or int(ctx.attr("capacity")) < -1:
        ctx.fail(f"capacity must be positive or -1 (unbounded), got {ctx.attr('capacity')}")
    return [spec(*_HANDLE)]


def _enqueue_infer(many: bool) -> Any:
    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        _expect_handle(ctx)
        types = list(ctx.attr("Tcomponents"))
        if ctx.num_inputs - 1 != len(types):
            ctx.fail(f"expects {len(types)} components, got {ctx.num_inputs - 1}")
        for i, dt in enumerate(types, start=1):
            if ctx.dtype(i) is not dt:
                ctx.fail(f"component {i - 1} has dtype {ctx.dtype(i).name}, expected {dt.name}")
            if many and ctx.shape(i).rank == 0:
                ctx.fail(f"component {i - 1} of an enqueue_many must have a batch dimension")
        return []

    return infer


op("QueueEnqueueV2", stateful=True, ref_inputs=(0,), defaults=_TIMEOUT)(_enqueue_infer(False))
op("QueueEnqueueManyV2", stateful=True, ref_inputs=(0,), defaults=_TIMEOUT)(_enqueue_infer(True))


@op("QueueDequeueV2", stateful=True, ref_inputs=(0,), defaults=_TIMEOUT)
def _dequeue(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _expect_handle(ctx)
    return [spec(dt, TensorShape(None)) for dt in ctx.attr("component_types")]


@op("QueueDequeueManyV2", stateful=True, ref_inputs=(0,), defaults=_TIMEOUT)
def _dequeue_many(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _expect_handle(ctx)
    _expect_scalar(ctx, 1, dtypes.int32, "n")
    return [spec(dt, TensorShape(None)) for dt in ctx.attr("component_types")]


@op("QueueSizeV2", stateful=True, ref_inputs=(0,))
def _queue_size(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _expect_handle(ctx)
    return [spec(dtypes.int32, ())]


@op("QueueIsClosedV2", stateful=True, ref_inputs=(0,))
def _queue_is_closed(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _expect_handle(ctx)
    return [spec(dtypes.bool_, ())]


@op("QueueCloseV2", stateful=True, ref_inputs=(0,), defaults={"cancel_pending_enqueues": False})
def _queue_close(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _expect_handle(ctx)
    return []


# ------------------------------------------------------------------------------ accumulators


@op("ConditionalAccumulator", stateful=True, ref_outputs=(0,),
    defaults={"shape": TensorShape(None), "container": "", "shared_name": "",
              "reduction_type": "MEAN"})
def _accumulator(ctx: InferContext) -> Sequence[TensorSpec]:
    dt = ctx.attr("dtype")
    if not (dt.is_floating or dt.is_integer or dt.is_complex):
        ctx.fail(f"an accumulator needs a numeric dtype, got {dt.name}")
    if ctx.attr("reduction_type") not in ("MEAN", "SUM"):
        ctx.fail(f"reduction_type must be 'MEAN' or 'SUM', got {ctx.attr('reduction_type')!r}")
    return [spec(*_HANDLE)]


@op("AccumulatorApplyGradient", stateful=True, ref_inputs=(0,))
def _apply_gradient(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    _expect_handle(ctx)
    _expect_scalar(ctx, 1, dtypes.int64, "local_step")
    if ctx.dtype(2) is not ctx.attr("dtype"):
        ctx.fail(f"gradient has dtype {ctx.dtype(2).name}; the accumulator's is "
                 f"{ctx.attr('dtype').name}")
    return []


@op("AccumulatorTakeGradient", stateful=True, ref_inputs=(0,))
def _take_gradient(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _expect_handle(ctx)
    _expect_scalar(ctx, 1, dtypes.int32, "num_required")
    return [spec(ctx.attr("dtype"), TensorShape(None))]


@op("AccumulatorWaitForGradients", stateful=True, ref_inputs=(0,),
    defaults={"timeout_ms": -1, "fail_on_timeout": False})
def _wait_for_gradients(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _expect_handle(ctx)
    _expect_scalar(ctx, 1, dtypes.int32, "num_required")
    return [spec(dtypes.int32, ())]


@op("AccumulatorSetGlobalStep", stateful=True, ref_inputs=(0,))
def _set_global_step(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _expect_handle(ctx)
    _expect_scalar(ctx, 1, dtypes.int64, "new_global_step")
    return []


@op("AccumulatorNumAccumulated", stateful=True, ref_inputs=(0,))
def _num_accumulated(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _expect_handle(ctx)
    return [spec(dtypes.int32, ())]


not_differentiable(
    "FIFOQueueV2", "QueueEnqueueV2", "QueueEnqueueManyV2", "QueueDequeueV2", "QueueDequeueManyV2",
    "QueueSizeV2", "QueueIsClosedV2", "QueueCloseV2", "ConditionalAccumulator",
    "AccumulatorApplyGradient", "AccumulatorTakeGradient", "AccumulatorWaitForGradients",
    "AccumulatorSetGlobalStep", "AccumulatorNumAccumulated",
)


# ------------------------------------------------------------------------------ python API


def _as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, list | tuple) else [x]


class QueueBase:
    """A queue of tuples of tensors (its *components*), shared by name on its device.

    Args:
        dtypes: the component dtypes.
        shapes: the component shapes (None: any shape; ``dequeue_many`` then needs the elements
            to agree).
        names: component names; with names, ``enqueue`` takes a dict and ``dequeue`` returns one.
        queue_ref: the queue's handle (output of a queue op).
    """

    def __init__(self, dtypes_: Sequence[Any], shapes: Sequence[Any] | None,
                 names: Sequence[str] | None, queue_ref: Tensor) -> None:
        self._dtypes = [dtypes.as_dtype(d) for d in dtypes_]
        self._shapes = [as_shape(s) for s in shapes] if shapes is not None else \
            [TensorShape(None)] * len(self._dtypes)
        if len(self._shapes) != len(self._dtypes):
            raise ValueError("Queue shapes must have the same length as dtypes")
        if names is not None and len(names) != len(self._dtypes):
            raise ValueError("Queue names must have the same length as dtypes")
        self._names = list(names) if names is not None else None
        self._queue_ref = queue_ref
        self._name = queue_ref.op.name

    @property
    def queue_ref(self) -> Tensor:
        """The queue's handle."""
        return self._queue_ref

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtypes(self) -> list[dtypes.DType]:
        return list(self._dtypes)

    @property
    def shapes(self) -> list[TensorShape]:
        return list(self._shapes)

    @property
    def names(self) -> list[str] | None:
        return None if self._names is None else list(self._names)

    def _components(self, vals: Any, many: bool) -> list[Tensor]:
        if self._names is not None:
            if not isinstance(vals, Mapping):
                raise ValueError("This queue has names, so enqueue takes a dict of its components")
            if sorted(vals) != sorted(self._names):
                raise ValueError(f"Keys in dict {sorted(vals)} do not match the queue's names "
                                 f"{sorted(self._names)}")
            items = [vals[n] for n in self._names]
        else:
            items = _as_list(vals)  # as TensorFlow: a list or tuple is the list of components
        if len(items) != len(self._dtypes):
            raise ValueError(f"Expected {len(self._dtypes)} components to enqueue, got "
                             f"{len(items)}")
        out = []
        for i, (v, dt, shape) in enumerate(zip(items, self._dtypes, self._shapes)):
            t = convert_to_tensor(v, dtype=dt, name=f"component_{i}")
            want = TensorShape(None) if shape.dims is None else \
                (TensorShape([None]).concatenate(shape) if many else shape)
            if not t.shape.is_compatible_with(want):
                raise ValueError(f"Component {i} has shape {t.shape}, which is not compatible "
                                 f"with the queue's {'batched ' if many else ''}shape {want}")
            out.append(t)
        return out

    def enqueue(self, vals: Any, name: str | None = None) -> Operation:
        """An op that adds one element (waits while a bounded queue is full).

        Raises:
            ValueError: the components do not match the queue's dtypes, shapes or names.
        """
        comps = self._components(vals, many=False)
        return make_op("QueueEnqueueV2", [self._queue_ref, *comps],  # type: ignore[no-any-return]
                       {"Tcomponents": list(self._dtypes)}, name=name or f"{self._name}_enqueue")

    def enqueue_many(self, vals: Any, name: str | None = None) -> Operation:
        """An op that adds the slices of ``vals`` along dimension 0 as elements."""
        comps = self._components(vals, many=True)
        return make_op("QueueEnqueueManyV2",  # type: ignore[no-any-return]
                       [self._queue_ref, *comps], {"Tcomponents": list(self._dtypes)},
                       name=name or f"{self._name}_EnqueueMany")

    def _result(self, outs: Any, lead: TensorShape | None) -> Any:
        ts = list(outs) if isinstance(outs, tuple) else [outs]
        for t, shape in zip(ts, self._shapes):
            if shape.dims is not None:
                t.set_shape(lead.concatenate(shape) if lead is not None else shape)
        if self._names is not None:
            return dict(zip(self._names, ts))
        return ts[0] if len(ts) == 1 else ts

    def dequeue(self, name: str | None = None) -> Any:
        """Take one element (waits while the queue is empty). A tensor for a one-component queue,
        else a list (a dict with names). Running it on a closed, empty queue raises
        ``OutOfRangeError``."""
        outs = make_op("QueueDequeueV2", [self._queue_ref],
                       {"component_types": list(self._dtypes)},
                       name=name or f"{self._name}_Dequeue")
        return self._result(outs, None)

    def dequeue_many(self, n: Any, name: str | None = None) -> Any:
        """Take ``n`` elements, stacked along a new dimension 0 (waits until there are ``n``)."""
        n_t = convert_to_tensor(n, dtype=dtypes.int32, name="n")
        outs = make_op("QueueDequeueManyV2", [self._queue_ref, n_t],
                       {"component_types": list(self._dtypes)},
                       name=name or f"{self._name}_DequeueMany")
        from tensorgrid.framework.tensor_util import constant_value

        nv = constant_value(n_t)
        return self._result(outs, TensorShape([None if nv is None else int(nv)]))

    def size(self, name: str | None = None) -> Tensor:
        """The number of elements in the queue (int32)."""
        return make_op("QueueSizeV2", [self._queue_ref], {},  # type: ignore[no-any-return]
                       name=name or f"{self._name}_Size")

    def is_closed(self, name: str | None = None) -> Tensor:
        """Whether the queue is closed (bool)."""
        return make_op("QueueIsClosedV2", [self._queue_ref], {},  # type: ignore[no-any-return]
                       name=name or f"{self._name}_IsClosed")

    def close(self, cancel_pending_enqueues: bool = False, name: str | None = None) -> Operation:
        """An op that closes the queue: later enqueues fail (``CancelledError``); dequeues go on
        while elements remain, then fail with ``OutOfRangeError``. With
        ``cancel_pending_enqueues`` the enqueues waiting for room fail too."""
        return make_op("QueueCloseV2", [self._queue_ref],  # type: ignore[no-any-return]
                       {"cancel_pending_enqueues": bool(cancel_pending_enqueues)},
                       name=name or f"{self._name}_Close")


class FIFOQueue(QueueBase):
    """A first-in first-out queue (``FIFOQueueV2``).

    Args:
        capacity: the most elements it holds (enqueues wait while it is full); -1: unbounded.
        dtypes: the component dtypes.
        shapes: the component shapes, or None.
        names: component names, or None.
        shared_name: the name under which graphs on the same device share it (default: the
            op's name).
        name: the op's name.
    """

    def __init__(self, capacity: int, dtypes: Any, shapes: Sequence[Any] | None = None,
                 names: Sequence[str] | None = None, shared_name: str | None = None,
                 name: str = "fifo_queue") -> None:
        types = _as_list(dtypes)
        shape_list = None if shapes is None else [as_shape(s) for s in shapes]
        attrs = {"component_types": [_dt(d) for d in types],
                 "shapes": shape_list or [], "capacity": int(capacity),
                 "container": "", "shared_name": shared_name or ""}
        g = get_default_graph()
        ref = g.create_op("FIFOQueueV2", [], attrs, name=name).outputs[0]
        super().__init__(types, shape_list, names, ref)


def _dt(d: Any) -> dtypes.DType:
    return dtypes.as_dtype(d)


class ConditionalAccumulator:
    """Aggregates gradients for one variable, dropping stale ones (``ConditionalAccumulator``).

    ``apply_grad(grad, local_step)`` adds a gradient unless ``local_step`` is older than the
    accumulator's global step. ``take_grad(n)`` waits until at least ``n`` gradients are in, returns
    their mean (or sum), resets, and advances the global step by one.

    Args:
        dtype: the gradients' dtype.
        shape: their shape (None: any, fixed by the first gradient).
        shared_name: the name under which graphs on the same device share it (default: the op's).
        name: the op's name.
        reduction_type: 'MEAN' or 'SUM'.
    """

    def __init__(self, dtype: Any, shape: Any = None, shared_name: str | None = None,
                 name: str = "conditional_accumulator", reduction_type: str = "MEAN") -> None:
        self._dtype = dtypes.as_dtype(dtype)
        self._shape = as_shape(shape)
        g = get_default_graph()
        self._accumulator_ref = g.create_op("ConditionalAccumulator", [], {
            "dtype": self._dtype, "shape": self._shape, "container": "",
            "shared_name": shared_name or "", "reduction_type": reduction_type,
        }, name=name).outputs[0]
        self._name = self._accumulator_ref.op.name

    @property
    def accumulator_ref(self) -> Tensor:
        return self._accumulator_ref

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self) -> dtypes.DType:
        return self._dtype

    def apply_grad(self, grad: Any, local_step: Any = 0, name: str | None = None) -> Operation:
        """An op adding ``grad``, computed at ``local_step``, unless that step is stale.

        Raises:
            ValueError: ``grad``'s shape does not fit the accumulator's.
        """
        from tensorgrid.ops.math import cast

        g = convert_to_tensor(grad, dtype=self._dtype, name="grad")
        if not g.shape.is_compatible_with(self._shape):
            raise ValueError(f"Shapes {g.shape} and {self._shape} are incompatible: the "
                             f"gradient does not fit accumulator {self._name}")
        step = cast(convert_to_tensor(local_step), dtypes.int64)
        return make_op("AccumulatorApplyGradient",  # type: ignore[no-any-return]
                       [self._accumulator_ref, step, g], {"dtype": self._dtype},
                       name=name or "AccumulatorApplyGradient")

    def take_grad(self, num_required: Any, name: str | None = None) -> Tensor:
        """The mean (or sum) of at least ``num_required`` gradients; waits until they are in,
        then resets the accumulator and advances its global step. ``num_required`` may be a
        tensor (fed at run time)."""
        n = convert_to_tensor(num_required, dtype=dtypes.int32, name="num_required")
        out: Tensor = make_op("AccumulatorTakeGradient", [self._accumulator_ref, n],
                              {"dtype": self._dtype}, name=name or "AccumulatorTakeGradient")
        out.set_shape(self._shape)
        return out

    def wait_for_grads(self, num_required: Any, timeout_ms: int = -1,
                       fail_on_timeout: bool = False, name: str | None = None) -> Tensor:
        """(tensorgrid) Wait until at least ``num_required`` gradients are in, or ``timeout_ms``
        passed (-1: no limit); take nothing; return how many there are (int32). With
        ``fail_on_timeout``, the time running out fails the step (``DeadlineExceededError``)."""
        n = convert_to_tensor(num_required, dtype=dtypes.int32, name="num_required")
        return make_op("AccumulatorWaitForGradients",  # type: ignore[no-any-return]
                       [self._accumulator_ref, n],
                       {"timeout_ms": int(timeout_ms), "fail_on_timeout": bool(fail_on_timeout)},
                       name=name or "AccumulatorWaitForGradients")

    def num_accumulated(self, name: str | None = None) -> Tensor:
        """The number of gradients accumulated since the last take (int32)."""
        return make_op("AccumulatorNumAccumulated",  # type: ignore[no-any-return]
                       [self._accumulator_ref], {}, name=name or "AccumulatorNumAccumulated")

    def set_global_step(self, new_global_step: Any, name: str | None = None) -> Operation:
        """An op setting the accumulator's global step (gradients older than it are dropped)."""
        from tensorgrid.ops.math import cast

        step = cast(convert_to_tensor(new_global_step), dtypes.int64)
        return make_op("AccumulatorSetGlobalStep",  # type: ignore[no-any-return]
                       [self._accumulator_ref, step], {}, name=name or "AccumulatorSetGlobalStep")
