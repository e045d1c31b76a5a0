"""Delta frames: the XOR of a tensor's new bits with a base's, in blocks (``transport/delta.py``
says when they are sent and to whom).

A frame is one or more block frames, in order: each covers ``BLOCK_BYTES`` of the tensor (the
last one what is left), its body the block's XOR byte-shuffled (or bitshuffled) and compressed
as one blosc2 chunk on one thread, or the block's new bytes when that would not be smaller. A
block frame's header names the base version, the block's offset and size, and carries a CRC32C
of the rest of the header and the body, so a damaged, missing or misplaced block is caught.
Encoding copies the new value block by block (the producer's record of what it sent) while the
block is in cache; decoding XORs each block into the new array in place.
"""

from __future__ import annotations

import functools
import struct
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import google_crc32c
import numpy as np

from tensorgrid.compiler.wire import DELTA_CODECS
from tensorgrid.core import errors
from tensorgrid.kernels import wire_codec

# magic, crc32c of the block's body, the body's length, flags, the block's bytes in the tensor,
# reserved, the block's offset in the tensor, base version
_HEAD = struct.Struct("<4sIIIIIQQ")
MAGIC = b"TGD3"
_RAW = 1  # flag: the body is the block's new bytes themselves (its delta would not be smaller)
# the tensor is cut into blocks of this many bytes, each XORed, shuffled and compressed on its
# own: the XOR, the producer's copy and the compression of a block stay in cache, and a block
# that does not pack travels raw
BLOCK_BYTES = 512 * 1024
_CODECS = {"lz4": "LZ4", "zstd": "ZSTD"}
# byte shuffle at the element size (measured better than bitshuffle on XOR deltas of Adam
# updates in float32 and bfloat16, see docs/distributed.md)
SHUFFLES = ("shuffle", "bitshuffle")
_scratch = threading.local()


@functools.cache
def _blosc2() -> Any:
    """blosc2, imported on the first delta: ~0.35 s that a task which never sends or receives
    one does not pay."""
    import blosc2  # lazy: a heavy optional dependency (and it loads a network library)

    return blosc2


def _crc(buf: Any) -> int:
    return int(google_crc32c.value(buf))


def _words(buf: np.ndarray) -> np.ndarray:
    """A contiguous uint8 vector as the widest unsigned words its length allows (a view): XOR is
    bitwise, so any width gives the same bytes, and wider words take fewer instructions."""
    for width in (8, 4, 2):
        if buf.size % width == 0:
            return buf.view(f"<u{width}")
    return buf


def _block_scratch(nbytes: int) -> np.ndarray:
    """This thread's scratch buffer for one block's XOR (reused: no allocation per block)."""
    buf = getattr(_scratch, "buf", None)
    if buf is None or buf.size < nbytes:
        buf = _scratch.buf = np.empty(max(nbytes, BLOCK_BYTES), np.uint8)
    return buf[:nbytes]  # type: ignore[no-any-return]


def _flat(a: np.ndarray) -> np.ndarray:
    """A C-contiguous array's bytes as a uint8 vector (a view)."""
    return a.reshape(-1).view(np.uint8)


def delta_blocks(new: np.ndarray, base: np.ndarray, base_version: int, codec: str = "lz4",
                 level: int = 1, *, keep: np.ndarray | None = None,
                 block_bytes: int = BLOCK_BYTES, shuffle: str = "shuffle") -> Iterator[np.ndarray]:
    """The block frames (uint8 vectors, in order) that turn ``base`` into ``new``: one per
    ``block_bytes`` of the tensor, each the XOR of its bits, shuffled at the element size and
    compressed with ``codec`` (one blosc2 chunk, one thread), or the block's new bytes when that
    would not be smaller. Each is made when asked for, so a sender can put one on the wire while
    the next is encoded.

    ``keep`` (C-contiguous, ``new``'s dtype and shape): ``new`` is copied into it block by
    block while each block is in cache, and the frames are made from the copy (the producer's
    record of what it sent; ``new`` may be a variable updated in place meanwhile).

    Raises:
        ValueError: the two differ in dtype or shape, or the codec, the shuffle or the block
            size is not one this supports (raised on the first block).
    """
    if new.dtype != base.dtype or new.shape != base.shape:
        raise ValueError(f"a delta needs equal types and shapes, got {new.dtype}{new.shape} "
                         f"and {base.dtype}{base.shape}")
    if codec not in DELTA_CODECS:
        raise ValueError(f"a delta codec is one of {', '.join(DELTA_CODECS)}, not {codec!r}")
    if shuffle not in SHUFFLES:
        raise ValueError(f"a delta shuffle is one of {', '.join(SHUFFLES)}, not {shuffle!r}")
    if block_bytes <= 0 or block_bytes % 8:
        raise ValueError(f"a delta block is a positive multiple of 8 bytes, not {block_bytes}")
    if keep is not None and (keep.dtype != new.dtype or keep.shape != new.shape
                             or not keep.flags.c_contiguous):
        raise ValueError(f"a delta's copy must be a C-contiguous {new.dtype}{new.shape}")
    blosc2 = _blosc2()
    cparams = {"codec": blosc2.Codec[_CODECS[codec]], "clevel": int(level),
               "typesize": new.itemsize, "nthreads": 1,
               "filters": [blosc2.Filter.SHUFFLE if shuffle == "shuffle"
                           else blosc2.Filter.BITSHUFFLE], "filters_meta": [0]}
    src = _flat(np.ascontiguousarray(new))
    old = _flat(np.ascontiguousarray(base))
    copy = _flat(keep) if keep is not None else None
    for off in range(0, src.size, block_bytes):
        n = min(block_bytes, src.size - off)
        blk = src[off:off + n]
        if copy is not None:
            copy[off:off + n] = blk
            blk = copy[off:off + n]
        x = _block_scratch(n)
        np.bitwise_xor(_words(blk), _words(old[off:off + n]), out=_words(x))
        packed = blosc2.compress2(x, **cparams)
        body, flags = (np.frombuffer(packed, np.uint8), 0) if len(packed) < n else (blk, _RAW)
        out = np.empty(_HEAD.size + body.size, np.uint8)
        out[_HEAD.size:] = body
        # the checksum covers the rest of the header too: a damaged field is caught as damage
        rest = _HEAD.pack(MAGIC, 0, body.size, flags, n, 0, off, base_version)[8:]
        crc = google_crc32c.extend(google_crc32c.value(rest), body)  # type: ignore[arg-type]
        out[:_HEAD.size] = np.frombuffer(
            _HEAD.pack(MAGIC, crc, body.size, flags, n, 0, off, base_version), np.uint8)
        yield out


def encode_delta(new: np.ndarray, base: np.ndarray, base_version: int, codec: str = "lz4",
                 level: int = 1, *, keep: np.ndarray | None = None,
                 block_bytes: int = BLOCK_BYTES, shuffle: str = "shuffle") -> np.ndarray:
    """The delta frame (uint8 vector) that turns ``base`` into ``new``: the block frames of
    ``delta_blocks`` (same arguments) one after the other. Frames of ``wire_codec.PAD_FROM``
    bytes or more are padded like the lossless codec's, so the consumer's receive buffers are
    reused from pull to pull.

    Raises:
        ValueError: as ``delta_blocks``.
    """
    blocks = list(delta_blocks(new, base, base_version, codec, level, keep=keep,
                               block_bytes=block_bytes, shuffle=shuffle))
    used = sum(b.size for b in blocks)
    out = np.empty(wire_codec.padded_size(used), np.uint8)
    pos = 0
    for b in blocks:
        out[pos:pos + b.size] = b
        pos += b.size
    out[pos:] = 0
    return out


def decode_delta(frame: np.ndarray | Sequence[np.ndarray], base: np.ndarray, base_version: int,
                 *, keep: np.ndarray | None = None) -> np.ndarray:
    """The tensor a delta frame (or the block frames of a streamed answer, in order) makes of
    ``base`` (a new array; ``base`` is not changed). Each block is decompressed into the new
    array and XORed there with the base; ``keep`` (a C-contiguous array like ``base``) gets a
    copy of each block while it is in cache.

    Raises:
        DataLossError: the frame is not a whole delta frame, a block names another base
            version, fails its checksum, or the blocks do not tile the base (says which).
    """
    old = _flat(np.ascontiguousarray(base))
    out = np.empty_like(base, order="C")
    dst = _flat(out)
    copy = _flat(keep) if keep is not None else None
    covered = 0
    for piece in [frame] if isinstance(frame, np.ndarray) else frame:
        buf = np.ascontiguousarray(piece).reshape(-1).view(np.uint8)
        pos = 0
        # blocks follow one another; what follows the last block of a frame is its padding
        while pos == 0 or (pos < buf.size and covered < old.size):
            pos, covered = _decode_block(buf, pos, covered, old, dst, copy, base, base_version)
    if covered != old.size:
        raise errors.DataLossError(f"A delta frame covers {covered} of the {old.size} bytes of "
                                   f"its base of {base.dtype}{base.shape} (cut short)")
    return out


def _decode_block(buf: np.ndarray, pos: int, covered: int, old: np.ndarray, dst: np.ndarray,
                  copy: np.ndarray | None, base: np.ndarray, base_version: int) -> tuple[int, int]:
    """Decode the block frame at ``buf[pos:]`` into ``dst`` (the tensor's bytes, of which
    ``covered`` are done); returns where the next block starts and the bytes now covered."""
    if buf.size - pos < _HEAD.size:
        raise errors.DataLossError(f"A delta frame of {buf.size} bytes is shorter than its "
                                   f"header (block at byte {pos})")
    magic, crc, length, flags, n, _, off, version = _HEAD.unpack(
        buf[pos:pos + _HEAD.size].tobytes())
    if magic != MAGIC:
        raise errors.DataLossError(f"Bytes starting {bytes(magic)!r} are not a delta frame")
    end = pos + _HEAD.size + length
    if end > buf.size:
        raise errors.DataLossError(f"A delta frame of {buf.size} bytes is cut short (its "
                                   f"block at byte {pos} takes {length})")
    if _crc(buf[pos + 8:end]) != crc:
        raise errors.DataLossError(f"A delta frame fails its checksum at the block at byte "
                                   f"{pos} (corrupted on the way)")
    if version != base_version:
        raise errors.DataLossError(f"A delta frame against version {version:x} cannot be "
                                   f"applied to version {base_version:x}")
    if off != covered or not 0 < n <= old.size - off or n % base.itemsize \
            or (flags & _RAW and length != n):
        raise errors.DataLossError(f"A delta frame's block of {n} bytes at offset {off} "
                                   f"does not fit its base of {base.dtype}{base.shape}")
    body = buf[pos + _HEAD.size:end]
    part = dst[off:off + n]
    if flags & _RAW:
        part[:] = body
    else:
        blosc2 = _blosc2()
        try:
            nbytes, cbytes, _ = blosc2.get_cbuffer_sizes(body)
        except Exception as exc:  # noqa: BLE001 - whatever blosc2 makes of a bad header
            raise errors.DataLossError(f"A delta frame's block at byte {pos} has a bad "
                                       f"header: {exc}") from None
        if nbytes != n or cbytes != length:
            raise errors.DataLossError(f"A delta frame's block of {nbytes} bytes ({cbytes} "
                                       f"compressed in {length}) does not fit its base of "
                                       f"{base.dtype}{base.shape}")
        try:
            # one thread: waking blosc2's pool costs more than a block takes
            blosc2.decompress2(body, dst=part, nthreads=1)
        except Exception as exc:  # noqa: BLE001
            raise errors.DataLossError(f"A delta frame does not decode: {exc}") from None
        np.bitwise_xor(_words(part), _words(old[off:off + n]), out=_words(part))
    if copy is not None:
        copy[off:off + n] = part
    return end, covered + n
