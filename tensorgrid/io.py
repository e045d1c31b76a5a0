"""``tf.io``: TFRecord files, Example parsing and raw decoding under their ``tf.io.*`` names, and
``tf.io.gfile``."""

from tensorgrid import gfile
from tensorgrid.core.tfrecord import (
    TFRecordCompressionType,
    TFRecordOptions,
    TFRecordWriter,
    tf_record_iterator,
)
from tensorgrid.framework.parsing_ops import (
    FixedLenFeature,
    FixedLenSequenceFeature,
    VarLenFeature,
    decode_csv,
    decode_raw,
    matching_files,
    parse_example,
    parse_single_example,
    parse_tensor,
    read_file,
    serialize_tensor,
    write_file,
)

__all__ = [
    "FixedLenFeature", "FixedLenSequenceFeature", "TFRecordCompressionType", "TFRecordOptions",
    "TFRecordWriter", "VarLenFeature", "decode_csv", "decode_raw", "gfile", "matching_files",
    "parse_example", "parse_single_example", "parse_tensor", "read_file", "serialize_tensor",
    "tf_record_iterator", "write_file",
]
