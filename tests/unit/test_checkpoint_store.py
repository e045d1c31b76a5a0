"""The checkpoint store on a real ``redis-server`` (a private one per module, on a unix socket):
save shards and commit, listing, retention, atomicity of the commit (a crash between the blobs and
the commit leaves ``latest`` on the previous checkpoint, and the next commit removes the orphans),
damage of every kind detected as ``DataLossError`` naming what, restore-latest falling back past
damaged checkpoints, and Redis being down as ``UnavailableError``."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import redis

from tensorgrid.checkpoint import listing
from tensorgrid.checkpoint import manifest as mf
from tensorgrid.checkpoint.cli import (
    format_checkpoint,
    format_checkpoints,
    list_checkpoints,
    remove_checkpoint,
    show_checkpoint,
)
from tensorgrid.checkpoint.redis_server import RedisProcess, start_redis
from tensorgrid.checkpoint.store import CheckpointStore, SyncCheckpointStore
from tensorgrid.core import dtypes, errors
from tensorgrid.core.shapes import TensorShape


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    srv = start_redis(tmp_path_factory.mktemp("redis"))
    yield srv
    srv.kill()


@pytest.fixture
def raw(server: RedisProcess) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(server.url, socket_timeout=5)
    yield client
    client.close()


@pytest.fixture
async def store(server: RedisProcess) -> AsyncIterator[CheckpointStore]:
    async with CheckpointStore.connect(server.url, orphan_grace_s=0.0) as s:
        yield s


@pytest.fixture
def directory() -> str:
    return f"runs/{uuid.uuid4().hex[:8]}"


def _tensors(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "layer/w": rng.standard_normal((3, 4)).astype(np.float32),
        "layer/b": np.arange(4, dtype=np.int64) * seed,
        "scalar": np.float64(seed),
        "flags": np.array([True, False, seed % 2 == 0]),
        "half": rng.standard_normal(5).astype(ml_dtypes.bfloat16),
        "names": np.array([b"alpha", b"", f"step{seed}".encode()], dtype=object),
        "empty": np.zeros((0, 3), np.float32),
    }


async def _save(store: CheckpointStore, directory: str, name: str, seed: int,
                step: int | None = None, max_to_keep: int | None = 5) -> dict[str, np.ndarray]:
    """Save ``_tensors(seed)`` in two shards (two 'devices') and commit."""
    values = _tensors(seed)
    names = sorted(values)
    half = len(names) // 2
    frag_a = await store.write_shard(directory, name, {n: values[n] for n in names[:half]}, "ps0")
    frag_b = await store.write_shard(directory, name, {n: values[n] for n in names[half:]}, "ps1")
    await store.commit(directory, name, [frag_a, frag_b], step, max_to_keep)
    return values


def _assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for k in want:
        w = np.asarray(want[k])
        assert got[k].dtype == w.dtype and got[k].shape == w.shape, k
        np.testing.assert_array_equal(got[k], w, err_msg=k)


def _keys(raw: redis.Redis, directory: str) -> set[str]:
    return {k.decode() for k in raw.scan_iter(match=f"tg:ckpt:{directory}:*", count=1000)}


# ------------------------------------------------------------------------------ round trip


async def test_save_commit_list_and_read_back(store: CheckpointStore, directory: str) -> None:
    want = await _save(store, directory, "model.ckpt-10", seed=1, step=10)
    assert await store.latest(directory) == "model.ckpt-10"
    assert await store.names(directory) == ["model.ckpt-10"]
    assert directory in await store.directories()
    _assert_same(await store.read_tensors(directory, "model.ckpt-10"), want)
    manifest = await store.read_manifest(directory, "model.ckpt-10")
    assert manifest["global_step"] == 10 and manifest["name"] == "model.ckpt-10"
    assert {e["device"] for e in manifest["tensors"].values()} == {"ps0", "ps1"}
    assert manifest["tensors"]["layer/w"]["nbytes"] == 48
    [row] = await listing.describe(store, directory)
    assert row["status"] == "ok" and row["latest"] and row["global_step"] == 10
    assert row["tensors"] == len(want)
    report = await store.verify(directory, "model.ckpt-10")
    assert report["path"] == f"{directory}/model.ckpt-10" and report["global_step"] == 10


async def test_read_checks_the_graphs_names_dtypes_and_shapes(store: CheckpointStore,
                                                              directory: str) -> None:
    await _save(store, directory, "c", seed=2)
    ok = await store.read_tensors(directory, "c", {"layer/w": (dtypes.float32, TensorShape([3, 4]))})
    assert list(ok) == ["layer/w"]
    with pytest.raises(errors.NotFoundError, match=r"Key missing/v not found in checkpoint .*/c"):
        await store.read_tensors(directory, "c", {"missing/v": (dtypes.float32, TensorShape([1]))})
    with pytest.raises(errors.InvalidArgumentError, match=r"layer/w .* dtype float32.* float64"):
        await store.read_tensors(directory, "c", {"layer/w": (dtypes.float64, TensorShape([3, 4]))})
    with pytest.raises(errors.InvalidArgumentError, match=r"layer/w .* shape \[3, 4\]"):
        await store.read_tensors(directory, "c", {"layer/w": (dtypes.float32, TensorShape([4, 3]))})
    with pytest.raises(errors.NotFoundError, match="no checkpoint named nope"):
        await store.read_manifest(directory, "nope")


async def test_large_tensor_goes_in_chunks(store: CheckpointStore, directory: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from tensorgrid.checkpoint import store as store_mod

    monkeypatch.setattr(store_mod, "CHUNK_BYTES", 1000)  # many APPENDs and GETRANGEs
    big = np.arange(10_001, dtype=np.float32)
    frag = await store.write_shard(directory, "big", {"big": big, "small": np.ones(3)})
    await store.commit(directory, "big", [frag])
    got = await store.read_tensors(directory, "big")
    np.testing.assert_array_equal(got["big"], big)


# ------------------------------------------------------------------------------ atomicity


async def test_crash_between_blobs_and_commit_keeps_latest_on_the_previous(
        store: CheckpointStore, directory: str, raw: redis.Redis) -> None:
    want = await _save(store, directory, "model.ckpt-1", seed=1, step=1)
    # the next save writes its blobs, then its process dies before the commit
    await store.write_shard(directory, "model.ckpt-2", _tensors(2), "ps0")
    assert any(":blob:model.ckpt-2:" in k for k in _keys(raw, directory))
    assert await store.latest(directory) == "model.ckpt-1"
    assert await store.restore_candidates(directory) == ["model.ckpt-1"]
    with pytest.raises(errors.NotFoundError):
        await store.read_manifest(directory, "model.ckpt-2")
    _assert_same(await store.read_tensors(directory, "model.ckpt-1"), want)
    # the next commit removes the abandoned save's blobs (grace 0 here)
    await _save(store, directory, "model.ckpt-3", seed=3, step=3)
    assert not any(":blob:model.ckpt-2:" in k for k in _keys(raw, directory))
    assert not any(":pending:" in k for k in _keys(raw, directory))
    assert await store.names(directory) == ["model.ckpt-1", "model.ckpt-3"]


async def test_a_live_save_is_not_taken_for_an_orphan(server: RedisProcess, directory: str,
                                                      raw: redis.Redis) -> None:
    async with CheckpointStore.connect(server.url) as patient:  # the default grace
        frag = await patient.write_shard(directory, "slow", _tensors(1))
        await _save(patient, directory, "fast", seed=2)  # commits, cleans up old orphans only
        await patient.commit(directory, "slow", [frag])
        _assert_same(await patient.read_tensors(directory, "slow"), _tensors(1))


async def test_commit_refuses_a_save_whose_blob_vanished(store: CheckpointStore, directory: str,
                                                         raw: redis.Redis) -> None:
    await _save(store, directory, "good", seed=1)
    frag = await store.write_shard(directory, "bad", _tensors(2))
    raw.delete(frag["tensors"]["layer/w"]["key"])
    with pytest.raises(errors.AbortedError, match="blob of tensor layer/w is missing"):
        await store.commit(directory, "bad", [frag])
    assert await store.latest(directory) == "good"
    assert await store.names(directory) == ["good"]


async def test_saving_a_name_again_replaces_it_whole(store: CheckpointStore, directory: str,
                                                     raw: redis.Redis) -> None:
    await _save(store, directory, "same", seed=1)
    first = set(raw.smembers(f"tg:ckpt:{directory}:blobs:same"))
    want = await _save(store, directory, "same", seed=2)
    second = set(raw.smembers(f"tg:ckpt:{directory}:blobs:same"))
    assert first.isdisjoint(second)  # new blob keys: the committed ones were never overwritten
    assert not any(raw.exists(k) for k in first)  # and the old ones went with the commit
    _assert_same(await store.read_tensors(directory, "same"), want)
    assert await store.names(directory) == ["same"]


# ------------------------------------------------------------------------------ retention, listing


async def test_max_to_keep_removes_the_oldest_with_their_blobs(store: CheckpointStore,
                                                               directory: str,
                                                               raw: redis.Redis) -> None:
    for step in range(5):
        await _save(store, directory, f"model.ckpt-{step}", seed=step, step=step, max_to_keep=2)
    assert await store.names(directory) == ["model.ckpt-3", "model.ckpt-4"]
    assert await store.latest(directory) == "model.ckpt-4"
    left = _keys(raw, directory)
    for step in range(3):
        assert not any(f"model.ckpt-{step}" in k for k in left), step
    blobs = [k for k in left if ":blob:" in k]
    assert len(blobs) == 2 * len(_tensors(0))
    rows = await listing.describe(store, directory)
    assert [r["global_step"] for r in rows] == [3, 4]
    assert [r["latest"] for r in rows] == [False, True]


async def test_keep_all_and_remove(store: CheckpointStore, directory: str,
                                   raw: redis.Redis) -> None:
    for step in range(3):
        await _save(store, directory, f"c-{step}", seed=step, step=step, max_to_keep=None)
    assert await store.names(directory) == ["c-0", "c-1", "c-2"]
    assert await store.remove(directory, "c-2")
    assert await store.latest(directory) == "c-1"  # latest moves to the newest left
    assert await store.remove(directory, "c-0") and await store.remove(directory, "c-1")
    assert not await store.remove(directory, "c-1")
    assert await store.latest(directory) is None
    assert directory not in await store.directories()
    assert _keys(raw, directory) == set()


def test_sync_facade_and_cli_functions(server: RedisProcess, directory: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", server.url)
    s = SyncCheckpointStore()
    frag = s.write_shard(directory, "m-5", {"w": np.ones((2, 2), np.float32)}, "cpu")
    s.commit(directory, "m-5", [frag], 5)
    frag = s.write_shard(directory, "m-6", {"w": np.zeros((2, 2), np.float32)}, "cpu")
    s.commit(directory, "m-6", [frag], 6)
    dirs = {r["directory"]: r for r in list_checkpoints()}
    assert dirs[directory]["checkpoints"] == 2 and dirs[directory]["latest"] == f"{directory}/m-6"
    rows = list_checkpoints(directory)
    assert [r["name"] for r in rows] == ["m-5", "m-6"]
    assert "m-6" in format_checkpoints(rows) and directory in format_checkpoints(list_checkpoints())
    info = show_checkpoint(directory, "m-5", verify=True)
    assert info["status"] == "ok" and info["global_step"] == 5
    assert info["tensors"][0]["name"] == "w" and info["tensors"][0]["shape"] == [2, 2]
    text = format_checkpoint(info)
    assert f"{directory}/m-5" in text and "float32" in text and "status       ok" in text
    assert remove_checkpoint(directory, "m-6") == {"removed": f"{directory}/m-6",
                                                   "latest": f"{directory}/m-5"}
    with pytest.raises(errors.NotFoundError):
        remove_checkpoint(directory, "m-6")
    with pytest.raises(errors.NotFoundError):
        show_checkpoint(directory, "m-6")


# ------------------------------------------------------------------------------ damage


def _flip_byte(raw: redis.Redis, key: str) -> None:
    data = bytearray(raw.get(key))
    data[len(data) // 2] ^= 0x01
    raw.set(key, bytes(data))


def _garble_field(raw: redis.Redis, key: str) -> None:
    manifest = json.loads(raw.get(key))
    manifest["tensors"]["layer/w"]["shape"] = [4, 3]  # same byte count: only the seal tells
    raw.set(key, json.dumps(manifest))


DAMAGE = {
    # case: (what to do to the newest checkpoint, what the error says)
    "flipped byte": (lambda raw, d, m: _flip_byte(raw, m["tensors"]["layer/w"]["key"]),
                     r"tensor layer/w .* does not match its sha256"),
    "truncated blob": (lambda raw, d, m: raw.set(m["tensors"]["layer/b"]["key"],
                                                 raw.get(m["tensors"]["layer/b"]["key"])[:-3]),
                       r"tensor layer/b .* has 29 bytes, the manifest says 32"),
    "deleted blob": (lambda raw, d, m: raw.delete(m["tensors"]["names"]["key"]),
                     r"tensor names .* is missing"),
    "deleted manifest": (lambda raw, d, m: raw.delete(f"tg:ckpt:{d}:manifest:model.ckpt-2"),
                         r"it is committed, but its manifest is missing"),
    "garbled manifest": (lambda raw, d, m: raw.set(f"tg:ckpt:{d}:manifest:model.ckpt-2",
                                                   b'{"format": "tensorgrid-chec\x00'),
                         r"its manifest is not valid JSON"),
    "changed manifest field": (lambda raw, d, m: _garble_field(
        raw, f"tg:ckpt:{d}:manifest:model.ckpt-2"), r"does not match its own sha256"),
    "latest names a missing manifest": (
        lambda raw, d, m: raw.set(f"tg:ckpt:{d}:latest", "model.ckpt-9"),
        r"model.ckpt-9 is damaged: it is named by 'latest', but its manifest is missing"),
}


@pytest.mark.parametrize("case", list(DAMAGE))
async def test_damage_is_detected_and_restore_latest_falls_back(
        case: str, store: CheckpointStore, directory: str, raw: redis.Redis,
        caplog: pytest.LogCaptureFixture) -> None:
    saved = {"model.ckpt-1": await _save(store, directory, "model.ckpt-1", seed=1, step=1),
             "model.ckpt-2": await _save(store, directory, "model.ckpt-2", seed=2, step=2)}
    manifest = await store.read_manifest(directory, "model.ckpt-2")
    damage, message = DAMAGE[case]
    damage(raw, directory, manifest)
    # a dangling 'latest' falls back to the newest committed checkpoint, intact here
    bad, fallback = ("model.ckpt-9", "model.ckpt-2") if "latest" in case else \
        ("model.ckpt-2", "model.ckpt-1")
    with pytest.raises(errors.DataLossError, match=message) as info:
        await store.read_tensors(directory, bad)
    assert f"{directory}/{bad}" in info.value.message
    with pytest.raises(errors.DataLossError):
        await store.verify(directory, bad)
    # listing flags it without reading the blobs' contents (a flipped byte needs a verify)
    rows = {r["name"]: r for r in await listing.describe(store, directory)}
    if case != "flipped byte":
        assert rows[bad]["status"].startswith("damaged: "), rows[bad]
    assert rows[fallback]["status"] == "ok"
    # restoring the latest skips the damaged one, says which and why, and takes the previous
    restored = await store.restore_latest(directory)
    assert restored is not None
    name, values = restored
    assert name == fallback
    _assert_same(values, saved[fallback])
    assert f"{directory}/{bad}" in caplog.text and "trying an older one" in caplog.text
    # and the latest checkpoint whose manifest reads is found without reading blobs
    if "blob" not in case and case != "flipped byte":
        assert await store.latest_readable(directory) == fallback


async def test_every_checkpoint_damaged(store: CheckpointStore, directory: str,
                                        raw: redis.Redis) -> None:
    await _save(store, directory, "only", seed=1)
    raw.delete(f"tg:ckpt:{directory}:manifest:only")
    with pytest.raises(errors.DataLossError, match=r"Every checkpoint of .* is damaged.*only"):
        await store.restore_latest(directory)
    assert await store.restore_latest("runs/never-used-" + uuid.uuid4().hex) is None


# ------------------------------------------------------------------------------ Redis down


async def test_redis_down_is_unavailable(tmp_path: Path) -> None:
    srv = start_redis(tmp_path / "r")
    url = srv.url
    srv.kill()
    async with CheckpointStore.connect(url, connect_timeout_s=1.0) as s:
        with pytest.raises(errors.UnavailableError, match=r"Redis at unix://.* is unavailable "
                                                          r"while saving checkpoint d/c"):
            await s.write_shard("d", "c", {"w": np.ones(2)})
        with pytest.raises(errors.UnavailableError, match="committing checkpoint d/c"):
            await s.commit("d", "c", [{"token": "t", "tensors": {}}])
        with pytest.raises(errors.UnavailableError):
            await s.read_manifest("d", "c")


def test_paths_and_blob_codec() -> None:
    assert mf.split_path("runs/exp1/model.ckpt-12") == ("runs/exp1", "model.ckpt-12")
    assert mf.split_path("./runs//exp1/m") == ("runs/exp1", "m")
    assert mf.split_path("m") == (".", "m") and mf.join_path(".", "m") == "m"
    for bad in ("", "runs/", "runs/a@b"):
        with pytest.raises(errors.InvalidArgumentError):
            mf.split_path(bad)
    for value in _tensors(3).values():
        data, dt, shape = mf.encode_tensor(value)
        back = mf.decode_tensor(bytes(data), dt, shape)
        np.testing.assert_array_equal(back, np.asarray(value))
    data, dt, shape = mf.encode_tensor(np.arange(3, dtype=">i4"))  # big-endian in, LE blob
    assert bytes(data) == np.arange(3, dtype="<i4").tobytes() and dt is dtypes.int32
    with pytest.raises(ValueError):
        mf.decode_tensor(b"\x00" * 7, dtypes.float32, [2])
