"""Checkpoints through the services: a ``Saver`` over the HTTP master saves ps variables from the
ps task service and restores them; ``/v1/checkpoints`` lists directories and checkpoints, shows
one (404 when missing), and answers 503 when Redis is down."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.checkpoint.bundle import BundleWriter
from tensorgrid.checkpoint.redis_server import RedisProcess, start_redis
from tensorgrid.client.train.saver import Saver


@pytest.fixture
def redis_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisProcess]:
    srv = start_redis(tmp_path / "redis")
    monkeypatch.setenv("REDIS_URL", srv.url)  # the client's settings read it
    yield srv
    srv.kill()


def test_save_restore_and_list_over_http(tasks, make_master, redis_server: RedisProcess,
                                         tmp_path: Path) -> None:
    master = make_master(tasks.spec, redis_url=redis_server.url)  # the master's own setting
    ckdir = f"{tmp_path}/runs/{uuid.uuid4().hex[:8]}"  # absolute: the ps task writes the files
    with tf.device("/job:ps/task:0"):
        w = tf.Variable(np.arange(12, dtype=np.float32).reshape(3, 4), name="w")
    saver = Saver()
    with tf.Session(master.url) as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, f"{ckdir}/model.ckpt", global_step=3)
        assert path == f"{ckdir}/model.ckpt-3"
        sess.run(tf.assign(w, np.zeros((3, 4), np.float32)))
        saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(w), np.arange(12, dtype=np.float32).reshape(3, 4))

    dirs = master.http.get("/v1/checkpoints").json()["directories"]
    assert {"directory": ckdir, "latest": path}.items() <= \
        next(d for d in dirs if d["directory"] == ckdir).items()
    listing = master.http.get("/v1/checkpoints", params={"dir": ckdir}).json()
    [row] = listing["checkpoints"]
    assert row["name"] == "model.ckpt-3" and row["status"] == "ok" and row["latest"]
    shown = master.http.get(f"/v1/checkpoints/{ckdir}/model.ckpt-3",
                            params={"verify": "true"}).json()
    assert shown["status"] == "ok" and shown["global_step"] == 3
    assert shown["tensors"][0]["device"].startswith("/job:ps/replica:0/task:0")
    missing = master.http.get(f"/v1/checkpoints/{ckdir}/model.ckpt-4")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"

    redis_server.kill()
    down = master.http.get("/v1/checkpoints")
    assert down.status_code == 503
    assert down.json()["error"]["code"] == "UNAVAILABLE" and down.json()["error"]["retryable"]


def _bundle(prefix: Path) -> None:
    """An untracked checkpoint: bundle files that no save committed to Redis."""
    writer = BundleWriter(str(prefix))
    writer.add("v", np.ones(3, np.float32))
    writer.finish()


def test_listing_is_confined_to_known_directories(tasks, make_master, redis_server: RedisProcess,
                                                  tmp_path: Path) -> None:
    """``/v1/checkpoints?dir=`` and ``/v1/checkpoints/<dir>/<name>`` read only the directories
    Redis tracks for the cluster and those under ``checkpoint_root``: any other answers 403 with
    a machine-readable reason, whether named directly, through ``..`` or through a symbolic link
    inside the root."""
    root = tmp_path / "root"
    master = make_master(tasks.spec, redis_url=redis_server.url, checkpoint_root=str(root))
    tracked = f"{tmp_path}/tracked"
    tf.Variable(np.ones(3, np.float32), name="v")
    with tf.Session() as sess:  # an in-process save, tracked by the same Redis
        sess.run(tf.global_variables_initializer())
        Saver().save(sess, f"{tracked}/model.ckpt", global_step=1)
    hidden, under = tmp_path / "hidden", root / "exp"
    _bundle(hidden / "other.ckpt")
    _bundle(under / "other.ckpt")
    (root / "link").symlink_to(hidden)

    ok = master.http.get("/v1/checkpoints", params={"dir": tracked})
    assert ok.status_code == 200 and ok.json()["checkpoints"][0]["name"] == "model.ckpt-1"
    rooted = master.http.get("/v1/checkpoints", params={"dir": str(under)})
    assert rooted.status_code == 200
    assert [r["name"] for r in rooted.json()["checkpoints"]] == ["other.ckpt"]
    shown = master.http.get(f"/v1/checkpoints/{under}/other.ckpt")
    assert shown.status_code == 200 and shown.json()["tracked"] is False
    for refused in (str(hidden), f"{root}/../hidden", f"{root}/link", "/etc", "/"):
        answer = master.http.get("/v1/checkpoints", params={"dir": refused})
        assert answer.status_code == 403, refused
        error = answer.json()["error"]
        assert error["code"] == "PERMISSION_DENIED"
        assert error["reason"] == "checkpoint_directory_not_allowed"
    detail = master.http.get(f"/v1/checkpoints/{hidden}/other.ckpt")
    assert detail.status_code == 403
    assert detail.json()["error"]["reason"] == "checkpoint_directory_not_allowed"

    plain = make_master(tasks.spec, redis_url=redis_server.url)  # no root: tracked ones only
    assert plain.http.get("/v1/checkpoints", params={"dir": str(under)}).status_code == 403
    assert plain.http.get("/v1/checkpoints", params={"dir": tracked}).status_code == 200
