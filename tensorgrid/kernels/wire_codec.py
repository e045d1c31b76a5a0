"""Kernels of ``_WireEncode`` and ``_WireDecode``: lossless blosc2 frames of tensors.

A frame (little-endian) is a header, the tensor's dims, the compressed size of each chunk, then the
chunks::

    b"TGW1" | dtype enum: u16 | rank: u8 | pad: u8 | chunk count: u32 | dims: i64 * rank
    | chunk sizes: u64 * count | blosc2 chunks

A frame of ``PAD_FROM`` bytes or more is padded with zeros to a multiple of ``FRAME_ALIGN``: the
compressed size of a tensor changes a little every step, and the consumer's receive buffers
(``transport/recvbuf.py``) are reused only for a tensor of the same size; frames of a new size
every step made every pull fault in and zero fresh pages (~5 ms a 3 MB pull on a VM) and filled
the pool with buffers that never matched. Padded, a layer's frames take a few sizes, each reused.

A chunk holds up to ``CHUNK_BYTES`` of the tensor's bytes (blosc2 takes at most ~2 GiB at once);
each carries its own codec and filter in its blosc2 header, so the decoder needs only the frame.
A frame has no checksum of its own: the transport's (TCP's, and TLS's where used) covers it; the
decoder checks every size it reads, so a cut or mangled header fails with what is wrong.
The shuffle filter's element size is the dtype's, so it regroups the sign, exponent and mantissa
bytes (or bits) of floats, which is what makes trained weights compress at all.

blosc2 runs one thread per call (``nthreads=1``): the kernels' threads and the task's event loop
must not be starved by a codec's own pool. The kernels run on the task's event loop like other
compute kernels. blosc2 releases the GIL while it works, so they could run on a thread of their
own; measured on the cross-host trainer of ``bench/xhost.py`` (a 3 MB float32 or 1.6 MB bfloat16
layer: 0.5-3 ms a call) on a loaded 2-core machine, that made steps slower, not faster: the
consumer's step waits on the decode anyway, and each hop to a thread waited for a core.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from tensorgrid.core import dtypes, errors
from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel

MAGIC = b"TGW1"
_HEAD = struct.Struct("<4sHBxI")
# a multiple of every element size, under blosc2's limit of one call
CHUNK_BYTES = 1 << 30
# frames of at least PAD_FROM bytes (the receive buffers' smallest pooled size) are padded to a
# multiple of FRAME_ALIGN (costing 8 KiB on the wire on average)
PAD_FROM = 1 << 20
FRAME_ALIGN = 16 << 10
# blosc2's names of the codecs and filters
_CODECS = {"lz4": "LZ4", "lz4hc": "LZ4HC", "zstd": "ZSTD", "zlib": "ZLIB"}
_SHUFFLES = {"shuffle": "SHUFFLE", "bitshuffle": "BITSHUFFLE", "none": "NOFILTER"}


@functools.cache
def _blosc2() -> Any:
    """The blosc2 module, imported on the first encode or decode: importing it takes ~0.35 s and
    loads httpx (for its remote arrays), which the kernels' layer must not import; only a process
    that runs the codec pays for it."""
    import blosc2  # lazy: a heavy optional dependency that loads a network library

    return blosc2


def encode(x: np.ndarray, codec: str = "lz4", level: int = 1, shuffle: str = "bitshuffle",
           blocksize: int = 0) -> np.ndarray:
    """The frame of ``x`` (any layout) as a uint8 vector.

    Args:
        codec, shuffle: names from ``ops.wire_codec.CODECS`` / ``SHUFFLES``.
        level: the codec's level (1 fast .. 9 small; 0 stores the bytes as they are).
        blocksize: blosc2's block size in bytes (0: its choice from the element size and level).
    """
    a = x if x.flags.c_contiguous else x.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)
    dt = dtypes.as_dtype(a.dtype)
    flat = a.reshape(-1).view(np.uint8)
    blosc2 = _blosc2()
    cparams = {"codec": blosc2.Codec[_CODECS[codec]], "clevel": int(level),
               "typesize": a.itemsize, "filters": [blosc2.Filter[_SHUFFLES[shuffle]]],
               "filters_meta": [0], "nthreads": 1, "blocksize": int(blocksize)}
    chunks = [blosc2.compress2(flat[i:i + CHUNK_BYTES], **cparams)
              for i in range(0, flat.size, CHUNK_BYTES)]
    head = _HEAD.pack(MAGIC, dt.enum, a.ndim, len(chunks))
    dims = np.asarray(a.shape, "<i8").tobytes()
    sizes = np.asarray([len(c) for c in chunks], "<u8").tobytes()
    used = len(head) + len(dims) + len(sizes) + sum(len(c) for c in chunks)
    out = np.empty(padded_size(used), np.uint8)
    pos = 0
    for part in (head, dims, sizes, *chunks):
        out[pos:pos + len(part)] = np.frombuffer(part, np.uint8)
        pos += len(part)
    out[pos:] = 0
    return out


def padded_size(used: int) -> int:
    """The size of a frame whose header and chunks take ``used`` bytes."""
    return used if used < PAD_FROM else -(-used // FRAME_ALIGN) * FRAME_ALIGN


def decode(frame: np.ndarray) -> np.ndarray:
    """The tensor a frame of ``encode`` holds.

    Raises:
        ValueError: the bytes are not a whole, valid frame (says what is wrong).
    """
    buf = np.ascontiguousarray(frame).reshape(-1).view(np.uint8)
    if buf.size < _HEAD.size:
        raise ValueError(f"{buf.size} bytes is shorter than a wire frame's header")
    magic, enum, rank, count = _HEAD.unpack(buf[:_HEAD.size].tobytes())
    if magic != MAGIC:
        raise ValueError(f"bytes starting {bytes(magic)!r} are not a wire frame")
    try:
        dt = dtypes.as_dtype(enum)
    except TypeError:
        raise ValueError(f"the frame names an unknown dtype enum {enum}") from None
    pos = _HEAD.size
    if buf.size < pos + 8 * (rank + count):
        raise ValueError(f"a wire frame of {buf.size} bytes is cut short in its header")
    shape = tuple(int(d) for d in buf[pos:pos + 8 * rank].view("<i8"))
    pos += 8 * rank
    sizes = [int(s) for s in buf[pos:pos + 8 * count].view("<u8")]
    pos += 8 * count
    if any(d < 0 for d in shape):
        raise ValueError(f"the frame holds a negative shape {list(shape)}")
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dt.np).itemsize
    if padded_size(pos + sum(sizes)) != buf.size:
        raise ValueError(f"a wire frame of {buf.size} bytes whose chunks need {pos + sum(sizes)}"
                         f" (padded: {padded_size(pos + sum(sizes))})")
    if -(-nbytes // CHUNK_BYTES) != count:
        raise ValueError(f"{count} chunks for a {dt.name} tensor of shape {list(shape)}")
    blosc2 = _blosc2()
    out = np.empty(nbytes, np.uint8)
    done = 0
    for size in sizes:
        chunk = buf[pos:pos + size]
        pos += size
        try:
            src_nbytes, _, _ = blosc2.get_cbuffer_sizes(chunk)
        except (ValueError, RuntimeError) as e:  # how blosc2 reports a bad chunk
            raise ValueError(f"a chunk of the frame is not a blosc2 chunk ({e})") from None
        if src_nbytes != min(CHUNK_BYTES, nbytes - done):
            raise ValueError(f"a chunk of {src_nbytes} bytes where the shape needs "
                             f"{min(CHUNK_BYTES, nbytes - done)}")
        try:
            blosc2.decompress2(chunk, dst=out[done:done + src_nbytes])
        except (ValueError, RuntimeError) as e:
            raise ValueError(f"a chunk of the frame does not decompress ({e})") from None
        done += src_nbytes
    return out.view(dt.np).reshape(shape)


@kernel("_WireEncode")
def _wire_encode(ctx: KernelContext) -> Callable[[Any], Any]:
    codec, level = ctx.attr("codec"), int(ctx.attr("level"))
    shuffle, blocksize = ctx.attr("shuffle"), int(ctx.attr("blocksize"))

    def run(x: Any) -> Any:
        return encode(np.asarray(x), codec, level, shuffle, blocksize)

    return run


@kernel("_WireDecode")
def _wire_decode(ctx: KernelContext) -> Callable[[Any], Any]:
    want = dtypes.as_dtype(ctx.attr("T"))

    def run(frame: Any) -> Any:
        try:
            x = decode(np.asarray(frame))
        except ValueError as e:
            raise ctx.error(errors.DataLossError, f"Received a bad wire frame: {e}") from None
        if x.dtype != want.np:
            raise ctx.error(errors.InvalidArgumentError,
                            f"The wire frame holds {dtypes.as_dtype(x.dtype).name}, the node "
                            f"expects {want.name}")
        return x

    return run
