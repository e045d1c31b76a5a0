"""Tensors on the wire: TensorProtos for call arguments, and RecvTensor's chunked stream.

RecvTensor answers each requested key with one of: the whole tensor inline (small tensors and
strings), the name of a shared-memory segment (same host), or a raw-byte stream of ``CHUNK_BYTES``
pieces (a header chunk with dtype and shape, then data at increasing offsets). No size is capped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tensorgrid.core import errors, serde
from tensorgrid.core.shapes import TensorShape
from tensorgrid.pb import worker_pb2
from tensorgrid.transport import shm

INLINE_BYTES = 64 * 1024
CHUNK_BYTES = 4 * 1024 * 1024
# results bigger than this do not ride inside a RunGraph answer: they are pulled over RecvTensor
BIG_RESULT_BYTES = 1024 * 1024
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


def encode(index: int, value: Any, use_shm: bool,
           pool: shm.SegmentPool | None = None) -> Iterator[Any]:
    """The chunks that carry one tensor to the consumer (through ``pool``'s segments when the
    consumer is on this host and can give leases back, else a one-off segment, else raw chunks)."""
    arr = _host(value)
    if arr.dtype == object or arr.nbytes <= INLINE_BYTES:
        yield worker_pb2.RecvTensorChunk(index=index, inline=serde.tensor_to_proto(arr))
        return
    dtype: Any = serde.dtype_to_enum(arr.dtype)
    shape = serde.shape_to_proto(TensorShape(arr.shape))
    if use_shm:
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
        piece = bytes(flat[offset:offset + CHUNK_BYTES])
        if offset == 0:
            yield worker_pb2.RecvTensorChunk(index=index, dtype=dtype, shape=shape, data=piece,
                                             offset=0)
        else:
            yield worker_pb2.RecvTensorChunk(index=index, data=piece, offset=offset)


class Assembler:
    """Rebuilds the tensors of a RecvTensor stream; ``add`` returns (index, value) when one is
    complete, else None."""

    def __init__(self, mappings: shm.MappingCache | None = None,
                 release: Callable[[str, int], None] | None = None) -> None:
        self._partial: dict[int, tuple[np.ndarray, np.dtype[Any], tuple[int, ...], int]] = {}
        self._mappings = mappings
        self._release = release

    def add(self, chunk: Any) -> tuple[int, Any] | None:
        i = chunk.index
        if chunk.HasField("inline"):
            return i, serde.tensor_from_proto(chunk.inline)
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
        entry = self._partial.get(i)
        if entry is None:
            if chunk.offset != 0:
                raise errors.DataLossError(f"RecvTensor stream for key {i} starts at offset "
                                           f"{chunk.offset}")
            dt = serde.dtype_from_enum(chunk.dtype).np
            shape = tuple(int(d or 0) for d in serde.shape_from_proto(chunk.shape).as_list())
            nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            buf = np.empty(nbytes, dtype=np.uint8)
            entry = (buf, dt, shape, 0)
        buf, dt, shape, filled = entry
        data = chunk.data
        if chunk.offset != filled or filled + len(data) > len(buf):
            raise errors.DataLossError(
                f"RecvTensor stream for key {i} is out of order (offset {chunk.offset}, "
                f"expected {filled})")
        buf[filled:filled + len(data)] = np.frombuffer(data, dtype=np.uint8)
        filled += len(data)
        if filled == len(buf):
            self._partial.pop(i, None)
            return i, buf.view(dt).reshape(shape)
        self._partial[i] = (buf, dt, shape, filled)
        return None
