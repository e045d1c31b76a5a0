"""The graphs kept by ``POST /v1/graphs``: bounded in count and in bytes, in all and per client,
deleted on request, and dropped when no one has used them for ``idle_s`` seconds."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from services.master.errors import too_large
from tensorgrid.core import errors
from tensorgrid.core.ir import NodeDef
from tensorgrid.master.quotas import ClientQuotaError


@dataclass
class _Entry:
    report: dict[str, Any]
    nbytes: int
    used: float
    client: str


class GraphStore:
    """Stored graphs by id: their nodes (in ``nodes``, the master core's table) and reports.

    Args:
        nodes: the table the sessions read stored graphs from (``MasterCore.graphs``).
        max_graphs: most graphs kept at once.
        max_bytes: most bytes the kept graphs may take together (their encoded size, or their
            constants' when larger).
        idle_s: a graph nobody submitted, read or opened a session on for this long goes.
        clock: seconds, monotonic (tests pass their own).
        max_graphs_per_client: most graphs one client may keep (None: ``max_graphs``).
        max_bytes_per_client: most bytes one client's graphs may take (None: ``max_bytes``).
    """

    def __init__(self, nodes: dict[str, tuple[NodeDef, ...]], max_graphs: int, max_bytes: int,
                 idle_s: float, clock: Callable[[], float] = time.monotonic, *,
                 max_graphs_per_client: int | None = None,
                 max_bytes_per_client: int | None = None) -> None:
        self.nodes = nodes
        self.max_graphs = max_graphs
        self.max_bytes = max_bytes
        self.idle_s = idle_s
        self.max_graphs_per_client = max_graphs_per_client or max_graphs
        self.max_bytes_per_client = max_bytes_per_client or max_bytes
        self._clock = clock
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Bytes the kept graphs count for."""
        return sum(e.nbytes for e in self._entries.values())

    def expire(self) -> list[str]:
        """Drop the graphs idle for ``idle_s`` or longer; returns their ids."""
        cutoff = self._clock() - self.idle_s
        gone = [gid for gid, e in self._entries.items() if e.used <= cutoff]
        for gid in gone:
            self.delete(gid)
        return gone

    def held_by(self, client: str) -> tuple[int, int]:
        """How many graphs ``client`` keeps, and their bytes."""
        mine = [e.nbytes for e in self._entries.values() if e.client == client]
        return len(mine), sum(mine)

    def check_room(self, nbytes: int, client: str = "") -> None:
        """Whether a graph of ``nbytes`` more fits, before it is validated: first in
        ``client``'s share ("": unknown, only the global caps), then in all.

        Raises:
            ClientQuotaError: over ``client``'s share of the count or the bytes (HTTP 429).
            ApiError(too_large): over ``max_graphs`` or ``max_bytes``.
        """
        self.expire()
        if client:
            count, held = self.held_by(client)
            if count >= self.max_graphs_per_client:
                raise ClientQuotaError(
                    f"Client {client!r} already stores {count} graphs (max_graphs_per_client "
                    f"{self.max_graphs_per_client}); DELETE /v1/graphs/<id> the ones you no "
                    "longer need")
            if held + nbytes > self.max_bytes_per_client:
                raise ClientQuotaError(
                    f"Client {client!r} stores graphs of {held} bytes; {nbytes} more would go "
                    f"over max_graph_store_bytes_per_client ({self.max_bytes_per_client}); "
                    "DELETE /v1/graphs/<id> the ones you no longer need")
        if len(self._entries) >= self.max_graphs:
            raise too_large(f"This master already stores {len(self._entries)} graphs "
                            f"(max_graphs {self.max_graphs}); DELETE /v1/graphs/<id> the ones "
                            "you no longer need")
        if self.nbytes + nbytes > self.max_bytes:
            raise too_large(f"Stored graphs take {self.nbytes} bytes; {nbytes} more would go "
                            f"over max_graph_store_bytes ({self.max_bytes}); DELETE "
                            "/v1/graphs/<id> the ones you no longer need")

    def put(self, graph_id: str, nodes: tuple[NodeDef, ...], report: dict[str, Any],
            nbytes: int, client: str = "") -> None:
        """Keep a validated graph for ``client`` (``check_room`` said it fits)."""
        self.check_room(nbytes, client)
        self.nodes[graph_id] = nodes
        self._entries[graph_id] = _Entry(report, nbytes, self._clock(), client)

    def report(self, graph_id: str) -> dict[str, Any]:
        """A kept graph's report; reading it counts as a use.

        Raises:
            NotFoundError: no such graph (never stored, deleted, or expired).
        """
        return self._touch(graph_id).report

    def graph(self, graph_id: str) -> tuple[NodeDef, ...]:
        """A kept graph's nodes; using them counts as a use.

        Raises:
            NotFoundError: as ``report``.
        """
        self._touch(graph_id)
        return self.nodes[graph_id]

    def delete(self, graph_id: str) -> None:
        """Forget a graph.

        Raises:
            NotFoundError: no such graph.
        """
        if self._entries.pop(graph_id, None) is None:
            raise errors.NotFoundError(f"Graph {graph_id} is not stored on this master")
        self.nodes.pop(graph_id, None)

    def _touch(self, graph_id: str) -> _Entry:
        self.expire()
        entry = self._entries.get(graph_id)
        if entry is None:
            raise errors.NotFoundError(f"Graph {graph_id} is not stored on this master")
        entry.used = self._clock()
        return entry
