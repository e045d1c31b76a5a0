"""Kernels of the parsing ops (see ``ops/parsing.py``): ``DecodeRaw``, and ``ParseExample`` /
``ParseSingleExample`` over ``tf.train.Example`` protos (``pb/example_pb2``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

import tensorgrid.ops.parsing  # noqa: F401 - registers the op definitions
from tensorgrid.core import dtypes, errors
from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.core.shapes import as_shape
from tensorgrid.pb import example_pb2, feature_pb2

_KIND_OF = {dtypes.float32: "float_list", dtypes.int64: "int64_list", dtypes.string: "bytes_list"}
_DTYPE_OF_KIND = {"float_list": "float", "int64_list": "int64", "bytes_list": "string"}


@kernel("DecodeRaw", "CPU")
def _decode_raw(ctx: KernelContext) -> Callable[[Any], Any]:
    out: dtypes.DType = ctx.attr("out_type")
    dt = np.dtype(out.as_numpy_dtype).newbyteorder("<" if ctx.attr("little_endian") else ">")

    def run(data: Any) -> Any:
        strings = np.asarray(data, object)
        flat = [s if isinstance(s, bytes) else str(s).encode() for s in strings.reshape(-1)]
        if flat and len(flat[0]) % dt.itemsize:
            raise ctx.error(errors.InvalidArgumentError,
                            f"Input to DecodeRaw has length {len(flat[0])} that is not a "
                            f"multiple of {dt.itemsize}, the size of {out.name}")
        for s in flat[1:]:
            if len(s) != len(flat[0]):
                raise ctx.error(errors.InvalidArgumentError,
                                f"DecodeRaw requires input strings to all be the same size, but "
                                f"element 0 has size {len(flat[0])} != {len(s)}")
        n = len(flat[0]) // dt.itemsize if flat else 0
        values: np.ndarray = np.frombuffer(b"".join(flat), dt).astype(out.as_numpy_dtype)
        return values.reshape((*strings.shape, n))

    return run


def _values(feature: feature_pb2.Feature, dtype: dtypes.DType, key: str,
            where: str) -> np.ndarray:
    """The values of ``feature`` as ``dtype``, or an error naming the key and example."""
    kind = feature.WhichOneof("kind")
    if kind is None:  # a feature with no list set holds no values, whatever its type
        return np.zeros(0, object if dtype is dtypes.string else dtype.as_numpy_dtype)
    if kind != _KIND_OF[dtype]:
        raise errors.InvalidArgumentError(
            f"{where}, Key: {key}. Data types don't match. Data type: "
            f"{_DTYPE_OF_KIND[kind]} but expected type: {dtype.name}")
    values = getattr(feature, kind).value
    if dtype is dtypes.string:
        out = np.empty(len(values), object)
        out[:] = list(values)
        return out
    return np.asarray(values, dtype.as_numpy_dtype)


class ExampleParser:
    """Parses serialized Examples into the sparse and dense outputs of the parse ops."""

    def __init__(self, sparse_types: Sequence[dtypes.DType], dense_types: Sequence[dtypes.DType],
                 dense_shapes: Sequence[Any]) -> None:
        self.sparse_types = list(sparse_types)
        self.dense_types = list(dense_types)
        # fully defined but, for a sequence (FixedLenSequenceFeature), the first dimension
        self.dense_shapes: list[list[int | None]] = [as_shape(s).as_list() for s in dense_shapes]

    def parse(self, serialized: Sequence[bytes], names: Sequence[str], sparse_keys: list[str],
              dense_keys: list[str], defaults: Sequence[Any]) -> list[list[Any]]:
        """Per example, its sparse value vectors then its dense arrays."""
        rows = []
        for b, data in enumerate(serialized):
            where = f"Name: {names[b] if b < len(names) else '<unknown>'}, Index: {b}"
            try:
                example = example_pb2.Example.FromString(data)
            except DecodeError as e:
                raise errors.InvalidArgumentError(
                    f"Could not parse example input, value: {data[:64]!r} ({where})") from e
            features = example.features.feature
            row: list[Any] = [
                _values(features[k], t, k, where) if k in features else _values(
                    feature_pb2.Feature(), t, k, where)
                for k, t in zip(sparse_keys, self.sparse_types, strict=True)]
            for k, t, shape, default in zip(dense_keys, self.dense_types, self.dense_shapes,
                                            defaults, strict=True):
                row.append(self._dense(features.get(k, None), t, shape,
                                       np.asarray(default), k, where))
            rows.append(row)
        return rows

    @staticmethod
    def _dense(feature: feature_pb2.Feature | None, dtype: dtypes.DType,
               shape: list[int | None], default: np.ndarray, key: str, where: str) -> np.ndarray:
        if shape and shape[0] is None:  # a sequence: as many blocks as there are values for
            rest = [d or 0 for d in shape[1:]]
            stride = int(np.prod(rest, dtype=np.int64))
            values = _values(feature, dtype, key, where) if feature is not None else \
                _values(feature_pb2.Feature(), dtype, key, where)
            if stride == 0 or values.size % stride:
                raise errors.InvalidArgumentError(
                    f"{where}, Key: {key}. Number of {dtype.name} values is not a multiple of "
                    f"stride length. Saw {values.size} values but output shape is: "
                    f"{[-1, *rest]}")
            return values.reshape([-1, *rest])
        dims = [d or 0 for d in shape]  # all known here
        size = int(np.prod(dims, dtype=np.int64))
        if feature is None:
            if default.size == 0 and size != 0:
                raise errors.InvalidArgumentError(
                    f"{where}, Feature: {key} (data type: {dtype.name}) is required but could "
                    "not be found.")
            return np.broadcast_to(default, dims) if default.size != size else \
                default.reshape(dims)
        values = _values(feature, dtype, key, where)
        if values.size != size:
            raise errors.InvalidArgumentError(
                f"{where}, Key: {key}. Number of {dtype.name} values != expected. Values size: "
                f"{values.size} but output shape: {dims}")
        return values.reshape(dims)


def _parser(ctx: KernelContext) -> ExampleParser:
    return ExampleParser(list(ctx.attr("sparse_types")), list(ctx.attr("Tdense")),
                         list(ctx.attr("dense_shapes")))


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _outputs(parser: ExampleParser, rows: list[list[Any]], batch: bool,
             defaults: Any) -> Any:
    """Sparse indices, values and shapes, then dense values, for the rows of a batch (or the
    one row when not ``batch``)."""
    n_sparse = len(parser.sparse_types)
    indices, values, shapes = [], [], []
    for j, t in enumerate(parser.sparse_types):
        per_row = [r[j] for r in rows]
        longest = max((v.size for v in per_row), default=0)
        idx = [(b, k) for b, v in enumerate(per_row) for k in range(v.size)]
        ind = np.asarray(idx, np.int64).reshape(-1, 2)
        vals = np.concatenate(per_row) if per_row else np.zeros(0)
        if t is dtypes.string:
            vals = np.asarray(list(vals), object) if vals.size else np.zeros(0, object)
        else:
            vals = vals.astype(t.as_numpy_dtype)
        if batch:
            indices.append(ind)
            shapes.append(np.asarray([len(rows), longest], np.int64))
        else:
            indices.append(ind[:, 1:])
            shapes.append(np.asarray([longest], np.int64))
        values.append(vals)
    dense = []
    for j, t in enumerate(parser.dense_types):
        parts = [r[n_sparse + j] for r in rows]
        np_type = object if t is dtypes.string else t.as_numpy_dtype
        shape = parser.dense_shapes[j]
        if shape and shape[0] is None:  # sequences, padded to the longest with the default
            longest = max((p.shape[0] for p in parts), default=0)
            rest = [d or 0 for d in shape[1:]]
            seq = np.empty((len(parts), longest, *rest), np_type)
            seq[...] = np.asarray(defaults[j]).reshape(())[()] if np.size(defaults[j]) else \
                (b"" if t is dtypes.string else 0)
            for b, p in enumerate(parts):
                seq[b, : p.shape[0]] = p
            dense.append(seq if batch else seq[0])
            continue
        if batch:
            out: np.ndarray = np.empty((len(rows), *(d or 0 for d in shape)), np_type)
            for b, p in enumerate(parts):
                out[b, ...] = p  # element-wise, also for object arrays of scalars
        else:
            out = np.array(parts[0], np_type)
        dense.append(out)
    result = (*indices, *values, *shapes, *dense)
    return result if len(result) != 1 else result[0]


@kernel("ParseExample", "CPU")
def _parse_example(ctx: KernelContext) -> Callable[..., Any]:
    parser = _parser(ctx)
    n_sparse, n_dense = int(ctx.attr("Nsparse")), int(ctx.attr("Ndense"))

    def run(serialized: Any, names: Any, *rest: Any) -> Any:
        keys = [_text(np.asarray(k, object).reshape(-1)[0]) for k in rest[: n_sparse + n_dense]]
        data = list(np.asarray(serialized, object).reshape(-1))
        label = [_text(n) for n in np.asarray(names, object).reshape(-1)]
        try:
            rows = parser.parse(data, label, keys[:n_sparse], keys[n_sparse:],
                                rest[n_sparse + n_dense :])
        except errors.OpError as e:
            raise errors.at_node(e, ctx.node.name, ctx.node.op, ctx.device) from None
        return _outputs(parser, rows, True, rest[n_sparse + n_dense :])

    return run


@kernel("ParseSingleExample", "CPU")
def _parse_single_example(ctx: KernelContext) -> Callable[..., Any]:
    parser = _parser(ctx)
    sparse_keys = [_text(k) for k in ctx.attr("sparse_keys")]
    dense_keys = [_text(k) for k in ctx.attr("dense_keys")]

    def run(serialized: Any, *defaults: Any) -> Any:
        data = np.asarray(serialized, object).reshape(-1)[0]
        try:
            rows = parser.parse([data], [], sparse_keys, dense_keys, defaults)
        except errors.OpError as e:
            raise errors.at_node(e, ctx.node.name, ctx.node.op, ctx.device) from None
        return _outputs(parser, rows, False, defaults)

    return run
