"""The graph manager of a task: the partitions registered on it, by handle.

A master registers a partition once per plan (``RegisterGraph``) and runs it by handle on every
later step. Handles are unique to this start of the process, so a handle from before a restart is
never mistaken for a new one.
"""

from __future__ import annotations

import itertools
import os
import secrets
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tensorgrid.compiler.infer import infer_graph
from tensorgrid.core import errors
from tensorgrid.core.device import task_of
from tensorgrid.core.ir import NodeDef
from tensorgrid.runtime.executor import Executable, LocalDevice


@dataclass
class RegisteredGraph:
    """One registered partition: its executable and the session it belongs to."""

    handle: str
    session: str
    exe: Executable
    nodes: tuple[NodeDef, ...]
    registered_at: float = field(default_factory=time.time)
    runs: int = 0
    steps_ok: int = 0  # runs that succeeded: each ran every node once (the kernel counts)
    op_counts: Counter[str] = field(default_factory=Counter)


class GraphManager:
    """The registered partitions of one task.

    Args:
        task: the task's name ('/job:J/replica:0/task:T').
        devices: its local devices by full name; default_device: where unplaced nodes run.
    """

    def __init__(self, task: str, devices: Mapping[str, LocalDevice], default_device: str,
                 step_memory_bytes: int | None = None) -> None:
        self.task = task
        self.step_memory_bytes = step_memory_bytes  # each step's tensor budget (None: none)
        self.devices = devices
        self.default_device = default_device
        self.graphs: dict[str, RegisteredGraph] = {}
        # kernels run by partitions since deregistered, by op (the metrics' counters never drop)
        self.retired_kernels: Counter[str] = Counter()
        self._handles = itertools.count(1)
        self._prefix = f"{os.getpid():x}{secrets.token_hex(3)}"

    def __len__(self) -> int:
        return len(self.graphs)

    def register(self, nodes: Sequence[NodeDef], session: str = "") -> str:
        """Build a partition's executable and return its new handle.

        Raises:
            InvalidArgumentError / NotFoundError: the partition is malformed, names a device not
                on this task, or uses an op without a kernel here (names the node).
        """
        for n in nodes:
            if n.device and task_of(n.device) != self.task:
                raise errors.InvalidArgumentError(
                    f"Node '{n.name}' is placed on {n.device}, which is not on task {self.task}",
                    node_name=n.name, op_type=n.op)
        specs = infer_graph(nodes)
        exe = Executable(nodes, self.devices, self.default_device, specs,
                         memory_budget=self.step_memory_bytes)
        handle = f"{self._prefix}-{next(self._handles)}"
        self.graphs[handle] = RegisteredGraph(handle, session, exe, tuple(nodes),
                                              op_counts=Counter(n.op for n in nodes))
        return handle

    def get(self, handle: str) -> RegisteredGraph | None:
        return self.graphs.get(handle)

    def deregister(self, handle: str) -> None:
        """Drop one partition.

        Raises:
            NotFoundError: no partition of that handle.
        """
        graph = self.graphs.pop(handle, None)
        if graph is None:
            raise errors.NotFoundError(f"Graph handle {handle} is not registered on {self.task}")
        self._retire(graph)

    def deregister_session(self, session: str) -> int:
        """Drop every partition of a session; returns how many."""
        gone = [h for h, g in self.graphs.items() if g.session == session]
        for h in gone:
            self._retire(self.graphs.pop(h))
        return len(gone)

    def _retire(self, graph: RegisteredGraph) -> None:
        for op, n in graph.op_counts.items():
            self.retired_kernels[op] += n * graph.steps_ok
