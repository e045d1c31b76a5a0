"""Writing tensor bundles (TensorFlow's checkpoint format V2), one shard at a time, and merging
shards written in parallel into one bundle.

``BundleWriter(prefix)`` writes ``prefix.data-00000-of-00001`` while tensors are added and
``prefix.index`` at ``finish``; both go to temporary names first and are renamed when complete, so
a crash leaves no half-written file under a checkpoint's name. For a save spread over tasks, each
task writes its own single-shard bundle under ``shard_prefix(prefix, i, n, token)``, then one
``merge_bundles`` renames the data files to ``prefix.data-0000i-of-0000n`` and writes the index of
all of them (TensorFlow's sharded save does the same). Layout: ``bundle_format.py``.
"""

from __future__ import annotations

import io
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from tensorgrid.checkpoint import bundle_format as bf
from tensorgrid.checkpoint import fs, spares
from tensorgrid.checkpoint.data_file import DIRECT_MIN_BYTES, DataFileWriter
from tensorgrid.checkpoint.table import TableWriter, read_table
from tensorgrid.core import dtypes, errors
from tensorgrid.core.crc32c import crc32c, mask
from tensorgrid.pb import tensor_bundle_pb2, types_pb2

Entry = tensor_bundle_pb2.BundleEntryProto


@dataclass(frozen=True)
class FileRecord:
    """A file of a bundle as a manifest records it: its name (relative to the directory), its
    size, and for an index file the CRC-32C of its bytes (not masked; None for a data file).

    A data file needs no checksum of its own: the index holds the CRC-32C of every tensor's bytes
    and the data files hold nothing else, so the index's checksum covers every byte."""

    name: str
    nbytes: int
    crc32c: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "bytes": self.nbytes, "crc32c": self.crc32c}


def shard_directory(prefix: str, token: str) -> str:
    """The temporary directory of the shards of one save (``token``) of ``prefix``."""
    return f"{prefix}_temp_{token}"


def shard_prefix(prefix: str, shard: int, num_shards: int, token: str) -> str:
    """Where shard ``shard`` of a sharded save of ``prefix`` is written before the merge."""
    return os.path.join(shard_directory(prefix, token), f"part-{shard:05d}-of-{num_shards:05d}")


def new_token() -> str:
    """A random token naming one save's temporary files."""
    return secrets.token_hex(8)


def _shape_proto(shape: Sequence[int]) -> types_pb2.TensorShapeProto:
    return types_pb2.TensorShapeProto(dim=[types_pb2.TensorShapeProto.Dim(size=int(d))
                                           for d in shape])


def _tmp_name(path: str) -> str:
    return f"{path}.tempstate{secrets.token_hex(6)}"


class BundleWriter:
    """Writes a single-shard bundle at ``prefix``.

    Args:
        prefix: the bundle's path prefix; its directory is created when missing.
        block_bytes: the index table's data block size.
        expected_bytes: about how many bytes the tensors take: a data file of at least
            ``data_file.DIRECT_MIN_BYTES`` is written around the page cache (``O_DIRECT``) where
            the filesystem allows. The bytes written are the same either way.
        direct: force (True) or forbid (False) that choice; None decides by ``expected_bytes``.
        sync: make the data file and the index durable (``fsync``) before ``finish`` returns
            (default: as TensorFlow, the operating system writes them back when it will).
        spare_dir: the directory whose spare files (``spares.py``: data files retired by
            earlier saves) the data file may recycle, when one fits ``expected_bytes`` and the
            file is written around the page cache (default the prefix's directory).

    Raises:
        UnavailableError: the files cannot be created.
    """

    def __init__(self, prefix: str, *, block_bytes: int | None = None,
                 expected_bytes: int = 0, direct: bool | None = None,
                 sync: bool = False, spare_dir: str | None = None) -> None:
        self.prefix = prefix
        self._sync = sync
        self._fs = fs.filesystem(prefix)
        self._block_bytes = block_bytes
        self._entries: dict[bytes, Entry] = {}
        self._data_path = bf.data_file(prefix, 0, 1)
        self._tmp_data = _tmp_name(self._data_path)
        self._offset = 0
        if direct is None:
            direct = expected_bytes >= DIRECT_MIN_BYTES
        try:
            self._fs.makedirs(os.path.dirname(prefix))
            if not self._fs.local:  # fsspec's buffered file; no O_DIRECT, no spares there
                self._out: DataFileWriter | None = DataFileWriter(
                    self._tmp_data, direct=False, file=self._fs.open(self._tmp_data, "wb"))
                return
            # a spare's blocks are already allocated: overwriting them in place is faster than
            # allocating new ones (around the page cache; buffered writes would truncate it)
            recycled = direct and spares.claim(
                os.path.dirname(prefix) if spare_dir is None else spare_dir,
                expected_bytes, self._tmp_data)
            self._out = DataFileWriter(self._tmp_data, direct=direct, overwrite=recycled)
        except OSError as exc:
            try:
                self._fs.remove(self._tmp_data)  # a claimed spare, or a file the open made
            except OSError:
                pass
            raise errors.UnavailableError(f"Cannot write checkpoint {prefix}: {exc}") from None

    @property
    def direct_io(self) -> bool:
        """Whether the data file is being written around the page cache."""
        return self._out is not None and self._out.direct_io

    def _write_tensor(self, name: str, value: Any, dtype: Any = None) -> Entry:
        if self._out is None:
            raise errors.FailedPreconditionError(f"Bundle {self.prefix} is already finished")
        arr = np.asarray(value) if not isinstance(value, np.ndarray) else value
        try:
            dt = dtypes.as_dtype(dtype if dtype is not None else arr.dtype)
        except TypeError as exc:
            raise errors.InvalidArgumentError(
                f"Cannot checkpoint tensor {name!r} of dtype {arr.dtype}: {exc}") from None
        try:
            if dt is dtypes.string:
                pieces, crc = bf.encode_strings(arr)
                size = 0
                for piece in pieces:
                    self._out.write_bytes(piece)
                    size += len(piece)
            else:
                arr = bf.numeric_array(arr, dt)
                size = arr.nbytes
                crc = self._out.write_array(arr)
        except OSError as exc:
            self.abort()
            raise errors.UnavailableError(
                f"Cannot write tensor {name!r} to checkpoint {self.prefix}: {exc}") from None
        # (the stubs type the enum field as DataType; its number is what protobuf stores)
        entry = Entry(dtype=dt.enum, shape=_shape_proto(arr.shape), shard_id=0,  # type: ignore[arg-type]
                      offset=self._offset, size=size, crc32c=mask(crc))
        self._offset += size
        return entry

    def add(self, name: str, value: Any, dtype: Any = None) -> None:
        """Append tensor ``name`` (an array; strings as bytes objects).

        Raises:
            InvalidArgumentError: the name is empty or added twice, or the value has no dtype.
        """
        key = self._key(name)
        if key in self._entries:
            raise errors.InvalidArgumentError(f"Tensor {name!r} is added to {self.prefix} twice")
        self._entries[key] = self._write_tensor(name, value, dtype)

    def add_slice(self, name: str, full_shape: Sequence[int], starts: Sequence[int],
                  lengths: Sequence[int | None], value: Any, dtype: Any = None) -> None:
        """Append one slice of a partitioned tensor ``name`` of shape ``full_shape``: the part
        at ``starts`` with ``lengths`` (None: the whole dimension). Readers assemble the slices.

        Raises:
            InvalidArgumentError: the slice does not fit the shape or the value, or the full
                tensor's dtype or shape differs from an earlier slice's.
        """
        arr = np.asarray(value)
        full = [int(d) for d in full_shape]
        if not len(full) == len(starts) == len(lengths) == arr.ndim:
            raise errors.InvalidArgumentError(
                f"Slice of {name!r}: shape {full}, starts {list(starts)}, lengths "
                f"{list(lengths)} and a value of rank {arr.ndim} differ in rank")
        for d, (start, length) in enumerate(zip(starts, lengths)):
            want = full[d] if length is None else length
            if start < 0 or start + want > full[d] or arr.shape[d] != want:
                raise errors.InvalidArgumentError(
                    f"Slice of {name!r} at {list(starts)} with lengths {list(lengths)} does not "
                    f"fit shape {full} or its value's shape {list(arr.shape)}")
        full_key = self._key(name)
        entry = self._write_tensor(name, arr, dtype)
        skey = bf.slice_key(name, starts, lengths)
        if skey in self._entries:
            raise errors.InvalidArgumentError(f"Slice {list(starts)} of {name!r} is added twice")
        self._entries[skey] = entry
        whole = self._entries.get(full_key)
        if whole is None:
            whole = Entry(dtype=entry.dtype, shape=_shape_proto(full))
            self._entries[full_key] = whole
        elif not whole.slices or whole.dtype != entry.dtype \
                or [d.size for d in whole.shape.dim] != full:
            raise errors.InvalidArgumentError(
                f"Slice of {name!r} disagrees with what was added before under that name")
        whole.slices.append(bf.slice_proto(starts, lengths))

    @staticmethod
    def _key(name: str) -> bytes:
        key = name.encode("utf-8")
        if not key or key.startswith(b"\x00"):
            raise errors.InvalidArgumentError(f"{name!r} cannot name a checkpointed tensor")
        return key

    def finish(self) -> tuple[dict[bytes, Entry], FileRecord, FileRecord]:
        """Close the data file and write the index; rename both to their names.

        Returns:
            The entries by index key, and the records of the data file and the index file.

        Raises:
            UnavailableError: a file cannot be written.
        """
        if self._out is None:
            raise errors.FailedPreconditionError(f"Bundle {self.prefix} is already finished")
        try:
            self._out.close(sync=self._sync)
            self._out = None
            self._fs.rename(self._tmp_data, self._data_path)
            data = FileRecord(os.path.basename(self._data_path), self._offset)
            index = write_index(self.prefix, 1, self._entries, self._block_bytes, self._sync)
            if self._sync and self._fs.local:
                sync_directory(os.path.dirname(self.prefix) or ".")
        except OSError as exc:
            self.abort()
            raise errors.UnavailableError(f"Cannot write checkpoint {self.prefix}: {exc}") from None
        return dict(self._entries), data, index

    def abort(self) -> None:
        """Drop what was written (after a failure)."""
        if self._out is not None:
            self._out.abort()
            self._out = None
        for path in (self._tmp_data,):
            try:
                self._fs.remove(path)
            except OSError:
                pass

    def __enter__(self) -> BundleWriter:
        return self

    def __exit__(self, exc_type: Any, *rest: object) -> None:
        if exc_type is not None:
            self.abort()


def sync_directory(directory: str) -> None:
    """Make the names created in ``directory`` durable (``fsync`` of the directory).

    Raises:
        OSError: the directory cannot be opened or synced.
    """
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_index(prefix: str, num_shards: int, entries: Mapping[bytes, Entry],
                block_bytes: int | None = None, sync: bool = False) -> FileRecord:
    """Write ``prefix.index``: the header and ``entries`` in key order (via a temporary name;
    with ``sync``, its bytes are made durable before the rename).

    Returns:
        The index file's record.
    """
    path = bf.index_file(prefix)
    tmp = _tmp_name(path)
    buf = io.BytesIO()  # an index is small: built in memory, written at once
    table = TableWriter(buf) if block_bytes is None else TableWriter(buf, block_bytes)
    table.add(bf.HEADER_KEY, bf.header(num_shards).SerializeToString())
    for key in sorted(entries):
        table.add(key, entries[key].SerializeToString(deterministic=True))
    table.finish()
    raw = buf.getvalue()
    where = fs.filesystem(prefix)
    with where.open(tmp, "wb") as f:
        f.write(raw)
        if sync and where.local:
            f.flush()
            os.fsync(f.fileno())
    where.rename(tmp, path)
    return FileRecord(os.path.basename(path), len(raw), crc32c(raw))


def merge_bundles(prefixes: Sequence[str], prefix: str, sync: bool = False
                  ) -> tuple[dict[bytes, Entry], list[FileRecord]]:
    """Merge the single-shard bundles ``prefixes`` (in shard order) into the bundle ``prefix``:
    their data files become ``prefix.data-<i>-of-<n>``, their entries one index. The shard
    bundles' index files, and their directories when left empty, are removed. With ``sync`` the
    index and the directory's new names are durable when it returns (the data files' bytes are
    the shards' writers' to sync).

    Returns:
        The merged entries by key, and the file records: the data files in order, then the index.

    Raises:
        InvalidArgumentError: two shards hold the same tensor (not slices of one).
        DataLossError: a shard's index is damaged; NotFoundError: a shard is missing.
    """
    n = len(prefixes)
    where = fs.filesystem(prefix)
    merged: dict[bytes, Entry] = {}
    records: list[FileRecord] = []
    for i, part in enumerate(prefixes):
        for key, entry in read_index(part)[1].items():
            entry.shard_id = i
            old = merged.get(key)
            if old is None:
                merged[key] = entry
            elif old.slices and entry.slices and old.dtype == entry.dtype \
                    and old.shape == entry.shape:
                old.slices.extend(entry.slices)  # a partitioned tensor spread over shards
            else:
                raise errors.InvalidArgumentError(
                    f"Tensor {key.decode('utf-8', 'replace')!r} is saved by shards "
                    f"{old.shard_id} and {i} of checkpoint {prefix}")
    for i, part in enumerate(prefixes):
        target = bf.data_file(prefix, i, n)
        if where.local:
            spares.replace(bf.data_file(part, 0, 1), target)  # an overwritten file is recycled
        else:
            where.rename(bf.data_file(part, 0, 1), target)
        records.append(FileRecord(os.path.basename(target), where.size(target)))
    for entry in merged.values():
        if entry.slices:
            entry.shard_id = 0  # a full tensor's entry holds no bytes
    records.append(write_index(prefix, n, merged, sync=sync))
    if where.local:
        if sync:
            sync_directory(os.path.dirname(prefix) or ".")
        # the spares the next save wants: as many as this save wrote; older ones are removed
        spares.prune(os.path.dirname(prefix) or ".", n)
    for part in prefixes:
        try:
            where.remove(bf.index_file(part))
            where.rmdir(os.path.dirname(part))
        except OSError:
            pass  # another shard's files are still there, or the directory is shared
    return merged, records


def read_index(prefix: str) -> tuple[tensor_bundle_pb2.BundleHeaderProto, dict[bytes, Entry]]:
    """The header and the entries (by key) of the bundle ``prefix``'s index.

    Raises:
        NotFoundError: there is no such index file.
        DataLossError: the index is damaged or its header missing or unsupported.
    """
    path = bf.index_file(prefix)
    try:
        with fs.filesystem(prefix).open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(f"Checkpoint {prefix} not found: no file {path}") from None
    except OSError as exc:
        raise errors.UnavailableError(f"Cannot read {path}: {exc}") from None
    rows = read_table(raw, path)
    if not rows or rows[0][0] != bf.HEADER_KEY:
        raise errors.DataLossError(f"Checkpoint index {path} has no header entry")
    try:
        head = tensor_bundle_pb2.BundleHeaderProto.FromString(rows[0][1])
        entries = {k: Entry.FromString(v) for k, v in rows[1:]}
    except DecodeError as exc:
        raise errors.DataLossError(f"Checkpoint index {path} has a malformed entry: {exc}") from None
    if head.version.producer < 0 or head.version.min_consumer > bf.FORMAT_VERSION:
        raise errors.DataLossError(
            f"Checkpoint {prefix} needs bundle format version {head.version.min_consumer}; "
            f"tensorgrid reads version {bf.FORMAT_VERSION}")
    if head.num_shards < 1:
        raise errors.DataLossError(f"Checkpoint {prefix} has {head.num_shards} data files")
    for key, entry in entries.items():
        if not entry.slices and not 0 <= entry.shard_id < head.num_shards:
            raise errors.DataLossError(
                f"Tensor {key!r} of checkpoint {prefix} is in data file {entry.shard_id}, but "
                f"there are {head.num_shards}")
        if any(d.size < 0 for d in entry.shape.dim) or entry.size < 0 or entry.offset < 0:
            raise errors.DataLossError(f"Tensor {key!r} of checkpoint {prefix} has a bad entry")
    return head, entries
