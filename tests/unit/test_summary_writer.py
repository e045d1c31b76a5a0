"""Event files: TFRecord framing with masked CRC-32C, the file name and header TensorBoard looks
for, FileWriter's queue, flushing, close and reopen, and summaries recorded while training by
SummarySaverHook and MonitoredTrainingSession."""

from __future__ import annotations

import glob
import io
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

import tensorgrid as tf
from tensorgrid.core import errors
from tensorgrid.core.crc32c import crc32c, mask
from tensorgrid.core.tfrecord import encode_record, read_records
from tensorgrid.summary import (
    Event,
    FileWriterCache,
    SessionLog,
    Summary,
    SummaryMetadata,
    summary_iterator,
    tf_record_iterator,
)

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


@pytest.fixture(autouse=True)
def _close_cached_writers():
    yield
    FileWriterCache.clear()


def _event_files(logdir) -> list[str]:
    return sorted(glob.glob(os.path.join(str(logdir), "events.out.tfevents.*")))


def _scalar(tag: str, value: float) -> Summary:
    return Summary(value=[Summary.Value(tag=tag, simple_value=value)])


# ------------------------------------------------------------------------------ records


def test_crc32c_and_mask_match_known_values():
    # the CRC-32C check value of the standard test string
    assert crc32c(b"123456789") == 0xE3069283
    assert mask(0) == 0xA282EAD8
    assert mask(0xE3069283) == (
        (((0xE3069283 >> 15) | (0xE3069283 << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    )


def test_record_framing_is_length_crc_data_crc():
    data = b"an event"
    record = encode_record(data)
    assert len(record) == 8 + 4 + len(data) + 4
    (length,) = struct.unpack("<Q", record[:8])
    assert length == len(data)
    assert struct.unpack("<I", record[8:12])[0] == mask(crc32c(record[:8]))
    assert record[12:-4] == data
    assert struct.unpack("<I", record[-4:])[0] == mask(crc32c(data))
    assert list(read_records(io.BytesIO(record + encode_record(b"")))) == [data, b""]


def test_damaged_and_truncated_records_fail_with_data_loss(tmp_path):
    good = encode_record(b"first") + encode_record(b"second record")
    damaged = bytearray(good)
    damaged[len(encode_record(b"first")) + 14] ^= 0x01  # a data byte of the second record
    path = tmp_path / "events.out.tfevents.damaged"
    path.write_bytes(bytes(damaged))
    records = tf_record_iterator(str(path))
    assert next(records) == b"first"
    with pytest.raises(errors.DataLossError, match=r"offset 21 of .*damaged: the data checksum"):
        next(records)
    bad_length = bytearray(good)
    bad_length[0] ^= 0x40
    with pytest.raises(errors.DataLossError, match="length checksum"):
        list(read_records(io.BytesIO(bytes(bad_length))))
    with pytest.raises(errors.DataLossError, match="Truncated record at offset 21"):
        list(read_records(io.BytesIO(good[:-3])))


# ------------------------------------------------------------------------------ FileWriter


def test_event_file_name_header_and_events(tmp_path):
    before = int(time.time())
    writer = tf.summary.FileWriter(str(tmp_path / "run"), filename_suffix=".v2")
    writer.add_summary(_scalar("a", 1.0), global_step=3)
    writer.add_session_log(SessionLog(status=SessionLog.CHECKPOINT, checkpoint_path="m"), 4)
    writer.add_event(Event(step=5, file_version="not written as a header"))
    writer.close()
    (path,) = _event_files(tmp_path / "run")
    match = re.fullmatch(r"events\.out\.tfevents\.(\d{10})\.(.+)\.v2", os.path.basename(path))
    assert match and before <= int(match.group(1)) <= time.time()
    assert match.group(2) == socket.gethostname()
    events = list(summary_iterator(path))
    assert events[0].file_version == "brain.Event:2" and events[0].wall_time >= before
    assert events[1].step == 3 and events[1].summary.value[0].simple_value == 1.0
    assert events[2].session_log.checkpoint_path == "m" and events[2].step == 4
    assert events[3].step == 5
    assert writer.get_logdir() == str(tmp_path / "run")


def test_metadata_is_written_with_the_first_value_of_a_tag_only(tmp_path):
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
    value = Summary.Value(tag="t", metadata=meta)
    value.tensor.dtype = 7  # DT_STRING
    value.tensor.string_val.append(b"hi")
    with tf.summary.FileWriter(str(tmp_path)) as writer:
        for step in range(3):
            writer.add_summary(Summary(value=[value]).SerializeToString(), step)
    events = list(summary_iterator(_event_files(tmp_path)[0]))[1:]
    assert [e.summary.value[0].HasField("metadata") for e in events] == [True, False, False]
    assert [list(e.summary.value[0].tensor.string_val) for e in events] == [[b"hi"]] * 3


def test_flush_writes_queued_events_and_the_thread_flushes_by_itself(tmp_path):
    writer = tf.summary.FileWriter(str(tmp_path / "a"), max_queue=2, flush_secs=3600)
    for step in range(5):  # more than max_queue: add_summary waits for room
        writer.add_summary(_scalar("loss", float(step)), step)
    writer.flush()
    events = list(summary_iterator(_event_files(tmp_path / "a")[0]))
    assert [e.step for e in events[1:]] == [0, 1, 2, 3, 4]
    writer.close()

    timed = tf.summary.FileWriter(str(tmp_path / "b"), flush_secs=0.05)
    timed.add_summary(_scalar("loss", 1.0), 1)
    path = _event_files(tmp_path / "b")[0]
    deadline = time.time() + 10
    while len(list(summary_iterator(path))) < 2 and time.time() < deadline:
        time.sleep(0.02)
    assert [e.step for e in summary_iterator(path)] == [0, 1]
    timed.close()


def test_close_drops_later_events_and_reopen_starts_a_new_file(tmp_path):
    writer = tf.summary.FileWriter(str(tmp_path))
    writer.add_summary(_scalar("x", 1.0), 1)
    writer.close()
    writer.close()  # harmless
    writer.add_summary(_scalar("x", 2.0), 2)  # dropped, as in TensorFlow
    writer.reopen()
    writer.add_summary(_scalar("x", 3.0), 3)
    writer.close()
    files = _event_files(tmp_path)
    assert len(files) == 2
    steps = [[e.step for e in summary_iterator(f)][1:] for f in files]
    assert steps == [[1], [3]]
    acc = event_accumulator.EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("x")] == [(1, 1.0), (3, 3.0)]


def test_add_graph_and_run_metadata_and_bad_arguments(tmp_path):
    x = tf.placeholder(tf.float32, [], name="x")
    tf.identity(x * 2.0, name="doubled")
    with tf.summary.FileWriter(str(tmp_path), graph=tf.get_default_graph()) as writer:
        writer.add_run_metadata(b"\x0a\x00", "step_1", global_step=1)
        with pytest.raises(ValueError, match="step_1"):
            writer.add_run_metadata(b"", "step_1")
        with pytest.raises(TypeError, match="Summary"):
            writer.add_summary(3.0)
        with pytest.raises(ValueError, match="not a Summary"):
            writer.add_summary(b"\xff\xff\xff")
    acc = event_accumulator.EventAccumulator(str(tmp_path))
    acc.Reload()
    assert {"x", "doubled"} <= {n.name for n in acc.Graph().node}
    assert acc.Tags()["run_metadata"] == ["step_1"]
    with pytest.raises(ValueError, match="session"):
        tf.summary.FileWriter(str(tmp_path), session=object())


def test_two_writers_in_one_directory_get_two_files(tmp_path):
    a = tf.summary.FileWriter(str(tmp_path))
    b = tf.summary.FileWriter(str(tmp_path))
    a.close()
    b.close()
    assert len(_event_files(tmp_path)) == 2


def test_file_writer_cache_shares_one_writer_per_directory(tmp_path):
    first = FileWriterCache.get(str(tmp_path))
    assert FileWriterCache.get(str(tmp_path)) is first
    FileWriterCache.clear()
    assert FileWriterCache.get(str(tmp_path)) is not first


# ------------------------------------------------------------------------------ training


def _model():
    step = tf.train.get_or_create_global_step()
    w = tf.Variable(1.0, name="w")
    loss = w * w
    tf.summary.scalar("loss", loss)
    tf.summary.histogram("weights", w)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    return train


def test_monitored_training_session_saves_summaries_every_n_steps(tmp_path):
    train = _model()
    with tf.train.MonitoredTrainingSession(
        summary_dir=str(tmp_path),
        save_summaries_steps=3,
        hooks=[tf.train.StopAtStepHook(last_step=10)],
    ) as sess:
        while not sess.should_stop():
            sess.run(train)
    FileWriterCache.clear()
    acc = event_accumulator.EventAccumulator(str(tmp_path), size_guidance={"histograms": 0})
    acc.Reload()
    # recorded after the runs that reached steps 1, 4, 7 and 10, with the loss of before them
    loss = acc.Scalars("loss")
    assert [e.step for e in loss] == [1, 4, 7, 10]
    assert [e.value for e in loss] == pytest.approx([0.8 ** (2 * s) for s in (0, 3, 6, 9)])
    assert [e.step for e in acc.Histograms("weights")] == [1, 4, 7, 10]
    assert acc.Tags()["graph"]
    events = list(summary_iterator(_event_files(tmp_path)[0]))
    starts = [e.step for e in events if e.session_log.status == SessionLog.START]
    assert starts == [1]


def test_no_summaries_without_a_directory_or_with_a_zero_interval(tmp_path):
    train = _model()
    for kwargs in ({}, {"summary_dir": str(tmp_path), "save_summaries_steps": 0}):
        with tf.train.MonitoredTrainingSession(
            hooks=[tf.train.StopAtStepHook(num_steps=2)], **kwargs
        ) as sess:
            while not sess.should_stop():
                sess.run(train)
    FileWriterCache.clear()
    assert _event_files(tmp_path) == []


def test_summary_saver_hook_every_n_seconds_with_its_own_op(tmp_path):
    train = _model()
    extra = tf.summary.scalar("extra", tf.constant(5.0), collections=[])
    writer = tf.summary.FileWriter(str(tmp_path))
    hook = tf.train.SummarySaverHook(save_secs=3600, summary_writer=writer, summary_op=[extra])
    with tf.train.MonitoredTrainingSession(
        hooks=[hook, tf.train.StopAtStepHook(last_step=5)]
    ) as sess:
        while not sess.should_stop():
            sess.run(train)
    writer.close()
    acc = event_accumulator.EventAccumulator(str(tmp_path))
    acc.Reload()
    # an hour never passes: only the first step is recorded, and only the op given
    assert [(e.step, e.value) for e in acc.Scalars("extra")] == [(1, 5.0)]
    assert "loss" not in acc.Tags()["scalars"]


def test_summary_saver_hook_arguments_and_global_step():
    with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op"):
        tf.train.SummarySaverHook(save_steps=1)
    with pytest.raises(ValueError, match="every_steps"):
        tf.train.SummarySaverHook(save_steps=1, save_secs=1, summary_op=tf.constant(""))
    hook = tf.train.SummarySaverHook(save_steps=1, summary_op=tf.constant(""))
    with pytest.raises(RuntimeError, match="Global step should be created"):
        hook.begin()


# ------------------------------------------------------------------------------ TensorFlow's files

TF_EVENTS = os.path.join(
    os.path.dirname(__file__),
    "..",
    "fixtures",
    "tf_events",
    "events.out.tfevents.1795460000.tensorflow",
)


def test_an_event_file_written_by_tensorflow_reads_and_rewrites_the_same(tmp_path):
    events = list(summary_iterator(TF_EVENTS))
    assert events[0].file_version == "brain.Event:2"
    assert [e.step for e in events[1:]] == [0, 1, 2, 3]
    assert events[-1].session_log.status == SessionLog.STOP
    with tf.summary.FileWriter(str(tmp_path)) as writer:
        for e in events[1:-1]:
            writer.add_summary(e.summary, e.step)
    theirs = event_accumulator.EventAccumulator(TF_EVENTS, size_guidance={"histograms": 0})
    ours = event_accumulator.EventAccumulator(str(tmp_path), size_guidance={"histograms": 0})
    theirs.Reload()
    ours.Reload()
    assert ours.Tags()["scalars"] == theirs.Tags()["scalars"] == ["mean_1"]
    assert (
        [(e.step, e.value) for e in ours.Scalars("mean_1")]
        == [(e.step, e.value) for e in theirs.Scalars("mean_1")]
        == [(0, 1.5), (1, 2.5), (2, 3.5)]
    )
    assert [h.histogram_value for h in ours.Histograms("x")] == [
        h.histogram_value for h in theirs.Histograms("x")
    ]
    assert ours.SummaryMetadata("t") == theirs.SummaryMetadata("t")


def test_a_program_that_never_closes_its_writer_still_writes_every_event(tmp_path):
    # many TF1 scripts end without writer.close(); the events must not die with the thread
    program = (
        "import sys\n"
        "from tensorgrid.summary import FileWriter, Summary\n"
        "w = FileWriter(sys.argv[1], flush_secs=3600)\n"
        "for step in range(50):\n"
        "    w.add_summary(Summary(value=[Summary.Value(tag='x', simple_value=step)]), step)\n"
    )
    subprocess.run([sys.executable, "-c", program, str(tmp_path)], check=True, timeout=120)
    assert [e.step for e in summary_iterator(_event_files(tmp_path)[0])][1:] == list(range(50))


def test_writers_shared_by_threads_lose_nothing_and_never_hang(tmp_path):
    writer = tf.summary.FileWriter(str(tmp_path), max_queue=3)

    def add(first: int) -> None:
        for step in range(first, first + 200):
            writer.add_summary(_scalar("x", float(step)), step)
            if step % 50 == 0:
                writer.flush()

    threads = [threading.Thread(target=add, args=(i * 1000,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    writer.close()
    writer.flush()  # after close: returns at once
    events = summary_iterator(_event_files(tmp_path)[0])
    steps = sorted(e.step for e in events if e.HasField("summary"))
    assert steps == sorted(s for i in range(4) for s in range(i * 1000, i * 1000 + 200))


def test_run_metadata_of_a_traced_step_is_read_by_tensorboard(tmp_path):
    x = tf.placeholder(tf.float32, [3], name="x")
    y = tf.reduce_sum(tf.square(x), name="y")
    options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE, output_partition_graphs=True)
    metadata = tf.RunMetadata()
    with tf.Session() as sess:
        sess.run(y, {x: [1.0, 2.0, 3.0]}, options=options, run_metadata=metadata)
    with tf.summary.FileWriter(str(tmp_path)) as writer:
        writer.add_run_metadata(metadata, "step001", global_step=1)
        with pytest.raises(TypeError, match="RunMetadata"):
            writer.add_run_metadata(object(), "other")
    acc = event_accumulator.EventAccumulator(str(tmp_path))
    acc.Reload()
    assert acc.Tags()["run_metadata"] == ["step001"]
    read = acc.RunMetadata("step001")  # TensorBoard's own RunMetadata message
    nodes = {n.node_name: n for d in read.step_stats.dev_stats for n in d.node_stats}
    assert {"Square", "y"} <= set(nodes)  # the fed placeholder does not run
    assert nodes["y"].all_start_micros > 1.7e15  # microseconds since the epoch
    assert nodes["y"].timeline_label.startswith("y = ")
    assert any(n.name == "y" for g in read.partition_graphs for n in g.node)
