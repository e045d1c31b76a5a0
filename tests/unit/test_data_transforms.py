"""tf.data transformations beyond the element-wise ones: padded_batch."""

from __future__ import annotations

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.core import errors


def _all(fetch, sess, feed=None, limit=10_000):
    out = []
    for _ in range(limit):
        try:
            out.append(sess.run(fetch, feed))
        except errors.OutOfRangeError:
            return out
    raise AssertionError("the iterator never ended")


def _ragged(n):
    """Element n: a vector of n copies of n (int64)."""
    return tf.fill(tf.reshape(tf.cast(n, tf.int32), [1]), n)


def test_padded_batch_pads_to_the_largest_in_each_batch():
    ds = tf.data.Dataset.range(1, 6).map(lambda n: (_ragged(n), tf.as_string(n)))
    batched = ds.padded_batch(2, padded_shapes=([None], []), padding_values=(np.int64(-1), b""))
    assert [s.as_list() for s in batched.output_shapes] == [[None, None], [None]]
    nxt = batched.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        got = _all(nxt, sess)
    assert [g[0].tolist() for g in got] == [[[1, -1], [2, 2]], [[3, 3, 3, -1], [4, 4, 4, 4]],
                                            [[5, 5, 5, 5, 5]]]
    assert [g[1].tolist() for g in got] == [[b"1", b"2"], [b"3", b"4"], [b"5"]]


def test_padded_batch_to_fixed_shapes_with_a_dict_and_drop_remainder():
    ds = tf.data.Dataset.range(5).map(lambda n: {"v": tf.cast(_ragged(n), tf.float32),
                                                 "m": tf.reshape(tf.cast(_ragged(n), tf.int32),
                                                                 [1, -1])})
    batched = ds.padded_batch(2, padded_shapes={"v": [4], "m": [2, -1]}, drop_remainder=True)
    assert batched.output_shapes["v"].as_list() == [2, 4]
    assert batched.output_shapes["m"].as_list() == [2, 2, None]
    nxt = batched.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        got = _all(nxt, sess)
    assert len(got) == 2  # the fifth element is dropped
    np.testing.assert_array_equal(got[1]["v"], [[2, 2, 0, 0], [3, 3, 3, 0]])
    np.testing.assert_array_equal(got[1]["m"], [[[2, 2, 0], [0, 0, 0]], [[3, 3, 3], [0, 0, 0]]])


def test_padded_batch_errors():
    ds = tf.data.Dataset.range(4).map(_ragged)
    with pytest.raises(ValueError, match="rank"):
        ds.padded_batch(2, padded_shapes=[None, None])
    with pytest.raises(ValueError, match="positive int"):
        ds.padded_batch(0)
    too_small = ds.padded_batch(4, padded_shapes=[2]).make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError,
                                             match="pad to a smaller size"):
        sess.run(too_small)


def test_apply_with_the_experimental_transformations(tmp_path):
    names = []
    for f in range(3):
        path = str(tmp_path / f"{f}.tfrecord")
        with tf.python_io.TFRecordWriter(path) as w:
            for i in range(2):
                w.write(f"{f}-{i}")
        names.append(path)
    files = tf.data.Dataset.from_tensor_slices(names)
    inter = files.apply(tf.data.experimental.parallel_interleave(
        tf.data.TFRecordDataset, cycle_length=3))
    batched = tf.data.Dataset.range(5).apply(tf.data.experimental.map_and_batch(
        lambda x: x * 2, 2, drop_remainder=True))
    shuffled = tf.data.Dataset.range(4).apply(tf.data.experimental.shuffle_and_repeat(4, 2, 7))
    with tf.Session() as sess:
        assert _all(inter.make_one_shot_iterator().get_next(), sess) == [
            b"0-0", b"1-0", b"2-0", b"0-1", b"1-1", b"2-1"]
        assert [b.tolist() for b in _all(batched.make_one_shot_iterator().get_next(), sess)] \
            == [[0, 2], [4, 6]]
        order = _all(shuffled.make_one_shot_iterator().get_next(), sess)
    assert sorted(order[:4]) == [0, 1, 2, 3] and sorted(order[4:]) == [0, 1, 2, 3]


def test_filter_keeps_the_elements_whose_predicate_holds():
    ds = tf.data.Dataset.range(20).map(lambda x: (x, x * 10))
    kept = ds.filter(lambda a, b: tf.equal(a % 2, 1)).filter(lambda a, b: b > 50)
    nxt = kept.batch(3).repeat(2).make_one_shot_iterator().get_next()
    empty = tf.data.Dataset.range(5).filter(lambda x: x > 9).make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        got = _all(nxt, sess)
        assert _all(empty, sess) == []
    assert [g[0].tolist() for g in got] == [[7, 9, 11], [13, 15, 17], [19]] * 2
    assert [g[1].tolist() for g in got] == [[70, 90, 110], [130, 150, 170], [190]] * 2


def test_filter_scans_its_upstream_once_per_initialization():
    counter = tf.Variable(0, dtype=tf.int64)

    def even(x):
        with tf.control_dependencies([tf.assign_add(counter, 1)]):
            return tf.equal(x % 2, 0)

    limit = tf.placeholder(tf.int64, [])
    it = tf.data.Dataset.range(limit).filter(even).make_initializable_iterator()
    nxt = it.get_next()
    one_shot = tf.data.Dataset.range(6).filter(even).make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        sess.run(counter.initializer)
        assert _all(one_shot, sess) == [0, 2, 4]
        assert sess.run(counter) == 6  # scanned at the first get_next only
        sess.run(it.initializer, {limit: 10})
        assert _all(nxt, sess) == [0, 2, 4, 6, 8]
        sess.run(it.initializer, {limit: 3})
        assert _all(nxt, sess) == [0, 2]
        assert sess.run(counter) == 6 + 10 + 3


def test_filter_after_shuffle_and_over_files(tmp_path):
    path = str(tmp_path / "r.tfrecord")
    with tf.python_io.TFRecordWriter(path) as w:
        for i in range(10):
            w.write(f"{'keep' if i % 3 == 0 else 'drop'}-{i}")
    records = tf.data.TFRecordDataset(path).filter(
        lambda r: tf.equal(tf.substr(r, 0, 4), "keep"))
    shuffled = tf.data.Dataset.range(30).shuffle(30, seed=4).filter(lambda x: x < 10)
    with tf.Session() as sess:
        assert _all(records.make_one_shot_iterator().get_next(), sess) == [
            b"keep-0", b"keep-3", b"keep-6", b"keep-9"]
        order = _all(shuffled.make_one_shot_iterator().get_next(), sess)
    assert sorted(order) == list(range(10)) and order != list(range(10))


def test_filter_errors():
    with pytest.raises(ValueError, match="bool scalar"):
        tf.data.Dataset.range(3).filter(lambda x: x).make_one_shot_iterator().get_next()
    endless = tf.data.Dataset.range(3).repeat().filter(lambda x: x > 0)
    nxt = endless.make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError,
                                             match="filter needs a finite upstream"):
        sess.run(nxt)


def test_flat_map_and_interleave_of_any_finite_datasets():
    ragged = tf.data.Dataset.range(1, 5)
    flat = ragged.flat_map(lambda n: tf.data.Dataset.range(n))
    inter = ragged.interleave(lambda n: tf.data.Dataset.range(n).map(lambda _: n),
                              cycle_length=2, block_length=2)
    rows = tf.data.Dataset.from_tensor_slices(np.arange(6).reshape(3, 2)).flat_map(
        tf.data.Dataset.from_tensor_slices)
    pairs = tf.data.Dataset.zip((ragged, ragged.map(lambda n: n * 10))).flat_map(
        lambda a, b: tf.data.Dataset.from_tensors((a, b)).repeat(2))
    with tf.Session() as sess:
        assert _all(flat.make_one_shot_iterator().get_next(), sess) == [0, 0, 1, 0, 1, 2, 0, 1, 2,
                                                                         3]
        assert _all(inter.make_one_shot_iterator().get_next(), sess) == [1, 2, 2, 3, 3, 3, 4, 4,
                                                                          4, 4]
        assert _all(rows.make_one_shot_iterator().get_next(), sess) == [0, 1, 2, 3, 4, 5]
        got = _all(pairs.batch(3).make_one_shot_iterator().get_next(), sess)
    assert [g[0].tolist() for g in got] == [[1, 1, 2], [2, 3, 3], [4, 4]]


def test_interleave_errors():
    with pytest.raises(TypeError, match="must return a Dataset"):
        tf.data.Dataset.range(3).flat_map(lambda x: x)
    endless = tf.data.Dataset.range(3).flat_map(lambda x: tf.data.Dataset.range(x).repeat())
    nxt = endless.make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="endless"):
        sess.run(nxt)
    with pytest.raises(ValueError, match="cannot filter"):
        tf.data.Dataset.range(3).flat_map(
            lambda x: tf.data.Dataset.range(x).filter(lambda y: y > 0)
        ).make_one_shot_iterator().get_next()


def test_unbatch_undoes_batch():
    ds = tf.data.Dataset.range(7).map(lambda x: (x, {"sq": x * x})).batch(3)
    nxt = ds.apply(tf.data.experimental.unbatch()).make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        got = _all(nxt, sess)
    assert [int(a) for a, _ in got] == list(range(7))
    assert [int(d["sq"]) for _, d in got] == [x * x for x in range(7)]


def test_shard_gives_each_worker_its_share():
    ten = tf.data.Dataset.range(10)
    one, two = ten.shard(3, 1), ten.shard(3, 2)
    short = tf.data.Dataset.range(2).shard(3, 2)
    repeated = tf.data.Dataset.range(4).shard(2, 1).repeat(2).batch(3)
    with tf.Session() as sess:
        assert _all(one.make_one_shot_iterator().get_next(), sess) == [1, 4, 7]
        assert _all(two.make_one_shot_iterator().get_next(), sess) == [2, 5, 8]
        assert _all(short.make_one_shot_iterator().get_next(), sess) == []
        assert [b.tolist() for b in _all(repeated.make_one_shot_iterator().get_next(), sess)] \
            == [[1, 3, 1], [3]]
    with pytest.raises(ValueError, match="0 <= index < num_shards"):
        ten.shard(2, 2)
