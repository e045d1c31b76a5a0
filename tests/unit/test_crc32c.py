"""CRC-32C against published check values, and the mask round trip."""

from tensorgrid.core.crc32c import crc32c, mask, masked_crc32c, unmask


def test_check_values() -> None:
    # The standard check value of CRC-32C and the iSCSI test vectors (RFC 3720, B.4).
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E


def test_extend_equals_whole() -> None:
    data = bytes(range(200))
    assert crc32c(data[100:], crc32c(data[:100])) == crc32c(data)


def test_mask_round_trip() -> None:
    for value in (0, 1, 0xE3069283, 0xFFFFFFFF):
        assert unmask(mask(value)) == value
    assert masked_crc32c(b"123456789") == mask(0xE3069283)
    assert mask(0) != 0
