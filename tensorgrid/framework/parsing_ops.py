"""``tf.parse_single_example``, ``tf.parse_example``, ``tf.FixedLenFeature``,
``tf.VarLenFeature``, ``tf.decode_raw``, ``tf.decode_csv``, ``tf.serialize_tensor``,
``tf.parse_tensor``, ``tf.read_file``, ``tf.write_file`` and ``tf.matching_files``: the ops of
``ops/parsing.py`` and ``ops/dataset_files.py``.

    features = tf.parse_single_example(record, {
        "image": tf.FixedLenFeature([], tf.string),
        "label": tf.FixedLenFeature([], tf.int64, default_value=0),
        "tags": tf.VarLenFeature(tf.string)})
    image = tf.decode_raw(features["image"], tf.uint8)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from tensorgrid.core import dtypes
from tensorgrid.core.shapes import TensorShape
from tensorgrid.framework.array_ops import reshape
from tensorgrid.framework.convert import (
    convert_to_tensor,
    make_op,
    make_op_operation,
    make_op_outputs,
)
from tensorgrid.framework.graph import Operation, Tensor
from tensorgrid.framework.string_ops import SparseTensor

__all__ = ["FixedLenFeature", "FixedLenSequenceFeature", "VarLenFeature", "decode_csv",
           "decode_raw", "parse_tensor", "read_file", "serialize_tensor", "write_file", "matching_files", "parse_example",
           "parse_single_example"]

_FEATURE_DTYPES = (dtypes.float32, dtypes.int64, dtypes.string)


class FixedLenFeature(NamedTuple):
    """A feature of a fixed number of values, parsed to a dense tensor of ``shape``; an example
    without it gets ``default_value`` (None: the feature is required)."""

    shape: Any
    dtype: Any
    default_value: Any = None


class FixedLenSequenceFeature(NamedTuple):
    """A feature of any number of values in blocks of ``shape``, parsed to a dense tensor of
    ``[blocks] + shape`` (``[batch, most blocks] + shape`` from ``parse_example``, padded with
    ``default_value``, 0 or b"" when None). ``allow_missing`` must be True: an example without
    the feature has no blocks."""

    shape: Any
    dtype: Any
    allow_missing: bool = False
    default_value: Any = None


class VarLenFeature(NamedTuple):
    """A feature of any number of values, parsed to a ``SparseTensor``."""

    dtype: Any


def _check_features(features: Mapping[str, Any]) -> None:
    if not features:
        raise ValueError("features must name at least one feature")
    for key, f in features.items():
        if not isinstance(f, FixedLenFeature | FixedLenSequenceFeature | VarLenFeature):
            raise TypeError(f"feature '{key}': expected a FixedLenFeature, "
                            f"FixedLenSequenceFeature or VarLenFeature, got {type(f).__name__}")
        if isinstance(f, FixedLenSequenceFeature) and not f.allow_missing:
            raise ValueError(f"feature '{key}': Unsupported: FixedLenSequenceFeature requires "
                             "allow_missing to be True")
        if dtypes.as_dtype(f.dtype) not in _FEATURE_DTYPES:
            raise ValueError(f"feature '{key}': dtype must be float32, int64 or string, got "
                             f"{dtypes.as_dtype(f.dtype).name}")
        if not isinstance(f, VarLenFeature) and not TensorShape(f.shape).is_fully_defined():
            raise ValueError(f"feature '{key}': a {type(f).__name__} needs a fully defined shape, "
                             f"got {TensorShape(f.shape)}")


def _split(features: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    _check_features(features)
    sparse = sorted(k for k, f in features.items() if isinstance(f, VarLenFeature))
    dense = sorted(k for k, f in features.items() if not isinstance(f, VarLenFeature))
    return sparse, dense


def _default(f: FixedLenFeature | FixedLenSequenceFeature) -> Tensor:
    dt = dtypes.as_dtype(f.dtype)
    if isinstance(f, FixedLenSequenceFeature):  # the padding: a scalar
        value = f.default_value if f.default_value is not None else \
            (b"" if dt is dtypes.string else 0)
        return convert_to_tensor(value, dtype=dt)
    if f.default_value is None:  # empty: required
        return convert_to_tensor([], dtype=dt)
    value = convert_to_tensor(f.default_value, dtype=dt)
    shape = TensorShape(f.shape)
    return value if value.shape == shape else reshape(value, shape.as_list())


def _attrs(features: Mapping[str, Any], sparse: list[str], dense: list[str]) -> dict[str, Any]:
    return {"sparse_types": [dtypes.as_dtype(features[k].dtype) for k in sparse],
            "Tdense": [dtypes.as_dtype(features[k].dtype) for k in dense],
            "dense_shapes": [_dense_shape(features[k]) for k in dense]}


def _dense_shape(f: FixedLenFeature | FixedLenSequenceFeature) -> TensorShape:
    shape = TensorShape(f.shape)
    return TensorShape([None]).concatenate(shape) if isinstance(f, FixedLenSequenceFeature) \
        else shape


def _pack(outs: tuple[Tensor, ...], sparse: list[str], dense: list[str]) -> dict[str, Any]:
    n = len(sparse)
    result: dict[str, Any] = {k: SparseTensor(outs[j], outs[n + j], outs[2 * n + j])
                              for j, k in enumerate(sparse)}
    result.update({k: outs[3 * n + j] for j, k in enumerate(dense)})
    return result


def parse_example(serialized: Any, features: Mapping[str, Any], name: str | None = None,
                  example_names: Any = None) -> dict[str, Any]:
    """A batch of serialized ``tf.train.Example`` protos (a string vector) parsed to a dict:
    per ``FixedLenFeature`` a tensor of ``[batch] + shape``, per ``FixedLenSequenceFeature``
    one of ``[batch, most blocks] + shape``, per ``VarLenFeature`` a ``SparseTensor`` of dense
    shape ``[batch, most values]``.

    Raises:
      ValueError, TypeError: an empty or malformed ``features``.
      InvalidArgumentError (when run): a required feature missing, a feature of another type or
        with the wrong number of values, or bytes that are not an Example; the message names the
        key and the example's index.
    """
    sparse, dense = _split(features)
    names = convert_to_tensor([] if example_names is None else example_names, dtype=dtypes.string)
    keys = [convert_to_tensor(k, dtype=dtypes.string) for k in sparse + dense]
    outs = make_op_outputs(
        "ParseExample",
        [convert_to_tensor(serialized, dtype=dtypes.string), names, *keys,
         *(_default(features[k]) for k in dense)],
        {"Nsparse": len(sparse), "Ndense": len(dense), **_attrs(features, sparse, dense)},
        name=name or "ParseExample")
    return _pack(outs, sparse, dense)


def parse_single_example(serialized: Any, features: Mapping[str, Any], name: str | None = None,
                         example_names: Any = None) -> dict[str, Any]:
    """One serialized ``tf.train.Example`` (a string scalar) parsed to a dict: per
    ``FixedLenFeature`` a tensor of its shape, per ``VarLenFeature`` a ``SparseTensor`` of
    dense shape ``[values]``. Raises as ``parse_example``."""
    sparse, dense = _split(features)
    outs = make_op_outputs(
        "ParseSingleExample",
        [convert_to_tensor(serialized, dtype=dtypes.string),
         *(_default(features[k]) for k in dense)],
        {"num_sparse": len(sparse), "sparse_keys": sparse, "dense_keys": dense,
         **_attrs(features, sparse, dense)},
        name=name or "ParseSingleExample")
    return _pack(outs, sparse, dense)


def decode_raw(input_bytes: Any = None, out_type: Any = None, little_endian: bool = True,
               name: str | None = None, bytes: Any = None) -> Tensor:
    """The bytes of each string reinterpreted as a vector of ``out_type`` (``tf.decode_raw``);
    the result has shape ``input.shape + [length / itemsize]``.

    Raises:
      InvalidArgumentError (when run): strings of different lengths, or a length that is not a
        multiple of the type's size.
    """
    data = input_bytes if input_bytes is not None else bytes
    if data is None or out_type is None:
        raise ValueError("decode_raw needs the bytes and an out_type")
    return make_op("DecodeRaw", [convert_to_tensor(data, dtype=dtypes.string)],
                   {"out_type": dtypes.as_dtype(out_type), "little_endian": bool(little_endian)},
                   name=name or "DecodeRaw")


def decode_csv(records: Any, record_defaults: Sequence[Any], field_delim: str = ",",
               use_quote_delim: bool = True, name: str | None = None, na_value: str = "",
               select_cols: Sequence[int] | None = None) -> list[Tensor]:
    """The columns of CSV ``records`` (a string tensor), one tensor of ``records``' shape per
    entry of ``record_defaults`` (``tf.decode_csv``). Each default is a one-value list or
    tensor giving the column's type and its value for empty (or ``na_value``) fields, or an
    empty tensor of the type for a required column; ``select_cols`` picks the columns read.

    Raises:
      InvalidArgumentError (when run): a record with another number of fields, a required
        field missing, a field that is not a number of its column's type, or bad quoting; the
        message names the record and field.
    """
    defaults = [convert_to_tensor(d) for d in record_defaults]
    outs = make_op_outputs(
        "DecodeCSV", [convert_to_tensor(records, dtype=dtypes.string), *defaults],
        {"OUT_TYPE": [d.dtype for d in defaults], "field_delim": field_delim,
         "use_quote_delim": bool(use_quote_delim), "na_value": na_value,
         "select_cols": [int(c) for c in select_cols or []]},
        name=name or "DecodeCSV")
    return list(outs)


def matching_files(pattern: Any, name: str | None = None) -> Tensor:
    """The paths matching the glob ``pattern`` (or any of a vector of them), sorted per pattern,
    as a string vector, empty when none matches (``tf.io.matching_files``)."""
    return make_op("MatchingFiles", [convert_to_tensor(pattern, dtype=dtypes.string)],
                   name=name or "MatchingFiles")


def serialize_tensor(tensor: Any, name: str | None = None) -> Tensor:
    """``tensor`` as a serialized ``TensorProto`` (a string scalar; ``tf.serialize_tensor``)."""
    t = convert_to_tensor(tensor)
    return make_op("SerializeTensor", [t], {"T": t.dtype}, name=name or "SerializeTensor")


def parse_tensor(serialized: Any, out_type: Any, name: str | None = None) -> Tensor:
    """The tensor a serialized ``TensorProto`` holds (``tf.parse_tensor``).

    Raises:
      InvalidArgumentError (when run): bytes that are no TensorProto, or one of another dtype.
    """
    return make_op("ParseTensor", [convert_to_tensor(serialized, dtype=dtypes.string)],
                   {"out_type": dtypes.as_dtype(out_type)}, name=name or "ParseTensor")


def read_file(filename: Any, name: str | None = None) -> Tensor:
    """The bytes of the file ``filename`` (a string scalar; ``tf.read_file``).

    Raises:
      NotFoundError (when run): no such file.
    """
    return make_op("ReadFile", [convert_to_tensor(filename, dtype=dtypes.string)],
                   name=name or "ReadFile")


def write_file(filename: Any, contents: Any, name: str | None = None) -> Operation:
    """An op writing ``contents`` to the file ``filename``, creating missing directories
    (``tf.write_file``)."""
    return make_op_operation("WriteFile", [convert_to_tensor(filename, dtype=dtypes.string),
                                           convert_to_tensor(contents, dtype=dtypes.string)],
                             name=name or "WriteFile")
