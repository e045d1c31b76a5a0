"""Op definitions of the ``tf.data`` file sources (tensorgrid's own; kernels in
``kernels/dataset_files.py``).

A file source is a table of records over its files, built the first time one of these ops runs
for a set of file names and kept in a resource of the device named by ``shared_name``:

* ``DatasetFileRecordCount(filenames)``: the number of records in the files (a string scalar or
  vector of paths, read in order), an int64 scalar.
* ``DatasetFileRecordRead(filenames, index)``: the records at ``index`` (int64, any shape), a
  string tensor of ``index``'s shape.

``format`` says what a record is: ``tfrecord`` (TFRecord framing, ``compression_type`` "",
"ZLIB" or "GZIP"), ``text_line`` (a line without its ``\\n``, every ``\\r`` dropped) or
``fixed_length`` (``record_bytes`` bytes, after ``header_bytes`` and before ``footer_bytes`` of
each file). With ``cycle_length`` > 1 the records come in ``interleave``'s order instead of file
after file: ``cycle_length`` files open at a time, ``block_length`` records from each in turn, a
finished file replaced by the next one in its slot.
Both are stateful: they read files, so nothing folds or caches them across steps.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, not_differentiable, op
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec

FORMATS = ("tfrecord", "text_line", "fixed_length")
_DEFAULTS = {"container": "", "shared_name": "", "format": "tfrecord", "compression_type": "",
             "record_bytes": 0, "header_bytes": 0, "footer_bytes": 0, "cycle_length": 0,
             "block_length": 1}


def _check(ctx: InferContext) -> None:
    if ctx.dtype(0) is not dtypes.string or ctx.shape(0).rank not in (None, 0, 1):
        ctx.fail(f"filenames must be a string scalar or vector, got {ctx.dtype(0).name} "
                 f"{ctx.shape(0)}")
    fmt = ctx.attr("format")
    if fmt not in FORMATS:
        ctx.fail(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if ctx.attr("compression_type") not in ("", "ZLIB", "GZIP"):
        ctx.fail(f"compression_type must be '', 'ZLIB' or 'GZIP', got "
                 f"{ctx.attr('compression_type')!r}")
    if fmt == "fixed_length" and int(ctx.attr("record_bytes")) < 1:
        ctx.fail(f"record_bytes must be positive, got {ctx.attr('record_bytes')}")
    if int(ctx.attr("header_bytes")) < 0 or int(ctx.attr("footer_bytes")) < 0:
        ctx.fail("header_bytes and footer_bytes must not be negative")
    if int(ctx.attr("block_length")) < 1:
        ctx.fail(f"block_length must be positive, got {ctx.attr('block_length')}")


@op("DatasetFileRecordCount", stateful=True, defaults=_DEFAULTS)
def _record_count(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _check(ctx)
    return [spec(dtypes.int64, ())]


@op("DatasetFileRecordRead", stateful=True, defaults=_DEFAULTS)
def _record_read(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _check(ctx)
    if ctx.dtype(1) is not dtypes.int64:
        ctx.fail(f"index must be int64, got {ctx.dtype(1).name}")
    return [spec(dtypes.string, ctx.shape(1))]


not_differentiable("DatasetFileRecordCount", "DatasetFileRecordRead")

_ATTRS = ("block_length:int compression_type:string container cycle_length:int footer_bytes:int "
          "format:string header_bytes:int record_bytes:int shared_name")
declare_attrs({"DatasetFileRecordCount": _ATTRS, "DatasetFileRecordRead": _ATTRS})


@op("MatchingFiles", stateful=True)
def _matching_files(ctx: InferContext) -> Sequence[TensorSpec]:
    """The paths matching a glob pattern (or any of a vector of them), sorted per pattern."""
    ctx.expect_inputs(1)
    if ctx.dtype(0) is not dtypes.string or ctx.shape(0).rank not in (None, 0, 1):
        ctx.fail(f"pattern must be a string scalar or vector, got {ctx.dtype(0).name} "
                 f"{ctx.shape(0)}")
    return [spec(dtypes.string, (None,))]


not_differentiable("MatchingFiles")
declare_attrs({"MatchingFiles": ""})


def _string_scalar(ctx: InferContext, i: int, what: str) -> None:
    if ctx.dtype(i) is not dtypes.string or ctx.shape(i).rank not in (None, 0):
        ctx.fail(f"{what} must be a string scalar, got {ctx.dtype(i).name} {ctx.shape(i)}")


@op("ReadFile", stateful=True)
def _read_file(ctx: InferContext) -> Sequence[TensorSpec]:
    """filename -> the file's bytes (a string scalar)."""
    ctx.expect_inputs(1)
    _string_scalar(ctx, 0, "filename")
    return [spec(dtypes.string, ())]


@op("WriteFile", stateful=True)
def _write_file(ctx: InferContext) -> Sequence[TensorSpec]:
    """filename, contents -> nothing; the file (and missing directories) created."""
    ctx.expect_inputs(2)
    _string_scalar(ctx, 0, "filename")
    _string_scalar(ctx, 1, "contents")
    return []


not_differentiable("ReadFile", "WriteFile")
declare_attrs({"ReadFile": "", "WriteFile": ""})
