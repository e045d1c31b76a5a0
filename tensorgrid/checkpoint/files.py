"""A checkpoint's files on disk, seen from its manifest: whether they are all there and intact
(cheaply: sizes, and the index's CRC-32C; the tensors' own checksums are checked when they are
read), reading tensors checked against the graph, removing the files, and finding the
checkpoints a directory holds. No Redis here: the kernels use this module.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tensorgrid.checkpoint import bundle_format as bf
from tensorgrid.checkpoint import fs, spares, trash
from tensorgrid.checkpoint import manifest as mf
from tensorgrid.checkpoint.bundle_reader import BundleReader
from tensorgrid.core import dtypes, errors
from tensorgrid.core.crc32c import crc32c
from tensorgrid.core.shapes import TensorShape

log = logging.getLogger("tensorgrid.checkpoint")

MISSING = "missing"  # the index is gone: the checkpoint was removed (not damaged)


def file_problem(manifest: Mapping[str, Any]) -> str | None:
    """None when every file of the manifest's checkpoint exists with its size (and the index
    with its CRC-32C); ``MISSING`` when its index file is gone; else what is wrong."""
    directory = manifest["directory"]
    where = fs.filesystem(directory)
    index_name = os.path.basename(bf.index_file(manifest["prefix"]))
    if not where.exists(os.path.join(directory, index_name)):
        return MISSING
    for record in manifest["files"]:
        path = os.path.join(directory, record["name"])
        try:
            size = where.size(path)
        except OSError:
            return MISSING if record["name"] == index_name else f"file {path} is missing"
        if size != record["bytes"]:
            return f"file {path} has {size} bytes, the manifest says {record['bytes']}"
        if record.get("crc32c") is not None:
            with where.open(path, "rb") as f:
                if crc32c(f.read()) != record["crc32c"]:
                    return f"file {path} does not match its CRC-32C in the manifest"
    return None


def remove_files(prefix: str) -> int:
    """Remove the files of the checkpoint ``prefix`` (index, data files, leftovers of a sharded
    save or of an interrupted removal); returns how many went. Large data files become spares
    that the next save in the directory overwrites (``spares``), else are renamed away at once
    and unlinked in the background (``trash``)."""
    where = fs.filesystem(prefix)
    if not where.local:
        return _remove_remote(where, prefix)
    removed = 0
    # first what an interrupted removal left (after it, this removal's own renamed files)
    for path in glob.glob(glob.escape(prefix) + ".data-?????-of-?????" + trash.MARK + "*"):
        try:
            os.remove(path)
        except OSError:
            pass
    data = glob.glob(glob.escape(prefix) + ".data-?????-of-?????")
    for path in [bf.index_file(prefix), *data]:
        try:
            if path in data and spares.keep(path):  # the next save overwrites it (spares.py)
                removed += 1
            else:
                removed += trash.remove(path)
        except OSError:
            pass
    for temp in glob.glob(glob.escape(prefix) + "_temp_*"):
        shutil.rmtree(temp, ignore_errors=True)
    return removed


def _remove_remote(where: fs.Filesystem, prefix: str) -> int:
    """``remove_files`` on an fsspec filesystem: each file at once (no background there)."""
    removed = 0
    pattern = glob.escape(prefix)
    temps = where.glob(pattern + "_temp_*/*")
    for path in [bf.index_file(prefix), *where.glob(pattern + ".data-?????-of-?????"), *temps]:
        try:
            where.remove(path)
            removed += path in (bf.index_file(prefix),) or ".data-" in os.path.basename(path)
        except OSError:
            pass
    for temp in where.glob(pattern + "_temp_*"):
        try:
            where.rmdir(temp)
        except OSError:
            pass
    return removed


def scan(directory: str) -> list[dict[str, Any]]:
    """The checkpoints whose index file lies in ``directory``, oldest first: ``{"name",
    "path", "time", "bytes"}`` (bytes of the index and its data files)."""
    out = []
    where = fs.filesystem(directory)
    for index in where.glob(os.path.join(glob.escape(directory), "*" + bf.INDEX_SUFFIX)):
        prefix = index[:-len(bf.INDEX_SUFFIX)]
        files = [index, *where.glob(glob.escape(prefix) + ".data-?????-of-?????")]
        try:
            stamp = where.mtime(index)
            size = sum(where.size(f) for f in files)
        except OSError:
            continue  # removed meanwhile
        out.append({"name": os.path.basename(prefix), "path": prefix, "time": stamp,
                    "bytes": size})
    return sorted(out, key=lambda r: (r["time"], r["name"]))


def check_manifest_files(manifest: Mapping[str, Any]) -> None:
    """Check a checkpoint's files against its manifest (sizes and the index's CRC-32C).

    Raises:
        NotFoundError: its index file is gone (the checkpoint was removed).
        DataLossError: a file is missing, or its size or checksum is wrong.
    """
    path = manifest["prefix"]
    problem = file_problem(manifest)
    if problem == MISSING:
        raise errors.NotFoundError(f"Checkpoint {path} not found: its index file is gone")
    if problem is not None:
        raise errors.DataLossError(f"Checkpoint {path} is damaged: {problem}")


def read_bundle(prefix: str, wanted: Mapping[str, tuple[dtypes.DType, TensorShape]] | None = None
                ) -> dict[str, np.ndarray]:
    """Read tensors of the bundle at ``prefix`` (``wanted``: name -> the graph's dtype and shape,
    each checked; None: every tensor), each checked against its CRC-32C.

    Raises:
        NotFoundError: no such bundle, or it lacks a wanted tensor.
        InvalidArgumentError: a tensor's dtype or shape differs from the graph's.
        DataLossError: a file is damaged (naming the checkpoint and the tensor).
    """
    with BundleReader(prefix) as reader:
        if wanted is None:
            return reader.read(reader.names())
        held = {n: (reader.dtype(n).name, reader.shape(n)) for n in reader.names()}
        for name, (dt, shape) in wanted.items():
            mf.check_tensor(prefix, held, name, dt.name, shape)
        return reader.read(wanted)


def skip_damaged(path: str, exc: errors.DataLossError, skipped: list[str]) -> None:
    """Log that a damaged checkpoint is skipped while restoring the latest, and note why."""
    skipped.append(exc.message)
    log.warning("Not restoring checkpoint %s, trying an older one: %s", path, exc.message)


def all_damaged(directory: str, skipped: Sequence[str]) -> errors.DataLossError:
    return errors.DataLossError(f"Every checkpoint of {directory} is damaged: "
                                + "; ".join(skipped))
