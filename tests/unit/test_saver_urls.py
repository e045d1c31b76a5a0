"""Checkpoint paths given as URLs: ``file://`` URLs name local files (spelled back as given, as
TensorFlow does); URLs of other schemes are kept whole (an fsspec filesystem,
``test_checkpoint_fsspec.py``), and a scheme no filesystem serves is refused naming it instead of
becoming an odd local directory."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.checkpoint import manifest as mf
from tensorgrid.checkpoint.redis_server import RedisProcess, start_redis
from tensorgrid.client.train.saver import Saver, get_checkpoint_state, latest_checkpoint
from tensorgrid.core import errors


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    srv = start_redis(tmp_path_factory.mktemp("redis"))
    yield srv
    srv.kill()


@pytest.fixture(autouse=True)
def _redis_env(server: RedisProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", server.url)


def test_file_urls_are_local_paths() -> None:
    assert mf.local_path("file:///runs/exp1/model.ckpt") == "/runs/exp1/model.ckpt"
    assert mf.local_path("file://localhost/runs/m") == "/runs/m"
    assert mf.local_path("runs/m") == "runs/m"
    assert mf.split_path("file:///runs/exp1/model.ckpt-3") == ("/runs/exp1", "model.ckpt-3")
    assert mf.normalize_directory("FILE:///runs/exp1/") == "/runs/exp1"
    with pytest.raises(errors.InvalidArgumentError, match="names host 'elsewhere'"):
        mf.split_path("file://elsewhere/runs/m")


def test_other_urls_are_kept_whole_and_normalized() -> None:
    assert mf.split_path("s3://bucket/runs/model.ckpt") == ("s3://bucket/runs", "model.ckpt")
    assert mf.normalize_directory("SFTP://host:22/a//b/../c/") == "sftp://host:22/a/c"
    assert mf.split_path("ftp://127.0.0.1:2121/m") == ("ftp://127.0.0.1:2121", "m")


def test_a_scheme_no_filesystem_serves_is_refused_naming_it() -> None:
    tf.Variable(np.zeros(2, np.float32), name="v")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(errors.UnimplementedError, match="nosuchfs://"):
            Saver().save(sess, "nosuchfs://bucket/runs/model.ckpt")


def test_saver_saves_and_restores_through_a_file_url(tmp_path: Path) -> None:
    w = tf.Variable(np.arange(4, dtype=np.float32), name="w")
    saver = Saver()
    url_dir = f"file://{tmp_path}/runs"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, f"{url_dir}/model.ckpt", global_step=5)
        assert path == f"{url_dir}/model.ckpt-5"
        assert os.path.exists(tmp_path / "runs" / "model.ckpt-5.index")
        assert os.path.exists(tmp_path / "runs" / "model.ckpt-5.data-00000-of-00001")
        assert latest_checkpoint(url_dir) == path
        assert latest_checkpoint(str(tmp_path / "runs")) == str(tmp_path / "runs" / "model.ckpt-5")
        state = get_checkpoint_state(url_dir)
        assert state is not None and state.model_checkpoint_path == path
        sess.run(tf.assign(w, np.zeros(4, np.float32)))
        saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(w), np.arange(4, dtype=np.float32))
        with pytest.raises(errors.UnimplementedError, match="nosuchfs://"):
            saver.save(sess, "nosuchfs://bucket/model.ckpt")
