"""Checkpoints on a filesystem reached through fsspec: an FTP server (pyftpdlib, a real server on
127.0.0.1 in a thread of the test, serving a local directory) holds the files of a ``Saver``
whose paths are ``ftp://`` URLs. Saves (retiring old checkpoints with ``max_to_keep``), the state
file, ``latest_checkpoint``, restores (CRC-32C checked, falling back past a damaged checkpoint)
and reading the bundle back all go over FTP; the files the server stores are TensorFlow's bundle
format, readable as local files."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.checkpoint import fs
from tensorgrid.checkpoint.bundle_reader import BundleReader
from tensorgrid.checkpoint.redis_server import start_redis
from tensorgrid.client.train.saver import Saver, latest_checkpoint
from tensorgrid.client.train.server import ClusterSpec, Server, free_port

pytest.importorskip("fsspec")
pytestmark = pytest.mark.filterwarnings("ignore:write permissions assigned to anonymous")
ftpservers = pytest.importorskip("pyftpdlib.servers")
from pyftpdlib.authorizers import DummyAuthorizer  # noqa: E402
from pyftpdlib.handlers import FTPHandler  # noqa: E402


@pytest.fixture
def ftp_root(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An FTP server on 127.0.0.1 (anonymous, writable) serving a fresh directory: its base URL
    and the directory."""
    root = tmp_path / "served"
    root.mkdir()
    authorizer = DummyAuthorizer()
    authorizer.add_anonymous(str(root), perm="elradfmwMT")
    handler = type("Handler", (FTPHandler,), {"authorizer": authorizer})
    server = ftpservers.FTPServer(("127.0.0.1", 0), handler)
    port = server.socket.getsockname()[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"timeout": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"ftp://127.0.0.1:{port}", root
    finally:
        server.close_all()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def _redis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    srv = start_redis(tmp_path / "redis")
    monkeypatch.setenv("REDIS_URL", srv.url)
    yield
    srv.kill()


def test_save_retire_and_restore_over_ftp(ftp_root: tuple[str, Path]) -> None:
    base, root = ftp_root
    w = tf.Variable(np.zeros((3, 5), np.float32), name="w")
    tf.Variable(np.array([b"a", b"bc"], dtype=object), name="names")
    step = tf.placeholder(tf.float32, [])
    bump = tf.assign(w, tf.fill([3, 5], step))
    saver = Saver(max_to_keep=2)
    url = f"{base}/runs/exp1"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for k in (1, 2, 3):
            sess.run(bump, {step: float(k)})
            path = saver.save(sess, f"{url}/model.ckpt", global_step=k)
        assert path == f"{url}/model.ckpt-3"
        stored = sorted(p.name for p in (root / "runs" / "exp1").iterdir())
        assert stored == ["checkpoint", "model.ckpt-2.data-00000-of-00001", "model.ckpt-2.index",
                          "model.ckpt-3.data-00000-of-00001", "model.ckpt-3.index"]
        assert latest_checkpoint(url) == path
        assert 'model_checkpoint_path: "model.ckpt-3"' in \
            (root / "runs" / "exp1" / "checkpoint").read_text()

        sess.run(bump, {step: 0.0})
        saver.restore(sess, path)
        assert (sess.run(w) == 3.0).all()
        with BundleReader(path) as reader:  # read over FTP, checked against the index
            assert reader.get_tensor("w").tolist() == [[3.0] * 5] * 3
            assert reader.get_tensor("names").tolist() == [b"a", b"bc"]
        local = str(root / "runs" / "exp1" / "model.ckpt-3")
        with BundleReader(local) as reader:  # the same bytes as a local file
            assert (reader.get_tensor("w") == 3.0).all()


def test_a_damaged_checkpoint_over_ftp_falls_back_to_the_previous(
        ftp_root: tuple[str, Path]) -> None:
    base, root = ftp_root
    w = tf.Variable(np.zeros(1000, np.float32), name="w")
    step = tf.placeholder(tf.float32, [])
    bump = tf.assign(w, tf.fill([1000], step))
    saver = Saver()
    url = f"{base}/ck"
    with tf.Session() as sess:
        for k in (1, 2):
            sess.run(bump, {step: float(k)})
            saver.save(sess, f"{url}/model.ckpt", global_step=k)
        data = root / "ck" / "model.ckpt-2.data-00000-of-00001"
        raw = bytearray(data.read_bytes())
        raw[100] ^= 0xFF  # same size: only the tensor's CRC-32C tells
        data.write_bytes(bytes(raw))
        sess.run(bump, {step: 0.0})
        with pytest.raises(tf.errors.DataLossError, match="checksum"):
            saver.restore(sess, f"{url}/model.ckpt-2")
        assert saver.restore_latest(sess, url) == f"{url}/model.ckpt-1"
        assert (sess.run(w) == 1.0).all()


def test_two_ps_tasks_write_their_shards_over_ftp(ftp_root: tuple[str, Path]) -> None:
    """A sharded save: each ps task's save op writes its own data file to the server, the merge
    renames them there and writes the index; the restore reads each shard back on its task."""
    base, root = ftp_root
    spec = ClusterSpec({"ps": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"],
                        "worker": [f"127.0.0.1:{free_port()}"]})
    servers = [Server(spec, "ps", 0), Server(spec, "ps", 1), Server(spec, "worker", 0)]
    try:
        deadline = time.monotonic() + 30
        while any(t["state"] != "alive" for s in servers for t in s.master.cluster.describe()):
            assert time.monotonic() < deadline, "the cluster did not come up"
            time.sleep(0.05)
        with tf.Graph().as_default():
            vs = []
            for i in range(2):
                with tf.device(f"/job:ps/task:{i}"):
                    vs.append(tf.Variable(np.full(64, float(i + 1), np.float32), name=f"v{i}"))
            saver = Saver()
            with tf.Session(servers[-1].target) as sess:
                sess.run(tf.global_variables_initializer())
                path = saver.save(sess, f"{base}/dist/model.ckpt", global_step=7)
                assert sorted(p.name for p in (root / "dist").iterdir()) == [
                    "checkpoint", "model.ckpt-7.data-00000-of-00002",
                    "model.ckpt-7.data-00001-of-00002", "model.ckpt-7.index"]
                sess.run([tf.assign(v, tf.zeros_like(v)) for v in vs])
                saver.restore(sess, path)
                assert [float(x[0]) for x in sess.run(vs)] == [1.0, 2.0]
    finally:
        for s in reversed(servers):
            s.stop()


def test_paths_come_back_as_the_urls_given_on_another_filesystem() -> None:
    """fsspec's memory filesystem keeps what follows ``memory://`` as its path, FTP the path
    after the host: both come back from a listing as URLs of the same spelling."""
    where = fs.filesystem("memory://tg-fsspec-test/runs")
    where.makedirs("memory://tg-fsspec-test/runs")
    with where.open("memory://tg-fsspec-test/runs/m-1.data-00000-of-00001", "wb") as f:
        f.write(b"abc")
    assert where.glob("memory://tg-fsspec-test/runs/m-1.data-?????-of-?????") == \
        ["memory://tg-fsspec-test/runs/m-1.data-00000-of-00001"]
    assert where.size("memory://tg-fsspec-test/runs/m-1.data-00000-of-00001") == 3
    with pytest.raises(FileNotFoundError):
        where.remove("memory://tg-fsspec-test/runs/nothing")
    where.remove("memory://tg-fsspec-test/runs/m-1.data-00000-of-00001")
    assert not where.exists("memory://tg-fsspec-test/runs/m-1.data-00000-of-00001")
