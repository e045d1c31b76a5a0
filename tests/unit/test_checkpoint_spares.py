"""Retired data files are recycled: a save's data file overwrites, in place, a spare that an
earlier save left in the directory (the same inode), cut to its size, and the checkpoint reads
back exactly; spares stay bounded by what the next save needs, and a process removes the ones
nobody claimed when it exits."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.checkpoint import bundle_format as bf
from tensorgrid.checkpoint import spares, trash
from tensorgrid.checkpoint.bundle import BundleWriter
from tensorgrid.checkpoint.files import read_bundle, remove_files
from tensorgrid.checkpoint.redis_server import start_redis
from tensorgrid.client.train.saver import Saver

needs_o_direct = pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="no O_DIRECT here")
N = spares.MIN_BYTES // 4  # float32 elements of a data file just large enough to be kept


def _save(prefix: str, value: np.ndarray) -> BundleWriter:
    w = BundleWriter(prefix, expected_bytes=value.nbytes, direct=True)
    w.add("w", value)
    w.finish()
    return w


def _spares(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.startswith(spares.MARK))


@needs_o_direct
def test_a_retired_data_file_is_overwritten_in_place_by_the_next_save(tmp_path):
    old = str(tmp_path / "model.ckpt-1")
    _save(old, np.full(N + 1000, 7.0, np.float32))  # larger: the new file is cut to its size
    inode = os.stat(bf.data_file(old, 0, 1)).st_ino
    remove_files(old)
    [spare] = _spares(tmp_path)
    assert os.stat(tmp_path / spare).st_ino == inode

    new = str(tmp_path / "model.ckpt-2")
    value = np.arange(N, dtype=np.float32)
    _save(new, value)
    data = bf.data_file(new, 0, 1)
    assert os.stat(data).st_ino == inode and _spares(tmp_path) == []
    assert os.path.getsize(data) == value.nbytes  # nothing of the old bytes is left
    np.testing.assert_array_equal(read_bundle(new)["w"], value)  # CRC-32C checked


@needs_o_direct
def test_a_spare_too_small_or_far_too_large_is_not_claimed(tmp_path):
    old = str(tmp_path / "a")
    _save(old, np.ones(3 * N, np.float32))
    remove_files(old)
    spare_bytes = 3 * N * 4
    assert not spares.claim(str(tmp_path), spare_bytes + 1, str(tmp_path / "x"))  # too small
    assert not spares.claim(str(tmp_path), N * 4, str(tmp_path / "x"))  # over twice the need
    assert spares.claim(str(tmp_path), 2 * N * 4, str(tmp_path / "x"))
    assert not spares.claim(str(tmp_path), 2 * N * 4, str(tmp_path / "y"))  # claimed once
    assert os.path.exists(tmp_path / "x") and _spares(tmp_path) == []


def test_replacing_a_large_file_keeps_it_as_a_spare_and_prune_bounds_them(tmp_path):
    target = tmp_path / "m.data-00000-of-00001"
    for fill in range(4):
        new = tmp_path / f"new{fill}"
        new.write_bytes(bytes([fill]) * spares.MIN_BYTES)
        spares.replace(str(new), str(target))
        assert target.read_bytes()[:1] == bytes([fill])
    assert len(_spares(tmp_path)) == 3  # the three files replaced
    newest = _spares(tmp_path)
    assert spares.prune(str(tmp_path), 1) == 2
    trash.wait()
    left = _spares(tmp_path)
    assert len(left) == 1 and left[0] == max(newest, key=lambda n: int(n.split("-")[3]))


def test_periodic_saves_keep_one_checkpoint_of_spares_and_restore_exactly(tmp_path, monkeypatch):
    srv = start_redis(tmp_path / "redis")
    monkeypatch.setenv("REDIS_URL", srv.url)
    try:
        v = tf.Variable(tf.zeros([N]), name="v")
        step = tf.placeholder(tf.float32, [])
        bump = tf.assign(v, tf.fill([N], step))
        saver = Saver(max_to_keep=2)
        ckdir = tmp_path / "ck"
        with tf.Session() as sess:
            for k in range(1, 7):
                sess.run(bump, {step: float(k)})
                path = saver.save(sess, str(ckdir / "model.ckpt"), global_step=k)
                assert len(_spares(ckdir)) <= 1  # one data file per save
            assert [os.path.basename(p) for p in saver.last_checkpoints] == \
                ["model.ckpt-5", "model.ckpt-6"]
            sess.run(tf.assign(v, tf.zeros([N])))
            saver.restore(sess, path)
            assert (sess.run(v) == 6.0).all()
    finally:
        srv.kill()


def test_a_process_removes_the_spares_nobody_claimed_at_exit(tmp_path):
    script = (
        "import sys\n"
        "from tensorgrid.checkpoint import spares\n"
        "p = sys.argv[1]\n"
        "open(p, 'wb').write(b'x' * spares.MIN_BYTES)\n"
        "assert spares.keep(p)\n"
        "print(len([n for n in __import__('os').listdir(sys.argv[2]) if n.startswith(spares.MARK)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "d"), str(tmp_path)],
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert out.stdout.strip() == "1"  # it was a spare while the process ran
    assert os.listdir(tmp_path) == []
