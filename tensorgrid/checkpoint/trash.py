"""Removing large checkpoint files off the save's path.

Unlinking a file of half a gigabyte takes the filesystem tens of milliseconds (freeing its
extents); a save that retires an older checkpoint (``max_to_keep``) or overwrites one under the
same name would wait for that. A large file is instead renamed at once to a name of its own
(``<path>.deleting-<token>``, in the same directory: a rename frees nothing) and unlinked by a
background thread; the checkpoint's names change exactly when they did before. The thread is not
a daemon: the interpreter waits for pending removals before it exits. Small files are removed
directly.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading

log = logging.getLogger("tensorgrid.checkpoint")

LARGE_BYTES = 16 << 20  # files below this are unlinked in place
MARK = ".deleting-"

_lock = threading.Lock()
_pending: list[str] = []
_idle = threading.Condition(_lock)
_worker: threading.Thread | None = None


def _trash_name(path: str) -> str:
    return f"{path}{MARK}{secrets.token_hex(6)}"


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def remove(path: str) -> bool:
    """Remove the file ``path`` (large ones in the background, once renamed away); returns
    whether it existed.

    Raises:
        OSError: it exists and cannot be removed.
    """
    size = _size(path)
    if size < 0:
        return False
    if size >= LARGE_BYTES:
        trash = _trash_name(path)
        try:
            os.rename(path, trash)
        except FileNotFoundError:
            return False
        except OSError:
            pass  # not renamable here: remove it in place
        else:
            _schedule(trash)
            return True
    try:
        os.remove(path)
    except FileNotFoundError:
        return False
    return True


def replace(src: str, dst: str) -> None:
    """``os.replace(src, dst)``, atomic as ever; a large file it replaces is kept under a second
    name (a hard link) and unlinked in the background.

    Raises:
        OSError: the rename failed.
    """
    trash = None
    if _size(dst) >= LARGE_BYTES:
        trash = _trash_name(dst)
        try:
            os.link(dst, trash)
        except OSError:
            trash = None  # no hard links here (or dst went): the rename frees the old file
    try:
        os.replace(src, dst)
    finally:
        if trash is not None:
            _schedule(trash)


def _schedule(path: str) -> None:
    global _worker
    with _lock:
        _pending.append(path)
        if _worker is None:
            _worker = threading.Thread(target=_drain, name="tg-ckpt-trash", daemon=False)
            _worker.start()


def _drain() -> None:
    global _worker
    while True:
        with _lock:
            if not _pending:
                _worker = None
                _idle.notify_all()
                return
            path = _pending.pop(0)
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("Could not remove the old checkpoint file %s: %s", path, exc)


def wait() -> None:
    """Block until every pending removal is done."""
    with _lock:
        while _worker is not None:
            _idle.wait()
