"""``tf.compat.v1.train.summary_iterator``: read back the events of an event file."""

from __future__ import annotations

from collections.abc import Iterator

from tensorgrid.core.tfrecord import tf_record_iterator
from tensorgrid.pb import event_pb2

__all__ = ["summary_iterator"]


def summary_iterator(path: str) -> Iterator[event_pb2.Event]:
    """The ``Event`` protos of the event file at ``path``, in the order they were written (the
    first is the ``file_version`` header).

    Raises:
        DataLossError: a record is damaged or truncated.
        OSError: the file cannot be opened.
    """
    for record in tf_record_iterator(path):
        yield event_pb2.Event.FromString(record)
