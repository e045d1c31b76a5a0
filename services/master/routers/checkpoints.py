"""``/v1/checkpoints``: the checkpoints in Redis (``REDIS_URL``, else the embedded server), read
only: directories, the checkpoints of one, and one checkpoint's manifest and status."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Query

from services.master.deps import Authorized, State
from services.master.errors import ApiError, invalid
from services.master.schemas import error_responses
from services.master.state import MasterState
from tensorgrid.checkpoint import listing
from tensorgrid.checkpoint.redis_server import redis_url
from tensorgrid.checkpoint.store import CheckpointStore
from tensorgrid.core import errors


def _path_part(value: str, what: str) -> str:
    """A directory or checkpoint name from the request, refused when no file can have it.

    Raises:
        ApiError(invalid_argument): it holds a NUL character.
    """
    if "\x00" in value:
        raise invalid(f"The checkpoint {what} {value!r} holds a NUL character", "invalid_argument")
    return value


async def _confined(store: CheckpointStore, state: MasterState, directory: str) -> str:
    """The directory, when the master may read it: tracked for this cluster, or under the
    configured ``checkpoint_root``.

    Raises:
        ApiError(checkpoint_directory_not_allowed): any other directory (HTTP 403).
    """
    try:
        return await listing.confine(store, directory, state.settings.checkpoint_root)
    except errors.PermissionDeniedError as exc:
        raise ApiError(exc, listing.NOT_ALLOWED) from None


router = APIRouter(prefix="/v1/checkpoints", tags=["checkpoints"], dependencies=[Authorized])


async def _store(state: MasterState) -> CheckpointStore:
    """A connection to the Redis of the master's settings (the embedded one under its home when
    none is set)."""
    # redis_url() may start the embedded server (a subprocess and a wait): off the event loop
    settings = state.settings
    url = await asyncio.to_thread(redis_url, settings.redis_url, settings.home_dir)
    return CheckpointStore.connect(url)


@router.get("", summary="Checkpoint directories, or the checkpoints of one",
            responses=error_responses(400, 401, 403, 503))
async def list_checkpoints(
        state: State,
        directory: Annotated[str | None, Query(alias="dir", description="a checkpoint directory, "
                                               "e.g. runs/exp1")] = None) -> dict[str, Any]:
    """Without ``dir``: every directory with its checkpoint count and latest intact checkpoint.
    With it: that directory's checkpoints, oldest first, each with its global step, time, size,
    whether ``latest`` names it, and its status ("ok" or "damaged: why", from the manifest and
    the blobs' byte counts). Only a directory Redis tracks for this cluster, or one under the
    master's ``checkpoint_root``, is read: any other answers 403 (reason
    ``checkpoint_directory_not_allowed``)."""
    if directory is not None:
        directory = _path_part(directory, "directory")
    async with await _store(state) as store:
        if directory is None:
            return {"directories": await listing.summarize(store)}
        directory = await _confined(store, state, directory)
        return {"directory": directory, "checkpoints": await listing.describe(store, directory)}


@router.get("/{directory:path}/{name}", summary="One checkpoint: manifest and status",
            responses=error_responses(400, 401, 403, 404, 503))
async def show_checkpoint(
        directory: str, name: str, state: State,
        verify: Annotated[bool, Query(description="read every blob and check its sha256")] = False
) -> dict[str, Any]:
    """The checkpoint ``name`` of ``directory`` (``/v1/checkpoints/runs/exp1/model.ckpt-100``):
    its global step, time, tensors (dtype, shape, bytes, sha256, device) and status. 404 when it
    does not exist, 403 when the directory is not one the master may read (as for the
    listing), 503 when Redis is down."""
    directory, name = _path_part(directory, "directory"), _path_part(name, "name")
    async with await _store(state) as store:
        directory = await _confined(store, state, directory)
        return await listing.show(store, directory, name, verify)
