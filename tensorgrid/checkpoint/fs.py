"""Where a checkpoint's files live: the local filesystem (a local path, a ``file://`` URL, or a
shared filesystem mounted on every task), or any filesystem ``fsspec`` knows, named by a URL
(``sftp://host/dir``, ``ftp://host:2121/dir``, ``s3://bucket/dir``, ``memory://dir``...).

``filesystem(path)`` gives the object that does a checkpoint's file operations on ``path``; the
rest of the checkpoint package asks it, never ``os`` directly, for what it may do on a remote
filesystem. Local files keep what only the local filesystem gives: ``O_DIRECT`` writes,
recycled data files, parallel reads at file offsets, background removal. On an fsspec
filesystem the files are written through fsspec's buffered files and renamed with its ``mv``
(atomic where the server's rename is: SFTP, FTP, WebDAV, local; a copy then a removal on object
stores, so a reader may meet a partial file there, and the CRC-32C of the manifest and of each
tensor still tell). A remote path is always the full URL, so every task resolves it the same
way; credentials come from fsspec's own configuration (its environment variables and config
files) or the URL.
"""

from __future__ import annotations

import contextlib
import glob as _glob
import os
import posixpath
import re
from collections.abc import Iterator
from typing import IO, Any

from tensorgrid.core import errors

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)


def scheme(path: str) -> str | None:
    """The URL scheme of ``path`` in lower case (None: a plain path)."""
    found = _URL.match(path)
    return None if found is None else found.group(1).lower()


def is_remote(path: str) -> bool:
    """Whether ``path`` is a URL of a scheme other than ``file`` (an fsspec filesystem)."""
    s = scheme(path)
    return s is not None and s != "file"


def normalize_url(url: str) -> str:
    """A remote URL in one spelling: ``scheme://authority/normalized/path`` (no ``..``, no
    doubled or trailing ``/``; the scheme in lower case)."""
    s = scheme(url)
    authority, _, path = url.split("://", 1)[1].partition("/")
    norm = posixpath.normpath("/" + path)
    return f"{s}://{authority}{'' if norm == '/' else norm}"


class LocalFilesystem:
    """The local filesystem (``os``): what every checkpoint path that is not a URL names."""

    local = True

    def open(self, path: str, mode: str) -> IO[bytes]:
        return open(path, mode)

    def makedirs(self, path: str) -> None:
        os.makedirs(path or ".", exist_ok=True)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def remove(self, path: str) -> None:
        os.remove(path)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isfile(self, path: str) -> bool:
        return os.path.isfile(path)

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def mtime(self, path: str) -> float:
        return os.path.getmtime(path)

    def glob(self, pattern: str) -> list[str]:
        return _glob.glob(pattern)


@contextlib.contextmanager
def _as_os_errors(what: str) -> Iterator[None]:
    """The errors of an fsspec filesystem as ``OSError``: each filesystem raises its own
    (``ftplib.error_perm``, botocore's, paramiko's...), and the checkpoint code handles
    ``OSError``."""
    try:
        yield
    except OSError:
        raise
    except Exception as exc:  # any filesystem's own error class (see above)
        raise OSError(f"{what}: {type(exc).__name__}: {exc}") from exc


class _RemoteFile:
    """An fsspec file whose errors are ``OSError`` (what ``open`` returns remotely)."""

    def __init__(self, f: Any, path: str) -> None:
        self._f = f
        self.name = path

    def write(self, data: Any) -> int:
        with _as_os_errors(f"writing {self.name}"):
            return int(self._f.write(data))

    def read(self, n: int = -1) -> bytes:
        with _as_os_errors(f"reading {self.name}"):
            return bytes(self._f.read(n))

    def readinto(self, buf: Any) -> int:
        with _as_os_errors(f"reading {self.name}"):
            return int(self._f.readinto(buf))

    def seek(self, offset: int, whence: int = 0) -> int:
        with _as_os_errors(f"seeking in {self.name}"):
            return int(self._f.seek(offset, whence))

    def flush(self) -> None:
        with _as_os_errors(f"writing {self.name}"):
            self._f.flush()

    def close(self) -> None:
        with _as_os_errors(f"closing {self.name}"):
            self._f.close()

    def __enter__(self) -> _RemoteFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FsspecFilesystem:
    """A filesystem of fsspec, reached by the URLs of one scheme; paths in and out are full URLs.

    Args:
        fs: the fsspec filesystem.
        url: a URL on it (its scheme and authority prefix every path this returns).
    """

    local = False

    def __init__(self, fs: Any, url: str) -> None:
        self._fs = fs
        # what fsspec keeps of a URL differs by filesystem ("bucket/key" of s3://bucket/key,
        # "/dir/file" of ftp://host/dir/file): the prefix it drops is what paths get back
        stripped = fs._strip_protocol(url)
        kept = stripped.lstrip("/")
        self._base = url[:len(url) - len(kept)] if kept and url.endswith(kept) else \
            url.rstrip("/") + "/"
        self._lead = "/" if stripped.startswith("/") else ""

    def _path(self, url: str) -> str:
        # cut the prefix by hand: fsspec's own parsing takes a glob's "?" for a query string
        if url.startswith(self._base):
            return self._lead + url[len(self._base):]
        return self._fs._strip_protocol(url)  # type: ignore[no-any-return]

    def _url(self, path: str) -> str:
        return self._base + path.lstrip("/")

    def open(self, path: str, mode: str) -> Any:
        with _as_os_errors(f"opening {path}"):
            return _RemoteFile(self._fs.open(self._path(path), mode), path)

    def makedirs(self, path: str) -> None:
        with _as_os_errors(f"making {path}"):
            try:
                self._fs.makedirs(self._path(path), exist_ok=True)
            except Exception:
                # the shards of one save make their directory at once: another task's mkdir
                # may win between this one's check and its own mkdir (and this filesystem's
                # cached listing of the parent predates it)
                self._fs.invalidate_cache()
                if not self._fs.isdir(self._path(path)):
                    raise

    def rename(self, src: str, dst: str) -> None:
        with _as_os_errors(f"renaming {src} to {dst}"):
            if self._fs.exists(self._path(dst)):
                self._fs.rm_file(self._path(dst))  # not every server's rename replaces
            self._fs.mv(self._path(src), self._path(dst))

    def remove(self, path: str) -> None:
        with _as_os_errors(f"removing {path}"):
            if not self._fs.exists(self._path(path)):
                raise FileNotFoundError(path)
            self._fs.rm_file(self._path(path))

    def rmdir(self, path: str) -> None:
        with _as_os_errors(f"removing {path}"):
            self._fs.rmdir(self._path(path))

    def exists(self, path: str) -> bool:
        with _as_os_errors(f"looking for {path}"):
            return bool(self._fs.exists(self._path(path)))

    def isfile(self, path: str) -> bool:
        with _as_os_errors(f"looking for {path}"):
            return bool(self._fs.isfile(self._path(path)))

    def size(self, path: str) -> int:
        with _as_os_errors(f"looking for {path}"):
            try:
                return int(self._fs.size(self._path(path)))
            except KeyError as exc:  # some filesystems' "no such file"
                raise FileNotFoundError(f"{path}: {exc}") from None

    def mtime(self, path: str) -> float:
        with _as_os_errors(f"looking for {path}"):
            try:
                return float(self._fs.modified(self._path(path)).timestamp())
            except NotImplementedError:
                return 0.0

    def glob(self, pattern: str) -> list[str]:
        with _as_os_errors(f"listing {pattern}"):
            try:
                found = self._fs.glob(self._path(pattern))
            except FileNotFoundError:
                return []
        return [self._url(p) for p in found]


Filesystem = LocalFilesystem | FsspecFilesystem
LOCAL = LocalFilesystem()


def filesystem(path: str) -> Filesystem:
    """The filesystem of a checkpoint path (a path or ``file://`` URL: the local one).

    Raises:
        UnimplementedError: fsspec is not installed, or knows no filesystem of the URL's scheme
            (or that filesystem needs a package that is missing).
        UnavailableError: the filesystem cannot be reached.
    """
    if not is_remote(path):
        return LOCAL
    try:
        import fsspec  # lazy: only remote checkpoint paths need it
    except ImportError:
        raise errors.UnimplementedError(
            f"Checkpoint path {path!r} is a URL; reading and writing it needs fsspec "
            "(pip install fsspec)") from None
    try:
        fs, _ = fsspec.core.url_to_fs(path)
    except (ImportError, ValueError) as exc:
        raise errors.UnimplementedError(
            f"Checkpoint path {path!r}: no filesystem for {scheme(path)}:// ({exc})") from None
    except OSError as exc:
        raise errors.UnavailableError(f"Cannot reach checkpoint path {path!r}: {exc}") from None
    return FsspecFilesystem(fs, path)
