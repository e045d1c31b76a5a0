"""Processes for the process-level integration tests: task, master and example processes on free
127.0.0.1 ports, started and stopped by PID, every wait bounded, every output in a log file.

Starting and stopping processes is ``examples/launch.py``'s job (the examples' launcher modes use
it too, so the tests exercise the same code): ``Process`` (a child with a log file, ``wait``,
``wait_for_output``, ``stop`` by PID: SIGTERM then SIGKILL), ``start_task`` / ``start_master``
and ``LocalCluster`` (ps and workers as ``python -m services.ps|worker``, the HTTP master as
``python -m services.master``). This module adds what the tests need on top: running an example
with a deadline, reading numbers out of its output, and reading the master's counters.
"""

from __future__ import annotations

import importlib
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import httpx

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
if str(EXAMPLES) not in sys.path:  # the examples import their helpers as top-level modules
    sys.path.insert(0, str(EXAMPLES))

from launch import (  # noqa: E402
    LocalCluster,
    Process,
    free_port,
    loopback_cluster,
    start_master,
    start_task,
)

__all__ = ["EXAMPLES", "NUMBER", "ExampleRun", "LocalCluster", "Process", "cluster",
           "example_module", "free_port", "loopback_cluster", "metric", "numbers", "run_example",
           "run_examples", "start_master", "start_task"]

EXAMPLE_TIMEOUT_S = 240.0
HTTP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ExampleRun:
    """One finished run of an example: its command line, exit status, output and duration."""

    argv: list[str]
    status: int
    output: str
    seconds: float

    def check(self) -> ExampleRun:
        """Assert that it exited 0 (the message shows the end of its output)."""
        assert self.status == 0, (f"{' '.join(self.argv[1:])} exited {self.status} after "
                                  f"{self.seconds:.1f}s:\n{self.output[-6000:]}")
        return self


def run_examples(runs: Sequence[tuple[str, Sequence[str]]], timeout: float = EXAMPLE_TIMEOUT_S
                 ) -> list[ExampleRun]:
    """Run examples side by side (``[(script, args), ...]``) and wait for all of them, at most
    ``timeout`` seconds in all; returns their runs in the same order.

    Raises:
        AssertionError: one still ran at the deadline (every one is stopped by its PID).
    """
    logs = tempfile.mkdtemp(prefix="tensorgrid-example-")
    procs = []
    started = time.monotonic()
    try:
        for i, (script, args) in enumerate(runs):
            argv = [sys.executable, str(EXAMPLES / script), *args]
            procs.append(Process(f"{Path(script).stem}-{i}", argv, log_dir=logs))
        deadline = started + timeout
        out = []
        for proc in procs:
            try:
                status = proc.wait(max(0.1, deadline - time.monotonic()))
            except RuntimeError as exc:
                raise AssertionError(str(exc)) from None
            out.append(ExampleRun(proc.argv, status, proc.log(), time.monotonic() - started))
        return out
    finally:
        for proc in procs:
            proc.stop()


def run_example(script: str, *args: str, timeout: float = EXAMPLE_TIMEOUT_S) -> ExampleRun:
    """Run one example to its end (at most ``timeout`` seconds) and check that it exited 0."""
    return run_examples([(script, args)], timeout)[0].check()


def example_module(name: str) -> ModuleType:
    """An example imported as a module (``examples/NAME.py``), to build its graph in a test."""
    return importlib.import_module(name)


def numbers(output: str, pattern: str) -> list[tuple[float, ...]]:
    """The numbers each match of ``pattern`` captured, line by line, as floats."""
    return [tuple(float(g) for g in m.groups()) for m in re.finditer(pattern, output, re.M)]


NUMBER = r"(-?[0-9.]+(?:e[-+]?\d+)?)"


def metric(master_url: str, name: str) -> float:
    """The value of an unlabelled metric in the master's ``/metrics``.

    Raises:
        AssertionError: the master does not export it.
    """
    text = httpx.get(f"{master_url}/metrics", timeout=HTTP_TIMEOUT_S).text
    match = re.search(rf"^{re.escape(name)} {NUMBER}$", text, re.M)
    assert match, f"{name} is not in {master_url}/metrics"
    return float(match.group(1))


@contextmanager
def cluster(ps: int = 1, workers: int = 2, master: bool = True,
            master_env: dict[str, str] | None = None) -> Iterator[LocalCluster]:
    """A ``LocalCluster`` stopped (by PID) on exit; on an error inside, its processes' log tails
    are printed (pytest shows them with the failure)."""
    c = LocalCluster(ps=ps, workers=workers, master=master, master_env=master_env)
    try:
        yield c
    except BaseException:
        print(c.logs(), file=sys.stderr)
        raise
    finally:
        c.stop()
