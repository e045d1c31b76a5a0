"""Control-flow op definitions: TensorFlow 1.x's primitives for conditionals and loops.

* ``Switch(data, pred) -> (output_false, output_true)``: forwards ``data`` to the output that ``pred``
  selects; the other output is *dead*.
* ``Merge(inputs...) -> (output, value_index)``: forwards the first live input and its index.
* ``Enter(data)``: moves a value into a child frame (a loop) named by ``frame_name``;
  ``is_constant`` makes it a loop invariant, seen by every iteration.
* ``Exit(data)``: moves a value from a frame to its parent.
* ``NextIteration(data)``: moves a value to the next iteration of its frame (its output edge is the
  loop's back edge, to a ``Merge``).
* ``LoopCond(pred)``: marks a loop's predicate.
* ``ControlTrigger``: a no-op that runs even when its inputs are dead.

The ``Ref*`` forms take and give variable references. None of these ops is constant-folded or merged
by CSE (``core.ir.CONTROL_FLOW_OPS``); their semantics live in the executor (``runtime/frames.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, register_op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.ops._attrs import declare_attrs


def _data(ctx: InferContext) -> TensorSpec:
    if ctx.num_inputs < 1 or ctx.inputs[0] is None:
        ctx.fail("expects a data input")
    return ctx.inputs[0]


def _check_pred(ctx: InferContext, i: int) -> None:
    pred = ctx.input(i)
    if not pred.dtype.is_bool:
        ctx.fail(f"predicate must be bool, got {pred.dtype.name}")
    if not pred.shape.is_compatible_with(TensorShape([])):
        ctx.fail(f"predicate must be a scalar, got shape {pred.shape}")


def _switch(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _check_pred(ctx, 1)
    data = _data(ctx)
    return [data, data]


def _merge(ctx: InferContext) -> Sequence[TensorSpec]:
    """The dtype all inputs share; the most specific shape compatible with every known input.

    An input may be None when it is a loop's back edge whose spec is not known yet (the compiler's
    inference resolves it on a later pass).
    """
    known = [s for s in ctx.inputs if s is not None]
    if not known:
        ctx.fail("expects at least one input")
    dtype = known[0].dtype
    shape = known[0].shape
    for i, s in enumerate(known[1:], 1):
        if s.dtype is not dtype:
            ctx.fail(f"input {i} has dtype {s.dtype.name} but input 0 has {dtype.name}; "
                     "they must match")
        shape = shape.most_specific_compatible_shape(s.shape)
    return [TensorSpec(dtype, shape), TensorSpec(dtypes.int32, TensorShape([]))]


def _pass_through(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    return [_data(ctx)]


def _loop_cond(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _check_pred(ctx, 0)
    return [TensorSpec(dtypes.bool_, TensorShape([]))]


def _control_trigger(ctx: InferContext) -> Sequence[TensorSpec]:
    return []


_ENTER_DEFAULTS = {"is_constant": False, "parallel_iterations": 10}

register_op("Switch", _switch, foldable=False)
register_op("RefSwitch", _switch, foldable=False, ref_inputs=(0,), ref_outputs=(0, 1))
register_op("Merge", _merge, foldable=False)
# a RefMerge takes references on all of its inputs (N is not bounded by the op; 64 covers TF's use)
register_op("RefMerge", _merge, foldable=False, ref_inputs=range(64), ref_outputs=(0,))
register_op("Enter", _pass_through, foldable=False, defaults=_ENTER_DEFAULTS)
register_op("RefEnter", _pass_through, foldable=False, defaults=_ENTER_DEFAULTS, ref_inputs=(0,),
            ref_outputs=(0,))
register_op("Exit", _pass_through, foldable=False)
register_op("RefExit", _pass_through, foldable=False, ref_inputs=(0,), ref_outputs=(0,))
register_op("NextIteration", _pass_through, foldable=False)
register_op("RefNextIteration", _pass_through, foldable=False, ref_inputs=(0,), ref_outputs=(0,))
register_op("LoopCond", _loop_cond, foldable=False)
register_op("ControlTrigger", _control_trigger, foldable=False)


# ------------------------------------------------------------------------------ stacks
# TensorFlow's stacks keep a loop's forward values, one push per iteration, for its gradient loop
# to pop in reverse order. A stack lives for one step (each run of StackV2 makes a new one).


def _stack(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    return [TensorSpec(dtypes.resource, TensorShape([]))]


def _stack_push(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    return [ctx.input(1)]


def _stack_pop(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    return [TensorSpec(ctx.attr("elem_type"), TensorShape(None))]


def _stack_close(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    return []


register_op("StackV2", _stack, stateful=True, defaults={"stack_name": ""})
register_op("StackPushV2", _stack_push, stateful=True, defaults={"swap_memory": False})
register_op("StackPopV2", _stack_pop, stateful=True)
register_op("StackCloseV2", _stack_close, stateful=True)


declare_attrs({
    "ControlTrigger": "",
    "Enter": "T frame_name is_constant parallel_iterations",
    "Exit": "T",
    "LoopCond": "",
    "Merge": "N T",
    "NextIteration": "T",
    "RefEnter": "T frame_name is_constant parallel_iterations",
    "RefExit": "T",
    "RefMerge": "N T",
    "RefNextIteration": "T",
    "RefSwitch": "T",
    "StackCloseV2": "",
    "StackPopV2": "elem_type",
    "StackPushV2": "T swap_memory",
    "StackV2": "elem_type stack_name",
    "Switch": "T",
})
