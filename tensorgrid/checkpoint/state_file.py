"""The ``checkpoint`` state file of a checkpoint directory, as TensorFlow writes and reads it: a
``CheckpointState`` in protobuf text format naming the newest checkpoint and every kept one.

Paths in the file are written relative to the directory when they lie in it (so the directory can
be moved or mounted elsewhere), otherwise absolute; a relative path read back is taken relative to
the directory, as TensorFlow does.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence

from google.protobuf import text_format

from tensorgrid.checkpoint import fs
from tensorgrid.core import errors
from tensorgrid.pb.tensor_bundle_pb2 import CheckpointState

STATE_FILENAME = "checkpoint"


def _absolute(path: str) -> str:
    """A local path made absolute; a URL is kept (it is absolute)."""
    return path if fs.scheme(path) is not None else os.path.abspath(path)


def _relative(directory: str, path: str) -> str:
    absolute = _absolute(path)
    if os.path.dirname(absolute) == _absolute(directory):
        return os.path.basename(absolute)
    return absolute


def write_state(directory: str, model_checkpoint_path: str, all_model_checkpoint_paths:
                Sequence[str], timestamps: Sequence[float] = (), last_preserved: float = 0.0,
                filename: str | None = None) -> str:
    """Write the state file of ``directory`` (via a temporary name, so readers never see half).

    Returns:
        The state file's path.

    Raises:
        UnavailableError: it cannot be written.
    """
    state = CheckpointState(
        model_checkpoint_path=_relative(directory, model_checkpoint_path),
        all_model_checkpoint_paths=[_relative(directory, p) for p in all_model_checkpoint_paths],
        all_model_checkpoint_timestamps=list(timestamps),
        last_preserved_timestamp=float(last_preserved))
    path = os.path.join(directory, filename or STATE_FILENAME)
    tmp = f"{path}.tmp{secrets.token_hex(6)}"
    where = fs.filesystem(directory)
    try:
        where.makedirs(directory)
        with where.open(tmp, "wb") as f:
            f.write(text_format.MessageToString(state).encode("utf-8"))
        where.rename(tmp, path)
    except OSError as exc:
        raise errors.UnavailableError(f"Cannot write checkpoint state file {path}: {exc}") from None
    return path


def read_state(directory: str, filename: str | None = None) -> CheckpointState | None:
    """The state file of ``directory`` with every path made absolute (relative ones are taken
    relative to the directory), or None when there is no state file.

    Raises:
        DataLossError: the file does not parse.
    """
    path = os.path.join(directory, filename or STATE_FILENAME)
    try:
        with fs.filesystem(directory).open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise errors.UnavailableError(f"Cannot read checkpoint state file {path}: {exc}") from None
    state = CheckpointState()
    try:
        text_format.Parse(text, state)
    except text_format.ParseError as exc:
        raise errors.DataLossError(f"Checkpoint state file {path} does not parse: {exc}") from None
    base = _absolute(directory)

    def absolute(p: str) -> str:
        return p if os.path.isabs(p) or fs.scheme(p) is not None else os.path.join(base, p)

    state.model_checkpoint_path = absolute(state.model_checkpoint_path) \
        if state.model_checkpoint_path else ""
    paths = [absolute(p) for p in state.all_model_checkpoint_paths]
    del state.all_model_checkpoint_paths[:]
    state.all_model_checkpoint_paths.extend(paths)
    return state


def mirror_state(directory: str, latest: str | None, kept: Sequence[tuple[str, float]],
                 filename: str | None = None) -> None:
    """Make the state file of ``directory`` name ``kept`` (checkpoint names with their times,
    oldest first) and ``latest``; remove it when there is none left."""
    if not kept or latest is None:
        try:
            fs.filesystem(directory).remove(os.path.join(directory, filename or STATE_FILENAME))
        except OSError:
            pass
        return
    write_state(directory, os.path.join(directory, latest),
                [os.path.join(directory, n) for n, _ in kept], [t for _, t in kept], kept[0][1],
                filename)
