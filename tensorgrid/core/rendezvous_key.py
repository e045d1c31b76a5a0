"""The rendezvous key: ``src_device;src_incarnation;dst_device;tensor_name;frame:iter``.

The sending and the receiving side build the same key from a Send/Recv pair's attrs, so a value
meets its receiver without any other coordination; the incarnation (in hex) makes a key of a task
that restarted differ from the key of its previous life, so stale values are refused. The
rendezvous table keyed by it lives in the runtime; the Send/Recv kernels only build keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorgrid.core import errors


def make_key(send_device: str, incarnation: int, recv_device: str, tensor_name: str,
             frame_iter: str = "0:0") -> str:
    """The key of one transfer.

    Args:
        send_device: the full name of the sending device.
        incarnation: the sending task's incarnation (written in hex).
        recv_device: the full name of the receiving device (or 'client' for fetches).
        tensor_name: the tensor sent, 'node:output'.
        frame_iter: the control-flow frame and iteration, '0:0' outside loops.

    Returns:
        The key, five ';'-separated parts.
    """
    return f"{send_device};{incarnation:x};{recv_device};{tensor_name};{frame_iter}"


@dataclass(frozen=True)
class ParsedKey:
    """The five parts of a rendezvous key."""

    send_device: str
    incarnation: int
    recv_device: str
    tensor_name: str
    frame_iter: str


def parse_key(key: str) -> ParsedKey:
    """Split a rendezvous key.

    Raises:
        InvalidArgumentError: the key does not have five ';'-separated parts, or its incarnation
            is not hex.
    """
    parts = key.split(";")
    if len(parts) != 5:
        raise errors.InvalidArgumentError(f"Malformed rendezvous key {key!r}")
    try:
        inc = int(parts[1], 16)
    except ValueError as exc:
        raise errors.InvalidArgumentError(f"Malformed incarnation in rendezvous key {key!r}") \
            from exc
    return ParsedKey(parts[0], inc, parts[2], parts[3], parts[4])
