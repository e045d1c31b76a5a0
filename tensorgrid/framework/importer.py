"""Importing a GraphDef into a Graph (``tf.import_graph_def``) and writing one out
(``tf.train.write_graph``).

Imported nodes become ordinary Operations made by ``Graph.create_op``, so each one runs its op's
inference and gets its attr defaults; they keep their own device and attrs (``_class`` included,
with colocation names moved under the import prefix).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from google.protobuf import text_format

from tensorgrid.compiler.infer import infer_graph
from tensorgrid.core import device as devlib
from tensorgrid.core import errors, ir, registry, serde
from tensorgrid.framework.convert import convert_to_tensor
from tensorgrid.framework.graph import Graph, Operation, Tensor, get_default_graph
from tensorgrid.pb import graph_pb2

__all__ = ["graph_from_graph_def", "import_graph_def", "write_graph"]

_COLOCATION_PREFIX = "loc:@"


def _as_ir(graph_def: Any) -> ir.GraphDef:
    """The IR of an IR GraphDef, a protobuf GraphDef or its bytes."""
    if isinstance(graph_def, ir.GraphDef):
        return graph_def
    if isinstance(graph_def, graph_pb2.GraphDef):
        return serde.graph_from_proto(graph_def)
    if isinstance(graph_def, bytes | bytearray | memoryview):
        return serde.graph_from_bytes(graph_def)
    raise TypeError(
        f"graph_def must be a GraphDef (IR or protobuf) or its serialized bytes, got "
        f"{type(graph_def).__name__}"
    )


def _op_of(value: Any) -> Operation:
    if isinstance(value, Operation):
        return value
    if isinstance(value, Tensor):
        return value.op
    raise TypeError(f"A control input_map value must be an Operation or Tensor, got "
                    f"{type(value).__name__}")


def import_graph_def(
    graph_def: Any,
    input_map: Mapping[str, Any] | None = None,
    return_elements: Sequence[str] | None = None,
    name: str | None = None,
    op_dict: Any = None,
    producer_op_list: Any = None,
) -> list[Tensor | Operation] | None:
    """Add the nodes of a GraphDef to the default graph.

    Nodes are created in dependency order under a name prefix: ``name`` as a name scope ("import"
    when None, made unique as name scopes are), or no prefix at all when ``name`` is "" (the names
    must then be free). Each node keeps its own device (merged over any enclosing ``tf.device``) and
    attrs; attrs it lacks get their op's defaults.

    Args:
        graph_def: an IR ``GraphDef``, a protobuf ``GraphDef`` or its serialized bytes.
        input_map: {name in graph_def: value} replacing those tensors: "x:0" (or "x") maps to a
            Tensor (other values are converted with ``convert_to_tensor``), "^x" maps control
            inputs on x to an Operation.
        return_elements: names in graph_def to return: "x:0" gives the imported Tensor, "x" the
            imported Operation.
        name: the prefix (see above).
        op_dict, producer_op_list: accepted for TensorFlow compatibility and ignored (the registry
            knows every op; defaults are filled from it).

    Returns:
        The imported elements named by ``return_elements``, in that order, or None when it is None.

    Raises:
        TypeError: graph_def or an input_map entry has the wrong type.
        NotFoundError: a node's op is not registered, or an input names a missing node (names
            the node).
        InvalidArgumentError: the graph has a cycle (names a node on it), an input names an output
            its node does not have, an attr fails to decode, an attr is one the op does not take
            or of the wrong type, or inference rejects a node.
        ValueError: an input_map key or return element names nothing in graph_def, an input_map
            tensor's dtype differs from the one it replaces, or a name is already in the graph.

    Everything but inference is checked before the first op is created; when inference fails,
    the nodes created so far stay in the graph.
    """
    del op_dict, producer_op_list
    gd = _as_ir(graph_def)
    graph = get_default_graph()
    nodes: dict[str, ir.NodeDef] = {}
    for n in gd.nodes:
        if n.name in nodes:
            raise errors.InvalidArgumentError(f"Duplicate node name '{n.name}' in graph_def",
                                              node_name=n.name, op_type=n.op)
        nodes[n.name] = n
        if not registry.has_op(n.op):
            raise errors.NotFoundError(
                f"Op type not registered '{n.op}' in imported node '{n.name}'",
                node_name=n.name, op_type=n.op,
            )
        # before anything is added: an attr the op does not take, or of the wrong type
        registry.check_attrs(n, registry.get_op(n.op, n))

    mapped = _check_input_map(input_map or {}, gd, nodes)
    for el in return_elements or ():
        if not isinstance(el, str) or ir.parse_input(el)[0] not in nodes or el.startswith("^"):
            raise ValueError(f"Requested return_element {el!r} not found in graph_def.")

    # A mapped input whose node is not in graph_def comes from outside; every other edge orders the
    # import (so the tensor a mapped input replaces exists first and its dtype can be checked).
    def external(inp: str) -> bool:
        return ir.parse_input(inp)[0] not in nodes and ir.canonical_input(inp) in mapped

    ordering = [n.with_(inputs=[i for i in n.inputs if not external(i)]) for n in gd.nodes]
    order = ir.topological_order(ordering)  # NotFoundError / InvalidArgumentError on a cycle

    with graph.name_scope("import" if name is None else name) as prefix:
        for n in gd.nodes:
            if _has_op(graph, prefix + n.name):
                raise ValueError(f"Cannot import node '{n.name}' as '{prefix + n.name}': the "
                                 "graph already has an operation of that name")
        values = _mapped_values(graph, mapped, name)
        created: dict[str, Operation] = {}
        back_edges: list[tuple[Operation, int, str, int]] = []
        for node in order:
            created[node.name] = _create(graph, nodes[node.name], prefix, created, values, nodes,
                                         back_edges)
        # a loop's Merge was made with a stand-in for its NextIteration input: connect it now
        for merge_op, pos, src, idx in back_edges:
            merge_op._update_input(pos, created[src].outputs[idx])
        if back_edges:
            _generalize_loop_shapes(graph, created.values())
    _check_mapped_outputs(values, created)

    if return_elements is None:
        return None
    out: list[Tensor | Operation] = []
    for el in return_elements:
        src, idx, _ = ir.parse_input(el)
        op = created[src]
        if ":" not in el:
            out.append(op)
        elif idx < len(op.outputs):
            out.append(op.outputs[idx])
        else:
            raise ValueError(f"Requested return_element {el!r} not found in graph_def "
                             f"('{src}' has {len(op.outputs)} outputs).")
    return out


def _has_op(graph: Graph, name: str) -> bool:
    try:
        graph.get_operation_by_name(name)
    except KeyError:
        return False
    return True


def _check_input_map(input_map: Mapping[str, Any], gd: ir.GraphDef,
                     nodes: Mapping[str, ir.NodeDef]) -> dict[str, Any]:
    """input_map with canonical keys ("x:0", "^x"); fails on keys that name nothing."""
    mapped: dict[str, Any] = {}
    for key, value in input_map.items():
        if not isinstance(key, str):
            raise TypeError(f"input_map keys must be tensor names, got {type(key).__name__}")
        mapped[ir.canonical_input(key)] = value
    used = {ir.canonical_input(i) for n in gd.nodes for i in n.inputs}
    missing = [k for k in mapped if k not in used and ir.parse_input(k)[0] not in nodes]
    if missing:
        raise ValueError(f"Attempted to map inputs that were not found in graph_def: {missing}")
    return mapped


def _mapped_values(graph: Graph, mapped: Mapping[str, Any], name: str | None) -> dict[str, Any]:
    """The input_map values as Tensors (data keys) and Operations (control keys) of ``graph``."""
    out: dict[str, Any] = {}
    for key, value in mapped.items():
        if key.startswith("^"):
            out[key] = _op_of(value)
        elif isinstance(value, Tensor):
            out[key] = value
        elif name == "":
            raise ValueError("import_graph_def needs a non-empty name when input_map holds values "
                             "that are not Tensors; convert them with tf.convert_to_tensor first.")
        else:
            with graph.name_scope("_inputs"):
                out[key] = convert_to_tensor(value)
        if out[key].graph is not graph:
            raise ValueError(f"input_map value for {key!r} is not an element of the default graph")
    return out


def _create(graph: Graph, node: ir.NodeDef, prefix: str, created: Mapping[str, Operation],
            values: Mapping[str, Any], nodes: Mapping[str, ir.NodeDef],
            back_edges: list[tuple[Operation, int, str, int]]) -> Operation:
    inputs: list[Tensor] = []
    controls: list[Operation] = []
    pending_back: list[tuple[int, str, int]] = []
    for inp in node.inputs:
        key = ir.canonical_input(inp)
        src, idx, is_control = ir.parse_input(inp)
        if key in values:
            if is_control:
                controls.append(values[key])
                continue
            tensor = values[key]
            original = created.get(src)
            if original is not None and idx < len(original.outputs) \
                    and original.outputs[idx].dtype is not tensor.dtype:
                raise ValueError(
                    f"Input {len(inputs)} of node '{prefix}{node.name}' was passed "
                    f"{tensor.dtype.name} from {tensor.name} incompatible with expected "
                    f"{original.outputs[idx].dtype.name} (input_map for {key!r})."
                )
            inputs.append(tensor)
            continue
        if src not in created and nodes[src].op in ir.BACK_EDGE_OPS and not is_control:
            pending_back.append((len(inputs), src, idx))  # a loop's back edge, connected later
            continue
        src_op = created[src]
        if is_control:
            controls.append(src_op)
        elif idx >= len(src_op.outputs):
            raise errors.InvalidArgumentError(
                f"Node '{node.name}' (op {node.op}) has input '{inp}', but node '{src}' has only "
                f"{len(src_op.outputs)} outputs",
                node_name=node.name, op_type=node.op,
            )
        else:
            inputs.append(src_op.outputs[idx])

    for pos, _, _ in pending_back:
        if not inputs:
            raise errors.InvalidArgumentError(
                f"Node '{node.name}' (op {node.op}) reads only loop back edges",
                node_name=node.name, op_type=node.op)
        inputs.insert(pos, inputs[0])  # a stand-in of the same dtype until the loop is built
    attrs = dict(node.attrs)
    op = graph.create_op(node.op, inputs, attrs, name=f"{prefix}{node.name}/",
                         control_inputs=controls)
    back_edges.extend((op, pos, src, idx) for pos, src, idx in pending_back)
    own_class = node.attrs.get("_class")
    if own_class is not None:
        op._set_attr("_class", _prefixed_colocation(own_class, prefix, nodes))
    if node.device:
        try:
            own = devlib.DeviceSpec.from_string(node.device)
        except errors.InvalidArgumentError as exc:
            raise errors.InvalidArgumentError(
                f"Node '{node.name}' (op {node.op}) has a malformed device: {exc.message}",
                node_name=node.name, op_type=node.op,
            ) from None
        op._set_device(own.merge(devlib.DeviceSpec.from_string(op.device)))
    return op


def _generalize_loop_shapes(graph: Graph, ops: Iterable[Operation]) -> None:
    """Give the imported loops' tensors the shapes every iteration can have.

    A loop's Merge was inferred from its entering value alone; with its back edge connected, the
    whole-graph inference (which iterates loops until their shapes settle) may find a less
    specific shape (a loop variable that grows), and so may everything downstream of it.
    """
    specs = infer_graph(graph.as_graph_def().nodes)
    for op in ops:
        for t, spec in zip(op.outputs, specs.get(op.name, ())):
            if t._shape != spec.shape:
                t._shape = spec.shape


def _prefixed_colocation(value: Any, prefix: str, nodes: Mapping[str, ir.NodeDef]) -> Any:
    """'loc:@w' -> 'loc:@import/w' for the nodes being imported; anything else unchanged."""
    if not prefix or not isinstance(value, list | tuple):
        return value
    out = []
    for v in value:
        if isinstance(v, str) and v.startswith(_COLOCATION_PREFIX) \
                and v[len(_COLOCATION_PREFIX):] in nodes:
            v = _COLOCATION_PREFIX + prefix + v[len(_COLOCATION_PREFIX):]
        out.append(v)
    return out


def _check_mapped_outputs(values: Mapping[str, Any], created: Mapping[str, Operation]) -> None:
    for key in values:
        src, idx, is_control = ir.parse_input(key)
        op = created.get(src)
        if not is_control and op is not None and idx >= len(op.outputs):
            raise ValueError(f"Attempted to map inputs that were not found in graph_def: [{key!r}] "
                             f"('{src}' has {len(op.outputs)} outputs)")


def graph_from_graph_def(graph_def: Any) -> Graph:
    """A new Graph holding the nodes of ``graph_def`` under their own names.

    Args:
        graph_def: an IR ``GraphDef``, a protobuf ``GraphDef`` or its serialized bytes.

    Raises:
        the errors of ``import_graph_def``.
    """
    graph = Graph()
    with graph.as_default():
        import_graph_def(graph_def, name="")
    return graph


def write_graph(graph_or_graph_def: Any, logdir: str, name: str, as_text: bool = True) -> str:
    """Write a graph to ``logdir/name`` (``tf.train.write_graph``), creating ``logdir`` if needed.

    Args:
        graph_or_graph_def: a Graph, an IR GraphDef or a protobuf GraphDef.
        logdir: the directory.
        name: the file name.
        as_text: protobuf text format (TensorFlow's ``.pbtxt``) when true, else the binary GraphDef.

    Returns:
        The path written. The file is replaced atomically, so readers never see half of it.

    Raises:
        TypeError: not a graph.
        OSError: the file cannot be written.
    """
    if isinstance(graph_or_graph_def, Graph):
        pb = serde.graph_to_proto(graph_or_graph_def.as_graph_def())
    elif isinstance(graph_or_graph_def, ir.GraphDef):
        pb = serde.graph_to_proto(graph_or_graph_def)
    elif isinstance(graph_or_graph_def, graph_pb2.GraphDef):
        pb = graph_or_graph_def  # written as given, fields tensorgrid does not model included
    else:
        raise TypeError(f"write_graph takes a Graph or a GraphDef, got "
                        f"{type(graph_or_graph_def).__name__}")
    if as_text:
        data = text_format.MessageToString(pb).encode("utf-8")
    else:
        data = pb.SerializeToString(deterministic=True)
    os.makedirs(logdir, exist_ok=True)
    path = os.path.join(logdir, name)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".tmp-", suffix=".graph")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path
