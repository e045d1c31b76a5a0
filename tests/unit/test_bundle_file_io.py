"""Data files written around the page cache (``O_DIRECT`` through staging buffers) hold exactly
the bytes a buffered write produces; filesystems that refuse ``O_DIRECT`` get buffered writes; a
failed write leaves no file behind and names the checkpoint. Large files that a save overwrites
or retires leave their names at once and are unlinked in the background."""

from __future__ import annotations

import errno
import filecmp
import os

import numpy as np
import pytest

from tensorgrid.checkpoint import bundle_format as bf
from tensorgrid.checkpoint import data_file, trash
from tensorgrid.checkpoint.bundle import BundleWriter
from tensorgrid.checkpoint.bundle_reader import BundleReader
from tensorgrid.checkpoint.files import remove_files
from tensorgrid.core import errors

needs_o_direct = pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="no O_DIRECT here")


def _tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        # spans several staging buffers and ends inside a block
        "big": rng.standard_normal(data_file.CHUNK // 4 * 2 + 1001).astype(np.float32),
        "empty": np.zeros((0, 3), np.float32),
        "ints": rng.integers(-5, 5, (7, 3)).astype(np.int64),
        "strings": np.array([b"a" * 5000, b"", "\u00e9t\u00e9".encode()], dtype=object),
        "scalar": np.array(2.5, np.float64),
        "tail": rng.standard_normal(3_333).astype(np.float16),
    }


def _write(prefix: str, tensors: dict[str, np.ndarray], **kw) -> BundleWriter:
    w = BundleWriter(prefix, **kw)
    for name, value in tensors.items():
        w.add(name, value)
    w.finish()
    return w


def _same_files(a: str, b: str) -> bool:
    return all(filecmp.cmp(a + suffix, b + suffix, shallow=False)
               for suffix in (".index", ".data-00000-of-00001"))


def _direct_refused(tmp_path) -> bool:
    try:
        fd = os.open(tmp_path / "probe", os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    except OSError:
        return True
    os.close(fd)
    return False


@needs_o_direct
def test_direct_and_buffered_files_are_byte_identical(tmp_path):
    tensors = _tensors()
    w = BundleWriter(str(tmp_path / "d" / "m"), direct=True)
    assert w.direct_io == (not _direct_refused(tmp_path))
    for name, value in tensors.items():
        w.add(name, value)
    w.finish()
    _write(str(tmp_path / "b" / "m"), tensors, direct=False)
    assert _same_files(str(tmp_path / "d" / "m"), str(tmp_path / "b" / "m"))
    data = tmp_path / "d" / "m.data-00000-of-00001"
    assert os.path.getsize(data) % data_file.ALIGN != 0  # the padding of the last block is cut
    with BundleReader(str(tmp_path / "d" / "m")) as r:
        got = r.read(list(tensors))
    for name, value in tensors.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape
        assert np.array_equal(got[name], value), name
    assert not [p for p in os.listdir(tmp_path / "d") if "tempstate" in p]


@needs_o_direct
def test_large_shards_go_around_the_page_cache_small_ones_do_not(tmp_path):
    if _direct_refused(tmp_path):
        pytest.skip("this filesystem refuses O_DIRECT")
    big = BundleWriter(str(tmp_path / "big"), expected_bytes=data_file.DIRECT_MIN_BYTES)
    small = BundleWriter(str(tmp_path / "small"), expected_bytes=1 << 20)
    assert big.direct_io and not small.direct_io
    big.abort()
    small.abort()
    assert os.listdir(tmp_path) == ["probe"]


@needs_o_direct
def test_filesystem_refusing_o_direct_at_open_gets_buffered_writes(tmp_path, monkeypatch):
    real_open = os.open

    def refusing_open(path, flags, *args):
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refusing_open)
    tensors = _tensors()
    w = BundleWriter(str(tmp_path / "d" / "m"), direct=True)
    assert not w.direct_io
    for name, value in tensors.items():
        w.add(name, value)
    w.finish()
    monkeypatch.undo()
    _write(str(tmp_path / "b" / "m"), tensors, direct=False)
    assert _same_files(str(tmp_path / "d" / "m"), str(tmp_path / "b" / "m"))


@needs_o_direct
def test_filesystem_refusing_o_direct_writes_falls_back_mid_file(tmp_path, monkeypatch):
    if _direct_refused(tmp_path):
        pytest.skip("this filesystem refuses O_DIRECT")
    import fcntl

    real_pwrite = os.pwrite
    refused = []

    def picky_pwrite(fd, data, offset):
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            refused.append(offset)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", picky_pwrite)
    tensors = _tensors()
    _write(str(tmp_path / "d" / "m"), tensors, direct=True)
    monkeypatch.undo()
    assert refused == [0]
    _write(str(tmp_path / "b" / "m"), tensors, direct=False)
    assert _same_files(str(tmp_path / "d" / "m"), str(tmp_path / "b" / "m"))


@pytest.mark.parametrize("direct", [True, False])
def test_failed_write_removes_the_file_and_names_the_checkpoint(tmp_path, monkeypatch, direct):
    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    prefix = str(tmp_path / "m")
    w = BundleWriter(prefix, direct=direct)
    if w.direct_io:
        monkeypatch.setattr(os, "pwrite", full_disk)
    else:
        monkeypatch.setattr(w._out._file, "write", full_disk)  # the buffered file object
    with pytest.raises(errors.UnavailableError, match=r"m.*No space left") as info:
        w.add("big", np.ones(data_file.CHUNK // 4 * 3, np.float32))
        w.add("more", np.ones(data_file.CHUNK // 4 * 3, np.float32))
        w.finish()
    assert "m" in info.value.message
    assert os.listdir(tmp_path) == []
    assert not os.path.exists(bf.index_file(prefix))


def test_staging_buffers_are_reused_from_save_to_save(tmp_path):
    if not hasattr(os, "O_DIRECT") or _direct_refused(tmp_path):
        pytest.skip("no O_DIRECT here")
    w1 = data_file.DataFileWriter(str(tmp_path / "a"), direct=True)
    first = {buf.ctypes.data for buf in w1._bufs}
    w1.close()
    w2 = data_file.DataFileWriter(str(tmp_path / "b"), direct=True)
    assert {buf.ctypes.data for buf in w2._bufs} == first
    assert all(buf.ctypes.data % data_file.ALIGN == 0 for buf in w2._bufs)
    w2.close()
    assert os.path.getsize(tmp_path / "b") == 0


def _file(path, nbytes: int, fill: int) -> None:
    with open(path, "wb") as f:
        f.write(bytes([fill]) * nbytes)


def test_large_files_leave_their_names_at_once_and_go_in_the_background(tmp_path):
    big, small = tmp_path / "big", tmp_path / "small"
    _file(big, trash.LARGE_BYTES, 1)
    _file(small, 10, 2)
    assert trash.remove(str(big)) and trash.remove(str(small))
    assert not big.exists() and not small.exists()
    assert not trash.remove(str(big))
    trash.wait()
    assert os.listdir(tmp_path) == []


def test_replacing_a_large_file_is_atomic_and_frees_the_old_one(tmp_path):
    old, new = tmp_path / "data", tmp_path / "data.tmp"
    _file(old, trash.LARGE_BYTES, 1)
    _file(new, trash.LARGE_BYTES + 5, 2)
    with open(old, "rb") as reader:  # a reader of the old file keeps reading it
        trash.replace(str(new), str(old))
        assert reader.read(3) == b"\x01\x01\x01"
    assert os.path.getsize(old) == trash.LARGE_BYTES + 5
    trash.wait()
    assert os.listdir(tmp_path) == ["data"]


def test_removing_a_checkpoint_takes_leftovers_of_an_interrupted_removal(tmp_path):
    prefix = str(tmp_path / "model.ckpt-7")
    _write(prefix, {"w": np.ones(trash.LARGE_BYTES // 4, np.float32)})
    _file(prefix + ".data-00000-of-00001" + trash.MARK + "0123", 10, 0)
    _file(str(tmp_path / "model.ckpt-70.index"), 10, 0)  # another checkpoint: kept
    assert remove_files(prefix) == 2
    trash.wait()
    assert os.listdir(tmp_path) == ["model.ckpt-70.index"]


def test_large_tensors_are_read_in_parallel_blocks_and_checked(tmp_path):
    prefix = str(tmp_path / "m")
    rng = np.random.default_rng(1)
    big = rng.standard_normal(data_file.PARALLEL_MIN_BYTES // 8 * 3 + 7)  # float64, odd tail
    _write(prefix, {"a": np.arange(10, dtype=np.int32), "big": big})
    with BundleReader(prefix) as r:
        assert np.array_equal(r.get_tensor("big"), big)
    data = prefix + ".data-00000-of-00001"
    offset = 40 + big.nbytes // 2  # a byte in a middle block
    with open(data, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 1]))
    with BundleReader(prefix) as r, pytest.raises(errors.DataLossError, match="big.*checksum"):
        r.get_tensor("big")
    os.truncate(data, 40 + data_file.CHUNK + 123)
    with BundleReader(prefix) as r, pytest.raises(errors.DataLossError, match="big is cut off"):
        r.get_tensor("big")


def _drop_from_page_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise here")
@pytest.mark.parametrize("cached_bytes", [0, data_file.CHUNK + 4096 * 3, None])
def test_large_tensors_read_the_same_from_the_cache_the_disk_or_both(tmp_path, cached_bytes):
    prefix = str(tmp_path / "m")
    rng = np.random.default_rng(2)
    big = rng.standard_normal(data_file.PARALLEL_MIN_BYTES // 4 * 2 + 5).astype(np.float32)
    _write(prefix, {"big": big}, direct=False)
    data = prefix + ".data-00000-of-00001"
    _drop_from_page_cache(data)
    with open(data, "rb") as f:  # bring some (or all) of it back into the page cache
        f.read(os.path.getsize(data) if cached_bytes is None else cached_bytes)
    with BundleReader(prefix) as r:
        got = r.get_tensor("big")
    assert got.dtype == np.float32 and np.array_equal(got, big)
