"""The rendezvous key: both sides of a transfer build the same text, and parsing gives it back."""

from __future__ import annotations

import pytest

from tensorgrid.core import errors
from tensorgrid.core.rendezvous_key import ParsedKey, make_key, parse_key

SEND = "/job:worker/replica:0/task:0/device:CPU:0"
RECV = "/job:ps/replica:0/task:1/device:CPU:0"


def test_make_and_parse_round_trip() -> None:
    key = make_key(SEND, 0x1F2E, RECV, "w/read:0")
    assert key == f"{SEND};1f2e;{RECV};w/read:0;0:0"
    assert parse_key(key) == ParsedKey(SEND, 0x1F2E, RECV, "w/read:0", "0:0")
    assert parse_key(make_key(SEND, 7, "client", "y:1", "f:3")).frame_iter == "f:3"


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (f"{SEND};1;{RECV};x:0", "Malformed rendezvous key"),
        (f"{SEND};zz;{RECV};x:0;0:0", "Malformed incarnation"),
    ],
)
def test_parse_refuses_malformed_keys(key: str, message: str) -> None:
    with pytest.raises(errors.InvalidArgumentError, match=message):
        parse_key(key)
