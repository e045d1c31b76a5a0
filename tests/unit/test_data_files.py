"""tf.data file sources: TFRecord, text-line and fixed-length record files read as datasets;
TFRecordWriter / tf_record_iterator; damaged files fail naming the file and offset."""

from __future__ import annotations

import gzip
import os
import struct

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.core import errors
from tensorgrid.framework.convert import make_op


def _all(fetch, sess, feed=None, limit=10_000):
    out = []
    for _ in range(limit):
        try:
            out.append(sess.run(fetch, feed))
        except errors.OutOfRangeError:
            return out
    raise AssertionError("the iterator never ended")


def _write(path, records, options=None):
    with tf.python_io.TFRecordWriter(str(path), options) as w:
        for r in records:
            w.write(r)
    return str(path)


# ------------------------------------------------------------------ writer and iterator


@pytest.mark.parametrize("compression", [None, "GZIP", "ZLIB"])
def test_writer_and_iterator_round_trip(tmp_path, compression):
    records = [b"", b"a", b"\x00" * 1000, "text is utf-8 \u00e9"]
    path = _write(tmp_path / "r.tfrecord", records, tf.python_io.TFRecordOptions(compression))
    got = list(tf.python_io.tf_record_iterator(path, compression))
    assert got == [b"", b"a", b"\x00" * 1000, "text is utf-8 \u00e9".encode()]
    if compression == "GZIP":  # a gzip file as gunzip reads it
        assert gzip.decompress(open(path, "rb").read()).startswith(struct.pack("<Q", 0))


def test_writer_refuses_writes_after_close_and_unknown_compression(tmp_path):
    w = tf.io.TFRecordWriter(str(tmp_path / "x"))
    w.close()
    w.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        w.write(b"x")
    with pytest.raises(ValueError, match="compression_type"):
        tf.io.TFRecordWriter(str(tmp_path / "y"), "BZIP2")


# ------------------------------------------------------------------ TFRecordDataset


def test_tfrecord_dataset_reads_files_in_order_and_batches(tmp_path):
    a = _write(tmp_path / "a.tfrecord", [b"a0", b"a1", b"a2"])
    b = _write(tmp_path / "b.tfrecord", [b"b0", b"b1"])
    _write(tmp_path / "empty.tfrecord", [])
    ds = tf.data.TFRecordDataset([a, str(tmp_path / "empty.tfrecord"), b])
    assert ds.output_types == tf.string and ds.output_shapes.as_list() == []
    one = ds.make_one_shot_iterator().get_next()
    batch = ds.batch(2).make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert _all(one, sess) == [b"a0", b"a1", b"a2", b"b0", b"b1"]
        assert [x.tolist() for x in _all(batch, sess)] == [[b"a0", b"a1"], [b"a2", b"b0"], [b"b1"]]


def test_tfrecord_dataset_gzip_shuffle_repeat(tmp_path):
    recs = [f"r{i}".encode() for i in range(20)]
    path = _write(tmp_path / "g.tfrecord.gz", recs, "GZIP")
    ds = tf.data.TFRecordDataset(path, compression_type="GZIP").shuffle(8, seed=3).repeat(2)
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        got = _all(nxt, sess)
    assert len(got) == 40
    assert sorted(got[:20]) == sorted(recs) and sorted(got[20:]) == sorted(recs)
    assert got[:20] != recs  # shuffled


def test_initializable_iterator_takes_file_names_from_a_placeholder(tmp_path):
    a = _write(tmp_path / "a.tfrecord", [b"a0", b"a1"])
    b = _write(tmp_path / "b.tfrecord", [b"b0"])
    names = tf.placeholder(tf.string, [None])
    it = tf.data.TFRecordDataset(names).make_initializable_iterator()
    nxt = it.get_next()
    with tf.Session() as sess:
        sess.run(it.initializer, {names: [a]})
        assert _all(nxt, sess) == [b"a0", b"a1"]
        sess.run(it.initializer, {names: [b, a]})
        assert _all(nxt, sess) == [b"b0", b"a0", b"a1"]
        # a file rewritten between initializations is read again
        _write(tmp_path / "b.tfrecord", [b"b0", b"b1", b"b2"])
        sess.run(it.initializer, {names: [b]})
        assert _all(nxt, sess) == [b"b0", b"b1", b"b2"]


def test_relative_paths_are_read_from_the_working_directory(tmp_path, monkeypatch):
    _write(tmp_path / "rel.tfrecord", [b"x"])
    monkeypatch.chdir(tmp_path)
    nxt = tf.data.TFRecordDataset("rel.tfrecord").make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert _all(nxt, sess) == [b"x"]


def test_damaged_data_fails_naming_the_file_and_offset(tmp_path):
    path = _write(tmp_path / "d.tfrecord", [b"first", b"second", b"third"])
    raw = bytearray(open(path, "rb").read())
    second = 12 + 5 + 4  # the second record's offset
    raw[second + 12 + 2] ^= 0xFF  # a byte of its data
    open(path, "wb").write(bytes(raw))
    nxt = tf.data.TFRecordDataset(path).make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert sess.run(nxt) == b"first"
        with pytest.raises(errors.DataLossError, match=rf"offset {second} of .*d\.tfrecord.*data "
                           "checksum"):
            sess.run(nxt)
        assert sess.run(nxt) == b"third"  # the records around it still read


@pytest.mark.parametrize("damage", ["length", "truncated"])
def test_damaged_framing_fails_when_the_file_is_scanned(tmp_path, damage):
    path = _write(tmp_path / "d.tfrecord", [b"first", b"second"])
    raw = bytearray(open(path, "rb").read())
    if damage == "length":
        raw[21] ^= 0x01  # the second record's length
        match = "offset 21 of .*length checksum"
    else:
        raw = raw[:-3]
        match = "Truncated record at offset 21 of .*d\\.tfrecord"
    open(path, "wb").write(bytes(raw))
    nxt = tf.data.TFRecordDataset(path).make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(errors.DataLossError, match=match) as info:
        sess.run(nxt)
    assert "FileRecord" in str(info.value)  # names the node too


def test_a_missing_file_is_not_found(tmp_path):
    nxt = tf.data.TFRecordDataset(str(tmp_path / "nope.tfrecord")).make_one_shot_iterator(
    ).get_next()
    with tf.Session() as sess, pytest.raises(errors.NotFoundError, match="nope.tfrecord"):
        sess.run(nxt)


def test_bad_file_names_are_refused_when_building():
    with pytest.raises(ValueError, match="scalar or vector"):
        tf.data.TFRecordDataset([["a", "b"]])
    with pytest.raises(ValueError, match="compression_type"):
        tf.data.TFRecordDataset("a", compression_type="LZ4")
    with pytest.raises(TypeError, match="string scalar elements"):
        tf.data.TFRecordDataset(tf.data.Dataset.range(3))


# ------------------------------------------------------------------ text and fixed-length


def test_text_line_dataset(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"header\nx,1\r\n\ny,\r2")
    (tmp_path / "b.txt").write_bytes(b"z,3\n")
    (tmp_path / "c.txt").write_bytes(b"")
    with gzip.open(tmp_path / "d.txt.gz", "wb") as f:
        f.write(b"g1\ng2\n")
    files = [str(tmp_path / n) for n in ("a.txt", "b.txt", "c.txt")]
    lines = tf.data.TextLineDataset(files).make_one_shot_iterator().get_next()
    skipped = tf.data.TextLineDataset(files[0]).skip(1).make_one_shot_iterator().get_next()
    gz = tf.data.TextLineDataset(str(tmp_path / "d.txt.gz"), "GZIP").make_one_shot_iterator(
    ).get_next()
    with tf.Session() as sess:
        assert _all(lines, sess) == [b"header", b"x,1", b"", b"y,2", b"z,3"]
        assert _all(skipped, sess) == [b"x,1", b"", b"y,2"]
        assert _all(gz, sess) == [b"g1", b"g2"]


def test_fixed_length_records_with_header_and_footer_and_decode_raw(tmp_path):
    values = np.arange(12, dtype=np.int16)
    body = values.tobytes()
    # 4 header bytes, three records of 8 bytes, 3 footer bytes
    (tmp_path / "f.bin").write_bytes(b"HEAD" + body[:24] + b"END")
    (tmp_path / "g.bin").write_bytes(b"HEAD" + body[:24] + b"xx" + b"END")  # 2 bytes too many
    ds = tf.data.FixedLengthRecordDataset(str(tmp_path / "f.bin"), 8, header_bytes=4,
                                          footer_bytes=3)
    nxt = ds.map(lambda r: tf.decode_raw(r, tf.int16)).batch(3).make_one_shot_iterator()\
        .get_next()
    partial = tf.data.FixedLengthRecordDataset(str(tmp_path / "g.bin"), 8, 4, 3)\
        .make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        (got,) = _all(nxt, sess)
        with pytest.raises(errors.InvalidArgumentError, match="g.bin.*body length 26 bytes, "
                           "which is not an exact multiple of the record length"):
            sess.run(partial)
    np.testing.assert_array_equal(got, values.reshape(3, 4))
    with pytest.raises(ValueError, match="record_bytes"):
        tf.data.FixedLengthRecordDataset("f", 0)


# ------------------------------------------------------------------ list_files


def test_list_files_sorted_shuffled_and_read_as_file_names(tmp_path):
    for n in ("c", "a", "b"):
        _write(tmp_path / f"{n}.tfrecord", [n.encode() + b"0", n.encode() + b"1"])
    (tmp_path / "other.txt").write_text("no")
    pattern = str(tmp_path / "*.tfrecord")
    ordered = tf.data.Dataset.list_files(pattern, shuffle=False).make_one_shot_iterator()\
        .get_next()
    shuffled = tf.data.Dataset.list_files(pattern, seed=5).make_one_shot_iterator().get_next()
    records = tf.data.TFRecordDataset(tf.data.Dataset.list_files(pattern, shuffle=False))\
        .make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        names = _all(ordered, sess)
        assert names == [os.path.join(str(tmp_path), f"{n}.tfrecord").encode() for n in "abc"]
        assert sorted(_all(shuffled, sess)) == names
        assert _all(records, sess) == [b"a0", b"a1", b"b0", b"b1", b"c0", b"c1"]


def test_list_files_with_no_match_fails_when_iterated(tmp_path):
    nxt = tf.data.Dataset.list_files(str(tmp_path / "*.none")).make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError,
                                             match="No files matched pattern"):
        sess.run(nxt)


def test_matching_files(tmp_path):
    for n in ("x1", "x2", "y1"):
        (tmp_path / n).write_text("")
    with tf.Session() as sess:
        got = sess.run(tf.io.matching_files([str(tmp_path / "x*"), str(tmp_path / "y?")]))
    assert [os.path.basename(p.decode()) for p in got] == ["x1", "x2", "y1"]


# ------------------------------------------------------------------ interleave and flat_map


def _files(tmp_path, counts):
    names = []
    for name, n in counts.items():
        names.append(_write(tmp_path / f"{name}.tfrecord", [f"{name}{i}".encode()
                                                            for i in range(n)]))
    return names


def test_interleave_of_file_sources_follows_tensorflows_order(tmp_path):
    names = _files(tmp_path, {"a": 3, "b": 0, "c": 5, "d": 2})
    files = tf.data.Dataset.from_tensor_slices(names)
    inter = files.interleave(tf.data.TFRecordDataset, cycle_length=2, block_length=2)
    flat = files.flat_map(lambda f: tf.data.TFRecordDataset(f).map(
        lambda r: tf.string_join([r, "!"])))
    with tf.Session() as sess:
        # two files open at a time, two records from each in turn; a finished file's slot
        # takes the next file
        assert [r.decode() for r in _all(inter.make_one_shot_iterator().get_next(), sess)] == \
            ["a0", "a1", "a2", "c0", "c1", "d0", "d1", "c2", "c3", "c4"]
        assert [r.decode() for r in _all(flat.make_one_shot_iterator().get_next(), sess)] == \
            [f"{n}{i}!" for n, k in (("a", 3), ("c", 5), ("d", 2)) for i in range(k)]


def test_interleave_of_file_sources_with_other_transformations(tmp_path):
    names = _files(tmp_path, {"a": 3, "b": 2})
    files = tf.data.Dataset.from_tensor_slices(names)
    # not a file source of the name alone: the general interleave (sizes taken per file)
    skipped = files.flat_map(lambda f: tf.data.TFRecordDataset(f).skip(1))
    with tf.Session() as sess:
        assert _all(skipped.make_one_shot_iterator().get_next(), sess) == [b"a1", b"a2", b"b1"]
    with pytest.raises(ValueError, match="positive"):
        files.interleave(tf.data.TFRecordDataset, cycle_length=0)


def test_scattered_records_are_read_one_by_one(tmp_path):
    """Records far apart in a large file are read where they lie (not the span between)."""
    recs = [bytes([i % 251]) * 8000 for i in range(300)]  # about 2.4 MB
    path = _write(tmp_path / "big.tfrecord", recs)
    attrs = {"format": "tfrecord", "shared_name": "scattered"}
    far = make_op("DatasetFileRecordRead", [tf.constant(path), tf.constant([299, 0, 150],
                                                                            tf.int64)], attrs)
    near = make_op("DatasetFileRecordRead", [tf.constant(path), tf.constant([[5, 6], [7, 8]],
                                                                             tf.int64)], attrs)
    with tf.Session() as sess:
        got_far, got_near = sess.run([far, near])
    assert got_far.tolist() == [recs[299], recs[0], recs[150]]
    assert got_near.tolist() == [[recs[5], recs[6]], [recs[7], recs[8]]]
