"""The remapper pass: a convolution, the bias added to it and the relu after it become one
``_FusedConv2D`` node (``ops.nn_fused``), whose kernel adds the bias and applies the relu to each
block of output rows while they are in cache, instead of two more passes over the whole output.

The pattern, on one device:

    Conv2D(x, f) -> AddV2(conv, b) | AddV2(b, conv) | BiasAdd(conv, b) [NHWC] -> Relu (optional)

Conditions, each needed for the fused node to compute exactly what the nodes it replaces did:

1. the convolution's and the add's outputs are read by the next node of the pattern alone (no
   other data or control consumer, not fetched, not a target), so no one misses them;
2. ``b`` is a vector of one value per output channel (known from the inferred specs), so the add
   is a bias add and broadcasts to nothing larger than the convolution's output;
3. float32 or float64 throughout, so the sums round as the separate ops' did;
4. the nodes request the same device.

The fused node takes the name of the pattern's last node, so its consumers are unchanged, and the
control inputs of every node it replaces.

On the gradient side, ``ReluGrad(MaxPoolGrad(x, y, g), x)`` (the gradient through a max pool of a
relu's output ``x``, then through the relu) becomes ``_FusedMaxPoolGrad(x, y, g)`` under the same
conditions 1, 3 and 4; its kernel applies the relu's mask to the window maxima's gradient instead
of in a pass of its own over the input-sized result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.ir import NodeDef, parse_input
from tensorgrid.core.registry import TensorSpec
from tensorgrid.ops.nn import text_attr

Specs = Mapping[str, Sequence[TensorSpec]]

_FLOATS = (dtypes.float32, dtypes.float64)
_ADDS = ("AddV2", "Add", "BiasAdd")


def fuse_conv_bias_relu(nodes: Sequence[NodeDef], specs: Specs,
                        protected: frozenset[str] | set[str] = frozenset()) -> list[NodeDef]:
    """The nodes with every Conv2D + bias (+ relu) pattern above replaced by one
    ``_FusedConv2D`` node; the others, in their order, untouched.

    ``specs`` holds the inferred output specs by node name; ``protected`` names nodes that must
    stay as they are (targets). Returns ``nodes`` itself as a new list when nothing matched.
    """
    by_name = {n.name: n for n in nodes}
    readers: dict[str, list[str]] = {}  # node -> the nodes reading any of its outputs or waiting
    for n in nodes:
        for inp in n.inputs:
            src, _, _ = parse_input(inp)
            readers.setdefault(src, []).append(n.name)
    fused: dict[str, NodeDef] = {}  # the last node of a pattern -> the fused node
    dropped: set[str] = set()
    for n in nodes:
        if n.op not in _ADDS or n.name in dropped:
            continue
        match = _match(n, by_name, readers, specs, protected)
        if match is None:
            continue
        conv, bias_input, last = match
        ctrl = [i for m in (conv, n, last) for i in m.inputs if i.startswith("^")]
        attrs = {**conv.attrs,
                 "fused_ops": ["BiasAdd", "Relu"] if last is not n else ["BiasAdd"]}
        fused[last.name] = NodeDef(last.name, "_FusedConv2D",
                                   (*conv.data_inputs, bias_input, *dict.fromkeys(ctrl)),
                                   last.device, attrs)
        dropped.update({conv.name, n.name} - {last.name})
    for n in nodes:
        if n.op == "ReluGrad" and n.name not in fused:
            pool_grad = _match_pool_grad(n, by_name, readers, specs, protected)
            if pool_grad is not None:
                ctrl = [i for m in (pool_grad, n) for i in m.inputs if i.startswith("^")]
                fused[n.name] = NodeDef(n.name, "_FusedMaxPoolGrad",
                                        (*pool_grad.data_inputs, *dict.fromkeys(ctrl)), n.device,
                                        {**pool_grad.attrs, "fused_ops": ["ReluGrad"]})
                dropped.add(pool_grad.name)
    if not fused:
        return list(nodes)
    return [fused.get(n.name, n) for n in nodes if n.name not in dropped]


def _match_pool_grad(relu_grad: NodeDef, by_name: Mapping[str, NodeDef],
                     readers: Mapping[str, list[str]], specs: Specs,
                     protected: frozenset[str] | set[str]) -> NodeDef | None:
    """The MaxPoolGrad that ``relu_grad`` alone reads, when its features are the pool's input."""
    data = relu_grad.data_inputs
    if len(data) != 2:
        return None
    src, idx, _ = parse_input(data[0])
    pool_grad = by_name.get(src)
    if (pool_grad is None or pool_grad.op != "MaxPoolGrad" or idx != 0
            or pool_grad.device != relu_grad.device
            or _sole_reader(pool_grad.name, readers, protected) != relu_grad.name):
        return None
    pool_inputs = pool_grad.data_inputs
    if len(pool_inputs) != 3 or parse_input(pool_inputs[0])[:2] != parse_input(data[1])[:2]:
        return None
    out = specs.get(pool_grad.name)
    return pool_grad if out and out[0].dtype in _FLOATS else None


def _sole_reader(name: str, readers: Mapping[str, list[str]],
                 protected: frozenset[str] | set[str]) -> str | None:
    """The one node reading (or waiting on) ``name``, or None when there are others or none."""
    found = readers.get(name, [])
    if len(found) != 1 or name in protected:
        return None
    return found[0]


def _match(add: NodeDef, by_name: Mapping[str, NodeDef], readers: Mapping[str, list[str]],
           specs: Specs, protected: frozenset[str] | set[str]
           ) -> tuple[NodeDef, str, NodeDef] | None:
    """(the convolution, the bias input, the pattern's last node) when ``add`` is the bias add of
    a fusable pattern, else None."""
    data = add.data_inputs
    if len(data) != 2:
        return None
    if add.op == "BiasAdd" and text_attr(add.attr("data_format", "NHWC")) != "NHWC":
        return None
    sides = [(0, 1)] if add.op == "BiasAdd" else [(0, 1), (1, 0)]
    for ci, bi in sides:
        src, idx, _ = parse_input(data[ci])
        conv = by_name.get(src)
        if (conv is None or conv.op != "Conv2D" or idx != 0 or conv.device != add.device
                or _sole_reader(conv.name, readers, protected) != add.name
                or not _is_bias(specs, conv.name, data[bi])):
            continue
        last = add
        reader = _sole_reader(add.name, readers, protected)
        if reader is not None:
            relu = by_name[reader]
            if relu.op == "Relu" and relu.device == add.device and \
                    [parse_input(i)[:2] for i in relu.data_inputs] == [(add.name, 0)]:
                last = relu
        return conv, data[bi], last
    return None


def _is_bias(specs: Specs, conv: str, bias_input: str) -> bool:
    """Whether ``bias_input`` is a vector of one float value per output channel of ``conv``."""
    conv_specs = specs.get(conv)
    src, idx, _ = parse_input(bias_input)
    bias_specs = specs.get(src)
    if not conv_specs or not bias_specs or idx >= len(bias_specs):
        return False
    out, bias = conv_specs[0], bias_specs[idx]
    if out.dtype not in _FLOATS or bias.dtype != out.dtype:
        return False
    out_dims, bias_dims = out.shape.dims, bias.shape.dims
    return (out_dims is not None and len(out_dims) == 4 and out_dims[3] is not None
            and bias_dims is not None and list(bias_dims) == [out_dims[3]])
