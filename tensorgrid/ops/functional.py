"""v2 control flow and function calls: ops that run functions of the graph's library.

* ``If(cond, input...) -> output...`` (``StatelessIf`` alike): runs ``then_branch`` or
  ``else_branch`` on the inputs; ``Tin``/``Tout`` are the dtypes.
* ``While(input...) -> output...`` (``StatelessWhile`` alike): runs ``body`` while ``cond`` of
  the loop variables is true; ``T`` is their dtypes.
* ``PartitionedCall(args...) -> output...`` (``StatefulPartitionedCall`` alike): calls ``f``.

TensorFlow 2.x writes these whenever eager execution is merely disabled. The function bodies
travel with the calling node (``core.serde_function``); the kernels, which run a body as a nested
executable, are in ``runtime/functions.py``. Output shapes come from ``output_shapes`` when the
node has it, and are unknown otherwise (a branch or loop may change them).
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core.registry import InferContext, TensorSpec, register_op
from tensorgrid.core.shapes import TensorShape, as_shape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec


def _outputs(ctx: InferContext, types_attr: str) -> list[TensorSpec]:
    types = list(ctx.attr(types_attr))
    shapes = list(ctx.attr("output_shapes", []) or [])
    if shapes and len(shapes) != len(types):
        ctx.fail(f"output_shapes has {len(shapes)} entries but {types_attr} has {len(types)}")
    return [spec(t, as_shape(shapes[i]) if shapes else TensorShape(None))
            for i, t in enumerate(types)]


def _if(ctx: InferContext) -> Sequence[TensorSpec]:
    if ctx.num_inputs < 1:
        ctx.fail("expects a condition input")
    return _outputs(ctx, "Tout")


def _while(ctx: InferContext) -> Sequence[TensorSpec]:
    types = list(ctx.attr("T"))
    if ctx.num_inputs != len(types):
        ctx.fail(f"has {ctx.num_inputs} inputs but T lists {len(types)} loop variables")
    for i, t in enumerate(types):
        if ctx.dtype(i) is not t:
            ctx.fail(f"loop variable {i} is {ctx.dtype(i).name} but T says {t.name}")
    return _outputs(ctx, "T")


def _call(ctx: InferContext) -> Sequence[TensorSpec]:
    return _outputs(ctx, "Tout")


# none is constant-folded (a body may give variants, which no Const holds); the stateless
# forms may be merged by CSE, as any pure op
register_op("If", _if, stateful=True)
register_op("StatelessIf", _if, foldable=False)
register_op("While", _while, stateful=True)
register_op("StatelessWhile", _while, foldable=False)
register_op("PartitionedCall", _call, foldable=False)
register_op("StatefulPartitionedCall", _call, stateful=True)


declare_attrs({
    "If": "Tcond Tin Tout else_branch output_shapes then_branch",
    "PartitionedCall": "Tin Tout config config_proto executor_type f",
    "StatefulPartitionedCall": "Tin Tout config config_proto executor_type f",
    "StatelessIf": "Tcond Tin Tout else_branch output_shapes then_branch",
    "StatelessWhile": "T:list(type) body cond output_shapes parallel_iterations",
    "While": "T:list(type) body cond output_shapes parallel_iterations",
})
