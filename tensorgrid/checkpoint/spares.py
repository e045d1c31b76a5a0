"""Recycling retired data files, as databases recycle their log segments.

A new data file costs the filesystem an allocation of every block as it is written; overwriting
the blocks of a file that already has them does not. On this project's reference VM two
``O_DIRECT`` writers of 512 MiB each ran at about 0.95 GB/s each into new files and about
1.2 GB/s each over the blocks of a retired file (``bench/checkpoint_io.py``, steady state).

So a large data file that a save retires (``max_to_keep`` dropping the oldest checkpoint, or a
save replacing the files of the same prefix) is not unlinked but renamed to a *spare* in the
same directory: ``.tg-spare-<bytes>-<nanoseconds>-<token>`` (a hidden name that no checkpoint
listing matches). The next save's writer that needs about as many bytes claims one by renaming
it to its own temporary name (a rename is atomic: of two writers, one gets it), overwrites it in
place and cuts it to its size; none of the old bytes are left. The file system is the only
shared state, so this works across processes: the process that retires checkpoints (the client
committing them) is not the one writing the shards (the ps tasks).

One thing changes for a reader: a process still reading a retired file (it opened it before
the retirement) read the old bytes to the end when the file was unlinked; now the next save may
overwrite them under it. Its reads then fail their CRC-32C check (``DataLossError``, never wrong
values), as for any checkpoint removed while it is read.

Spares are bounded: at the end of each save ``prune`` keeps the newest ones, as many as the save
wrote data files (what the next save will want), and removes the rest; a process removes at its
exit the spares it made that nobody claimed. A crashed process leaves at most one checkpoint's
worth, which the next save in the directory prunes.
"""

from __future__ import annotations

import atexit
import os
import re
import secrets
import threading
import time

from tensorgrid.checkpoint import trash
from tensorgrid.checkpoint.data_file import DIRECT_MIN_BYTES

MARK = ".tg-spare-"
# only files written around the page cache claim spares; smaller ones are removed, not kept
MIN_BYTES = DIRECT_MIN_BYTES
SLACK = 2  # a spare is claimed for a file of at least 1/SLACK of its size

_NAME = re.compile(r"^" + re.escape(MARK) + r"(\d+)-(\d+)-[0-9a-f]+$")
_lock = threading.Lock()
_made: set[str] = set()  # the spares this process made (removed at exit when still there)


def _spares(directory: str) -> list[tuple[int, int, str]]:
    """The spares of ``directory``: (bytes, nanoseconds, path), newest first."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = []
    for name in names:
        m = _NAME.match(name)
        if m is not None:
            found.append((int(m.group(1)), int(m.group(2)), os.path.join(directory, name)))
    return sorted(found, key=lambda s: -s[1])


def _spare_name(directory: str, nbytes: int) -> str:
    return os.path.join(directory, f"{MARK}{nbytes}-{time.time_ns()}-{secrets.token_hex(4)}")


def _note(path: str) -> None:
    with _lock:
        if not _made:
            atexit.register(_remove_unclaimed)
        _made.add(path)


def keep(path: str) -> bool:
    """Retire the data file ``path`` as a spare of its directory, when it is large enough to be
    worth recycling; returns whether it did (False: the caller removes it).

    Raises:
        nothing: a file that cannot be renamed is left to the caller.
    """
    try:
        nbytes = os.stat(path).st_size
    except OSError:
        return False
    if nbytes < MIN_BYTES:
        return False
    spare = _spare_name(os.path.dirname(path) or ".", nbytes)
    try:
        os.rename(path, spare)
    except OSError:
        return False
    _note(spare)
    return True


def replace(src: str, dst: str) -> None:
    """``os.replace(src, dst)``, atomic as ever; a large file it replaces becomes a spare (a
    second name made first, so ``dst`` always names a complete file), a smaller one is freed in
    the background (``trash.replace``).

    Raises:
        OSError: the rename failed.
    """
    try:
        nbytes = os.stat(dst).st_size
    except OSError:
        nbytes = -1
    if nbytes < MIN_BYTES:
        trash.replace(src, dst)
        return
    name = _spare_name(os.path.dirname(dst) or ".", nbytes)
    spare: str | None = name
    try:
        os.link(dst, name)
    except OSError:
        spare = None  # no hard links here: the rename frees the old file
    try:
        os.replace(src, dst)
    except OSError:
        if spare is not None:
            os.remove(spare)
        raise
    if spare is not None:
        _note(spare)


def claim(directory: str, nbytes: int, dst: str) -> bool:
    """Rename a spare of ``directory`` fit for a file of ``nbytes`` to ``dst`` (the smallest
    one at least that large and at most ``SLACK`` times it); returns whether one was claimed.
    The caller overwrites it and cuts it to its size."""
    if nbytes < MIN_BYTES:
        return False
    fits = sorted((s for s in _spares(directory) if nbytes <= s[0] <= SLACK * nbytes),
                  key=lambda s: (s[0], -s[1]))
    for _, _, path in fits:
        try:
            os.rename(path, dst)
        except OSError:
            continue  # another writer took it first
        with _lock:
            _made.discard(path)
        return True
    return False


def prune(directory: str, keep_newest: int) -> int:
    """Keep the newest ``keep_newest`` spares of ``directory``, removing the others in the
    background (``trash``); returns how many go."""
    stale = _spares(directory)[max(keep_newest, 0):]
    for _, _, path in stale:
        with _lock:
            _made.discard(path)
        try:
            trash.remove(path)
        except OSError:
            pass
    return len(stale)


def remove_all(directory: str) -> int:
    """Remove every spare of ``directory`` (in the background); returns how many go."""
    return prune(directory, 0)


def _remove_unclaimed() -> None:
    with _lock:
        left = list(_made)
        _made.clear()
    for path in left:
        try:
            os.remove(path)
        except OSError:
            pass  # claimed by another process, or already pruned
