"""TFRecord files of tf.train.Example protos move between tensorgrid and real TensorFlow: TF
reads and parses the files tensorgrid writes (plain and GZIP), and tensorgrid's TFRecordDataset
and parse ops read the files TF writes (plain, GZIP, ZLIB); text lines, fixed-length records and
interleave's order come out as TF's. Runs where TensorFlow's interpreter
exists (``TENSORGRID_TF_PYTHON``, else ``.venv-tf/bin/python`` of this checkout or of the main
worktree); skips with the reason otherwise."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_bundle_tf_roundtrip import TF_PYTHON  # the optional TensorFlow interpreter, or None

import tensorgrid as tf
from tensorgrid.core import errors

REPO = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.skipif(
    TF_PYTHON is None, reason="TensorFlow peer not found: set TENSORGRID_TF_PYTHON or create "
    ".venv-tf (pip install tensorflow-cpu) to exchange TFRecord files with TensorFlow")

# Reads tensorgrid's files, then writes its own: one TensorFlow process for both directions.
TF_SCRIPT = r"""
import json, os, sys
import numpy as np
import tensorflow as tf
d = sys.argv[1]
spec = {"x": tf.io.FixedLenFeature([2], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64),
        "name": tf.io.FixedLenFeature([], tf.string), "tags": tf.io.VarLenFeature(tf.int64)}
out = {"ours": [], "ours_gzip": []}
for r in tf.data.TFRecordDataset(os.path.join(d, "ours.tfrecord")):
    p = tf.io.parse_single_example(r, spec)
    out["ours"].append({"x": p["x"].numpy().tolist(), "label": int(p["label"]),
                        "name": p["name"].numpy().decode(),
                        "tags": p["tags"].values.numpy().tolist()})
seq = tf.io.parse_example(tf.stack(list(tf.data.TFRecordDataset(os.path.join(d, "ours.tfrecord")))),
                         {"tags": tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True,
                                                                default_value=-5),
                          "x": tf.io.FixedLenSequenceFeature([1], tf.float32, allow_missing=True)})
out["sequences"] = {k: v.numpy().tolist() for k, v in seq.items()}
for r in tf.data.TFRecordDataset(os.path.join(d, "ours.gz"), compression_type="GZIP"):
    out["ours_gzip"].append(r.numpy().decode())
out["lines"] = [r.numpy().hex() for r in tf.data.TextLineDataset(
    [os.path.join(d, "a.txt"), os.path.join(d, "b.txt")])]
il = json.load(open(os.path.join(d, "interleave.json")))
out["interleave"] = [[r.numpy().decode() for r in tf.data.Dataset.from_tensor_slices(il["files"])
                      .interleave(tf.data.TFRecordDataset, cycle_length=c, block_length=b)]
                     for c, b in il["configs"]]
sizes = tf.data.Dataset.from_tensor_slices(tf.constant(il["sizes"], tf.int64))
out["general"] = [[int(v) for v in sizes.interleave(
    lambda n: tf.data.Dataset.range(n).map(lambda x: n * 100 + x), cycle_length=c,
    block_length=b)] for c, b in il["configs"]]
out["parallel_reads"] = [r.numpy().decode() for r in tf.data.TFRecordDataset(
    il["files"], num_parallel_reads=3)]
out["fixed"] = [r.numpy().hex() for r in tf.data.FixedLengthRecordDataset(
    os.path.join(d, "f.bin"), 3, header_bytes=2, footer_bytes=1)]

def example(i):
    return tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i, i / 4])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i * 10])),
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[np.arange(i, i + 6, dtype=np.uint16).tobytes()])),
        "tags": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i)))),
    })).SerializeToString()

with tf.io.TFRecordWriter(os.path.join(d, "tf.tfrecord")) as w:
    for i in range(5):
        w.write(example(i))
for kind in ("GZIP", "ZLIB"):
    with tf.io.TFRecordWriter(os.path.join(d, "tf." + kind), options=kind) as w:
        for i in range(3):
            w.write(("%s-%d" % (kind, i)).encode())
out["tensor"] = tf.io.parse_tensor(tf.io.read_file(os.path.join(d, "ours.tensor")),
                                   tf.float32).numpy().tolist()
tf.io.write_file(os.path.join(d, "tf.tensor"),
                 tf.io.serialize_tensor(tf.constant([[1, 2], [3, 4]], tf.int64)))
csv_lines = il["csv"]
cols = tf.io.decode_csv(csv_lines, [[0], [0.0], ["?"]])
out["csv"] = [c.numpy().tolist() if c.dtype != tf.string else [v.decode() for v in c.numpy()]
              for c in cols]
out["csv_errors"] = []
for bad in il["csv_bad"]:
    try:
        tf.io.decode_csv([bad], [[0], [0.0], ["?"]])
        out["csv_errors"].append(False)
    except tf.errors.InvalidArgumentError:
        out["csv_errors"].append(True)
print(json.dumps(out))
"""


def _records(path, compression=None):
    return _read(tf.data.TFRecordDataset(path, compression))


def _read(dataset):
    nxt = dataset.make_one_shot_iterator().get_next()
    out = []
    with tf.Session() as sess:
        while True:
            try:
                out.append(sess.run(nxt))
            except errors.OutOfRangeError:
                return out


def test_tfrecord_files_of_examples_move_both_ways(tmp_path):
    with tf.python_io.TFRecordWriter(str(tmp_path / "ours.tfrecord")) as w:
        for i in range(3):
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i + 0.5, -i])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[2**40 + i])),
                "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"ex%d" % i])),
                "tags": tf.train.Feature(int64_list=tf.train.Int64List(value=[7] * i)),
            })).SerializeToString())
    with tf.io.TFRecordWriter(str(tmp_path / "ours.gz"), tf.io.TFRecordOptions("GZIP")) as w:
        for i in range(4):
            w.write(f"line {i}")
    interleaved = []
    for name, n in (("p", 4), ("q", 0), ("r", 7), ("s", 1), ("t", 3), ("u", 5)):
        with tf.python_io.TFRecordWriter(str(tmp_path / f"{name}.tfrecord")) as w:
            for i in range(n):
                w.write(f"{name}{i}")
        interleaved.append(str(tmp_path / f"{name}.tfrecord"))
    configs = [(2, 2), (3, 1), (4, 3), (1, 2)]
    csv_lines = ['1,2.5,"a,""b"""', ",,", "3,4,x", '"",1e2,"q"', "5,-inf,", "-7,.5,,"[:-1]]
    csv_bad = ["1,2", "1,2,3,4", "x,1,a", "1,y,a", 'a"b,1,c', '1,2,"c"d', "2147483648,1,a"]
    (tmp_path / "interleave.json").write_text(json.dumps({
        "files": interleaved, "configs": configs, "csv": csv_lines, "csv_bad": csv_bad,
        "sizes": [3, 0, 5, 1, 4, 2]}))
    with tf.Session() as sess:
        sess.run(tf.write_file(str(tmp_path / "ours.tensor"), tf.serialize_tensor(
            tf.constant(np.arange(6, dtype=np.float32).reshape(3, 2)))))
    lines = b"one\r\ntwo\n\n\r\nlone\rcr\nlast"
    (tmp_path / "a.txt").write_bytes(lines)
    (tmp_path / "b.txt").write_bytes(b"\n")
    (tmp_path / "f.bin").write_bytes(bytes(range(12)))  # 2 header + 3 * 3 + 1 footer
    proc = subprocess.run([TF_PYTHON, "-c", TF_SCRIPT, str(tmp_path)], capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    # TensorFlow parsed what tensorgrid wrote
    assert seen["ours"] == [{"x": [i + 0.5, -i], "label": 2**40 + i, "name": f"ex{i}",
                             "tags": [7] * i} for i in range(3)]
    assert seen["ours_gzip"] == [f"line {i}" for i in range(4)]
    # tensors serialized as TensorProtos, both ways
    assert seen["tensor"] == [[0, 1], [2, 3], [4, 5]]
    with tf.Session() as sess:
        theirs = sess.run(tf.parse_tensor(tf.read_file(str(tmp_path / "tf.tensor")), tf.int64))
    assert theirs.tolist() == [[1, 2], [3, 4]]
    # sequence features padded as TensorFlow pads them
    records = tf.data.TFRecordDataset(str(tmp_path / "ours.tfrecord")).batch(3)
    seq = tf.parse_example(records.make_one_shot_iterator().get_next(), {
        "tags": tf.FixedLenSequenceFeature([], tf.int64, allow_missing=True, default_value=-5),
        "x": tf.FixedLenSequenceFeature([1], tf.float32, allow_missing=True)})
    with tf.Session() as sess:
        assert {k: v.tolist() for k, v in sess.run(seq).items()} == seen["sequences"]
    # text lines and fixed-length records split as TensorFlow splits them
    text = tf.data.TextLineDataset([str(tmp_path / "a.txt"), str(tmp_path / "b.txt")])
    fixed = tf.data.FixedLengthRecordDataset(str(tmp_path / "f.bin"), 3, 2, 1)
    assert [r.hex() for r in _read(text)] == seen["lines"]
    assert [r.hex() for r in _read(fixed)] == seen["fixed"]
    files = tf.data.Dataset.from_tensor_slices(interleaved)
    for (cycle, block), expected in zip(configs, seen["interleave"], strict=True):
        got = _read(files.interleave(tf.data.TFRecordDataset, cycle, block))
        assert [r.decode() for r in got] == expected, (cycle, block)
    # CSV columns, defaults and quoting as TensorFlow decodes them; the same records refused
    cols = tf.decode_csv(tf.constant(csv_lines), [[0], [0.0], ["?"]])
    with tf.Session() as sess:
        got_cols = sess.run(cols)
        refused = []
        for bad in csv_bad:
            try:
                sess.run(tf.decode_csv(tf.constant([bad]), [[0], [0.0], ["?"]]))
                refused.append(False)
            except errors.InvalidArgumentError:
                refused.append(True)
    assert [got_cols[0].tolist(), got_cols[1].tolist(),
            [v.decode() for v in got_cols[2]]] == seen["csv"]
    assert refused == seen["csv_errors"] == [True] * len(csv_bad)
    sizes = tf.data.Dataset.from_tensor_slices(np.array([3, 0, 5, 1, 4, 2], np.int64))
    for (cycle, block), expected in zip(configs, seen["general"], strict=True):
        general = sizes.interleave(lambda n: tf.data.Dataset.range(n).map(lambda x: n * 100 + x),
                                   cycle, block)
        assert [int(v) for v in _read(general)] == expected, (cycle, block)
    parallel = _read(tf.data.TFRecordDataset(interleaved, num_parallel_reads=3))
    assert [r.decode() for r in parallel] == seen["parallel_reads"]

    # tensorgrid reads and parses what TensorFlow wrote
    records = tf.data.TFRecordDataset(str(tmp_path / "tf.tfrecord")).batch(5)
    batch = records.make_one_shot_iterator().get_next()
    parsed = tf.parse_example(batch, {
        "x": tf.FixedLenFeature([2], tf.float32), "label": tf.FixedLenFeature([], tf.int64),
        "image": tf.FixedLenFeature([], tf.string), "tags": tf.VarLenFeature(tf.int64)})
    image = tf.decode_raw(parsed["image"], tf.uint16)
    with tf.Session() as sess:
        got, pixels = sess.run([parsed, image])
    np.testing.assert_allclose(got["x"], [[i, i / 4] for i in range(5)])
    assert got["label"].tolist() == [0, 10, 20, 30, 40]
    np.testing.assert_array_equal(pixels, [np.arange(i, i + 6) for i in range(5)])
    assert got["tags"].values.tolist() == [t for i in range(5) for t in range(i)]
    assert got["tags"].dense_shape.tolist() == [5, 4]
    for kind in ("GZIP", "ZLIB"):
        assert _records(str(tmp_path / f"tf.{kind}"), kind) == [
            f"{kind}-{i}".encode() for i in range(3)]
        assert list(tf.python_io.tf_record_iterator(str(tmp_path / f"tf.{kind}"), kind)) == [
            f"{kind}-{i}".encode() for i in range(3)]
