"""Kernels of the ``tf.data`` file sources (see ``ops/dataset_files.py``): a table of records
over the files, built on first use and kept in a device resource, and reads by record number.

The table holds each record's start offset and length, not its bytes: an uncompressed file is
read again, at the offsets asked for, each time records are read. A compressed file cannot be
read at an offset, so its uncompressed content is kept in memory with the table. Each file's
table is kept; a file is scanned again when its size or modification time changed (checked
each time the record count is taken, which an iterator's initializer does).
"""

from __future__ import annotations

import contextlib
import glob
import mmap
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import tensorgrid.ops.dataset_files  # noqa: F401 - registers the op definitions
from tensorgrid.core import errors, tfrecord
from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel


@dataclass(frozen=True)
class Format:
    """What a record is (the kernel's attrs)."""

    kind: str  # tfrecord | text_line | fixed_length
    compression: str = ""
    record_bytes: int = 0
    header_bytes: int = 0
    footer_bytes: int = 0
    cycle_length: int = 0  # > 1: the records in interleave's order
    block_length: int = 1


@dataclass
class FileTable:
    """The records of one file: start offsets and lengths, and the content when compressed."""

    path: str
    stamp: tuple[int, int]  # (size, mtime_ns) when the table was built
    starts: np.ndarray
    lengths: np.ndarray
    content: bytes | None = None


def _stamp(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def _whole(path: str, fmt: Format) -> tuple[Any, bytes | None]:
    """The file's content to scan (a map of the file when uncompressed) and what to keep."""
    if fmt.compression:
        content = tfrecord.read_file(path, fmt.compression)
        return content, content
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b"", None
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), None


def _text_lines(buffer: Any) -> tuple[np.ndarray, np.ndarray]:
    data = np.frombuffer(buffer, np.uint8)
    newlines = np.flatnonzero(data == ord("\n"))
    starts = np.concatenate([[0], newlines + 1]).astype(np.int64)
    ends = np.concatenate([newlines, [data.size]]).astype(np.int64)
    if starts[-1] == data.size:  # a file ending in a newline has no empty line after it
        starts, ends = starts[:-1], ends[:-1]
    return starts, ends - starts


def _scan(path: str, fmt: Format) -> FileTable:
    stamp = _stamp(path)
    buffer, content = _whole(path, fmt)
    try:
        if fmt.kind == "tfrecord":
            starts_list, lengths_list = tfrecord.record_table(buffer, path)
            starts = np.asarray(starts_list, np.int64)
            lengths = np.asarray(lengths_list, np.int64)
        elif fmt.kind == "text_line":
            starts, lengths = _text_lines(buffer)
        else:
            body = max(len(buffer) - fmt.header_bytes - fmt.footer_bytes, 0)
            if body % fmt.record_bytes:
                raise errors.InvalidArgumentError(
                    f"Excluding the header ({fmt.header_bytes} bytes) and footer "
                    f"({fmt.footer_bytes} bytes), input file \"{path}\" has body length {body} "
                    f"bytes, which is not an exact multiple of the record length "
                    f"({fmt.record_bytes} bytes)")
            count = body // fmt.record_bytes
            starts = fmt.header_bytes + np.arange(count, dtype=np.int64) * fmt.record_bytes
            lengths = np.full(count, fmt.record_bytes, np.int64)
    finally:
        if isinstance(buffer, mmap.mmap):
            buffer.close()
    return FileTable(path, stamp, starts, lengths, content)


class RecordFiles:
    """The record table of one file source on one device (a resource shared by name)."""

    def __init__(self, fmt: Format) -> None:
        self.lock = threading.Lock()
        self.format = fmt
        self.paths: tuple[str, ...] | None = None
        self.files: list[FileTable] = []
        self.ends = np.zeros(0, np.int64)  # cumulative record counts
        self.order: np.ndarray | None = None  # output position -> record number (interleave)
        # every file's table, kept when another set of files is read (a source made per file
        # name, as an interleave's function makes them, goes back and forth between files)
        self.tables: dict[str, FileTable] = {}

    def _table(self, path: str, fresh: bool) -> FileTable:
        found = self.tables.get(path)
        if found is None or (fresh and _stamp(path) != found.stamp):
            found = self.tables[path] = _scan(path, self.format)
        return found

    def _build(self, paths: tuple[str, ...], fresh: bool = True) -> None:
        self.files = [self._table(p, fresh) for p in paths]
        counts = [f.starts.size for f in self.files]
        self.ends = np.cumsum(counts, dtype=np.int64)
        self.order = interleave_order(counts, self.format.cycle_length,
                                      self.format.block_length) \
            if self.format.cycle_length > 1 else None
        self.paths = paths

    def _stale(self) -> bool:
        return any(_stamp(f.path) != f.stamp for f in self.files)

    def count(self, paths: tuple[str, ...]) -> int:
        """The number of records, (re)building the table when the files are new or changed."""
        with self.lock:
            if paths != self.paths or self._stale():
                self._build(paths)
            return int(self.ends[-1]) if self.ends.size else 0

    def read(self, paths: tuple[str, ...], index: np.ndarray) -> np.ndarray:
        """The records at ``index`` (any shape), as an object array of bytes."""
        with self.lock:
            if paths != self.paths:
                self._build(paths, fresh=False)  # counted (and checked) before
            files, ends, order = self.files, self.ends, self.order
        total = int(ends[-1]) if ends.size else 0
        flat = index.reshape(-1)
        if flat.size and (flat.min() < 0 or flat.max() >= total):
            bad = int(flat[(flat < 0) | (flat >= total)][0])
            raise errors.OutOfRangeError(f"record {bad} is out of range: the files hold {total} "
                                         "records")
        if order is not None:
            flat = order[flat]
        which = np.searchsorted(ends, flat, side="right")
        local = flat - (ends[which] - np.asarray([files[w].starts.size for w in which],
                                                 np.int64).reshape(-1))
        out = np.empty(flat.size, object)
        for w in np.unique(which):
            mask = np.flatnonzero(which == w)
            out[mask] = self._read_file(files[int(w)], local[mask])
        return out.reshape(index.shape)

    def _read_file(self, table: FileTable, local: np.ndarray) -> list[bytes]:
        frame = tfrecord.HEADER_SIZE + tfrecord.FOOTER_SIZE if self.format.kind == "tfrecord" \
            else 0
        starts, lengths = table.starts[local], table.lengths[local]
        base, buffer = 0, table.content
        if buffer is None:
            # one read of the span the records lie in (a batch of consecutive records is one
            # span), unless they are scattered over much more of the file than they fill
            base = int(starts.min())
            span = int((starts + lengths).max()) + frame - base
            buffer = _read_span(table.path, base, span) \
                if span <= 2 * int(lengths.sum() + frame * local.size) + (1 << 20) else None
        records = []
        with open(table.path, "rb") if buffer is None else contextlib.nullcontext() as f:
            for start, length in zip(starts.tolist(), lengths.tolist(), strict=True):
                records.append(self._record(table.path, buffer, base, f, start, length, frame))
        return records

    def _record(self, path: str, buffer: Any, base: int, f: Any, start: int, length: int,
                frame: int) -> bytes:
        """The record at ``start``: from ``buffer`` (the file from ``base`` on) or read."""
        size = length + frame
        if buffer is not None:
            chunk: Any = memoryview(buffer)[start - base : start - base + size]
        else:
            f.seek(start)
            chunk = f.read(size)
        if len(chunk) < size:
            raise errors.DataLossError(f"{path} is shorter than when it was read: the record "
                                       f"at offset {start} is cut off")
        if self.format.kind == "tfrecord":
            return tfrecord.record_at(chunk, 0, length, path, base=start)
        if self.format.kind == "text_line":
            # every "\r" is dropped, as TensorFlow's line reader drops them ("\r\n" ends a line
            # as "\n" does)
            return bytes(chunk).replace(b"\r", b"")
        return bytes(chunk)


def _read_span(path: str, start: int, size: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(size)


def interleave_order(counts: list[int], cycle_length: int, block_length: int) -> np.ndarray:
    """The record numbers (files' records numbered one file after the other) in the order
    ``interleave`` gives: ``cycle_length`` slots, each holding an open file; the current slot
    gives up to ``block_length`` records, then the next slot is current; a slot whose file is
    finished is closed (the next slot becomes current) and, while files remain, an empty current
    slot opens the next file (TensorFlow's deterministic order)."""
    firsts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    slots: list[list[int] | None] = [None] * cycle_length  # [file, records taken]
    parts: list[np.ndarray] = []
    current = block_taken = opened = 0
    open_count = 0
    while opened < len(counts) or open_count:
        slot = slots[current]
        if slot is None:
            if opened < len(counts):
                slots[current] = [opened, 0]
                opened += 1
                open_count += 1
                continue
            current, block_taken = (current + 1) % cycle_length, 0
            continue
        f, taken = slot
        take = min(counts[f] - taken, block_length - block_taken)
        if take > 0:
            parts.append(firsts[f] + taken + np.arange(take, dtype=np.int64))
            slot[1] += take
            block_taken += take
            if block_taken < block_length:
                continue  # the file is finished: closed on the next turn
        else:
            slots[current] = None
            open_count -= 1
        current, block_taken = (current + 1) % cycle_length, 0
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _paths(filenames: Any) -> tuple[str, ...]:
    return tuple(p.decode() if isinstance(p, bytes) else str(p)
                 for p in np.asarray(filenames, object).reshape(-1))


def _files(ctx: KernelContext) -> RecordFiles:
    fmt = Format(str(ctx.attr("format")), str(ctx.attr("compression_type")),
                 int(ctx.attr("record_bytes")), int(ctx.attr("header_bytes")),
                 int(ctx.attr("footer_bytes")), int(ctx.attr("cycle_length")),
                 int(ctx.attr("block_length")))
    name = ctx.attr("shared_name") or ctx.name
    found = ctx.resources.lookup_or_create(ctx.attr("container"), name, lambda: RecordFiles(fmt))
    if not isinstance(found, RecordFiles) or found.format != fmt:
        raise ctx.error(errors.InvalidArgumentError,
                        f"Resource '{name}' on {ctx.device} is not a file source of {fmt}")
    return found


def _named(ctx: KernelContext, fn: Callable[[], Any]) -> Any:
    """``fn()``, its errors naming this node; a missing or unreadable file is NotFound."""
    try:
        return fn()
    except errors.OpError as e:
        raise errors.at_node(e, ctx.node.name, ctx.node.op, ctx.device) from None
    except FileNotFoundError as e:
        raise ctx.error(errors.NotFoundError, f"{e.filename}: No such file or directory") from e
    except OSError as e:
        raise ctx.error(errors.UnknownError, f"{e.filename}: {e.strerror}") from e


@kernel("DatasetFileRecordCount", "CPU")
def _record_count(ctx: KernelContext) -> Callable[[Any], Any]:
    files = _files(ctx)
    return lambda filenames: np.int64(_named(ctx, lambda: files.count(_paths(filenames))))


@kernel("DatasetFileRecordRead", "CPU")
def _record_read(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    files = _files(ctx)

    def run(filenames: Any, index: Any) -> Any:
        idx = np.asarray(index, np.int64)
        return _named(ctx, lambda: files.read(_paths(filenames), idx))

    return run


@kernel("MatchingFiles", "CPU")
def _matching_files(ctx: KernelContext) -> Callable[[Any], Any]:
    def run(pattern: Any) -> Any:
        found: list[bytes] = []
        for p in _paths(pattern):
            found.extend(sorted(m.encode() for m in glob.glob(p)))
        out = np.empty(len(found), object)
        out[:] = found
        return out

    return run


@kernel("ReadFile", "CPU")
def _read_file(ctx: KernelContext) -> Callable[[Any], Any]:
    def run(filename: Any) -> Any:
        path = _paths(filename)[0]

        def read() -> bytes:
            with open(path, "rb") as f:
                return f.read()

        return np.array(_named(ctx, read), dtype=object)

    return run


@kernel("WriteFile", "CPU")
def _write_file(ctx: KernelContext) -> Callable[[Any, Any], None]:
    def run(filename: Any, contents: Any) -> None:
        path = _paths(filename)[0]
        data = np.asarray(contents, object).reshape(-1)[0]
        data = data if isinstance(data, bytes) else str(data).encode()

        def write() -> None:
            if os.path.dirname(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)

        _named(ctx, write)

    return run
