"""``tf.data.experimental``: the transformations TF1 programs pass to ``Dataset.apply``, each
the composition of ``Dataset`` methods it stands for.

    dataset = files.apply(tf.data.experimental.parallel_interleave(
        tf.data.TFRecordDataset, cycle_length=4))
    dataset = dataset.apply(tf.data.experimental.shuffle_and_repeat(1000))
    dataset = dataset.apply(tf.data.experimental.map_and_batch(parse, 32))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensorgrid.data.dataset import Dataset

__all__ = ["AUTOTUNE", "map_and_batch", "parallel_interleave", "shuffle_and_repeat", "unbatch"]

AUTOTUNE = -1

Transformation = Callable[[Any], Any]


def parallel_interleave(map_func: Callable[..., Any], cycle_length: int, block_length: int = 1,
                        sloppy: bool = False, buffer_output_elements: Any = None,
                        prefetch_input_elements: Any = None) -> Transformation:
    """``dataset.interleave(map_func, cycle_length, block_length)``: elements are computed when
    asked for, so the order is the deterministic one (which ``sloppy`` also allows)."""
    return lambda dataset: dataset.interleave(map_func, cycle_length, block_length)


def shuffle_and_repeat(buffer_size: int, count: int | None = None,
                       seed: int | None = None) -> Transformation:
    """``dataset.shuffle(buffer_size, seed).repeat(count)``: a new order each pass."""
    return lambda dataset: dataset.shuffle(buffer_size, seed).repeat(count)


def map_and_batch(map_func: Callable[..., Any], batch_size: int,
                  num_parallel_batches: Any = None, drop_remainder: bool = False,
                  num_parallel_calls: Any = None) -> Transformation:
    """``dataset.map(map_func).batch(batch_size, drop_remainder)``."""
    return lambda dataset: dataset.map(map_func).batch(batch_size, drop_remainder)


def unbatch() -> Transformation:
    """Each element split along its first dimension into that many elements
    (``flat_map`` of ``from_tensor_slices``; finite upstreams, as ``flat_map``)."""

    def slices(*element: Any) -> Dataset:
        return Dataset.from_tensor_slices(element if len(element) > 1 else element[0])

    return lambda dataset: dataset.flat_map(slices)
