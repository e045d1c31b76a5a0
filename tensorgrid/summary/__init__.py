"""``tf.summary`` (TensorFlow 1.x): summary ops, ``FileWriter``, and the protocol buffers of event
files. What is written here is read by TensorBoard as it reads TensorFlow's files.

    loss_summary = tf.summary.scalar("loss", loss)
    merged = tf.summary.merge_all()
    writer = tf.summary.FileWriter("logs/run1", sess.graph)
    writer.add_summary(sess.run(merged), global_step=step)
"""

from tensorgrid.core.tfrecord import tf_record_iterator
from tensorgrid.framework.summary_ops import (
    histogram,
    image,
    merge,
    merge_all,
    scalar,
    tensor_summary,
    text,
)
from tensorgrid.pb.event_pb2 import Event, LogMessage, SessionLog, TaggedRunMetadata
from tensorgrid.pb.summary_pb2 import (
    HistogramProto,
    Summary,
    SummaryDescription,
    SummaryMetadata,
)
from tensorgrid.summary.event_file_writer import EventFileWriter
from tensorgrid.summary.iterator import summary_iterator
from tensorgrid.summary.writer import FileWriter, FileWriterCache

__all__ = [
    "scalar",
    "histogram",
    "image",
    "text",
    "tensor_summary",
    "merge",
    "merge_all",
    "FileWriter",
    "FileWriterCache",
    "EventFileWriter",
    "summary_iterator",
    "tf_record_iterator",
    "Event",
    "LogMessage",
    "SessionLog",
    "TaggedRunMetadata",
    "HistogramProto",
    "Summary",
    "SummaryDescription",
    "SummaryMetadata",
]
