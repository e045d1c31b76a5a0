"""Caps per client: what one client may hold of the master's sessions, live steps and stored
graphs, so that it cannot lock out the others. The global caps (``Limits``) stay the last defence.

A client is whatever the front end names it (the HTTP master: the ``X-Tensorgrid-Client`` header
the SDK and the command line send, else the peer's address). The empty name is "unknown": only
the global caps apply to it (the gRPC MasterService and in-process masters).
"""

from __future__ import annotations

import os
import secrets
import socket
from collections import Counter

from tensorgrid.core import errors


class ClientQuotaError(errors.ResourceExhaustedError):
    """One client is over its own share of a cap; others may still go on (HTTP 429)."""


class ClientCounts:
    """How many of one kind of thing (sessions, live steps) each client holds, against a cap.

    Args:
        what: the thing counted, in the error's words ("open sessions").
        setting: the setting that bounds it ("max_sessions_per_client").
        cap: most one client may hold.
    """

    def __init__(self, what: str, setting: str, cap: int) -> None:
        self.what = what
        self.setting = setting
        self.cap = cap
        self._held: Counter[str] = Counter()

    def held(self, client: str) -> int:
        """How many ``client`` holds now."""
        return self._held[client]

    def check(self, client: str) -> None:
        """Whether ``client`` may take one more.

        Raises:
            ClientQuotaError: it holds ``cap`` already.
        """
        if client and self._held[client] >= self.cap:
            raise ClientQuotaError(
                f"Client {client!r} has {self._held[client]} {self.what} ({self.setting} "
                f"{self.cap}); release some first: other clients are not affected")

    def take(self, client: str) -> None:
        """Count one more for ``client`` (after ``check``)."""
        if client:
            self._held[client] += 1

    def give_back(self, client: str) -> None:
        """Count one fewer for ``client``."""
        if client and self._held[client] > 0:
            self._held[client] -= 1
            if not self._held[client]:
                del self._held[client]


CLIENT_HEADER = "X-Tensorgrid-Client"
"""The HTTP header in which the SDK and the command line name their client."""

CLIENT_ID_MAX_CHARS = 128
_process_id: tuple[int, str] | None = None


def process_client_id() -> str:
    """This process's client name: ``<host>-<pid>-<random>``, made once per process (a forked
    child makes its own)."""
    global _process_id
    pid = os.getpid()
    if _process_id is None or _process_id[0] != pid:
        host = "".join(c for c in socket.gethostname() if c.isalnum() or c in ".-")[:48]
        _process_id = (pid, f"{host or 'host'}-{pid}-{secrets.token_hex(4)}")
    return _process_id[1]


def valid_client_id(name: str) -> bool:
    """Whether ``name`` may name a client: 1 to 128 characters of letters, digits and ``.-_@``
    (no ``:``, so no header can take the name of a client known by its address, ``peer:...``)."""
    return 0 < len(name) <= CLIENT_ID_MAX_CHARS and all(
        c.isascii() and (c.isalnum() or c in ".-_@") for c in name)
