"""core.serde: tensors, attrs and graphs to and from TensorFlow-compatible protobufs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from google.protobuf import json_format, text_format

import tensorgrid as tf
from tensorgrid.core import dtypes, errors, ir, serde
from tensorgrid.core.shapes import TensorShape
from tensorgrid.pb import full_type_pb2, graph_pb2, types_pb2

DATA = Path(__file__).parent / "data"

NUMERIC = [
    dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64, dtypes.int8, dtypes.int16,
    dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64,
    dtypes.bool_, dtypes.complex64, dtypes.complex128,
]
ALL = [*NUMERIC, dtypes.string]


def sample(dt: dtypes.DType, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Values that exercise the type: extremes for ints, fractions and signs for floats."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dt is dtypes.string:
        pool = [b"", b"a", "héllo".encode(), b"\x00\xff", b"x" * 300]
        return np.array([pool[i % len(pool)] for i in range(n)], dtype=object).reshape(shape)
    if dt is dtypes.bool_:
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    if dt.is_integer:
        info = np.iinfo(dt.np)
        vals = rng.integers(info.min, info.max, n, dtype=dt.np, endpoint=True)
        if n >= 2:
            vals[0], vals[1] = info.min, info.max
        return vals.reshape(shape)
    if dt.is_complex:
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt.np).reshape(shape)
    return (rng.standard_normal(n) * 100).astype(dt.np).reshape(shape)


def same_tensor(a: np.ndarray, b: np.ndarray) -> bool:
    """Same dtype, shape and bits (so NaNs and -0.0 count)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == object:
        return a.tolist() == b.tolist()
    return a.tobytes() == b.tobytes()


def same_graph(a: ir.GraphDef, b: ir.GraphDef) -> bool:
    return [(n.name, n.op, n.inputs, n.device, ir.attrs_key(n.attrs)) for n in a.nodes] == [
        (n.name, n.op, n.inputs, n.device, ir.attrs_key(n.attrs)) for n in b.nodes
    ]


# ------------------------------------------------------------------------------------ tensors


@pytest.mark.parametrize("dt", ALL, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3, 4), (0, 5)], ids=str)
def test_tensor_round_trip_every_dtype_and_shape(dt, shape):
    value = sample(dt, shape)
    pb = serde.tensor_to_proto(value)
    assert pb.dtype == dt.enum
    assert [d.size for d in pb.tensor_shape.dim] == list(shape)
    back = serde.tensor_from_proto(types_pb2.TensorProto.FromString(pb.SerializeToString()))
    assert same_tensor(back, value)
    assert back.flags.writeable


@pytest.mark.parametrize("dt", NUMERIC, ids=lambda d: d.name)
def test_numeric_tensors_travel_as_raw_little_endian_bytes(dt):
    value = sample(dt, (5,))
    pb = serde.tensor_to_proto(value)
    assert pb.tensor_content == value.astype(value.dtype.newbyteorder("<")).tobytes()
    assert not pb.float_val and not pb.int_val and not pb.half_val


def test_big_endian_input_is_written_little_endian():
    pb = serde.tensor_to_proto(np.array([1, 256], dtype=">i4"))
    assert pb.dtype == types_pb2.DT_INT32
    assert pb.tensor_content == b"\x01\x00\x00\x00\x00\x01\x00\x00"


def test_strings_use_string_val_and_str_becomes_utf8():
    pb = serde.tensor_to_proto(np.array(["ab", "é"]))
    assert pb.dtype == types_pb2.DT_STRING
    assert list(pb.string_val) == [b"ab", "é".encode()]
    assert serde.tensor_from_proto(pb).tolist() == [b"ab", "é".encode()]


def test_large_tensor_round_trip_is_fast():
    value = np.arange(4_000_000, dtype=np.float32).reshape(2000, 2000)
    start = time.perf_counter()
    data = serde.tensor_to_proto(value).SerializeToString()
    back = serde.tensor_from_proto(types_pb2.TensorProto.FromString(data))
    elapsed = time.perf_counter() - start
    assert same_tensor(back, value)
    assert len(data) < value.nbytes + 64
    assert elapsed < 2.0, f"16 MB round trip took {elapsed:.2f}s; per-element work crept in?"


def typed(dt: dtypes.DType, shape: list[int], field: str, values: list) -> types_pb2.TensorProto:
    pb = types_pb2.TensorProto(dtype=dt.enum)
    pb.tensor_shape.SetInParent()
    for d in shape:
        pb.tensor_shape.dim.add(size=d)
    getattr(pb, field).extend(values)
    return pb


@pytest.mark.parametrize(
    "dt, field, values, expected",
    [
        (dtypes.float32, "float_val", [1.5, -2.0, 3.25, 4.0], [1.5, -2.0, 3.25, 4.0]),
        (dtypes.float64, "double_val", [0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4]),
        (dtypes.int32, "int_val", [-(2**31), 0, 7, 2**31 - 1], [-(2**31), 0, 7, 2**31 - 1]),
        (dtypes.int16, "int_val", [-32768, 1, 2, 32767], [-32768, 1, 2, 32767]),
        (dtypes.int8, "int_val", [-128, 1, 2, 127], [-128, 1, 2, 127]),
        (dtypes.uint8, "int_val", [0, 1, 128, 255], [0, 1, 128, 255]),
        (dtypes.uint16, "int_val", [0, 1, 40000, 65535], [0, 1, 40000, 65535]),
        (dtypes.int64, "int64_val", [-(2**63), 0, 1, 2**63 - 1], [-(2**63), 0, 1, 2**63 - 1]),
        (dtypes.uint32, "uint32_val", [0, 1, 2, 2**32 - 1], [0, 1, 2, 2**32 - 1]),
        (dtypes.uint64, "uint64_val", [0, 1, 2, 2**64 - 1], [0, 1, 2, 2**64 - 1]),
        (dtypes.bool_, "bool_val", [True, False, True, True], [True, False, True, True]),
        # half and bfloat16 travel as 16-bit patterns: 0x3C00 is 1.0 in half, 0x3F80 in bfloat16
        (dtypes.float16, "half_val", [0x3C00, 0xC000, 0, 0x3800], [1.0, -2.0, 0.0, 0.5]),
        (dtypes.bfloat16, "half_val", [0x3F80, 0xC000, 0, 0x3F00], [1.0, -2.0, 0.0, 0.5]),
        (dtypes.complex64, "scomplex_val", [1, 2, 3, 4, 5, 6, 7, 8],
         [1 + 2j, 3 + 4j, 5 + 6j, 7 + 8j]),
        (dtypes.complex128, "dcomplex_val", [1, -1, 0, 0, 2, 2, 3, 3],
         [1 - 1j, 0j, 2 + 2j, 3 + 3j]),
        (dtypes.string, "string_val", [b"a", b"", b"c", b"d"], [b"a", b"", b"c", b"d"]),
    ],
    ids=lambda v: v.name if isinstance(v, dtypes.DType) else None,
)
def test_typed_fields_decode(dt, field, values, expected):
    out = serde.tensor_from_proto(typed(dt, [2, 2], field, values))
    assert out.dtype == dt.np and out.shape == (2, 2)
    want = np.array(expected, dtype=object if dt is dtypes.string else dt.np).reshape(2, 2)
    assert same_tensor(out, want)


@pytest.mark.parametrize(
    "dt, field, values, expected",
    [
        (dtypes.float32, "float_val", [1.0, 2.5], [1.0, 2.5, 2.5, 2.5, 2.5]),
        (dtypes.int8, "int_val", [3], [3, 3, 3, 3, 3]),
        (dtypes.float16, "half_val", [0x3C00], [1.0] * 5),
        (dtypes.complex64, "scomplex_val", [1, 2], [1 + 2j] * 5),
        (dtypes.string, "string_val", [b"x", b"yz"], [b"x", b"yz", b"yz", b"yz", b"yz"]),
        (dtypes.int64, "int64_val", [], [0] * 5),
        (dtypes.string, "string_val", [], [b""] * 5),
    ],
    ids=lambda v: v.name if isinstance(v, dtypes.DType) else None,
)
def test_fewer_values_than_elements_repeat_the_last_one(dt, field, values, expected):
    out = serde.tensor_from_proto(typed(dt, [5], field, values))
    assert out.tolist() == expected


def test_tensor_content_wins_over_typed_fields_and_bool_bytes_are_truthy():
    pb = typed(dtypes.bool_, [3], "bool_val", [False])
    pb.tensor_content = b"\x00\x02\x01"
    assert serde.tensor_from_proto(pb).tolist() == [False, True, True]


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda: typed(dtypes.float32, [3], "float_val", [1, 2, 3, 4]), "4 values"),
        (lambda: typed(dtypes.complex64, [1], "scomplex_val", [1, 2, 3]), "odd number"),
        (lambda: types_pb2.TensorProto(dtype=types_pb2.DT_VARIANT), "DT_VARIANT"),
        (lambda: types_pb2.TensorProto(dtype=77), "unknown DataType"),
        (lambda: types_pb2.TensorProto(dtype=types_pb2.DT_INVALID), "DT_INVALID"),
        (lambda: typed(dtypes.float32, [-1], "float_val", [1.0]), "fully defined"),
        (lambda: typed(dtypes.float32, [-5], "float_val", [1.0]), "size -5"),
    ],
)
def test_bad_tensors_are_invalid_argument(make, needle):
    with pytest.raises(errors.InvalidArgumentError, match=needle):
        serde.tensor_from_proto(make())


def test_tensor_content_of_wrong_length_is_invalid_argument():
    pb = serde.tensor_to_proto(np.zeros(4, np.float32))
    pb.tensor_content = pb.tensor_content[:-1]
    with pytest.raises(errors.InvalidArgumentError, match="needs 16 bytes"):
        serde.tensor_from_proto(pb)


def test_unencodable_values_are_invalid_argument():
    with pytest.raises(errors.InvalidArgumentError):
        serde.tensor_to_proto(np.array([1, None], dtype=object))
    with pytest.raises(errors.InvalidArgumentError):
        serde.tensor_to_proto(np.array(["2020-01-01"], dtype="datetime64[D]"))


# -------------------------------------------------------------------------------------- dtypes


def test_dtype_enums_are_tensorflows():
    expected = {"DT_FLOAT": 1, "DT_DOUBLE": 2, "DT_INT32": 3, "DT_UINT8": 4, "DT_INT16": 5,
                "DT_INT8": 6, "DT_STRING": 7, "DT_COMPLEX64": 8, "DT_INT64": 9, "DT_BOOL": 10,
                "DT_BFLOAT16": 14, "DT_UINT16": 17, "DT_COMPLEX128": 18, "DT_HALF": 19,
                "DT_RESOURCE": 20, "DT_VARIANT": 21, "DT_UINT32": 22, "DT_UINT64": 23,
                "DT_FLOAT_REF": 101, "DT_UINT64_REF": 123}
    for name, value in expected.items():
        assert types_pb2.DataType.Value(name) == value
    for dt in ALL:
        assert serde.dtype_to_enum(dt) == types_pb2.DataType.Value(dtypes.proto_name(dt))
        assert serde.dtype_from_enum(dt.enum) is dt


def test_ref_dtypes_read_as_their_base_type():
    assert serde.dtype_from_enum(types_pb2.DT_FLOAT_REF) is dtypes.float32
    assert serde.dtype_from_enum(types_pb2.DT_HALF_REF) is dtypes.float16
    attr = graph_pb2.AttrValue(type=types_pb2.DT_INT64_REF)
    assert serde.attr_from_proto(attr) is dtypes.int64


def test_unknown_dtype_enum_names_node_and_attr():
    gd = graph_pb2.GraphDef()
    gd.node.add(name="n1", op="NoOp").attr["T"].type = 55
    with pytest.raises(errors.InvalidArgumentError, match="node 'n1', attr 'T'") as info:
        serde.graph_from_bytes(gd.SerializeToString())
    assert info.value.node_name == "n1"


# --------------------------------------------------------------------------------------- attrs


ATTR_VALUES = {
    "i": -7, "big": 2**62, "f": 0.1, "nan": float("nan"), "b": True, "s": "héllo",
    "raw": b"\xff\x00", "empty_s": "", "type": dtypes.bfloat16, "shape": TensorShape([None, 3]),
    "scalar_shape": TensorShape([]), "unknown_shape": TensorShape(None),
    "tensor": np.arange(6, dtype=np.int16).reshape(2, 3),
    "list_i": [1, 2, 3], "list_f": [0.5, -1.25], "list_b": [True, False],
    "list_s": ["a", "loc:@w"], "list_type": [dtypes.float32, dtypes.string],
    "list_shape": [TensorShape([1]), TensorShape(None)],
    "list_tensor": [np.array(1.5, np.float32), np.array([b"x"], dtype=object)],
    "list_func": [serde.NameAttrList("g", {"N": 2})],
    "empty_list": [],
    "func": serde.NameAttrList("f", {"T": dtypes.float32, "inner": [1, 2]}),
    "placeholder": serde.AttrPlaceholder("T"),
}


@pytest.mark.parametrize("key", list(ATTR_VALUES))
def test_attr_round_trip_every_kind(key):
    value = ATTR_VALUES[key]
    pb = graph_pb2.AttrValue.FromString(serde.attr_to_proto(value).SerializeToString())
    assert ir.attr_key(serde.attr_from_proto(pb)) == ir.attr_key(value)


def test_attr_decoding_rules():
    assert serde.attr_from_proto(graph_pb2.AttrValue(s=b"abc")) == "abc"
    assert serde.attr_from_proto(graph_pb2.AttrValue(s=b"\xc3")) == b"\xc3"
    assert serde.attr_from_proto(graph_pb2.AttrValue(f=0.1)) == 0.1  # not 0.10000000149...
    assert serde.attr_to_proto([1, 2.5]).list.f == [1.0, 2.5]  # ints join a float list
    assert serde.attr_to_proto(np.int64(3)).i == 3
    assert serde.attr_to_proto(np.float32(0.5)).f == 0.5
    assert serde.attr_to_proto(np.bool_(True)).b is True
    assert serde.attr_to_proto(()).WhichOneof("value") == "list"


def test_bad_attrs_are_invalid_argument():
    with pytest.raises(errors.InvalidArgumentError, match="attr 'a'"):
        serde.attr_to_proto(object(), node="n", attr="a")
    with pytest.raises(errors.InvalidArgumentError, match="one kind"):
        serde.attr_to_proto([1, "a"])
    with pytest.raises(errors.InvalidArgumentError, match="not set"):
        serde.attr_from_proto(graph_pb2.AttrValue())
    mixed = graph_pb2.AttrValue()
    mixed.list.i.append(1)
    mixed.list.s.append(b"a")
    with pytest.raises(errors.InvalidArgumentError, match="more than one kind"):
        serde.attr_from_proto(mixed)


# -------------------------------------------------------------------------------------- graphs


def build_graph() -> tf.Graph:
    """A graph with a Const of every dtype, placeholders, devices, control edges and a node that
    carries every attr kind."""
    g = tf.Graph()
    with g.as_default():
        for i, dt in enumerate(ALL):
            g.create_op("Const", [], {"value": sample(dt, (2, 3), seed=i), "dtype": dt},
                        name=f"c_{dt.name}")
        g.create_op("Const", [], {"value": np.array(7, np.int32), "dtype": dtypes.int32},
                    name="scalar")
        g.create_op("Const", [], {"value": np.zeros((0, 4), np.float64),
                                  "dtype": dtypes.float64}, name="empty")
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        with tf.device("/job:worker/replica:0/task:1/device:CPU:0"):
            y = tf.identity(x, name="y")
        with tf.control_dependencies([y]):
            g.create_op("NoOp", [], dict(ATTR_VALUES), name="every_attr")
        tf.placeholder(tf.int64, None, name="unknown_rank")
    return g


def test_graph_round_trip_through_bytes_json_and_text():
    gd = build_graph().as_graph_def()
    assert any(n.control_inputs for n in gd.nodes) and any(n.device for n in gd.nodes)
    for back in (
        serde.graph_from_bytes(serde.graph_to_bytes(gd)),
        serde.graph_from_json(serde.graph_to_json(gd)),
        serde.graph_from_text(serde.graph_to_text(gd)),
    ):
        assert same_graph(back, gd)
        assert back.producer == gd.producer


def test_graph_bytes_are_deterministic():
    gd = build_graph().as_graph_def()
    assert serde.graph_to_bytes(gd) == serde.graph_to_bytes(serde.graph_from_bytes(
        serde.graph_to_bytes(gd)))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def test_reads_tensorflow_wire_format_written_by_hand():
    """Field numbers are TensorFlow's: a GraphDef encoded from those numbers alone decodes."""
    shape = _field(2, _field(1, 2))  # TensorShapeProto.dim(2) { size(1): 2 }
    tensor = (_field(1, 1) + _field(2, shape)  # dtype DT_FLOAT, tensor_shape
              + _field(4, np.array([1.5, -2], "<f4").tobytes()))  # tensor_content
    value_attr = _field(1, b"value") + _field(2, _field(8, tensor))  # map entry; AttrValue.tensor
    dtype_attr = _field(1, b"dtype") + _field(2, _field(6, 1))  # AttrValue.type = DT_FLOAT
    node = (_field(1, b"c") + _field(2, b"Const") + _field(4, b"/device:CPU:0")
            + _field(5, value_attr) + _field(5, dtype_attr))
    ident = _field(1, b"i") + _field(2, b"Identity") + _field(3, b"c") + _field(3, b"^c")
    data = _field(1, node) + _field(1, ident) + _field(4, _field(1, 27))  # versions.producer
    gd = serde.graph_from_bytes(data)
    c, i = gd.nodes
    assert (c.name, c.op, c.device, c.attrs["dtype"]) == ("c", "Const", "/device:CPU:0",
                                                          dtypes.float32)
    assert c.attrs["value"].tolist() == [1.5, -2.0]
    assert i.inputs == ("c", "^c") and gd.producer == 27


def test_unknown_fields_are_tolerated_in_binary_and_refused_in_json():
    pb = graph_pb2.GraphDef()
    pb.node.add(name="a", op="NoOp")
    data = pb.SerializeToString() + _field(99, b"")  # a field number TensorFlow does not use
    assert len(serde.graph_from_bytes(data)) == 1
    for doc, field in [({"foo": 1}, "foo"), ({"node": [], "foo": 1}, "foo"),
                       ({"node": [{"name": "a", "op": "NoOp", "colour": "red"}]}, "colour")]:
        with pytest.raises(errors.InvalidArgumentError, match=field):
            serde.graph_from_json(json.dumps(doc))
    assert serde.graph_from_json('{"node": [], "foo": 1}', ignore_unknown_fields=True).nodes == ()


@pytest.mark.parametrize("doc", ["{}", '{"versions": {"producer": 27}}', '{"library": {}}'])
def test_json_without_node_list_is_refused(doc):
    with pytest.raises(errors.InvalidArgumentError, match="no 'node' list"):
        serde.graph_from_json(doc)


def test_empty_graph_json_round_trips():
    back = serde.graph_from_json(serde.graph_to_json(ir.GraphDef(())))
    assert back.nodes == ()


def test_fields_tensorflow_writes_parse_in_every_format():
    """Full types, node and graph debug info and the function library are TensorFlow 2.x's."""
    text = """
    node { name: "s" op: "Shape" input: "x"
           attr { key: "T" value { type: DT_FLOAT } }
           attr { key: "out_type" value { type: DT_INT32 } }
           experimental_debug_info { original_node_names: "orig" }
           experimental_type { type_id: TFT_PRODUCT
                               args { type_id: TFT_SHAPE_TENSOR args { type_id: TFT_INT32 } } } }
    node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
    library { function { signature { name: "f" input_arg { name: "a" type: DT_FLOAT }
                                     output_arg { name: "y" type: DT_FLOAT } is_stateful: false }
                         node_def { name: "n" op: "Neg" input: "a"
                                    attr { key: "T" value { type: DT_FLOAT } } }
                         ret { key: "y" value: "n:y:0" }
                         arg_attr { key: 0 value { attr { key: "_output_shapes"
                                                          value { list { shape {} } } } } }
                         resource_arg_unique_id { key: 0 value: 0 } }
              gradient { function_name: "f" gradient_func: "g" } }
    versions { producer: 1882 min_consumer: 12 }
    debug_info { files: "a.py" traces { key: "s" value { file_line_cols { line: 3 } } } }
    """
    pb = text_format.Parse(text, graph_pb2.GraphDef())
    assert pb.node[0].experimental_type.args[0].type_id == full_type_pb2.TFT_SHAPE_TENSOR
    assert pb.library.function[0].ret["y"] == "n:y:0"
    for parsed in (serde.graph_from_text(text), serde.graph_from_bytes(pb.SerializeToString()),
                   serde.graph_from_json(json_format.MessageToJson(pb))):
        assert [n.name for n in parsed.nodes] == ["s", "x"] and parsed.producer == 1882


def test_tensorflow_json_form_parses():
    gd = serde.graph_from_json((DATA / "linear_tf.json").read_text())
    nodes = gd.node_map()
    assert gd.producer == 27
    assert nodes["x"].attrs["shape"] == TensorShape([None, 2])
    assert nodes["w"].attrs["value"].tolist() == [[2.0], [-1.0]]
    assert nodes["b"].attrs["value"].dtype == np.float32
    assert nodes["y"].attrs["T"] is dtypes.float32 and nodes["y"].inputs == ("MatMul", "b")
    text = serde.graph_from_text((DATA / "linear_tf.pbtxt").read_text())
    assert same_graph(text, gd)


def test_json_snake_case_and_string_int64s():
    doc = {"node": [{"name": "c", "op": "Const", "attr": {
        "dtype": {"type": "DT_INT64"},
        "value": {"tensor": {"dtype": "DT_INT64", "tensor_shape": {"dim": [{"size": 3}]},
                             "int64_val": ["9007199254740993", 1, "2"]}}}}]}
    node = serde.graph_from_json(json.dumps(doc)).nodes[0]
    assert node.attrs["value"].tolist() == [9007199254740993, 1, 2]


@pytest.mark.parametrize(
    "text, needle",
    [
        ("{", "Malformed GraphDef JSON"),
        ("[1, 2]", "expected an object"),
        ('{"node": 3}', "Malformed GraphDef JSON"),
        ('{"node": [{"name": "n", "op": "NoOp", "attr": {"T": {"type": "DT_NOPE"}}}]}',
         "DT_NOPE.*node 'n'"),
        ('{"node": [{"name": "n", "op": "NoOp", "attr": {"T": {"list": {"type": ["DT_FLOAT", '
         '"DT_NOPE"]}}}}]}', "DT_NOPE"),
        ('{"node": [{"name": "n", "op": "NoOp", "attr": {"T": {}}}]}', "not set.*attr 'T'"),
        ('{"node": [{"name": "n", "op": "NoOp"}, {"name": "n", "op": "NoOp"}]}', "Duplicate"),
        ('{"node": [{"op": "NoOp"}]}', "no name"),
        ('{"node": [{"name": "n"}]}', "no op"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_malformed_json_is_invalid_argument(text, needle):
    with pytest.raises(errors.InvalidArgumentError, match=needle):
        serde.graph_from_json(text)


@pytest.mark.parametrize("data", [b"\xff\xff\xff", b"\x0a\x05abc", b"\x0a"])
def test_malformed_bytes_are_invalid_argument(data):
    with pytest.raises(errors.InvalidArgumentError, match="Malformed GraphDef"):
        serde.graph_from_bytes(data)


def test_truncated_graph_bytes_are_invalid_argument():
    data = serde.graph_to_bytes(build_graph().as_graph_def())
    with pytest.raises(errors.InvalidArgumentError):
        serde.graph_from_bytes(data[: len(data) // 2])


def test_malformed_text_is_invalid_argument():
    with pytest.raises(errors.InvalidArgumentError, match="Malformed GraphDef text"):
        serde.graph_from_text("node { name: ")


def test_wrong_python_type_is_type_error():
    with pytest.raises(TypeError):
        serde.graph_from_bytes("not bytes")  # type: ignore[arg-type]


# -------------------------------------------------------------------------------------- limits


def huge_tensor_graph(elements: int) -> bytes:
    """A few bytes that describe a float tensor of ``elements`` elements (one value, repeated)."""
    pb = graph_pb2.GraphDef()
    node = pb.node.add(name="big", op="Const")
    node.attr["dtype"].type = types_pb2.DT_FLOAT
    t = node.attr["value"].tensor
    t.dtype = types_pb2.DT_FLOAT
    t.tensor_shape.dim.add(size=elements)
    t.float_val.append(1.0)
    return pb.SerializeToString()


def test_limits_stop_a_tiny_message_describing_a_huge_tensor():
    data = huge_tensor_graph(1 << 40)  # 4 TiB once decoded
    assert len(data) < 64
    limits = serde.GraphLimits(max_tensor_bytes=1 << 30)
    with pytest.raises(errors.ResourceExhaustedError, match="node 'big', attr 'value'"):
        serde.graph_from_bytes(data, limits)
    small = serde.graph_from_bytes(huge_tensor_graph(1000), limits)
    assert small.nodes[0].attrs["value"].shape == (1000,)


def test_limits_count_tensors_in_lists_and_strings():
    gd = tf.Graph()
    with gd.as_default():
        gd.create_op("NoOp", [], {"t": [np.zeros(100, np.float64)] * 3}, name="n")
        gd.create_op("Const", [], {"value": np.array([b"x" * 1000], dtype=object),
                                   "dtype": dtypes.string}, name="s")
    data = serde.graph_to_bytes(gd.as_graph_def())
    with pytest.raises(errors.ResourceExhaustedError, match="node 'n'"):
        serde.graph_from_bytes(data, serde.GraphLimits(max_tensor_bytes=2000))
    with pytest.raises(errors.ResourceExhaustedError, match="node 's'"):
        serde.graph_from_bytes(data, serde.GraphLimits(max_tensor_bytes=3000))
    assert len(serde.graph_from_bytes(data, serde.GraphLimits(max_tensor_bytes=4000))) == 2


def test_limits_on_node_count_and_message_size():
    pb = graph_pb2.GraphDef()
    for i in range(11):
        pb.node.add(name=f"n{i}", op="NoOp")
    data = pb.SerializeToString()
    with pytest.raises(errors.ResourceExhaustedError, match="11 nodes"):
        serde.graph_from_bytes(data, serde.GraphLimits(max_nodes=10))
    with pytest.raises(errors.ResourceExhaustedError, match="over the limit of 10"):
        serde.graph_from_bytes(data, serde.GraphLimits(max_message_bytes=10))
    gd = serde.graph_from_bytes(data, serde.GraphLimits(max_nodes=11, max_message_bytes=len(data)))
    assert len(gd) == 11
    text = serde.graph_to_json(gd)
    with pytest.raises(errors.ResourceExhaustedError):
        serde.graph_from_json(text, serde.GraphLimits(max_nodes=10))
    with pytest.raises(errors.ResourceExhaustedError):
        serde.graph_from_text(serde.graph_to_text(gd), serde.GraphLimits(max_message_bytes=5))


def test_tensor_nbytes_is_computed_without_decoding():
    pb = huge_tensor_graph(1 << 40)
    t = graph_pb2.GraphDef.FromString(pb).node[0].attr["value"].tensor
    assert serde.tensor_nbytes(t) == 4 << 40
    s = typed(dtypes.string, [4], "string_val", [b"ab", b"cde"])
    assert serde.tensor_nbytes(s) == 2 + 3 * 3 + 4 * 8


def test_bfloat16_values_are_ml_dtypes():
    pb = serde.tensor_to_proto(np.array([1.5, -3.0], dtype=ml_dtypes.bfloat16))
    assert pb.dtype == types_pb2.DT_BFLOAT16
    assert pb.tensor_content == np.array([0x3FC0, 0xC040], "<u2").tobytes()
