"""``EventFileWriter``: appends ``Event`` protos to an event file from a background thread.

The file is ``<logdir>/events.out.tfevents.<seconds>.<host><suffix>``, TFRecord-framed, and its
first event holds only ``file_version: "brain.Event:2"``, as TensorFlow writes it, so TensorBoard
finds and reads it. Callers only enqueue: a thread writes the events, and flushes the file every
``flush_secs`` seconds and whenever asked. At most ``max_queue`` events wait; a caller that adds
more waits for room, so a slow disk slows training rather than filling memory.
"""

from __future__ import annotations

import atexit
import os
import queue
import socket
import threading
import time
import weakref
from typing import Any, BinaryIO

from tensorgrid.core.tfrecord import encode_record
from tensorgrid.pb import event_pb2

__all__ = ["EventFileWriter", "FILE_VERSION"]

FILE_VERSION = "brain.Event:2"
WRITER_NAME = "tensorgrid"

_CLOSE = object()  # tells the thread to flush, close the file and end
_FLUSH = object()  # tells the thread to flush the file now


class EventFileWriter:
    """Write ``Event`` protos to a new event file in ``logdir`` (created when missing).

    Args:
        logdir: the directory of the file.
        max_queue: how many events may wait to be written before ``add_event`` waits.
        flush_secs: how often the thread flushes the file to the operating system.
        filename_suffix: appended to the file's name.

    Raises:
        OSError: the directory or the file cannot be created.
    """

    def __init__(
        self,
        logdir: str,
        max_queue: int = 10,
        flush_secs: float = 120,
        filename_suffix: str | None = None,
    ) -> None:
        self._logdir = str(logdir)
        self._max_queue = max(int(max_queue), 1)
        self._flush_secs = float(flush_secs)
        self._suffix = filename_suffix or ""
        self._closed = True
        # held while the open/closed state is read and an item queued: nothing may follow the
        # close marker into the queue (a flush waiting on it would wait forever)
        self._lock = threading.Lock()
        self._open()

    # ------------------------------------------------------------------ public

    def get_logdir(self) -> str:
        """The directory this writer writes to."""
        return self._logdir

    @property
    def path(self) -> str:
        """The path of the current event file."""
        return self._path

    def add_event(self, event: event_pb2.Event) -> None:
        """Queue ``event`` for writing (waits while ``max_queue`` events are waiting).

        Raises:
            RuntimeError: the writer thread failed earlier (the cause is chained).
        """
        self._raise_if_failed()
        data = event.SerializeToString()
        with self._lock:
            if self._closed:
                return  # as TensorFlow: events added to a closed writer are dropped
            self._queue.put(data)

    def flush(self) -> None:
        """Write every queued event and flush the file to the operating system.

        Raises:
            RuntimeError: the writer thread failed (the cause is chained).
        """
        with self._lock:
            pending = None if self._closed else self._queue
            if pending is not None:
                pending.put(_FLUSH)
        if pending is not None:
            pending.join()
        self._raise_if_failed()

    def close(self) -> None:
        """Write every queued event and close the file; later events are dropped until
        ``reopen``. Closing twice is harmless.

        Raises:
            RuntimeError: the writer thread failed (the cause is chained).
        """
        with self._lock:
            if not self._closed:
                self._closed = True
                self._queue.put(_CLOSE)
                self._thread.join()
                _OPEN_WRITERS.discard(self)
        self._raise_if_failed()

    def reopen(self) -> None:
        """After ``close``: start a new event file in the same directory (no-op when open)."""
        with self._lock:
            if self._closed:
                self._open()

    # ------------------------------------------------------------------ the file and thread

    def _open(self) -> None:
        os.makedirs(self._logdir, exist_ok=True)
        self._file, self._path = _create_event_file(self._logdir, self._suffix)
        self._failure: BaseException | None = None
        self._queue: queue.Queue[Any] = queue.Queue(self._max_queue)
        header = event_pb2.Event(wall_time=time.time(), file_version=FILE_VERSION)
        header.source_metadata.writer = WRITER_NAME
        # the header goes out at once, so a reader sees a valid file from the start
        self._file.write(encode_record(header.SerializeToString()))
        self._file.flush()
        self._closed = False
        self._thread = threading.Thread(
            target=self._run, name=f"EventFileWriter:{self._path}", daemon=True
        )
        self._thread.start()
        _OPEN_WRITERS.add(self)

    def _run(self) -> None:
        next_flush = time.monotonic() + self._flush_secs
        while True:
            try:
                item = self._queue.get(timeout=max(next_flush - time.monotonic(), 0.001))
            except queue.Empty:
                item = _FLUSH
                get_done = False
            else:
                get_done = True
            try:
                if self._failure is None:
                    if item is _FLUSH or item is _CLOSE:
                        self._file.flush()
                        next_flush = time.monotonic() + self._flush_secs
                    else:
                        self._file.write(encode_record(item))
                if item is _CLOSE:
                    self._file.close()
                    return
            except BaseException as exc:  # noqa: BLE001 - reported to the caller's thread
                self._failure = exc
                if item is _CLOSE:
                    return
            finally:
                if get_done:
                    self._queue.task_done()

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise RuntimeError(
                f"Writing the event file {self._path} failed: {self._failure}"
            ) from self._failure


def _close_open_writers() -> None:
    # a program that never closes its writer (many TF1 scripts) still gets every event it added
    for writer in list(_OPEN_WRITERS):
        try:
            writer.close()
        except Exception:  # noqa: BLE001 - nothing can be reported at exit
            pass


_OPEN_WRITERS: weakref.WeakSet[EventFileWriter] = weakref.WeakSet()
atexit.register(_close_open_writers)


def _create_event_file(logdir: str, suffix: str) -> tuple[BinaryIO, str]:
    """A new, empty event file named as TensorFlow names them; a name already taken (two
    writers started in the same second) gets a counter, keeping 'tfevents' in it."""
    base = os.path.join(
        logdir, f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}"
    )
    for n in range(1000):
        path = f"{base}{suffix}" if n == 0 else f"{base}.{os.getpid()}.{n}{suffix}"
        try:
            return open(path, "xb"), path  # the writer thread closes it
        except FileExistsError:
            continue
    raise FileExistsError(f"Cannot create an event file in {logdir}: {base}* are all taken")
