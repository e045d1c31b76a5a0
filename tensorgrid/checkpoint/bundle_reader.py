"""Reading tensor bundles (TensorFlow's checkpoint format V2), written by tensorgrid or by
TensorFlow: the index, then each tensor's bytes from its data file, checked against its CRC-32C.
A partitioned tensor (saved as slices) is read whole, assembled from its slices.

``BundleReader(prefix)`` is also what ``tf.train.load_checkpoint`` returns in TensorFlow:
``get_variable_to_shape_map``, ``get_variable_to_dtype_map``, ``has_tensor`` and ``get_tensor``.
Layout: ``bundle_format.py``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import google_crc32c
import numpy as np

from tensorgrid.checkpoint import bundle_format as bf
from tensorgrid.checkpoint import data_file, fs
from tensorgrid.checkpoint.bundle import Entry, read_index
from tensorgrid.core import dtypes, errors
from tensorgrid.core.crc32c import mask
from tensorgrid.pb import tensor_bundle_pb2


class BundleReader:
    """The tensors of the bundle at ``prefix``.

    Raises:
        NotFoundError: there is no index file at ``prefix``.
        DataLossError: the index is damaged.
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._fs = fs.filesystem(prefix)
        self.header, self._entries = read_index(prefix)
        self._big = self.header.endianness == tensor_bundle_pb2.BundleHeaderProto.BIG
        self._files: dict[int, Any] = {}  # FileIO locally, fsspec's file remotely
        self._names = {k.decode("utf-8", "replace"): k for k in self._entries
                       if not k.startswith(b"\x00")}  # keys starting with 0 are slices

    # ------------------------------------------------------------------ what is there
    def names(self) -> list[str]:
        """The tensors' names, sorted."""
        return sorted(self._names)

    def has_tensor(self, name: str) -> bool:
        return name in self._names

    def entry(self, name: str) -> Entry:
        """The index entry of tensor ``name``.

        Raises:
            NotFoundError: naming the tensor and the checkpoint.
        """
        key = self._names.get(name)
        if key is None:
            raise errors.NotFoundError(f"Key {name} not found in checkpoint {self.prefix}")
        return self._entries[key]

    def dtype(self, name: str) -> dtypes.DType:
        return self._dtype(name, self.entry(name))

    def shape(self, name: str) -> list[int]:
        return [int(d.size) for d in self.entry(name).shape.dim]

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return {n: self.shape(n) for n in self.names()}

    def get_variable_to_dtype_map(self) -> dict[str, dtypes.DType]:
        return {n: self.dtype(n) for n in self.names()}

    def data_files(self) -> list[str]:
        """The paths of the bundle's data files."""
        n = self.header.num_shards
        return [bf.data_file(self.prefix, i, n) for i in range(n)]

    # ------------------------------------------------------------------ reading
    def get_tensor(self, name: str) -> np.ndarray:
        """Tensor ``name``'s value, checked against its CRC-32C.

        Raises:
            NotFoundError: no such tensor, or a data file is missing.
            DataLossError: its bytes are short or do not match the checksum.
        """
        entry = self.entry(name)
        if entry.slices:
            return self._assemble(name, entry)
        return self._read(name, entry)

    def read(self, names: Iterable[str]) -> dict[str, np.ndarray]:
        """Several tensors at once, read in file order."""
        wanted = list(names)
        order = sorted(wanted, key=lambda n: (self.entry(n).shard_id, self.entry(n).offset))
        values = {n: self.get_tensor(n) for n in order}
        return {n: values[n] for n in wanted}

    def _dtype(self, name: str, entry: Entry) -> dtypes.DType:
        try:
            return dtypes.as_dtype(int(entry.dtype))
        except TypeError:
            raise errors.UnimplementedError(
                f"Tensor {name} of checkpoint {self.prefix} has data type {entry.dtype}, which "
                "tensorgrid does not support") from None

    def _file(self, shard: int) -> Any:
        f = self._files.get(shard)
        if f is None:
            path = bf.data_file(self.prefix, shard, self.header.num_shards)
            try:
                # unbuffered locally: large reads go straight into the tensors' arrays
                f = open(path, "rb", buffering=0) if self._fs.local \
                    else self._fs.open(path, "rb")  # noqa: SIM115 (kept open until close())
            except FileNotFoundError:
                raise errors.NotFoundError(
                    f"Checkpoint {self.prefix} is missing its data file {path}") from None
            except OSError as exc:
                raise errors.UnavailableError(f"Cannot read {path}: {exc}") from None
            self._files[shard] = f
        return f

    def _damaged(self, name: str, why: str) -> errors.DataLossError:
        return errors.DataLossError(f"Checkpoint {self.prefix} is damaged: tensor {name} {why}")

    def _read_into(self, name: str, entry: Entry, buf: memoryview) -> None:
        f = self._file(entry.shard_id)
        f.seek(entry.offset)
        got = 0
        while got < len(buf):
            n = f.readinto(buf[got:])
            if not n:
                raise self._damaged(name, f"is cut off: {got} of {len(buf)} bytes in "
                                          f"{getattr(f, 'name', 'its data file')}")
            got += n

    def _read_checked(self, name: str, entry: Entry, view: np.ndarray) -> int:
        """Read a tensor's bytes into ``view``; returns their CRC-32C."""
        f = self._file(entry.shard_id)
        if not self._fs.local:  # sequential reads through fsspec's file
            self._read_into(name, entry, view.data)
            return int(google_crc32c.value(bytes(view))) if view.nbytes else 0
        try:
            got, crc = data_file.read_into(f.fileno(), entry.offset, view)
        except OSError as exc:
            raise errors.UnavailableError(f"Cannot read {f.name}: {exc}") from None
        if got < view.nbytes:
            raise self._damaged(name, f"is cut off: {got} of {view.nbytes} bytes in {f.name}")
        return crc

    def _read(self, name: str, entry: Entry) -> np.ndarray:
        dt = self._dtype(name, entry)
        shape = tuple(int(d.size) for d in entry.shape.dim)
        count = math.prod(shape)
        if dt is dtypes.string:
            raw = bytearray(entry.size)
            self._read_into(name, entry, memoryview(raw))
            try:
                arr, crc = bf.decode_strings(memoryview(raw), count)
            except ValueError as exc:
                raise self._damaged(name, f"has malformed string data ({exc})") from None
            self._check(name, entry, crc)
            return arr.reshape(shape)
        np_dtype = np.dtype(dt.np).newbyteorder(">" if self._big else "<")
        if entry.size != count * np_dtype.itemsize:
            raise self._damaged(name, f"has {entry.size} bytes in its entry, but {count} "
                                      f"{dt.name} values take {count * np_dtype.itemsize}")
        arr = np.empty(shape, dtype=np_dtype)
        self._check(name, entry, self._read_checked(name, entry, arr.reshape(-1).view(np.uint8)))
        return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))

    def _check(self, name: str, entry: Entry, crc: int) -> None:
        if mask(crc) != entry.crc32c:
            raise self._damaged(name, "does not match its checksum")

    def _assemble(self, name: str, entry: Entry) -> np.ndarray:
        shape = [int(d.size) for d in entry.shape.dim]
        dt = self._dtype(name, entry)
        out = np.empty(shape, dtype=object if dt is dtypes.string else dt.np)
        covered = 0
        for proto in entry.slices:
            try:
                starts, lengths = bf.slice_bounds(proto, shape)
            except ValueError as exc:
                raise self._damaged(name, f"has a bad slice ({exc})") from None
            skey = bf.slice_key(name, starts, lengths)
            part_entry = self._entries.get(skey)
            if part_entry is None:
                raise self._damaged(name, f"lacks its slice at {starts} (lengths {lengths})")
            part = self._read(name, part_entry)
            region = _region(starts, lengths, shape)
            if part.shape != out[region].shape:
                raise self._damaged(name, f"has a slice of shape {list(part.shape)} where "
                                          f"{list(out[region].shape)} was expected")
            out[region] = part
            covered += part.size
        if covered != out.size:
            raise self._damaged(name, f"has slices covering {covered} of {out.size} elements")
        return out

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()

    def __enter__(self) -> BundleReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _region(starts: Sequence[int], lengths: Sequence[int | None],
            shape: Sequence[int]) -> tuple[slice, ...]:
    return tuple(slice(s, (s + n) if n is not None else d)
                 for s, n, d in zip(starts, lengths, shape))


def bundle_exists(prefix: str) -> bool:
    """Whether a bundle's index file exists at ``prefix``."""
    return fs.filesystem(prefix).isfile(bf.index_file(prefix))


def load_checkpoint(prefix: str) -> BundleReader:
    """A reader of the checkpoint ``prefix`` (``tf.train.load_checkpoint`` for a bundle path)."""
    return BundleReader(prefix)


def read_all(prefix: str) -> dict[str, Any]:
    """Every tensor of the bundle at ``prefix``, by name."""
    with BundleReader(prefix) as reader:
        return reader.read(reader.names())
