"""``tf.python_io``: TFRecord files written and read from Python (not graph ops).

    with tf.python_io.TFRecordWriter("train.tfrecord") as writer:
        writer.write(tf.train.Example(...).SerializeToString())
    for record in tf.python_io.tf_record_iterator("train.tfrecord"):
        ...
"""

from tensorgrid.core.tfrecord import (
    TFRecordCompressionType,
    TFRecordOptions,
    TFRecordWriter,
    tf_record_iterator,
)

__all__ = ["TFRecordCompressionType", "TFRecordOptions", "TFRecordWriter", "tf_record_iterator"]
