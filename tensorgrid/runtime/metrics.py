"""Prometheus metrics of one task (worker or ps), in a registry of its own.

What a step costs on the task is counted where it is already known, so the step path pays only
for a clock reading and a histogram observation per partition run:

* steps: ``tensorgrid_task_steps_total{outcome}`` and ``tensorgrid_task_step_seconds`` (each
  partition run, from its RunGraph arriving to its last node);
* kernels: ``tensorgrid_task_kernels_total{op}``, read when scraped from the graph manager (each
  successful run of a partition ran each of its nodes once), so no kernel pays for it;
  ``tensorgrid_task_kernel_seconds{op}`` comes from traced steps only (timing every kernel of
  every step would cost the untraced ones);
* transfers: ``tensorgrid_task_recv_bytes_total{peer}`` and ``tensorgrid_task_recvs_total{peer}``
  for every tensor received from another task, and ``tensorgrid_task_recv_wait_seconds`` (from
  asking to having it); ``tensorgrid_task_sends_total`` (the ``_Send`` kernels run);
* state: ``tensorgrid_task_graphs``, ``tensorgrid_task_live_steps``, ``tensorgrid_task_uptime_seconds``.
* memory: ``tensorgrid_task_resident_bytes`` (the process's resident set, read from
  ``/proc/self/statm`` when scraped; absent where there is no such file), and the gauges the
  task adds with ``watch_bytes``: ``tensorgrid_task_rendezvous_bytes`` (tensors sent and not
  received yet) and, from the serving layer, ``tensorgrid_task_shm_pool_bytes`` (its
  shared-memory pool).

Every series carries a ``task`` label, so the texts of all tasks merge into one exposition.
"""

from __future__ import annotations

import os
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tensorgrid.runtime.executor import Executable, TraceRecord
from tensorgrid.runtime.graph_manager import GraphManager

__all__ = ["TaskMetrics"]

STEP_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
KERNEL_BUCKETS = (1e-6, 5e-6, 2e-5, 1e-4, 5e-4, 0.002, 0.01, 0.05, 0.25, 1.0)


class _StateCollector(Collector):
    """Counts read when scraped: kernels run, sends, graphs, live steps, uptime."""

    def __init__(self, task: str, graphs: GraphManager, live: Callable[[], int],
                 started: float) -> None:
        self.task = task
        self.graphs = graphs
        self.live = live
        self.started = started

    def collect(self) -> Iterator[Metric]:
        kernels: Tally[str] = Tally(self.graphs.retired_kernels)
        for g in list(self.graphs.graphs.values()):
            for op, n in g.op_counts.items():
                kernels[op] += n * g.steps_ok
        family = CounterMetricFamily("tensorgrid_task_kernels",
                                     "Kernels run by the task's successful steps, by op",
                                     labels=["task", "op"])
        for op, n in sorted(kernels.items()):
            family.add_metric([self.task, op], n)
        yield family
        yield _one(CounterMetricFamily, "tensorgrid_task_sends",
                   "Tensors sent to other tasks (_Send kernels run)", self.task, kernels["_Send"])
        yield _one(GaugeMetricFamily, "tensorgrid_task_graphs", "Partitions registered now",
                   self.task, len(self.graphs))
        yield _one(GaugeMetricFamily, "tensorgrid_task_live_steps", "Steps running now",
                   self.task, self.live())
        yield _one(GaugeMetricFamily, "tensorgrid_task_uptime_seconds",
                   "Seconds since the task started", self.task, time.time() - self.started)
        rss = resident_bytes()
        if rss is not None:
            yield _one(GaugeMetricFamily, "tensorgrid_task_resident_bytes",
                       "Resident memory of the task's process", self.task, rss)


_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int | None:
    """This process's resident set in bytes (``/proc/self/statm``), None where unavailable."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * _PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return None


class _BytesGauge(Collector):
    """A gauge read from a callable when scraped."""

    def __init__(self, name: str, doc: str, task: str, read: Callable[[], int]) -> None:
        self.name, self.doc, self.task, self.read = name, doc, task, read

    def collect(self) -> Iterator[Metric]:
        yield _one(GaugeMetricFamily, self.name, self.doc, self.task, self.read())


def _one(kind: Any, name: str, doc: str, task: str, value: float) -> Metric:
    family = kind(name, doc, labels=["task"])
    family.add_metric([task], value)
    return family  # type: ignore[no-any-return]


class TaskMetrics:
    """The metrics of one task.

    Args:
        task: the task's name (every series' ``task`` label).
        graphs: its graph manager (kernel counts are read from it when scraped).
        live: how many steps run now.
    """

    def __init__(self, task: str, graphs: GraphManager, live: Callable[[], int]) -> None:
        self.task = task
        self.registry = CollectorRegistry(auto_describe=False)
        steps = Counter("tensorgrid_task_steps", "Partition runs (one per step) by outcome",
                        ["task", "outcome"], registry=self.registry)
        self._ok = steps.labels(task, "ok")
        self._failed = steps.labels(task, "failed")
        self._step_seconds = Histogram(
            "tensorgrid_task_step_seconds", "Time of each partition run on the task",
            ["task"], buckets=STEP_BUCKETS, registry=self.registry).labels(task)
        self._kernel_seconds = Histogram(
            "tensorgrid_task_kernel_seconds", "Kernel times, from traced steps only",
            ["task", "op"], buckets=KERNEL_BUCKETS, registry=self.registry)
        self._recv_bytes = Counter("tensorgrid_task_recv_bytes",
                                   "Bytes of the tensors received from other tasks",
                                   ["task", "peer"], registry=self.registry)
        self._recvs = Counter("tensorgrid_task_recvs", "Tensors received from other tasks",
                              ["task", "peer"], registry=self.registry)
        self._recv_wait = Histogram(
            "tensorgrid_task_recv_wait_seconds",
            "From asking a peer for a tensor to having it", ["task"], buckets=STEP_BUCKETS,
            registry=self.registry).labels(task)
        self.registry.register(_StateCollector(task, graphs, live, time.time()))

    def step_done(self, seconds: float, ok: bool) -> None:
        """Count one partition run."""
        (self._ok if ok else self._failed).inc()
        self._step_seconds.observe(seconds)

    def received(self, peer: str, nbytes: int, seconds: float) -> None:
        """Count one tensor received from ``peer``."""
        self._recvs.labels(self.task, peer).inc()
        self._recv_bytes.labels(self.task, peer).inc(nbytes)
        self._recv_wait.observe(seconds)

    def traced(self, exe: Executable, records: Sequence[TraceRecord]) -> None:
        """Observe the kernel times of a traced step."""
        for index, t0, t1, _tid, _value in records:
            self._kernel_seconds.labels(self.task, exe.nodes[index].node.op).observe(t1 - t0)

    def watch_bytes(self, name: str, doc: str, read: Callable[[], int]) -> None:
        """Export ``read()`` (bytes held by a layer above the runtime, e.g. the serving
        layer's shared-memory pool) as the gauge ``name``, read when scraped."""
        self.registry.register(_BytesGauge(name, doc, self.task, read))

    def text(self) -> str:
        """The Prometheus text exposition of the task's metrics."""
        return generate_latest(self.registry).decode()
