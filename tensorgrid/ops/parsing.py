"""Parsing ops (TensorFlow's op names, inputs, attrs and outputs; kernels in
``kernels/parsing.py``, python API in ``framework/parsing_ops.py``):

* ``DecodeRaw(bytes)``: each string's bytes as a vector of ``out_type`` (all strings of one
  length); output shape ``bytes.shape + [n]``.
* ``ParseExample(serialized, names, sparse_keys..., dense_keys..., dense_defaults...)``: a
  vector of serialized ``tf.train.Example`` protos parsed into, per sparse key, a sparse
  tensor (indices ``[n, 2]``, values, dense_shape ``[2]``) and, per dense key, a tensor of
  ``[batch] + dense_shape``. An empty ``dense_defaults[j]`` makes that feature required. A
  dense shape whose first dimension is unknown (-1) is a sequence: the values in blocks of the
  rest of the shape, as many as there are (none when missing), padded to the batch's longest
  with ``dense_defaults[j]`` (a scalar).
* ``ParseSingleExample(serialized, dense_defaults...)``: one serialized Example; the keys are
  attrs, sparse indices ``[n, 1]``, dense outputs of ``dense_shape``.

* ``DecodeCSV(records, record_defaults...)``: each string a CSV record (``field_delim``, RFC
  4180 quotes when ``use_quote_delim``), one output per column of ``records``' shape; a field
  that is empty or ``na_value`` takes its column's default (an empty default: required).

* ``SerializeTensor(tensor)`` / ``ParseTensor(serialized)``: a tensor as a serialized
  ``TensorProto`` and back (``out_type`` must be the proto's dtype).

Feature kinds map to dtypes as TensorFlow's: float_list -> float32, int64_list -> int64,
bytes_list -> string.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, not_differentiable, op
from tensorgrid.core.shapes import TensorShape, as_shape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec

FEATURE_DTYPES = (dtypes.float32, dtypes.int64, dtypes.string)
RAW_DTYPES = (dtypes.float16, dtypes.float32, dtypes.float64, dtypes.int8, dtypes.int16,
              dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16, dtypes.bool_,
              dtypes.complex64, dtypes.complex128)


@op("DecodeRaw", defaults={"little_endian": True})
def _decode_raw(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    if ctx.dtype(0) is not dtypes.string:
        ctx.fail(f"bytes must be a string tensor, got {ctx.dtype(0).name}")
    out = ctx.attr("out_type")
    if out not in RAW_DTYPES:
        ctx.fail(f"out_type {out.name} is not a fixed-size numeric type")
    return [spec(out, ctx.shape(0).concatenate(TensorShape([None])))]


def _outputs(ctx: InferContext, defaults: int, batch: TensorShape,
             sparse_index_rank: int) -> list[TensorSpec]:
    """The outputs of either parse op, checking the attrs against the defaults given."""
    sparse_types = list(ctx.attr("sparse_types"))
    dense_types = list(ctx.attr("Tdense"))
    shapes = [as_shape(s) for s in ctx.attr("dense_shapes")]
    if len(shapes) != len(dense_types):
        ctx.fail(f"dense_shapes has {len(shapes)} entries but Tdense has {len(dense_types)}")
    for j, s in enumerate(shapes):
        # a first dimension of -1: a sequence of any length (FixedLenSequenceFeature)
        if s.rank is None or not TensorShape(s.as_list()[1:]).is_fully_defined():
            ctx.fail(f"dense_shapes[{j}] must be fully defined but for its first dimension, "
                     f"got {s}")
    for t in [*sparse_types, *dense_types]:
        if t not in FEATURE_DTYPES:
            ctx.fail(f"a feature's type must be float32, int64 or string, got {t.name}")
    for j, t in enumerate(dense_types):
        if ctx.dtype(defaults + j) is not t:
            ctx.fail(f"dense_defaults[{j}] must be {t.name}, got {ctx.dtype(defaults + j).name}")
    n = len(sparse_types)
    return ([spec(dtypes.int64, (None, sparse_index_rank))] * n
            + [spec(t, (None,)) for t in sparse_types]
            + [spec(dtypes.int64, (sparse_index_rank,))] * n
            + [spec(t, batch.concatenate(s)) for t, s in zip(dense_types, shapes, strict=True)])


@op("ParseExample", defaults={"sparse_types": [], "Tdense": [], "dense_shapes": []})
def _parse_example(ctx: InferContext) -> Sequence[TensorSpec]:
    n_sparse, n_dense = int(ctx.attr("Nsparse")), int(ctx.attr("Ndense"))
    if ctx.num_inputs != 2 + n_sparse + 2 * n_dense:
        ctx.fail(f"expected {2 + n_sparse + 2 * n_dense} inputs (serialized, names, "
                 f"{n_sparse} sparse keys, {n_dense} dense keys and defaults), got "
                 f"{ctx.num_inputs}")
    if len(ctx.attr("sparse_types")) != n_sparse or len(ctx.attr("Tdense")) != n_dense:
        ctx.fail("sparse_types and Tdense must have Nsparse and Ndense entries")
    if ctx.dtype(0) is not dtypes.string or ctx.shape(0).rank not in (None, 1):
        ctx.fail(f"serialized must be a string vector, got {ctx.dtype(0).name} {ctx.shape(0)}")
    for i in range(2, 2 + n_sparse + n_dense):
        if ctx.dtype(i) is not dtypes.string or ctx.shape(i).rank not in (None, 0):
            ctx.fail(f"input {i} (a key) must be a string scalar")
    batch = TensorShape([ctx.shape(0).as_list()[0] if ctx.shape(0).rank == 1 else None])
    return _outputs(ctx, 2 + n_sparse + n_dense, batch, 2)


@op("ParseSingleExample", defaults={"sparse_types": [], "Tdense": [], "dense_shapes": [],
                                    "sparse_keys": [], "dense_keys": []})
def _parse_single_example(ctx: InferContext) -> Sequence[TensorSpec]:
    n_sparse, n_dense = int(ctx.attr("num_sparse")), len(ctx.attr("dense_keys"))
    if len(ctx.attr("sparse_keys")) != n_sparse or len(ctx.attr("sparse_types")) != n_sparse:
        ctx.fail("sparse_keys and sparse_types must have num_sparse entries")
    if len(ctx.attr("Tdense")) != n_dense:
        ctx.fail("Tdense must have one entry per dense key")
    if ctx.num_inputs != 1 + n_dense:
        ctx.fail(f"expected {1 + n_dense} inputs (serialized and {n_dense} dense defaults), got "
                 f"{ctx.num_inputs}")
    if ctx.dtype(0) is not dtypes.string or ctx.shape(0).rank not in (None, 0):
        ctx.fail(f"serialized must be a string scalar, got {ctx.dtype(0).name} {ctx.shape(0)}")
    return _outputs(ctx, 1, TensorShape([]), 1)


CSV_DTYPES = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64, dtypes.string)


@op("DecodeCSV", defaults={"field_delim": ",", "use_quote_delim": True, "na_value": "",
                           "select_cols": []})
def _decode_csv(ctx: InferContext) -> Sequence[TensorSpec]:
    types = list(ctx.attr("OUT_TYPE"))
    if ctx.num_inputs != 1 + len(types):
        ctx.fail(f"expected records and {len(types)} record_defaults, got {ctx.num_inputs} "
                 "inputs")
    if ctx.dtype(0) is not dtypes.string:
        ctx.fail(f"records must be a string tensor, got {ctx.dtype(0).name}")
    for j, t in enumerate(types):
        if t not in CSV_DTYPES:
            ctx.fail(f"column {j}: type must be float32, float64, int32, int64 or string, got "
                     f"{t.name}")
        if ctx.dtype(1 + j) is not t:
            ctx.fail(f"record_defaults[{j}] must be {t.name}, got {ctx.dtype(1 + j).name}")
        if ctx.shape(1 + j).rank not in (None, 0, 1):
            ctx.fail(f"record_defaults[{j}] must have at most one value, got shape "
                     f"{ctx.shape(1 + j)}")
    delim = ctx.attr("field_delim")
    if len(delim) != 1:
        ctx.fail(f"field_delim must be one character, got {delim!r}")
    select = list(ctx.attr("select_cols"))
    if select and (select != sorted(set(select)) or select[0] < 0 or len(select) != len(types)):
        ctx.fail(f"select_cols must be increasing, non-negative and one per default, got "
                 f"{select}")
    return [spec(t, ctx.shape(0)) for t in types]


@op("SerializeTensor")
def _serialize_tensor(ctx: InferContext) -> Sequence[TensorSpec]:
    """tensor -> its TensorProto, serialized (a string scalar)."""
    ctx.expect_inputs(1)
    return [spec(dtypes.string, ())]


@op("ParseTensor")
def _parse_tensor(ctx: InferContext) -> Sequence[TensorSpec]:
    """serialized TensorProto -> the tensor, which must be of ``out_type``."""
    ctx.expect_inputs(1)
    if ctx.dtype(0) is not dtypes.string or ctx.shape(0).rank not in (None, 0):
        ctx.fail(f"serialized must be a string scalar, got {ctx.dtype(0).name} {ctx.shape(0)}")
    return [spec(ctx.attr("out_type"), None)]


not_differentiable("DecodeRaw", "ParseExample", "ParseSingleExample", "DecodeCSV",
                   "SerializeTensor", "ParseTensor")

declare_attrs({
    "DecodeCSV": "OUT_TYPE:list(type) field_delim:string use_quote_delim:bool na_value:string "
                 "select_cols:list(int)",
    "DecodeRaw": "out_type little_endian:bool",
    "ParseTensor": "out_type",
    "SerializeTensor": "T",
    "ParseExample": "Nsparse:int Ndense:int sparse_types:list(type) Tdense:list(type) "
                    "dense_shapes:list(shape)",
    "ParseSingleExample": "num_sparse:int sparse_keys:list(string) dense_keys:list(string) "
                          "sparse_types:list(type) Tdense:list(type) dense_shapes:list(shape)",
})
