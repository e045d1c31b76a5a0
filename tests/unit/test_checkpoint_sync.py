"""``Saver(sync=True)`` makes a checkpoint durable before Redis commits it: the data file (written
around the page cache or through it), the index and the directory are each ``fsync``ed, and only
then is the manifest committed; the default (TensorFlow's semantics) syncs nothing."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.checkpoint.data_file import DIRECT_MIN_BYTES
from tensorgrid.checkpoint.redis_server import start_redis
from tensorgrid.checkpoint.store import CheckpointStore
from tensorgrid.client.train.saver import Saver


@pytest.fixture
def events(tmp_path, monkeypatch) -> list[str]:
    """What the save did, in order: ``fsync <path>`` for each fsync (the real one runs), and
    ``commit`` when the manifest is committed to Redis."""
    srv = start_redis(tmp_path / "redis")
    monkeypatch.setenv("REDIS_URL", srv.url)
    seen: list[str] = []
    real_fsync, real_commit = os.fsync, CheckpointStore.commit

    def fsync(fd: int) -> None:
        seen.append("fsync " + os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    async def commit(self, *args, **kwargs):
        seen.append("commit")
        return await real_commit(self, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(CheckpointStore, "commit", commit)
    yield seen
    srv.kill()


@pytest.mark.parametrize("elements", [1000, DIRECT_MIN_BYTES // 4], ids=["buffered", "direct"])
def test_sync_makes_every_file_durable_before_the_commit(tmp_path, events, elements):
    tf.Variable(np.full(elements, 3.0, np.float32), name="v")
    ckdir = str(tmp_path / "ck")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = Saver(sync=True).save(sess, f"{ckdir}/model.ckpt", global_step=1)
    assert events[-1] == "commit" and events.count("commit") == 1
    synced = [e.split(" ", 1)[1] for e in events[:-1]]
    assert any(".data-00000-of-00001" in p for p in synced)  # under its temporary name
    assert any(p.startswith(path + ".index") for p in synced)
    assert ckdir in synced  # the directory, after the renames


def test_no_sync_by_default(tmp_path, events):
    tf.Variable(np.ones(1000, np.float32), name="v")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        Saver().save(sess, f"{tmp_path}/ck/model.ckpt")
    assert [e for e in events if e.startswith("fsync") and "/ck/" in e] == []
    assert "commit" in events
