"""TFRecord files: the container of ``tf.data.TFRecordDataset`` inputs and of TensorBoard event
files. Each record is

    uint64 length | uint32 masked CRC-32C of the 8 length bytes | data | uint32 masked CRC-32C of data

all little-endian; a file may be compressed as a whole (GZIP or ZLIB). A reader checks both
checksums, so a damaged or truncated file fails loudly, naming the file and the record's offset,
instead of yielding garbage.

Here: the framing (``encode_record``, ``read_records``, ``record_table`` and ``record_at`` for
random access by offset), ``TFRecordWriter`` and ``tf_record_iterator`` (``tf.python_io``'s names),
and ``TFRecordOptions`` / ``TFRecordCompressionType`` for compressed files.
"""

from __future__ import annotations

import gzip
import io
import struct
import zlib
from collections.abc import Iterator
from types import TracebackType
from typing import Any, BinaryIO

from tensorgrid.core import errors
from tensorgrid.core.crc32c import masked_crc32c

__all__ = [
    "TFRecordCompressionType", "TFRecordOptions", "TFRecordWriter", "compression_of",
    "encode_record", "read_file", "read_records", "record_at", "record_table",
    "tf_record_iterator",
]

_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
HEADER_SIZE = _LENGTH.size + _CRC.size
FOOTER_SIZE = _CRC.size


class TFRecordCompressionType:
    """The compressions a TFRecord file may have (``tf.python_io.TFRecordCompressionType``)."""

    NONE = 0
    ZLIB = 1
    GZIP = 2


_COMPRESSION_NAMES = {TFRecordCompressionType.NONE: "", TFRecordCompressionType.ZLIB: "ZLIB",
                      TFRecordCompressionType.GZIP: "GZIP"}


class TFRecordOptions:
    """How a TFRecord file is compressed (``tf.io.TFRecordOptions``): ``compression_type`` is
    ``""``/``None``, ``"ZLIB"``, ``"GZIP"`` or a ``TFRecordCompressionType`` value."""

    def __init__(self, compression_type: Any = None, compression_level: int | None = None) -> None:
        self.compression_type = compression_of(compression_type)
        self.compression_level = compression_level

    @staticmethod
    def get_compression_type_string(options: Any) -> str:
        """The compression of ``options`` (TFRecordOptions, a name or None) as TF names it."""
        return compression_of(options)


def compression_of(value: Any) -> str:
    """The compression named by ``value`` as ``""``, ``"ZLIB"`` or ``"GZIP"``.

    Raises:
        ValueError: a value that names no compression.
    """
    if value is None:
        return ""
    if isinstance(value, TFRecordOptions):
        return value.compression_type
    if isinstance(value, int) and value in _COMPRESSION_NAMES:
        return _COMPRESSION_NAMES[value]
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str) and value.upper() in ("", "ZLIB", "GZIP"):
        return value.upper()
    raise ValueError(f"compression_type must be '', 'ZLIB' or 'GZIP', got {value!r}")


def encode_record(data: bytes) -> bytes:
    """``data`` framed as one TFRecord."""
    length = _LENGTH.pack(len(data))
    return length + _CRC.pack(masked_crc32c(length)) + data + _CRC.pack(masked_crc32c(data))


def _length_of(header: bytes | memoryview, offset: int, name: str) -> int:
    """The data length a record header announces, its checksum checked."""
    length_bytes = bytes(header[: _LENGTH.size])
    (length,) = _LENGTH.unpack(length_bytes)
    (length_crc,) = _CRC.unpack(header[_LENGTH.size : HEADER_SIZE])
    if masked_crc32c(length_bytes) != length_crc:
        raise errors.DataLossError(
            f"Corrupted record at offset {offset} of {name}: the length checksum does not match"
        )
    return int(length)


def _checked(data: bytes, crc_bytes: bytes | memoryview, offset: int, name: str) -> bytes:
    (data_crc,) = _CRC.unpack(crc_bytes)
    if masked_crc32c(data) != data_crc:
        raise errors.DataLossError(
            f"Corrupted record at offset {offset} of {name}: the data checksum does not match"
        )
    return data


def read_records(stream: BinaryIO, name: str = "<stream>") -> Iterator[bytes]:
    """The records of a TFRecord stream, in order.

    A stream that ends exactly at a record boundary ends the iteration.

    Raises:
        DataLossError: a length or data checksum does not match, or the stream ends inside a
            record (names the stream and the offset).
    """
    offset = 0
    while True:
        header = stream.read(HEADER_SIZE)
        if len(header) < HEADER_SIZE:
            if header:
                raise errors.DataLossError(f"Truncated record header at offset {offset} of {name}")
            return
        length = _length_of(header, offset, name)
        body = stream.read(length + FOOTER_SIZE)
        if len(body) < length + FOOTER_SIZE:
            raise errors.DataLossError(
                f"Truncated record at offset {offset} of {name}: {length} bytes announced, "
                f"{max(len(body) - FOOTER_SIZE, 0)} present"
            )
        yield _checked(body[:length], body[length:], offset, name)
        offset += len(header) + len(body)


def record_table(buffer: bytes | memoryview, name: str) -> tuple[list[int], list[int]]:
    """The start offset and data length of every record in ``buffer`` (a whole uncompressed
    TFRecord file), checking each length's checksum; data checksums are checked by
    ``record_at`` when a record is read.

    Raises:
        DataLossError: a damaged length, or a record the buffer ends inside (names ``name`` and
            the record's offset).
    """
    starts: list[int] = []
    lengths: list[int] = []
    # released on the way out, errors included, so a memory map under it can be closed
    with memoryview(buffer) as view:
        offset, end = 0, len(view)
        while offset < end:
            if end - offset < HEADER_SIZE:
                raise errors.DataLossError(
                    f"Truncated record header at offset {offset} of {name}")
            length = _length_of(bytes(view[offset : offset + HEADER_SIZE]), offset, name)
            if end - offset - HEADER_SIZE - FOOTER_SIZE < length:
                raise errors.DataLossError(
                    f"Truncated record at offset {offset} of {name}: {length} bytes announced, "
                    f"{max(end - offset - HEADER_SIZE - FOOTER_SIZE, 0)} present"
                )
            starts.append(offset)
            lengths.append(length)
            offset += HEADER_SIZE + length + FOOTER_SIZE
    return starts, lengths


def record_at(buffer: bytes | memoryview, start: int, length: int, name: str,
              base: int = 0) -> bytes:
    """The data of the record at ``start`` of ``buffer`` (an offset ``record_table`` gave), its
    checksum checked; ``buffer`` is the file from offset ``base`` on (errors name the offset in
    the file).

    Raises:
        DataLossError: the data checksum does not match (names ``name`` and the offset).
    """
    view = memoryview(buffer)
    begin = start + HEADER_SIZE
    data = bytes(view[begin : begin + length])
    return _checked(data, view[begin + length : begin + length + FOOTER_SIZE], base + start,
                    name)


def read_file(path: str, compression: str = "") -> bytes:
    """The uncompressed content of the file at ``path``.

    Raises:
        DataLossError: the file is not valid GZIP/ZLIB data (names the file).
        OSError: the file cannot be opened.
    """
    with open(path, "rb") as f:
        raw = f.read()
    try:
        if compression == "GZIP":
            return gzip.decompress(raw)
        if compression == "ZLIB":
            return zlib.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise errors.DataLossError(f"{path} is not valid {compression} data: {e}") from e
    return raw


def tf_record_iterator(path: str, options: Any = None) -> Iterator[bytes]:
    """The records of the TFRecord file at ``path`` (``tf.python_io.tf_record_iterator``);
    ``options``: a ``TFRecordOptions`` or compression name for a compressed file.

    Raises:
        DataLossError: a checksum does not match or the file ends inside a record.
        OSError: the file cannot be opened.
    """
    compression = compression_of(options)
    if compression:
        yield from read_records(io.BytesIO(read_file(path, compression)), path)
        return
    with open(path, "rb") as f:
        yield from read_records(f, path)


class TFRecordWriter:
    """Writes records to a TFRecord file (``tf.python_io.TFRecordWriter``), compressed as
    ``options`` says (a ``TFRecordOptions``, ``"GZIP"``, ``"ZLIB"`` or None).

        with tf.python_io.TFRecordWriter("train.tfrecord") as writer:
            writer.write(example.SerializeToString())

    Raises (constructor):
        OSError: the file cannot be created.
        ValueError: an unknown compression.
    """

    def __init__(self, path: str, options: Any = None) -> None:
        self._path = path
        self._compression = compression_of(options)
        level = options.compression_level if isinstance(options, TFRecordOptions) else None
        self._file: BinaryIO | None = open(path, "wb")  # noqa: SIM115 - closed by close()
        self._zlib: Any = None
        if self._compression == "GZIP":
            # a gzip stream over the file: what TF's GZIP option writes and gunzip reads
            self._zlib = zlib.compressobj(9 if level is None else level, zlib.DEFLATED, 31)
        elif self._compression == "ZLIB":
            self._zlib = zlib.compressobj(6 if level is None else level)

    def _put(self, data: bytes) -> None:
        if self._file is None:
            raise ValueError(f"TFRecordWriter for {self._path} is closed")
        self._file.write(self._zlib.compress(data) if self._zlib is not None else data)

    def write(self, record: bytes | str) -> None:
        """Append one record (bytes; a str is written as UTF-8).

        Raises:
            ValueError: the writer is closed.
        """
        self._put(encode_record(record.encode() if isinstance(record, str) else bytes(record)))

    def flush(self) -> None:
        """Push what was written to the file (a compressed stream is flushed to a point a
        reader can decompress up to)."""
        if self._file is None:
            return
        if self._zlib is not None:
            self._file.write(self._zlib.flush(zlib.Z_SYNC_FLUSH))
        self._file.flush()

    def close(self) -> None:
        """Finish the file (idempotent)."""
        if self._file is None:
            return
        if self._zlib is not None:
            self._file.write(self._zlib.flush())
        self._file.close()
        self._file = None

    def __enter__(self) -> TFRecordWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report to at interpreter exit
            pass
