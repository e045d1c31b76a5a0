"""CRC-32C (Castagnoli) and the masked form that TFRecord files, TensorBoard event files and
TensorFlow's checkpoint tables store.

A CRC stored next to the data it covers is masked (rotated and offset) so that the CRC of a string
that itself contains CRCs stays well distributed; readers unmask before comparing.
"""

from __future__ import annotations

import google_crc32c

_MASK_DELTA = 0xA282EAD8


def crc32c(data: bytes | bytearray | memoryview, initial: int = 0) -> int:
    """The CRC-32C of ``data``, continuing from ``initial`` (the CRC of what came before)."""
    return google_crc32c.extend(initial, bytes(data)) if initial else google_crc32c.value(bytes(data))


def mask(crc: int) -> int:
    """The masked form of ``crc``: rotated right by 15 bits, plus a constant, modulo 2**32."""
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def unmask(masked: int) -> int:
    """The CRC that ``mask`` turned into ``masked``."""
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """``mask(crc32c(data))``: the checksum as TFRecord and table files store it."""
    return mask(crc32c(data))
