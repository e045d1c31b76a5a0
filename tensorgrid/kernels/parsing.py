"""Kernels of the parsing ops (see ``ops/parsing.py``): ``DecodeRaw``, ``ParseExample`` /
``ParseSingleExample`` over ``tf.train.Example`` protos (``pb/example_pb2``), ``DecodeCSV``,
``SerializeTensor`` / ``ParseTensor``."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

import tensorgrid.ops.parsing  # noqa: F401 - registers the op definitions
from tensorgrid.core import dtypes, errors
from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.core.serde_tensor import dtype_from_enum, tensor_from_proto, tensor_to_proto
from tensorgrid.core.shapes import as_shape
from tensorgrid.pb import example_pb2, feature_pb2, types_pb2

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


def _listed(feature: feature_pb2.Feature | None, dtype: dtypes.DType, key: str) -> Any:
    """The values of ``feature`` (its repeated field; () when missing or holding no list),
    checked to be of ``dtype``."""
    kind = feature.WhichOneof("kind") if feature is not None else None
    if kind is None:  # a feature with no list set holds no values, whatever its type
        return ()
    if kind != _KIND_OF[dtype]:
        raise errors.InvalidArgumentError(
            f"Key: {key}. Data types don't match. Data type: "
            f"{_DTYPE_OF_KIND[kind]} but expected type: {dtype.name}")
    return getattr(feature, kind).value  # type: ignore[union-attr]


def _array(values: Sequence[Any], dtype: dtypes.DType) -> np.ndarray:
    if dtype is dtypes.string:  # bytes stay bytes objects (numpy would make them fixed-width)
        out = np.empty(len(values), object)
        out[:] = list(values)
        return out
    return np.array(values, dtype.as_numpy_dtype)


class ExampleParser:
    """Parses serialized Examples into the sparse and dense outputs of the parse ops.

    Values are gathered feature by feature into flat lists across the examples (one array
    built per output, not one per example and feature: the parse ops' cost is in here).
    """

    def __init__(self, sparse_types: Sequence[dtypes.DType], dense_types: Sequence[dtypes.DType],
                 dense_shapes: Sequence[Any]) -> None:
        self.sparse_types = list(sparse_types)
        self.dense_types = list(dense_types)
        # fully defined but, for a sequence (FixedLenSequenceFeature), the first dimension
        shapes = [as_shape(s).as_list() for s in dense_shapes]
        self.sequence = [bool(s) and s[0] is None for s in shapes]
        self.dims = [[d or 0 for d in (s[1:] if seq else s)]
                     for s, seq in zip(shapes, self.sequence, strict=True)]
        self.sizes = [math.prod(d) for d in self.dims]  # values per example (per block)

    def parse(self, serialized: Sequence[bytes], names: Sequence[str], sparse_keys: list[str],
              dense_keys: list[str], defaults: Sequence[Any], batch: bool) -> tuple[Any, ...]:
        """The op's outputs: sparse indices, values and shapes, then the dense values, for a
        batch (``batch``: a leading dimension; else the one example's)."""
        sparse: list[list[Any]] = [[] for _ in sparse_keys]
        sparse_lens: list[list[int]] = [[] for _ in sparse_keys]
        dense: list[list[Any]] = [[] for _ in dense_keys]
        fills = [np.asarray(d).ravel().tolist() for d in defaults]
        for b, data in enumerate(serialized):
            try:
                features = example_pb2.Example.FromString(data).features.feature
                for j, k in enumerate(sparse_keys):
                    got = _listed(features.get(k), self.sparse_types[j], k)
                    sparse[j].extend(got)
                    sparse_lens[j].append(len(got))
                for j, k in enumerate(dense_keys):
                    self._dense(dense[j], j, features.get(k), fills[j], k)
            except (DecodeError, errors.InvalidArgumentError) as e:
                # the example is named only when something is wrong with it
                where = f"Name: {names[b] if b < len(names) else '<unknown>'}, Index: {b}"
                if isinstance(e, DecodeError):
                    raise errors.InvalidArgumentError(
                        f"Could not parse example input, value: {data[:64]!r} ({where})") from e
                raise errors.InvalidArgumentError(f"{where}, {e.message}") from None
        n = len(serialized)
        indices, shapes = [], []
        for lens in sparse_lens:
            counts = np.asarray(lens, np.int64)
            rows = np.repeat(np.arange(n, dtype=np.int64), counts)
            cols = np.arange(rows.size, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts,
                                                                    counts)
            longest = int(counts.max()) if n else 0
            indices.append(np.stack([rows, cols], 1) if batch else cols.reshape(-1, 1))
            shapes.append(np.asarray([n, longest] if batch else [longest], np.int64))
        values = [_array(v, t) for v, t in zip(sparse, self.sparse_types, strict=True)]
        outs = [self._assemble(j, dense[j], fills[j], n) for j in range(len(dense_keys))]
        return (*indices, *values, *shapes, *(o if batch else o[0, ...] for o in outs))

    def _dense(self, into: list[Any], j: int, feature: feature_pb2.Feature | None,
               fill: list[Any], key: str) -> None:
        """Add one example's values of dense feature ``j`` to ``into``."""
        dtype, size = self.dense_types[j], self.sizes[j]
        if self.sequence[j]:  # as many blocks as there are values for; one list per example
            got = _listed(feature, dtype, key)
            if size == 0 or len(got) % size:
                raise errors.InvalidArgumentError(
                    f"Key: {key}. Number of {dtype.name} values is not a multiple of stride "
                    f"length. Saw {len(got)} values but output shape is: {[-1, *self.dims[j]]}")
            into.append(got)
            return
        if feature is None:
            if not fill and size:
                raise errors.InvalidArgumentError(
                    f"Feature: {key} (data type: {dtype.name}) is required but could not be "
                    "found.")
            into.extend(fill if len(fill) == size else fill * size)
            return
        got = _listed(feature, dtype, key)
        if len(got) != size:
            raise errors.InvalidArgumentError(
                f"Key: {key}. Number of {dtype.name} values != expected. Values size: "
                f"{len(got)} but output shape: {self.dims[j]}")
        into.extend(got)

    def _assemble(self, j: int, gathered: list[Any], fill: list[Any], n: int) -> np.ndarray:
        dtype, dims = self.dense_types[j], self.dims[j]
        if not self.sequence[j]:
            return _array(gathered, dtype).reshape((n, *dims))
        # sequences, padded to the longest with the default (a scalar)
        size = self.sizes[j]
        longest = max((len(g) // size for g in gathered), default=0)
        pad = fill[0] if fill else (b"" if dtype is dtypes.string else 0)
        out: np.ndarray = np.empty((n, longest, *dims), object if dtype is dtypes.string else
                       dtype.as_numpy_dtype)
        out[...] = pad
        for b, g in enumerate(gathered):
            if len(g):
                out[b, : len(g) // size] = _array(g, dtype).reshape((-1, *dims))
        return out


def _parser(ctx: KernelContext) -> ExampleParser:
    return ExampleParser(list(ctx.attr("sparse_types")), list(ctx.attr("Tdense")),
                         list(ctx.attr("dense_shapes")))


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _one_or_all(outputs: tuple[Any, ...]) -> Any:
    return outputs if len(outputs) != 1 else outputs[0]


@kernel("ParseExample", "CPU")
def _parse_example(ctx: KernelContext) -> Callable[..., Any]:
    parser = _parser(ctx)
    n_sparse, n_dense = int(ctx.attr("Nsparse")), int(ctx.attr("Ndense"))

    def run(serialized: Any, names: Any, *rest: Any) -> Any:
        keys = [_text(np.asarray(k, object).reshape(-1)[0]) for k in rest[: n_sparse + n_dense]]
        data = list(np.asarray(serialized, object).reshape(-1))
        label = [_text(n) for n in np.asarray(names, object).reshape(-1)]
        try:
            return _one_or_all(parser.parse(data, label, keys[:n_sparse], keys[n_sparse:],
                                            rest[n_sparse + n_dense :], batch=True))
        except errors.OpError as e:
            raise errors.at_node(e, ctx.node.name, ctx.node.op, ctx.device) from None

    return run


@kernel("ParseSingleExample", "CPU")
def _parse_single_example(ctx: KernelContext) -> Callable[..., Any]:
    parser = _parser(ctx)
    sparse_keys = [_text(k) for k in ctx.attr("sparse_keys")]
    dense_keys = [_text(k) for k in ctx.attr("dense_keys")]

    def run(serialized: Any, *defaults: Any) -> Any:
        data = np.asarray(serialized, object).reshape(-1)[0]
        try:
            return _one_or_all(parser.parse([data], [], sparse_keys, dense_keys, defaults,
                                            batch=False))
        except errors.OpError as e:
            raise errors.at_node(e, ctx.node.name, ctx.node.op, ctx.device) from None

    return run


def csv_fields(record: bytes, delim: bytes, quotes: bool, index: int) -> list[bytes]:
    """The fields of one CSV record: split at ``delim``; with ``quotes`` a field may be
    enclosed in double quotes, within which ``delim`` is text and ``""`` is one quote.

    Raises:
        InvalidArgumentError: a quote inside an unquoted field, or a quoted field not followed
            by the delimiter or the end (names the record's index).
    """
    if not quotes:
        return record.split(delim)
    fields: list[bytes] = []
    pos, n = 0, len(record)
    while True:
        if pos < n and record[pos : pos + 1] == b'"':
            field = bytearray()
            pos += 1
            while True:
                end = record.find(b'"', pos)
                if end < 0:
                    raise errors.InvalidArgumentError(
                        f"Quoted field has to end with quote followed by delim or end, in "
                        f"record {index}")
                field += record[pos:end]
                if record[end + 1 : end + 2] == b'"':  # "" is one quote
                    field += b'"'
                    pos = end + 2
                    continue
                pos = end + 1
                break
            if pos < n and record[pos : pos + 1] != delim:
                raise errors.InvalidArgumentError(
                    f"Quoted field has to end with quote followed by delim or end, in record "
                    f"{index}")
            fields.append(bytes(field))
        else:
            end = record.find(delim, pos)
            end = n if end < 0 else end
            field_bytes = record[pos:end]
            if b'"' in field_bytes:
                raise errors.InvalidArgumentError(
                    f"Unquoted fields cannot have quotes inside, in record {index}: "
                    f"{field_bytes!r}")
            fields.append(field_bytes)
            pos = end
        if pos >= n:
            return fields
        pos += 1  # past the delimiter
        if pos == n:  # a delimiter at the end: one more, empty field
            fields.append(b"")
            return fields


_CSV_PARSE = {dtypes.int32: int, dtypes.int64: int, dtypes.float32: float,
              dtypes.float64: float}
_CSV_NAME = {dtypes.int32: "int32", dtypes.int64: "int64", dtypes.float32: "float",
             dtypes.float64: "double"}


@kernel("DecodeCSV", "CPU")
def _decode_csv(ctx: KernelContext) -> Callable[..., Any]:
    types: list[dtypes.DType] = list(ctx.attr("OUT_TYPE"))
    delim = ctx.attr("field_delim")
    delim_b = delim.encode() if isinstance(delim, str) else bytes(delim)
    quotes = bool(ctx.attr("use_quote_delim"))
    na = ctx.attr("na_value")
    na_b = na.encode() if isinstance(na, str) else bytes(na)
    select = [int(c) for c in ctx.attr("select_cols")]

    def run(records: Any, *defaults: Any) -> Any:
        recs = np.asarray(records, object)
        fills = [np.asarray(d).ravel() for d in defaults]
        columns: list[list[Any]] = [[] for _ in types]
        for i, rec in enumerate(recs.reshape(-1)):
            record = rec if isinstance(rec, bytes) else str(rec).encode()
            try:
                fields = csv_fields(record, delim_b, quotes, i)
                if select:
                    if len(fields) <= select[-1]:
                        raise errors.InvalidArgumentError(
                            f"Expect at least {select[-1] + 1} fields but have {len(fields)} "
                            f"in record {i}")
                    fields = [fields[c] for c in select]
                elif len(fields) != len(types):
                    raise errors.InvalidArgumentError(
                        f"Expect {len(types)} fields but have {len(fields)} in record {i}")
                for f, (field, t) in enumerate(zip(fields, types, strict=True)):
                    columns[f].append(_csv_value(field, t, fills[f], na_b, f, i))
            except errors.OpError as e:
                raise errors.at_node(e, ctx.node.name, ctx.node.op, ctx.device) from None
        outs = tuple(_array(c, t).reshape(recs.shape) for c, t in zip(columns, types, strict=True))
        return _one_or_all(outs)

    return run


def _csv_value(field: bytes, dtype: dtypes.DType, fill: np.ndarray, na: bytes, f: int,
               i: int) -> Any:
    if not field or field == na:
        if fill.size == 0:
            raise errors.InvalidArgumentError(f"Field {f} is required but missing in record {i}!")
        return fill[0]
    if dtype is dtypes.string:
        return field
    try:
        value = _CSV_PARSE[dtype](field)
        if dtype is dtypes.int32 and not -(2**31) <= value < 2**31:
            raise ValueError(field)
        return value
    except ValueError:
        raise errors.InvalidArgumentError(
            f"Field {f} in record {i} is not a valid {_CSV_NAME[dtype]}: "
            f"{field.decode(errors='replace')}") from None


@kernel("SerializeTensor", "CPU")
def _serialize_tensor(ctx: KernelContext) -> Callable[[Any], Any]:
    dtype = ctx.attr("T")
    return lambda t: np.array(tensor_to_proto(t, dtype).SerializeToString(), dtype=object)


@kernel("ParseTensor", "CPU")
def _parse_tensor(ctx: KernelContext) -> Callable[[Any], Any]:
    out: dtypes.DType = ctx.attr("out_type")

    def run(serialized: Any) -> Any:
        data = np.asarray(serialized, object).reshape(-1)[0]
        try:
            pb = types_pb2.TensorProto.FromString(data)
        except DecodeError as e:
            raise ctx.error(errors.InvalidArgumentError,
                            "Could not parse `serialized` as TensorProto") from e
        found = dtype_from_enum(pb.dtype, ctx.name)
        if found is not out:
            raise ctx.error(errors.InvalidArgumentError,
                            f"Type mismatch between parsed tensor ({found.name}) and dtype "
                            f"({out.name})")
        return tensor_from_proto(pb, ctx.name)

    return run
