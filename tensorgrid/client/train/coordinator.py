"""``tf.train.Coordinator`` and ``tf.train.QueueRunner``: threads that run ops in a loop next to the
training loop, and the way to stop them together (TensorFlow 1.x semantics).

A ``Coordinator`` is a stop flag shared by threads plus the first exception any of them reported:
``request_stop(ex)`` sets the flag (``OutOfRangeError`` counts as a clean stop), ``join`` waits for
the threads and re-raises the reported exception.

A ``QueueRunner`` holds a list of ops (usually enqueues) and runs each in its own thread until the
coordinator stops or a queue closes; when the coordinator stops, one more thread runs the runner's
``cancel_op`` (by default closing the queue and cancelling pending enqueues) so threads blocked on
a full queue wake up.

The threads share one Session with the caller. That needs a session whose ``run`` may be called
from several threads at once: a cluster target (``Session(server.target)``), or the in-process
``Session()`` (which runs each thread's waiting kernels on that thread's own event loop).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any

from tensorgrid.core import errors
from tensorgrid.framework.graph import GraphKeys, get_default_graph, get_default_session

__all__ = ["Coordinator", "QueueRunner", "add_queue_runner", "start_queue_runners"]

_log = logging.getLogger(__name__)

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


class Coordinator:
    """Coordinates the termination of a set of threads.

    Args:
        clean_stop_exception_types: exceptions that stop the threads without being an error
            (default: ``OutOfRangeError``, raised when an input queue is exhausted).
    """

    def __init__(self, clean_stop_exception_types: Iterable[type[BaseException]] | None = None
                 ) -> None:
        if clean_stop_exception_types is None:
            clean_stop_exception_types = (errors.OutOfRangeError,)
        self._clean_stop_exception_types = tuple(clean_stop_exception_types)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info_to_raise: ExcInfo | None = None
        self._joined = False
        self._registered_threads: set[threading.Thread] = set()

    def _filter_exception(self, ex: Any) -> Any:
        exc = ex[1] if isinstance(ex, tuple) else ex
        if isinstance(exc, self._clean_stop_exception_types):
            return None
        return ex

    def request_stop(self, ex: BaseException | ExcInfo | None = None) -> None:
        """Ask every thread to stop; record ``ex`` (an exception or ``sys.exc_info()``) when it is
        the first one reported, so that ``join`` re-raises it.

        Raises:
            the exception ``ex``, when the coordinator was already joined.
        """
        with self._lock:
            ex = self._filter_exception(ex)
            if self._joined and ex is not None:
                raise ex[1] if isinstance(ex, tuple) else ex
            if self._stop_event.is_set():
                return
            if ex is not None and self._exc_info_to_raise is None:
                if isinstance(ex, tuple):
                    self._exc_info_to_raise = ex
                else:
                    self._exc_info_to_raise = (type(ex), ex, ex.__traceback__)
                _log.info("Error reported to Coordinator: %s", self._exc_info_to_raise[1])
            self._stop_event.set()

    def clear_stop(self) -> None:
        """Clear the stop request and the recorded exception (the coordinator may be reused)."""
        with self._lock:
            self._joined = False
            self._exc_info_to_raise = None
            self._stop_event.clear()

    def should_stop(self) -> bool:
        """Whether a stop was requested."""
        return self._stop_event.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self) -> Iterator[None]:
        """A context in which an exception requests a stop (and is recorded) instead of
        propagating; ``OutOfRangeError`` stops cleanly."""
        try:
            yield
        except BaseException:  # noqa: BLE001 - every exception stops the threads
            self.request_stop(ex=sys.exc_info())  # type: ignore[arg-type]

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Wait until a stop is requested (or ``timeout`` seconds pass); whether it was."""
        return self._stop_event.wait(timeout)

    def register_thread(self, thread: threading.Thread) -> None:
        """Make ``join`` (with no thread list) wait for ``thread``."""
        with self._lock:
            self._registered_threads.add(thread)

    def join(self, threads: Iterable[threading.Thread] | None = None,
             stop_grace_period_secs: float = 120.0, ignore_live_threads: bool = False) -> None:
        """Wait until every thread ends or a stop is requested, then give the threads
        ``stop_grace_period_secs`` to end.

        Raises:
            the exception reported with ``request_stop``, if any.
            RuntimeError: threads are still alive after the grace period (unless
                ``ignore_live_threads``).
        """
        with self._lock:
            wanted = set(self._registered_threads) if threads is None else \
                self._registered_threads | set(threads)
        pending = list(wanted)
        while any(t.is_alive() for t in pending) and not self.wait_for_stop(1.0):
            pass
        deadline = time.monotonic() + max(stop_grace_period_secs, 0.0)
        for t in pending:
            if t.is_alive():  # (joining a thread never started would raise)
                t.join(max(deadline - time.monotonic(), 0.0))
        stragglers = [t.name for t in pending if t.is_alive()]
        with self._lock:
            self._joined = True
            self._registered_threads = set()
            if self._exc_info_to_raise is not None:
                raise self._exc_info_to_raise[1]
            if stragglers:
                if ignore_live_threads:
                    _log.info("Coordinator stopped with threads still running: %s",
                              " ".join(stragglers))
                else:
                    raise RuntimeError("Coordinator stopped with threads still running: "
                                       + " ".join(stragglers))

    @property
    def joined(self) -> bool:
        return self._joined

    def raise_requested_exception(self) -> None:
        """Raise the exception reported with ``request_stop``, if any."""
        with self._lock:
            if self._exc_info_to_raise is not None:
                raise self._exc_info_to_raise[1]


class QueueRunner:
    """Runs ``enqueue_ops`` in a loop, one thread each, until the coordinator stops or a queue
    closes.

    Args:
        queue: the queue the ops feed (used for the default close and cancel ops), or None when
            both are given.
        enqueue_ops: the ops to run, each in its own thread.
        close_op: run when the last thread sees its queue closed (default: ``queue.close()``).
        cancel_op: run when the coordinator stops (default:
            ``queue.close(cancel_pending_enqueues=True)``).
        queue_closed_exception_types: exceptions that mean "the queue is closed, end the thread
            quietly" (default: ``OutOfRangeError``).

    Raises:
        ValueError: no enqueue ops, or neither a queue nor the close and cancel ops.
    """

    def __init__(self, queue: Any = None, enqueue_ops: Sequence[Any] | None = None,
                 close_op: Any = None, cancel_op: Any = None,
                 queue_closed_exception_types: Iterable[type[BaseException]] | None = None
                 ) -> None:
        if not enqueue_ops:
            raise ValueError("QueueRunner needs at least one enqueue op")
        if queue is None and (close_op is None or cancel_op is None):
            raise ValueError("QueueRunner needs a queue, or both a close_op and a cancel_op")
        self._queue = queue
        self._enqueue_ops = list(enqueue_ops)
        self._close_op = close_op if close_op is not None else queue.close()
        self._cancel_op = cancel_op if cancel_op is not None else \
            queue.close(cancel_pending_enqueues=True)
        self._queue_closed_exception_types = tuple(
            queue_closed_exception_types or (errors.OutOfRangeError,))
        self._lock = threading.Lock()
        self._runs_per_session: weakref.WeakKeyDictionary[Any, int] = \
            weakref.WeakKeyDictionary()
        self._exceptions_raised: list[BaseException] = []

    @property
    def queue(self) -> Any:
        return self._queue

    @property
    def enqueue_ops(self) -> list[Any]:
        return list(self._enqueue_ops)

    @property
    def close_op(self) -> Any:
        return self._close_op

    @property
    def cancel_op(self) -> Any:
        return self._cancel_op

    @property
    def queue_closed_exception_types(self) -> tuple[type[BaseException], ...]:
        return self._queue_closed_exception_types

    @property
    def name(self) -> str:
        """The queue's name (or the first op's, without a queue)."""
        if self._queue is not None:
            return str(self._queue.name)
        return str(getattr(self._enqueue_ops[0], "name", "queue_runner"))

    @property
    def exceptions_raised(self) -> list[BaseException]:
        """Exceptions the threads raised when run without a coordinator."""
        return list(self._exceptions_raised)

    # ------------------------------------------------------------------ threads
    def _make_step(self, sess: Any, enqueue_op: Any) -> Callable[[], Any]:
        """What one iteration of a thread's loop runs (a subclass may run more than the op)."""
        return sess.make_callable(enqueue_op)  # type: ignore[no-any-return]

    def _run(self, sess: Any, enqueue_op: Any, coord: Coordinator | None) -> None:
        decremented = False
        try:
            step = self._make_step(sess, enqueue_op)
            while not (coord is not None and coord.should_stop()):
                try:
                    step()
                except self._queue_closed_exception_types:
                    with self._lock:
                        self._runs_per_session[sess] -= 1
                        decremented = True
                        last = self._runs_per_session[sess] == 0
                    if last:
                        try:
                            sess.run(self._close_op)
                        except Exception as exc:  # noqa: BLE001 - closing is best effort
                            _log.debug("Ignored exception closing the queue: %s", exc)
                    return
        except Exception as exc:  # reported to the coordinator
            if coord is not None:
                coord.request_stop(exc)
            else:
                _log.error("Exception in QueueRunner: %s", exc)
                with self._lock:
                    self._exceptions_raised.append(exc)
                raise
        finally:
            if not decremented:
                with self._lock:
                    self._runs_per_session[sess] -= 1

    def _close_on_stop(self, sess: Any, coord: Coordinator) -> None:
        coord.wait_for_stop()
        try:
            sess.run(self._cancel_op)
        except Exception as exc:  # noqa: BLE001 - the session may be closing already
            _log.debug("Ignored exception running the cancel op: %s", exc)

    def create_threads(self, sess: Any, coord: Coordinator | None = None, daemon: bool = False,
                       start: bool = False) -> list[threading.Thread]:
        """The threads running the enqueue ops in ``sess`` (plus, with a coordinator, one that
        runs the cancel op once it stops). Returns [] when this runner already runs in ``sess``.

        Args:
            sess: the session (usable from several threads; see the module docstring).
            coord: a Coordinator the threads report to and stop with (recommended).
            daemon: make the threads daemons.
            start: start them now.
        """
        with self._lock:
            if self._runs_per_session.get(sess, 0) > 0:
                return []
            self._runs_per_session[sess] = len(self._enqueue_ops)
            self._exceptions_raised = []
        threads = [threading.Thread(target=self._run, args=(sess, op, coord),
                                    name=f"QueueRunnerThread-{self.name}-{i}")
                   for i, op in enumerate(self._enqueue_ops)]
        if coord is not None:
            threads.append(threading.Thread(target=self._close_on_stop, args=(sess, coord),
                                            name=f"QueueRunnerThread-{self.name}-close"))
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            t.daemon = daemon
            if start:
                t.start()
        return threads


def add_queue_runner(qr: QueueRunner, collection: str = GraphKeys.QUEUE_RUNNERS) -> None:
    """Add a QueueRunner to a collection of the default graph (started by
    ``start_queue_runners``)."""
    get_default_graph().add_to_collection(collection, qr)


def start_queue_runners(sess: Any = None, coord: Coordinator | None = None, daemon: bool = True,
                        start: bool = True, collection: str = GraphKeys.QUEUE_RUNNERS
                        ) -> list[threading.Thread]:
    """Start the threads of every QueueRunner in ``collection`` of the session's graph.

    Args:
        sess: the session (default: the default session).
        coord: a Coordinator for the threads.

    Returns:
        The threads.

    Raises:
        ValueError: no session given and no default session.
        TypeError: ``sess`` is not a session.
    """
    if sess is None:
        sess = get_default_session()
        if sess is None:
            raise ValueError("Cannot start queue runners: no default session is registered. Use "
                             "`with sess.as_default()` or pass an explicit session to "
                             "tf.start_queue_runners(sess=sess)")
    if not hasattr(sess, "run") or not hasattr(sess, "graph"):
        raise TypeError(f"sess must be a tf.Session object. Given class: {type(sess).__name__}")
    threads: list[threading.Thread] = []
    with sess.graph.as_default():
        for qr in sess.graph.get_collection(collection):
            threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads
