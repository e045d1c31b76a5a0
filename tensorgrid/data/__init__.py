"""``tf.data``: input pipelines as datasets and iterators, lowered to graph ops.

A dataset here is a description that computes its element ``i`` from ``i``: ``get_next``
builds the ops that take the iterator's next position (a small stateful op that fails with
``OutOfRangeError`` at the end) and compute that element from it. ``map`` functions are traced
into ordinary graph ops when ``get_next`` is built (no Python function runs when the graph
does), so a pipeline runs wherever its graph is placed.

Supported: ``Dataset.from_tensor_slices``, ``from_tensors``, ``range``, ``zip``,
``list_files``, and ``map``, ``filter``, ``flat_map``, ``interleave`` (finite upstreams, scanned
once per initialization: ``materialize.py``), ``batch``, ``padded_batch``, ``shuffle``,
``repeat``, ``take``, ``skip``, ``shard``, ``prefetch``, ``apply`` (with ``tf.data.experimental``'s
``parallel_interleave``, ``shuffle_and_repeat``, ``map_and_batch``, ``unbatch``); the file sources
``TFRecordDataset``, ``TextLineDataset`` and ``FixedLengthRecordDataset`` (``readers.py``:
element ``i`` is record ``i``, read through a table of record offsets built when the files are
first counted); ``make_one_shot_iterator``, ``make_initializable_iterator`` (the initializer
captures fed placeholders, as TF's does). ``map`` functions are traced once per element of a
batch that follows them (``batch(n)`` after ``map`` builds ``n`` copies of the function's ops).
``prefetch`` computes elements when ``get_next`` runs.
"""

from tensorgrid.data import experimental
from tensorgrid.data.dataset import Dataset
from tensorgrid.data.iterator import Iterator, make_initializable_iterator, make_one_shot_iterator
from tensorgrid.data.readers import FixedLengthRecordDataset, TextLineDataset, TFRecordDataset

__all__ = ["Dataset", "FixedLengthRecordDataset", "Iterator", "TFRecordDataset", "TextLineDataset",
           "experimental", "make_initializable_iterator", "make_one_shot_iterator"]
