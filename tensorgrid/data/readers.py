"""``tf.data`` file sources: ``TFRecordDataset``, ``TextLineDataset``,
and ``FixedLengthRecordDataset``.

A file source's element ``i`` is record ``i`` of its files, read in order: the files are
scanned once, when the record count is first taken (an initializable iterator's initializer,
or a one-shot iterator's first ``get_next``), into a table of offsets kept on the device that
reads them; a record is read from its file when its element is computed. Relative paths are
relative to the working directory of the process that runs the reading ops (the caller's, in a
local session, as in TensorFlow).

File names may come from a dataset (``list_files``, ``from_tensor_slices``...): its elements are
taken whole, in its first pass, so a shuffle of the names gives one file order for every pass of
a ``repeat`` after the file source (TensorFlow draws a new one per pass).
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from tensorgrid import math as math_ops
from tensorgrid.core import dtypes
from tensorgrid.core.shapes import TensorShape
from tensorgrid.core.tfrecord import compression_of
from tensorgrid.data import structure
from tensorgrid.data.base import Capture, DatasetBase
from tensorgrid.data.dataset import Dataset
from tensorgrid.framework import array_create_ops as array_create
from tensorgrid.framework.convert import convert_to_tensor, make_op
from tensorgrid.framework.debug_ops import Assert
from tensorgrid.framework.graph import Tensor, get_default_graph

__all__ = ["FixedLengthRecordDataset", "TFRecordDataset", "TextLineDataset"]


def _filenames(filenames: Any) -> Any:
    """A string tensor of paths, or a dataset of paths (materialized when read)."""
    if isinstance(filenames, DatasetBase):
        spec = filenames._spec()
        if not isinstance(spec, structure.Spec) or spec.dtype is not dtypes.string or \
                spec.shape.rank not in (None, 0):
            raise TypeError(f"a dataset of file names must have string scalar elements, got "
                            f"{filenames.output_types} {filenames.output_shapes}")
        return filenames
    t = convert_to_tensor(filenames, dtype=dtypes.string)
    if t.shape.rank not in (None, 0, 1):
        raise ValueError(f"filenames must be a string scalar or vector, got shape {t.shape}")
    return t


class _FileRecords(Dataset):
    """The records of files, one element each (a string scalar)."""

    _vectorized = True

    def __init__(self, filenames: Any, attrs: dict[str, Any]) -> None:
        self._filenames = _filenames(filenames)
        self._format = attrs
        self._attrs = dict(attrs, shared_name=f"FileRecords_{uuid.uuid4().hex}")

    def _interleave_of(self, names: DatasetBase, argument: Tensor, cycle_length: int,
                       block_length: int) -> Any:
        """The records of the files ``names`` gives, interleaved, when this dataset reads the
        file named by ``argument`` (what ``interleave``'s function was called with)."""
        if self._filenames is not argument:
            return None
        return _FileRecords(names, dict(self._format, cycle_length=cycle_length,
                                        block_length=block_length))

    def _sources(self) -> list[Tensor]:
        if isinstance(self._filenames, DatasetBase):
            return self._filenames._sources()
        return [self._filenames]

    def _spec(self) -> Any:
        return structure.Spec(dtypes.string, TensorShape([]))

    def _paths(self, capture: Capture) -> Tensor:
        if not isinstance(self._filenames, DatasetBase):
            return capture(self._filenames)
        names = self._filenames
        if not names._vectorized:
            raise ValueError("file names from a dataset must come from one that computes "
                             "several elements at once (list_files, from_tensor_slices, "
                             "shuffle, repeat(n), take, skip); map the paths after reading")
        size = names._size(capture)
        with get_default_graph().control_dependencies([Assert(
                math_ops.greater_equal(size, 0), ["a dataset of file names must be finite"])]):
            index = array_create.range(0, size, dtype=dtypes.int64)
        return names._elements(index, math_ops.multiply(index, 0), capture)  # type: ignore[no-any-return]

    def _size(self, capture: Capture) -> Tensor:
        return make_op("DatasetFileRecordCount", [self._paths(capture)], self._attrs,  # type: ignore[no-any-return]
                       name="FileRecordCount")

    def _element(self, index: Tensor, epoch: Tensor, capture: Capture) -> Any:
        return make_op("DatasetFileRecordRead", [self._paths(capture), index], self._attrs,
                       name="FileRecordRead")

    def _elements(self, indices: Tensor, epochs: Tensor, capture: Capture) -> Any:
        return self._element(indices, epochs, capture)


class TFRecordDataset(_FileRecords):
    """The records of TFRecord files, in order (``tf.data.TFRecordDataset``).

    Args:
      filenames: a path, a list or string tensor of paths, or a dataset of paths.
      compression_type: ``""``/None, ``"ZLIB"`` or ``"GZIP"``.
      buffer_size: accepted for TensorFlow's signature (records are read by offset, with no
        read-ahead buffer).
      num_parallel_reads: above 1 (or -1, AUTOTUNE: the number of CPUs), the records come in
        the order TensorFlow gives them then: interleaved, ``num_parallel_reads`` files at a
        time, one record from each in turn.

    Reading a damaged record raises ``DataLossError`` naming the file and the record's offset.
    """

    def __init__(self, filenames: Any, compression_type: Any = None, buffer_size: Any = None,
                 num_parallel_reads: Any = None) -> None:
        reads = 1 if num_parallel_reads is None else int(num_parallel_reads)
        if reads == -1:
            reads = os.cpu_count() or 1
        if reads < 1:
            raise ValueError(f"num_parallel_reads must be positive or -1, got {num_parallel_reads}")
        super().__init__(filenames, {"format": "tfrecord",
                                     "compression_type": compression_of(compression_type),
                                     "cycle_length": reads if reads > 1 else 0})


class TextLineDataset(_FileRecords):
    """The lines of text files, without their ``\\n`` and with every ``\\r`` dropped, as
    TensorFlow reads them (``tf.data.TextLineDataset``).

    Args:
      filenames: a path, a list or string tensor of paths, or a dataset of paths.
      compression_type: ``""``/None, ``"ZLIB"`` or ``"GZIP"``.
      buffer_size: accepted for TensorFlow's signature.
    """

    def __init__(self, filenames: Any, compression_type: Any = None,
                 buffer_size: Any = None) -> None:
        super().__init__(filenames, {"format": "text_line",
                                     "compression_type": compression_of(compression_type)})


class FixedLengthRecordDataset(_FileRecords):
    """Records of ``record_bytes`` bytes from binary files, each file's first ``header_bytes``
    and last ``footer_bytes`` skipped (``tf.data.FixedLengthRecordDataset``). A file whose
    body is not a whole number of records fails with ``InvalidArgumentError`` when scanned.

    Raises:
      ValueError: ``record_bytes`` not positive, or a negative header or footer.
    """

    def __init__(self, filenames: Any, record_bytes: int, header_bytes: int | None = None,
                 footer_bytes: int | None = None, buffer_size: Any = None,
                 compression_type: Any = None) -> None:
        if int(record_bytes) < 1:
            raise ValueError(f"record_bytes must be positive, got {record_bytes}")
        if int(header_bytes or 0) < 0 or int(footer_bytes or 0) < 0:
            raise ValueError("header_bytes and footer_bytes must not be negative")
        super().__init__(filenames, {
            "format": "fixed_length", "compression_type": compression_of(compression_type),
            "record_bytes": int(record_bytes), "header_bytes": int(header_bytes or 0),
            "footer_bytes": int(footer_bytes or 0)})

