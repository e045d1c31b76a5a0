"""The registry: three tables keyed by op name.

* op definitions: how to infer output dtypes and shapes, whether the op is stateful, which inputs
  take a variable reference, the attrs it takes with their types (``core.attr_types``), attr
  defaults;
* kernels, keyed by (op, device type): a *builder* called once per node that returns the function
  run at every step (plain, ``StepKernel`` or ``AsyncKernel``);
* gradient rules, keyed by op (or a declaration that the op has no gradient).

A duplicate registration fails and names the first one; a missing kernel or gradient fails naming the
op, the node and the device.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from tensorgrid.core import attr_types, errors
from tensorgrid.core.dtypes import DType
from tensorgrid.core.ir import NodeDef
from tensorgrid.core.shapes import TensorShape


class TensorSpec(NamedTuple):
    """What is known of a tensor before it runs: its dtype and (possibly partial) shape."""

    dtype: DType
    shape: TensorShape


_MISSING = object()


class InferContext:
    """What an op's inference function sees: the node, its inputs' specs and constant inputs."""

    __slots__ = ("_const", "inputs", "node", "opdef")

    def __init__(
        self,
        node: NodeDef,
        opdef: OpDef,
        inputs: Sequence[TensorSpec],
        const: Callable[[int], np.ndarray | None] | None = None,
    ) -> None:
        self.node = node
        self.opdef = opdef
        self.inputs = list(inputs)
        self._const = const

    def attr(self, name: str, default: Any = _MISSING) -> Any:
        return node_attr(self.node, self.opdef, name, default)

    def input(self, i: int) -> TensorSpec:
        if i >= len(self.inputs):
            self.fail(f"expects at least {i + 1} inputs, got {len(self.inputs)}")
        return self.inputs[i]

    def dtype(self, i: int) -> DType:
        return self.input(i).dtype

    def shape(self, i: int) -> TensorShape:
        return self.input(i).shape

    @property
    def num_inputs(self) -> int:
        return len(self.inputs)

    def const(self, i: int) -> np.ndarray | None:
        """The value of input i when it is known before running (a constant), else None."""
        return None if self._const is None else self._const(i)

    def fail(self, message: str, cls: type[errors.OpError] = errors.InvalidArgumentError) -> Any:
        raise cls(
            f"{message} (node '{self.node.name}', op {self.node.op})",
            node_name=self.node.name, op_type=self.node.op,
        )

    def expect_inputs(self, n: int) -> None:
        if len(self.inputs) != n:
            self.fail(f"expects {n} inputs, got {len(self.inputs)}")

    def same_dtype(self, *idx: int) -> DType:
        """The common dtype of the given inputs (all of them when none given); fails if they differ."""
        which = idx or tuple(range(len(self.inputs)))
        first = self.inputs[which[0]].dtype
        for i in which[1:]:
            if self.inputs[i].dtype is not first:
                self.fail(
                    f"input {i} has dtype {self.inputs[i].dtype.name} but input {which[0]} has "
                    f"{first.name}; they must match"
                )
        return first


InferFn = Callable[[InferContext], Sequence[TensorSpec]]


@dataclass(frozen=True)
class OpDef:
    name: str
    infer: InferFn
    stateful: bool = False
    ref_inputs: frozenset[int] = frozenset()
    ref_outputs: frozenset[int] = frozenset()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    # Constant folding may evaluate the op when all inputs are constant.
    foldable: bool = True
    source: str = ""
    # attr name -> attr type ("int", "list(shape)", ...); None until the op declares its attrs
    attrs: Mapping[str, str] | None = None


def node_attr(node: NodeDef, opdef: OpDef | None, name: str, default: Any = _MISSING) -> Any:
    """An attr of a node, falling back to the op's default; names the node when missing."""
    if name in node.attrs:
        return node.attrs[name]
    if opdef is not None and name in opdef.defaults:
        return opdef.defaults[name]
    if default is not _MISSING:
        return default
    raise errors.InvalidArgumentError(
        f"Node '{node.name}' (op {node.op}) is missing attr '{name}'",
        node_name=node.name, op_type=node.op,
    )


# ----------------------------------------------------------------------------------- kernels


class StepKernel:
    """A synchronous kernel that needs the step (its id, rendezvous, feeds): ``fn(step, *inputs)``."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn


class AsyncKernel:
    """A kernel that may wait (Recv, queues, barriers): ``async fn(step, *inputs)``."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn


class KernelContext:
    """What a kernel builder sees, once per node: the node, its device and its resources."""

    __slots__ = (
        "device",
        "device_type",
        "input_specs",
        "node",
        "opdef",
        "output_specs",
        "resources",
        "xp",
    )

    def __init__(
        self,
        node: NodeDef,
        opdef: OpDef,
        device: str,
        device_type: str,
        xp: Any,
        resources: Any,
        input_specs: Sequence[TensorSpec | None] = (),
        output_specs: Sequence[TensorSpec | None] = (),
    ) -> None:
        self.node = node
        self.opdef = opdef
        self.device = device
        self.device_type = device_type
        self.xp = xp
        self.resources = resources
        self.input_specs = list(input_specs)
        self.output_specs = list(output_specs)

    def attr(self, name: str, default: Any = _MISSING) -> Any:
        return node_attr(self.node, self.opdef, name, default)

    @property
    def name(self) -> str:
        return self.node.name

    def error(self, cls: type[errors.OpError], message: str) -> errors.OpError:
        """An error of the given class that names this node, op and device."""
        return errors.at_node(cls(message), self.node.name, self.node.op, self.device)


KernelBuilder = Callable[[KernelContext], Any]
GradientFn = Callable[..., Any]


@dataclass(frozen=True)
class KernelDef:
    op: str
    device_type: str
    build: KernelBuilder
    source: str


_OPS: dict[str, OpDef] = {}
_KERNELS: dict[tuple[str, str], KernelDef] = {}
_GRADIENTS: dict[str, tuple[GradientFn | None, str]] = {}


def _caller(depth: int = 2) -> str:
    # sys._getframe, not inspect.stack(): the latter reads the source of every frame on the stack,
    # which made importing the package (thousands of registrations) take seconds
    frame = sys._getframe(depth)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def register_op(
    name: str,
    infer: InferFn,
    *,
    stateful: bool = False,
    ref_inputs: Iterable[int] = (),
    ref_outputs: Iterable[int] = (),
    defaults: Mapping[str, Any] | None = None,
    foldable: bool | None = None,
    source: str | None = None,
    attrs: Mapping[str, str] | None = None,
) -> OpDef:
    """Register an op definition; ``attrs`` declares the attrs the op takes, by name and type
    (or ``declare_attrs`` does, later).

    Raises:
        AlreadyExistsError: the op is registered already (the message names where).
        ValueError: an attr type that is not one (``core.attr_types.ATTR_TYPES``).
    """
    if name in _OPS:
        raise errors.AlreadyExistsError(
            f"Op '{name}' is already registered (first at {_OPS[name].source})"
        )
    opdef = OpDef(
        name=name, infer=infer, stateful=stateful, ref_inputs=frozenset(ref_inputs),
        ref_outputs=frozenset(ref_outputs), defaults=dict(defaults or {}),
        foldable=(not stateful) if foldable is None else foldable,
        source=source or _caller(),
        attrs=_attr_table(name, attrs) if attrs is not None else None,
    )
    _OPS[name] = opdef
    return opdef


def _attr_table(op_name: str, attrs: Mapping[str, str]) -> dict[str, str]:
    try:
        return {k: attr_types.check_type_name(t) for k, t in attrs.items()}
    except ValueError as exc:
        raise ValueError(f"Op '{op_name}': {exc}") from None


def declare_attrs(op_name: str, attrs: Mapping[str, str]) -> OpDef:
    """Declare the attrs an op takes, by name and attr type, once.

    Raises:
        NotFoundError: no such op. AlreadyExistsError: its attrs are declared already.
        ValueError: an attr type that is not one.
    """
    opdef = get_op(op_name)
    if opdef.attrs is not None:
        raise errors.AlreadyExistsError(
            f"The attrs of op '{op_name}' are already declared (op registered at {opdef.source})")
    _OPS[op_name] = replace(opdef, attrs=_attr_table(op_name, attrs))
    return _OPS[op_name]


def check_attrs(node: NodeDef, opdef: OpDef) -> None:
    """Check a node's attrs against its op's declaration (nothing to check when the op declares
    none).

    Raises:
        InvalidArgumentError: an attr the op does not take, or of another type; names the node,
            the attr, the expected and the given type.
    """
    if opdef.attrs is not None:
        attr_types.check_node_attrs(node, opdef.attrs)


def op(name: str, **kw: Any) -> Callable[[InferFn], InferFn]:
    """Decorator form of ``register_op`` on an inference function."""

    def deco(fn: InferFn) -> InferFn:
        register_op(name, fn, source=_caller(), **kw)
        return fn

    return deco


def get_op(name: str, node: NodeDef | None = None) -> OpDef:
    """The definition of an op.

    Raises:
        NotFoundError: no op of that name is registered.
    """
    found = _OPS.get(name)
    if found is None:
        where = f" (node '{node.name}')" if node is not None else ""
        raise errors.NotFoundError(
            f"Op type not registered '{name}'{where}",
            node_name=node.name if node else None, op_type=name,
        )
    return found


def has_op(name: str) -> bool:
    return name in _OPS


def registered_ops() -> dict[str, OpDef]:
    return dict(_OPS)


def register_kernel(op_name: str, device_types: str | Iterable[str] = "CPU") -> Callable[
    [KernelBuilder], KernelBuilder
]:
    """Decorator: register a kernel builder for an op on one or more device types."""
    types = (device_types,) if isinstance(device_types, str) else tuple(device_types)

    def deco(build: KernelBuilder) -> KernelBuilder:
        src = _caller()
        for dt in types:
            key = (op_name, dt)
            if key in _KERNELS:
                raise errors.AlreadyExistsError(
                    f"Kernel for op '{op_name}' on {dt} is already registered "
                    f"(first at {_KERNELS[key].source})"
                )
            _KERNELS[key] = KernelDef(op_name, dt, build, src)
        return build

    return deco


def get_kernel(op_name: str, device_type: str, node: NodeDef | None = None,
               device: str = "") -> KernelDef:
    """The kernel of an op for a device type.

    Raises:
        NotFoundError: none is registered; names the op, the node and the device.
    """
    found = _KERNELS.get((op_name, device_type))
    if found is None:
        node_name = node.name if node else None
        raise errors.NotFoundError(
            f"No kernel registered for op '{op_name}' on device type {device_type}"
            + (f" (node '{node_name}'{', device ' + device if device else ''})" if node_name else ""),
            node_name=node_name, op_type=op_name, device=device or None,
        )
    return found


def has_kernel(op_name: str, device_type: str) -> bool:
    return (op_name, device_type) in _KERNELS


def register_gradient(op_name: str) -> Callable[[GradientFn], GradientFn]:
    """Decorator: register the gradient rule of an op."""

    def deco(fn: GradientFn) -> GradientFn:
        _add_gradient(op_name, fn, _caller())
        return fn

    return deco


def not_differentiable(*op_names: str) -> None:
    """Declare ops through which no gradient flows (integer results, state updates, ...)."""
    src = _caller()
    for name in op_names:
        _add_gradient(name, None, src)


def _add_gradient(op_name: str, fn: GradientFn | None, src: str) -> None:
    if op_name in _GRADIENTS:
        raise errors.AlreadyExistsError(
            f"Gradient for op '{op_name}' is already registered (first at {_GRADIENTS[op_name][1]})"
        )
    _GRADIENTS[op_name] = (fn, src)


def get_gradient(op_name: str) -> GradientFn | None:
    """The gradient rule of an op, or None when it is declared not differentiable.

    Raises:
        LookupError: the op has neither a rule nor a declaration.
    """
    found = _GRADIENTS.get(op_name)
    if found is None:
        raise LookupError(f"No gradient defined for operation type '{op_name}'")
    return found[0]


def gradient_status(op_name: str) -> str:
    """'rule', 'none' (declared not differentiable) or 'missing'."""
    found = _GRADIENTS.get(op_name)
    if found is None:
        return "missing"
    return "rule" if found[0] is not None else "none"
