"""Tensors on the wire: TensorProtos for call arguments, and RecvTensor's chunked stream.

RecvTensor answers each requested key with one of: a dead tensor's flag (``is_dead``), the whole
tensor inline (small tensors and strings), the name of a shared-memory segment (same host), or a raw-byte stream of ``CHUNK_BYTES``
pieces (a header chunk with dtype and shape, then data at increasing offsets). On the framed data
plane the pieces' bytes travel beside their chunks (``RawChunk``, views of the producer's array)
and are received in place (``Assembler.target``); over gRPC they ride in the chunks' ``data``.
A header may declare up to ``MAX_TENSOR_BYTES``; more is refused before anything is allocated.
An answer to a delta key (``transport/delta.py``) carries its version (and, for a delta frame, the
``delta`` flag) on its first chunk; the assembler hands such a tensor on as a ``Versioned``. A
delta answer streamed block by block (``delta_block``) comes as one chunk per block frame, the
last flagged ``delta_last``, and is handed on as a ``Versioned`` list of the frames.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorgrid.core import errors, serde
from tensorgrid.core.ir import DEAD
from tensorgrid.core.shapes import TensorShape
from tensorgrid.pb import worker_pb2
from tensorgrid.transport import shm
from tensorgrid.transport.recvbuf import ReceiveBuffers

INLINE_BYTES = 64 * 1024
CHUNK_BYTES = 4 * 1024 * 1024
# results bigger than this do not ride inside a RunGraph answer: they are pulled over RecvTensor
BIG_RESULT_BYTES = 1024 * 1024
# the largest tensor a stream header may declare (checked before its buffer is allocated)
MAX_TENSOR_BYTES = 64 * 1024**3
# a delta answer's block frames may hold at most twice its tensor's bytes and this much more
# (headers; a producer sends a block raw rather than bigger)
BLOCK_SLACK = 1 << 16
EMPTY = worker_pb2.RecvTensorChunk().inline  # an empty TensorProto (a placeholder)


def is_big(value: Any) -> bool:
    """A numeric array large enough to travel over the data plane instead of inline."""
    dtype = getattr(value, "dtype", None)
    return dtype is not None and dtype.kind != "O" and value.nbytes > BIG_RESULT_BYTES


def to_proto(value: Any) -> Any:
    return serde.tensor_to_proto(_host(value))


def from_proto(pb: Any) -> np.ndarray:
    return serde.tensor_from_proto(pb)


def _host(value: Any) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    get = getattr(value, "get", None)
    if get is not None and type(value).__module__.startswith("cupy"):
        return get()  # type: ignore[no-any-return]
    return np.asarray(value)


@dataclass(frozen=True)
class Versioned:
    """A tensor received on a delta key: ``value`` (a delta frame, or a list of block frames,
    when ``delta``) and the version the consumer caches it under."""

    version: int
    value: Any
    delta: bool


@dataclass(frozen=True)
class RawChunk:
    """A chunk whose bytes travel beside it: ``meta`` says where they go, ``payload`` is a view of
    the producer's array (no copy is made here)."""

    meta: Any  # RecvTensorChunk without data
    payload: memoryview


def encode(index: int, value: Any, use_shm: bool,
           pool: shm.SegmentPool | None = None, raw: bool = False, version: int = 0,
           delta: bool = False) -> Iterator[Any]:
    """The chunks that carry one tensor to the consumer (through ``pool``'s segments when the
    consumer is on this host and can give leases back, else a one-off segment, else chunks of
    raw bytes: ``RawChunk``s that view the array when ``raw``, else copies inside the chunks).
    ``version`` (nonzero) and ``delta`` go on the first chunk (an answer to a delta key; never
    through shared memory)."""
    if value is DEAD:  # a dead tensor has no value: a flag says what it is
        yield worker_pb2.RecvTensorChunk(index=index, is_dead=True)
        return
    arr = _host(value)
    if arr.dtype == object or arr.nbytes <= INLINE_BYTES:
        yield worker_pb2.RecvTensorChunk(index=index, inline=serde.tensor_to_proto(arr),
                                         version=version, delta=delta)
        return
    dtype: Any = serde.dtype_to_enum(arr.dtype)
    shape = serde.shape_to_proto(TensorShape(arr.shape))
    if use_shm and not version:
        lent = pool.put(arr) if pool is not None else None
        if lent is not None:
            yield worker_pb2.RecvTensorChunk(index=index, dtype=dtype, shape=shape,
                                             shm_name=lent[0], shm_lease=lent[1],
                                             offset=arr.nbytes)
        else:
            yield worker_pb2.RecvTensorChunk(index=index, dtype=dtype, shape=shape,
                                             shm_name=shm.write(arr), offset=arr.nbytes)
        return
    flat = memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))  # type: ignore[arg-type]
    total = len(flat)
    for offset in range(0, total, CHUNK_BYTES):
        if raw:
            meta = worker_pb2.RecvTensorChunk(index=index, offset=offset)
            if offset == 0:
                meta.dtype = dtype
                meta.shape.CopyFrom(shape)
                meta.version = version
                meta.delta = delta
            yield RawChunk(meta, flat[offset:offset + CHUNK_BYTES])
            continue
        piece = bytes(flat[offset:offset + CHUNK_BYTES])
        if offset == 0:
            yield worker_pb2.RecvTensorChunk(index=index, dtype=dtype, shape=shape, data=piece,
                                             offset=0, version=version, delta=delta)
        else:
            yield worker_pb2.RecvTensorChunk(index=index, data=piece, offset=offset)


class _Partial:
    """A tensor being received: its buffer, and how far it is reserved (raw pieces whose bytes
    are on their way into it) and filled."""

    __slots__ = ("buf", "delta", "dt", "filled", "reserved", "shape", "version")

    def __init__(self, buf: np.ndarray, dt: np.dtype[Any], shape: tuple[int, ...],
                 version: int = 0, delta: bool = False) -> None:
        self.buf = buf
        self.dt = dt
        self.shape = shape
        self.filled = 0
        self.reserved = 0
        self.version = version
        self.delta = delta


class _Blocks:
    """A delta answer being received block by block: its frames so far."""

    __slots__ = ("frames", "landing", "nbytes", "size", "version")

    def __init__(self, version: int, nbytes: int) -> None:
        # where raw blocks are being received, in order (the next may be given out before
        # the one before it is reported landed)
        self.landing: deque[np.ndarray] = deque()
        self.version = version
        self.nbytes = nbytes  # the decoded tensor's size
        self.size = 0
        self.frames: list[np.ndarray] = []


class Assembler:
    """Rebuilds the tensors of a RecvTensor stream; ``add`` (and ``landed``) return
    (index, value) when one is complete, else None.

    Args:
        mappings, release: for segments lent by a same-host producer.
        max_bytes: the largest tensor a header may declare; a bigger one is refused before any
            buffer is allocated.
        peer: the producer's name, for errors.
        buffers: where the memory of streamed tensors comes from (None: fresh allocations).
    """

    def __init__(self, mappings: shm.MappingCache | None = None,
                 release: Callable[[str, int], None] | None = None,
                 max_bytes: int = MAX_TENSOR_BYTES, peer: str = "",
                 buffers: ReceiveBuffers | None = None) -> None:
        self._partial: dict[int, _Partial] = {}
        self._blocks: dict[int, _Blocks] = {}
        self._buffers = buffers
        self._mappings = mappings
        self._release = release
        self._max_bytes = max_bytes
        self._peer = peer

    def _from(self) -> str:
        return f" from task {self._peer}" if self._peer else ""

    def _start(self, chunk: Any) -> _Partial:
        """The partial tensor a chunk belongs to, made (after checking its header) if new."""
        i = chunk.index
        entry = self._partial.get(i)
        if entry is not None:
            return entry
        if chunk.offset != 0:
            raise errors.DataLossError(f"RecvTensor stream for key {i}{self._from()} starts at "
                                       f"offset {chunk.offset}")
        dt, shape, nbytes = self._header(chunk)
        buf = self._buffers.take(nbytes) if self._buffers is not None else \
            np.empty(nbytes, dtype=np.uint8)
        entry = _Partial(buf, dt, shape, chunk.version, chunk.delta)
        self._partial[i] = entry
        return entry

    def _header(self, chunk: Any) -> tuple[np.dtype[Any], tuple[int, ...], int]:
        """The dtype, shape and size a stream's first chunk declares (checked)."""
        i = chunk.index
        try:
            dt = serde.dtype_from_enum(chunk.dtype).np
            dims = serde.shape_from_proto(chunk.shape).as_list()
        except Exception as exc:  # noqa: BLE001 - any malformed header is the peer's fault
            raise errors.DataLossError(f"RecvTensor stream for key {i}{self._from()} has a bad "
                                       f"header: {exc}") from None
        shape = tuple(d for d in dims if d is not None and d >= 0)
        if len(shape) != len(dims):
            raise errors.DataLossError(f"RecvTensor stream for key {i}{self._from()} declares "
                                       f"shape {dims}, which is not fully defined")
        nbytes = dt.itemsize
        for d in shape:  # Python ints: a hostile shape cannot overflow the check
            nbytes *= d
        if nbytes > self._max_bytes:
            raise errors.ResourceExhaustedError(
                f"RecvTensor stream for key {i}{self._from()} declares a tensor of {nbytes} "
                f"bytes, over the limit of {self._max_bytes}")
        return dt, shape, nbytes

    def _blocks_of(self, chunk: Any, nbytes: int) -> _Blocks:
        """The delta answer a block chunk of ``nbytes`` belongs to (made after checking the
        header if new), with the block counted against the answer's bound."""
        i = chunk.index
        entry = self._blocks.get(i)
        if entry is None:
            entry = self._blocks[i] = _Blocks(chunk.version, self._header(chunk)[2])
        entry.size += nbytes
        if chunk.version != entry.version or not chunk.delta:
            raise errors.DataLossError(f"RecvTensor stream for key {i}{self._from()} mixes "
                                       "blocks of different answers")
        if entry.size > 2 * entry.nbytes + BLOCK_SLACK:
            raise errors.DataLossError(f"RecvTensor stream for key {i}{self._from()} sends "
                                       f"{entry.size} bytes of blocks for a tensor of "
                                       f"{entry.nbytes}")
        return entry

    def _block(self, chunk: Any, entry: _Blocks, frame: np.ndarray) -> tuple[int, Any] | None:
        """A block frame of a delta answer streamed block by block: kept until the last, which
        completes the answer as a ``Versioned`` list of block frames (decoded by the consumer
        against the version it named)."""
        entry.frames.append(frame)
        if not chunk.delta_last:
            return None
        del self._blocks[chunk.index]
        return chunk.index, Versioned(entry.version, entry.frames, True)

    def add(self, chunk: Any) -> tuple[int, Any] | None:
        i = chunk.index
        if chunk.is_dead:
            return i, DEAD
        if chunk.delta_block:
            frame = np.frombuffer(chunk.data, dtype=np.uint8)
            return self._block(chunk, self._blocks_of(chunk, frame.size), frame)
        if chunk.HasField("inline"):
            value = serde.tensor_from_proto(chunk.inline)
            return i, Versioned(chunk.version, value, chunk.delta) if chunk.version else value
        if chunk.shm_name:
            dt = serde.dtype_from_enum(chunk.dtype).np
            shape = tuple(int(d or 0) for d in serde.shape_from_proto(chunk.shape).as_list())
            if chunk.shm_lease and self._mappings is not None and self._release is not None:
                give_back = functools.partial(self._release, chunk.shm_name, chunk.shm_lease)
                return i, self._mappings.view(chunk.shm_name, dt, shape, give_back)
            if chunk.shm_lease:
                raise errors.InternalError("A pooled segment was lent to a consumer that cannot "
                                           "give it back")
            return i, shm.read(chunk.shm_name, dt, shape)
        entry = self._start(chunk)
        data = chunk.data
        if chunk.offset != entry.filled or entry.filled + len(data) > len(entry.buf):
            raise errors.DataLossError(
                f"RecvTensor stream for key {i}{self._from()} is out of order (offset "
                f"{chunk.offset}, expected {entry.filled})")
        entry.buf[entry.filled:entry.filled + len(data)] = np.frombuffer(data, dtype=np.uint8)
        entry.filled += len(data)
        entry.reserved = entry.filled
        return self._complete(i, entry)

    def target(self, chunk: Any, nbytes: int) -> memoryview:
        """The part of the tensor's buffer a raw piece of ``nbytes`` at ``chunk.offset`` is
        received into; pieces must come in order and stay inside the declared size.

        Raises:
            DataLossError, ResourceExhaustedError: a bad header or piece; nothing is allocated
                for a declared size over the limit.
        """
        if chunk.delta_block:  # a block frame of a streamed delta answer: a buffer of its own
            landing = np.empty(nbytes, np.uint8)
            self._blocks_of(chunk, nbytes).landing.append(landing)
            return memoryview(landing)  # type: ignore[arg-type]
        entry = self._start(chunk)
        if chunk.offset != entry.reserved or entry.reserved + nbytes > len(entry.buf):
            raise errors.DataLossError(
                f"RecvTensor stream for key {chunk.index}{self._from()} is out of order (raw "
                f"piece of {nbytes} bytes at offset {chunk.offset}, expected offset "
                f"{entry.reserved} of {len(entry.buf)} bytes)")
        entry.reserved += nbytes
        return memoryview(entry.buf)[chunk.offset:chunk.offset + nbytes]  # type: ignore[arg-type]

    def landed(self, chunk: Any, nbytes: int) -> tuple[int, Any] | None:
        """A raw piece given by ``target`` has been received."""
        if chunk.delta_block:
            blocks = self._blocks.get(chunk.index)
            if blocks is None or not blocks.landing or blocks.landing[0].size != nbytes:
                raise errors.DataLossError(f"RecvTensor stream for key {chunk.index}"
                                           f"{self._from()}: raw block for no delta answer")
            return self._block(chunk, blocks, blocks.landing.popleft())
        entry = self._partial.get(chunk.index)
        if entry is None:
            raise errors.DataLossError(f"RecvTensor stream for key {chunk.index}{self._from()}: "
                                       "raw piece for no tensor")
        entry.filled += nbytes
        return self._complete(chunk.index, entry)

    def _complete(self, i: int, entry: _Partial) -> tuple[int, Any] | None:
        if entry.filled < len(entry.buf):
            return None
        self._partial.pop(i, None)
        value = entry.buf.view(entry.dt).reshape(entry.shape)
        return i, Versioned(entry.version, value, entry.delta) if entry.version else value
