"""``tf.gfile`` (and ``tf.io.gfile``): the file functions TF1 programs call around their input
pipelines, over local files (paths as ``open`` takes them; relative to the working directory).

TF1 names (``Exists``, ``Glob``, ``GFile``, ``MakeDirs``...) and ``tf.io.gfile``'s lower-case ones
(``exists``, ``glob``, ``makedirs``...) are the same functions. Errors are TensorFlow's:
``NotFoundError`` for a missing path, ``AlreadyExistsError``/``FailedPreconditionError`` where
TensorFlow raises them.
"""

from __future__ import annotations

import glob as _glob
import os
import shutil
from collections.abc import Iterator
from typing import IO, Any, NamedTuple

from tensorgrid.core import errors

__all__ = [
    "Copy", "DeleteRecursively", "Exists", "FastGFile", "GFile", "Glob", "IsDirectory",
    "ListDirectory", "MakeDirs", "MkDir", "Open", "Remove", "Rename", "Stat", "Walk", "copy",
    "exists", "glob", "isdir", "listdir", "makedirs", "mkdir", "remove", "rename", "rmtree",
    "stat", "walk",
]


def _path(path: Any) -> str:
    return path.decode() if isinstance(path, bytes) else os.fspath(path)


def GFile(name: Any, mode: str = "r") -> IO[Any]:
    """The file ``name`` opened in ``mode`` (as ``open``; text modes read and write UTF-8).

    Raises:
      NotFoundError: reading a file that does not exist.
    """
    path = _path(name)
    try:
        if "b" in mode:
            return open(path, mode)
        return open(path, mode, encoding="utf-8")
    except FileNotFoundError as e:
        raise errors.NotFoundError(f"{path}; No such file or directory") from e


Open = FastGFile = GFile


def Exists(path: Any) -> bool:
    """Whether ``path`` exists (a file or a directory)."""
    return os.path.exists(_path(path))


def IsDirectory(path: Any) -> bool:
    """Whether ``path`` is a directory."""
    return os.path.isdir(_path(path))


def Glob(pattern: Any) -> list[str]:
    """The paths matching ``pattern`` (a glob, or a list of them), sorted per pattern."""
    patterns = pattern if isinstance(pattern, list | tuple) else [pattern]
    return [m for p in patterns for m in sorted(_glob.glob(_path(p)))]


def ListDirectory(path: Any) -> list[str]:
    """The names of the entries of directory ``path``.

    Raises:
      NotFoundError: ``path`` is not a directory.
    """
    if not os.path.isdir(_path(path)):
        raise errors.NotFoundError(f"Could not find directory {_path(path)}")
    return sorted(os.listdir(_path(path)))


def MakeDirs(path: Any) -> None:
    """Create directory ``path`` and its missing parents (nothing when it exists)."""
    os.makedirs(_path(path), exist_ok=True)


def MkDir(path: Any) -> None:
    """Create directory ``path``; its parent must exist.

    Raises:
      AlreadyExistsError: ``path`` exists. NotFoundError: its parent does not.
    """
    try:
        os.mkdir(_path(path))
    except FileExistsError as e:
        raise errors.AlreadyExistsError(f"{_path(path)} already exists") from e
    except FileNotFoundError as e:
        raise errors.NotFoundError(f"{_path(path)}: the parent directory does not exist") from e


def Remove(path: Any) -> None:
    """Delete file ``path``.

    Raises:
      NotFoundError: there is no such file.
    """
    try:
        os.remove(_path(path))
    except FileNotFoundError as e:
        raise errors.NotFoundError(f"{_path(path)}; No such file or directory") from e


def DeleteRecursively(path: Any) -> None:
    """Delete ``path`` and, for a directory, everything under it.

    Raises:
      NotFoundError: ``path`` does not exist.
    """
    p = _path(path)
    if not os.path.exists(p):
        raise errors.NotFoundError(f"{p}; No such file or directory")
    if os.path.isdir(p):
        shutil.rmtree(p)
    else:
        os.remove(p)


def Rename(oldname: Any, newname: Any, overwrite: bool = False) -> None:
    """Move ``oldname`` to ``newname``.

    Raises:
      AlreadyExistsError: ``newname`` exists and not ``overwrite``. NotFoundError: no
        ``oldname``.
    """
    old, new = _path(oldname), _path(newname)
    if not os.path.exists(old):
        raise errors.NotFoundError(f"{old}; No such file or directory")
    if os.path.exists(new) and not overwrite:
        raise errors.AlreadyExistsError(f"file already exists: {new}")
    os.replace(old, new)


def Copy(oldpath: Any, newpath: Any, overwrite: bool = False) -> None:
    """Copy file ``oldpath`` to ``newpath``.

    Raises:
      AlreadyExistsError: ``newpath`` exists and not ``overwrite``. NotFoundError: no
        ``oldpath``.
    """
    old, new = _path(oldpath), _path(newpath)
    if not os.path.isfile(old):
        raise errors.NotFoundError(f"{old}; No such file or directory")
    if os.path.exists(new) and not overwrite:
        raise errors.AlreadyExistsError(f"file already exists: {new}")
    shutil.copyfile(old, new)


class FileStatistics(NamedTuple):
    """What ``Stat`` tells of a path."""

    length: int
    mtime_nsec: int
    is_directory: bool


def Stat(path: Any) -> FileStatistics:
    """The length, modification time (ns) and kind of ``path``.

    Raises:
      NotFoundError: ``path`` does not exist.
    """
    try:
        st = os.stat(_path(path))
    except FileNotFoundError as e:
        raise errors.NotFoundError(f"{_path(path)}; No such file or directory") from e
    return FileStatistics(st.st_size, st.st_mtime_ns, os.path.isdir(_path(path)))


def Walk(top: Any, in_order: bool = True) -> Iterator[tuple[str, list[str], list[str]]]:
    """``(directory, subdirectories, files)`` for ``top`` and each directory under it, parents
    first when ``in_order``, else children first."""
    yield from os.walk(_path(top), topdown=in_order)


# tf.io.gfile's names
copy, exists, glob, isdir, listdir = Copy, Exists, Glob, IsDirectory, ListDirectory
makedirs, mkdir, remove, rename, rmtree = MakeDirs, MkDir, Remove, Rename, DeleteRecursively
stat, walk = Stat, Walk
