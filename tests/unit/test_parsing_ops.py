"""tf.train.Example protos parsed by parse_single_example / parse_example, decode_raw, and a
TF1-style input pipeline over TFRecord files of Examples that trains a model."""

from __future__ import annotations

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.core import errors


def _example(**features):
    feature = {}
    for key, value in features.items():
        value = list(value)
        if value and isinstance(value[0], bytes):
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=value))
        elif value and isinstance(value[0], float):
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
        else:
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=value))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


SPEC = {
    "x": tf.FixedLenFeature([2], tf.float32),
    "label": tf.FixedLenFeature([], tf.int64, default_value=-1),
    "name": tf.FixedLenFeature([], tf.string, default_value=b"?"),
    "tags": tf.VarLenFeature(tf.int64),
}


def test_parse_single_example_dense_defaults_and_var_len():
    record = tf.placeholder(tf.string, [])
    parsed = tf.parse_single_example(record, SPEC)
    assert parsed["x"].shape.as_list() == [2] and parsed["x"].dtype == tf.float32
    assert parsed["label"].shape.as_list() == [] and parsed["name"].dtype == tf.string
    assert isinstance(parsed["tags"], tf.SparseTensor)
    with tf.Session() as sess:
        full = sess.run(parsed, {record: _example(x=[1.0, 2.0], label=[3], name=[b"n"],
                                                  tags=[7, 8, 9])})
        sparse = sess.run(parsed, {record: _example(x=[0.5, 0.25])})
    np.testing.assert_array_equal(full["x"], [1.0, 2.0])
    assert full["label"] == 3 and full["name"] == b"n"
    assert full["tags"].indices.tolist() == [[0], [1], [2]]
    assert full["tags"].values.tolist() == [7, 8, 9] and full["tags"].dense_shape.tolist() == [3]
    assert sparse["label"] == -1 and sparse["name"] == b"?"
    assert sparse["tags"].values.size == 0 and sparse["tags"].dense_shape.tolist() == [0]


def test_parse_example_batches():
    batch = [_example(x=[1.0, 2.0], tags=[1]), _example(x=[3.0, 4.0], label=[5], tags=[2, 3, 4]),
             _example(x=[5.0, 6.0])]
    parsed = tf.parse_example(tf.constant(batch), SPEC)
    with tf.Session() as sess:
        got = sess.run(parsed)
    np.testing.assert_array_equal(got["x"], [[1, 2], [3, 4], [5, 6]])
    assert got["label"].tolist() == [-1, 5, -1] and got["name"].tolist() == [b"?"] * 3
    assert got["tags"].indices.tolist() == [[0, 0], [1, 0], [1, 1], [1, 2]]
    assert got["tags"].values.tolist() == [1, 2, 3, 4]
    assert got["tags"].dense_shape.tolist() == [3, 3]


@pytest.mark.parametrize("serialized,match", [
    (_example(label=[1]), "Feature: x \\(data type: float32\\) is required"),
    (_example(x=[1, 2]), "Key: x. Data types don't match. Data type: int64 but expected type: "
                         "float32"),
    (_example(x=[1.0, 2.0, 3.0]), "Key: x. Number of float32 values != expected. Values size: "
                                  "3 but output shape: \\[2\\]"),
    (b"\xff\xff not a proto", "Could not parse example input"),
])
def test_bad_examples_fail_naming_the_key(serialized, match):
    parsed = tf.parse_example(tf.constant([_example(x=[1.0, 2.0]), serialized]), SPEC)
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match=match) as info:
        sess.run(parsed)
    assert "ParseExample" in str(info.value)
    if b"proto" not in serialized:
        assert "Index: 1" in str(info.value)


def test_bad_feature_specs_are_refused_when_building():
    with pytest.raises(ValueError, match="fully defined"):
        tf.parse_single_example(tf.constant(b""), {"x": tf.FixedLenFeature([None], tf.float32)})
    with pytest.raises(ValueError, match="float32, int64 or string"):
        tf.parse_single_example(tf.constant(b""), {"x": tf.FixedLenFeature([], tf.int32)})
    with pytest.raises(TypeError, match="FixedLenSequenceFeature or VarLenFeature, got DType"):
        tf.parse_single_example(tf.constant(b""), {"x": tf.float32})


def test_decode_raw_endianness_and_errors():
    data = np.array([1, 256, -2], np.int32)
    little = tf.decode_raw(tf.constant([data.tobytes(), data[::-1].tobytes()]), tf.int32)
    big = tf.decode_raw(tf.constant(data.astype(">i4").tobytes()), tf.int32, little_endian=False)
    floats = tf.io.decode_raw(tf.constant(np.float64(1.5).tobytes()), tf.float64)
    assert little.shape.as_list() == [2, None]
    ragged = tf.decode_raw(tf.constant([b"abcd", b"ab"]), tf.uint8)
    odd = tf.decode_raw(tf.constant(b"abc"), tf.int16)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(little), [data, data[::-1]])
        np.testing.assert_array_equal(sess.run(big), data)
        assert sess.run(floats).tolist() == [1.5]
        with pytest.raises(errors.InvalidArgumentError, match="same size"):
            sess.run(ragged)
        with pytest.raises(errors.InvalidArgumentError, match="not a multiple of 2"):
            sess.run(odd)


def test_tf1_input_pipeline_trains_from_tfrecord_files(tmp_path):
    """A TF1 program as written for TensorFlow: Examples written with TFRecordWriter, read back
    by list_files + TFRecordDataset + map(parse_single_example) + shuffle/repeat/batch, and a
    linear model trained from the iterator."""
    rng = np.random.default_rng(0)
    true_w, true_b = np.array([2.0, -3.0], np.float32), 0.5
    for shard in range(3):
        with tf.python_io.TFRecordWriter(str(tmp_path / f"train-{shard}.tfrecord")) as writer:
            for _ in range(40):
                x = rng.normal(size=2).astype(np.float32)
                y = float(x @ true_w + true_b)
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(bytes_list=tf.train.BytesList(value=[x.tobytes()])),
                    "y": tf.train.Feature(float_list=tf.train.FloatList(value=[y])),
                })).SerializeToString())

    def parse(record):
        features = tf.parse_single_example(record, {
            "x": tf.FixedLenFeature([], tf.string),
            "y": tf.FixedLenFeature([], tf.float32)})
        x = tf.reshape(tf.decode_raw(features["x"], tf.float32), [2])
        return x, features["y"]

    files = tf.data.Dataset.list_files(str(tmp_path / "train-*.tfrecord"), shuffle=False)
    dataset = (tf.data.TFRecordDataset(files).map(parse).shuffle(64, seed=1).repeat()
               .batch(16).prefetch(1))
    x, y = dataset.make_one_shot_iterator().get_next()
    w = tf.Variable(tf.zeros([2, 1]))
    b = tf.Variable(0.0)
    pred = tf.squeeze(tf.matmul(x, w), 1) + b
    loss = tf.reduce_mean(tf.square(pred - y))
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss)
        for _ in range(300):
            sess.run(train_op)
        last = sess.run(loss)
        w_val, b_val = sess.run([w, b])
    assert last < first * 1e-3
    np.testing.assert_allclose(w_val.ravel(), true_w, atol=1e-2)
    assert abs(b_val - true_b) < 1e-2


def test_fixed_len_sequence_features_are_padded_to_the_longest():
    spec = {"pts": tf.FixedLenSequenceFeature([2], tf.float32, allow_missing=True,
                                              default_value=-1.0),
            "words": tf.FixedLenSequenceFeature([], tf.string, allow_missing=True)}
    batch = [_example(pts=[1.0, 2.0, 3.0, 4.0], words=[b"a"]), _example(words=[b"b", b"c"]),
             _example(pts=[5.0, 6.0])]
    parsed = tf.parse_example(tf.constant(batch), spec)
    single = tf.parse_single_example(tf.constant(batch[0]), spec)
    assert parsed["pts"].shape.as_list() == [3, None, 2]
    assert single["pts"].shape.as_list() == [None, 2]
    odd = tf.parse_single_example(tf.constant(_example(pts=[1.0, 2.0, 3.0])), spec)
    with tf.Session() as sess:
        got, one = sess.run([parsed, single])
        with pytest.raises(errors.InvalidArgumentError, match="not a multiple of stride length"):
            sess.run(odd)
    np.testing.assert_array_equal(got["pts"], [[[1, 2], [3, 4]], [[-1, -1], [-1, -1]],
                                               [[5, 6], [-1, -1]]])
    assert got["words"].tolist() == [[b"a", b""], [b"b", b"c"], [b"", b""]]
    np.testing.assert_array_equal(one["pts"], [[1, 2], [3, 4]])
    assert one["words"].tolist() == [b"a"]
    with pytest.raises(ValueError, match="allow_missing"):
        tf.parse_example(tf.constant(batch), {"w": tf.io.FixedLenSequenceFeature([], tf.int64)})


def test_decode_csv_columns_defaults_and_quotes():
    records = tf.constant([b'1,2.5,"a,""b""",7', b",,plain,", b"3,-1e3,,9"])
    a, b, c, d = tf.decode_csv(records, [[0], [0.0], ["?"], tf.constant([-1], tf.int64)])
    assert [t.dtype for t in (a, b, c, d)] == [tf.int32, tf.float32, tf.string, tf.int64]
    picked = tf.io.decode_csv(tf.constant([[b"x;1;2"], [b"y;3;4"]]),
                              [[""], [0]], field_delim=";", select_cols=[0, 2])
    with tf.Session() as sess:
        got = sess.run([a, b, c, d])
        names, nums = sess.run(picked)
    assert got[0].tolist() == [1, 0, 3] and got[1].tolist() == [2.5, 0.0, -1000.0]
    assert got[2].tolist() == [b'a,"b"', b"plain", b"?"] and got[3].tolist() == [7, -1, 9]
    assert names.tolist() == [[b"x"], [b"y"]] and nums.tolist() == [[2], [4]]


@pytest.mark.parametrize("record,defaults,match", [
    (b"1,2,3", [[0], [0]], "Expect 2 fields but have 3 in record 0"),
    (b"1,", [[0], None], "Field 1 is required but missing in record 0"),
    (b"1,x", [[0], [0.0]], "Field 1 in record 0 is not a valid float: x"),
    (b"99999999999", [[0]], "not a valid int32"),
    (b'a"b', [[""]], "Unquoted fields cannot have quotes"),
    (b'"ab"c', [[""]], "Quoted field has to end with quote followed by delim or end"),
])
def test_decode_csv_errors(record, defaults, match):
    # None: a required int32 column (an empty default, built in the test's graph)
    defaults = [tf.constant([], tf.int32) if d is None else d for d in defaults]
    cols = tf.decode_csv(tf.constant([record]), defaults)
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match=match):
        sess.run(cols)


def test_serialize_and_parse_tensor_and_files(tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    path = str(tmp_path / "sub" / "t.pb")
    blob = tf.serialize_tensor(tf.constant(x))
    write = tf.write_file(path, blob)
    back = tf.parse_tensor(tf.read_file(path), tf.float32)
    wrong = tf.parse_tensor(blob, tf.int32)
    words = tf.io.parse_tensor(tf.io.serialize_tensor(tf.constant([b"a", b"bc"])), tf.string)
    missing = tf.read_file(str(tmp_path / "none"))
    with tf.Session() as sess:
        sess.run(write)
        np.testing.assert_array_equal(sess.run(back), x)
        assert sess.run(words).tolist() == [b"a", b"bc"]
        with pytest.raises(errors.InvalidArgumentError, match="Type mismatch"):
            sess.run(wrong)
        with pytest.raises(errors.NotFoundError, match="none"):
            sess.run(missing)
    # the bytes are a TensorProto, as TensorFlow writes it
    proto = tf.TensorProto.FromString(open(path, "rb").read())
    assert [d.size for d in proto.tensor_shape.dim] == [2, 3]
