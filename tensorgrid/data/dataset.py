"""``tf.data.Dataset``: its sources and transformations, each able to compute element ``i``
(the contract every dataset implements is ``DatasetBase``'s, in ``base.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensorgrid import math as math_ops
from tensorgrid.core import dtypes
from tensorgrid.core.shapes import TensorShape
from tensorgrid.data import batching, materialize, positions, structure
from tensorgrid.data.base import Capture, DatasetBase
from tensorgrid.framework import array_index_ops as array_index
from tensorgrid.framework import array_ops
from tensorgrid.framework.convert import convert_to_tensor, make_op
from tensorgrid.framework.core_ops import identity, placeholder
from tensorgrid.framework.debug_ops import Assert
from tensorgrid.framework.graph import Tensor, get_default_graph
from tensorgrid.framework.parsing_ops import matching_files
from tensorgrid.framework.random_ops import get_seed

__all__ = ["Dataset"]

def _i64(value: Any) -> Tensor:
    return math_ops.cast(convert_to_tensor(value), dtypes.int64)


class Dataset(DatasetBase):
    """A sequence of elements (see ``DatasetBase``); build pipelines with the methods and read
    them with ``make_one_shot_iterator`` / ``make_initializable_iterator``."""

    # ---------------------------------------------------------------- sources
    @staticmethod
    def from_tensor_slices(tensors: Any) -> Dataset:
        """The slices of ``tensors`` (a tensor, tuple or dict) along their first dimension.

        Raises:
          ValueError: components with different first dimensions, or a scalar component.
        """
        return _TensorSlices(structure.normalize(tensors))

    @staticmethod
    def from_tensors(tensors: Any) -> Dataset:
        """One element: ``tensors``."""
        return _Tensors(structure.normalize(tensors))

    @staticmethod
    def range(*args: Any) -> Dataset:
        """``range(stop)``, ``range(start, stop)`` or ``range(start, stop, step)`` as int64.

        Raises:
          ValueError: no arguments, more than three, or a zero step.
        """
        if not 1 <= len(args) <= 3:
            raise ValueError(f"Dataset.range takes 1 to 3 arguments, got {len(args)}")
        start, stop, step = (0, args[0], 1) if len(args) == 1 else \
            (args[0], args[1], args[2] if len(args) == 3 else 1)
        if isinstance(step, int) and step == 0:
            raise ValueError("Dataset.range: step must not be 0")
        return _Range(start, stop, step)

    @staticmethod
    def list_files(file_pattern: Any, shuffle: bool | None = None,
                   seed: int | None = None) -> Dataset:
        """The paths matching ``file_pattern`` (a glob or a list of them) as string elements:
        sorted, then shuffled unless ``shuffle`` is False. Iterating fails with
        ``InvalidArgumentError`` when no file matches."""
        names = matching_files(file_pattern)
        check = Assert(math_ops.greater(array_ops.size(names), 0), [
            "No files matched pattern:", convert_to_tensor(file_pattern, dtype=dtypes.string)])
        with get_default_graph().control_dependencies([check]):
            ds: Dataset = _TensorSlices(identity(names))
        return ds.shuffle(1 << 30, seed=seed) if shuffle is None or shuffle else ds

    @staticmethod
    def zip(datasets: Any) -> Dataset:
        """Elements of several datasets side by side (a tuple or dict of datasets), as long as
        the shortest."""
        return _Zip(datasets)

    # ---------------------------------------------------------------- transformations
    def map(self, map_func: Callable[..., Any], num_parallel_calls: Any = None) -> Dataset:
        """``map_func`` applied to each element (a tuple element is passed as arguments).

        The function is traced into graph ops when ``get_next`` is built.
        """
        return _Map(self, map_func)

    def batch(self, batch_size: int, drop_remainder: bool = False) -> Dataset:
        """Consecutive elements stacked in batches of ``batch_size`` (the last one smaller
        unless ``drop_remainder``).

        Raises:
          ValueError: ``batch_size`` not a positive int.
        """
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        return _Batch(self, batch_size, drop_remainder)

    def padded_batch(self, batch_size: int, padded_shapes: Any = None, padding_values: Any = None,
                     drop_remainder: bool = False) -> Dataset:
        """Batches of ``batch_size`` whose elements are padded to one shape: per dimension the
        size in ``padded_shapes`` (one shape per component, in the elements' structure), or the
        largest in the batch where that is None, -1 or ``padded_shapes`` is None. Padding is
        ``padding_values`` (one per component, or one for all; default 0 / b"").

        Raises:
          ValueError: ``batch_size`` not a positive int, a component of unknown rank, or a
            padded shape of the wrong rank. InvalidArgumentError (when run): an element larger
            than its padded shape.
        """
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        return _Batch(self, batch_size, drop_remainder,
                      batching.padding_for(self._spec(), padded_shapes, padding_values))

    def filter(self, predicate: Callable[..., Any]) -> Dataset:
        """The elements for which ``predicate`` (a bool scalar) is true, in order.

        The upstream must be finite: when the iterator is initialized (a one-shot iterator:
        at its first ``get_next``) a loop computes the predicate of every upstream element and
        keeps the positions that pass; a shuffle before the filter is drawn once per
        initialization (a later ``repeat`` gives the same order each pass).
        """
        return _Filter(self, predicate)

    def interleave(self, map_func: Callable[..., Any], cycle_length: int | None = None,
                   block_length: int = 1, num_parallel_calls: Any = None) -> Dataset:
        """The elements of the datasets ``map_func`` makes of this dataset's elements, in
        TensorFlow's interleave order: ``cycle_length`` of them at a time (None or -1: the
        number of CPUs, as AUTOTUNE), ``block_length`` elements from each in turn.

        This dataset and those made must be finite: their sizes are taken when the iterator is
        initialized (a one-shot iterator: at its first ``get_next``), as ``filter`` does. File
        sources of file names (``lambda f: tf.data.TFRecordDataset(f)``, maybe then ``map``)
        read all the files through one table instead.

        Raises:
          ValueError: a length below 1. TypeError: ``map_func`` returns no dataset.
        """
        cycle, block = materialize.cycle_and_block(cycle_length, block_length)
        argument, inner = materialize.probe(self, map_func)
        files = inner._interleave_of(self, argument, cycle, block)
        return files if files is not None else _Interleave(self, map_func, inner._spec(), cycle,
                                                           block)

    def flat_map(self, map_func: Callable[..., Any]) -> Dataset:
        """The datasets ``map_func`` makes of the elements, one after the other (as
        ``interleave`` with a cycle of 1)."""
        return self.interleave(map_func, cycle_length=1)

    def shuffle(self, buffer_size: int, seed: int | None = None,
                reshuffle_each_iteration: bool = True) -> Dataset:
        """The elements in the random order a ``buffer_size`` buffer gives (TensorFlow's
        algorithm); a new order each pass of an enclosing ``repeat`` unless told otherwise.

        Raises:
          ValueError: ``buffer_size`` not positive.
        """
        if int(buffer_size) < 1:
            raise ValueError(f"buffer_size must be greater than zero, got {buffer_size}")
        return _Shuffle(self, int(buffer_size), seed, reshuffle_each_iteration)

    def repeat(self, count: int | None = None) -> Dataset:
        """The dataset ``count`` times (endlessly when None or -1)."""
        return _Remap(self, positions.Repeat(-1 if count is None else int(count)))

    def take(self, count: int) -> Dataset:
        """The first ``count`` elements (all when -1)."""
        return _Remap(self, positions.Take(int(count)))

    def skip(self, count: int) -> Dataset:
        """All but the first ``count`` elements."""
        return _Remap(self, positions.Skip(max(int(count), 0)))

    def shard(self, num_shards: int, index: int) -> Dataset:
        """Every ``num_shards``-th element from position ``index`` on: worker ``index`` of
        ``num_shards`` reads its share.

        Raises:
          ValueError: ``num_shards`` below 1, or ``index`` not in ``[0, num_shards)``.
        """
        if int(num_shards) < 1 or not 0 <= int(index) < int(num_shards):
            raise ValueError(f"shard: need num_shards >= 1 and 0 <= index < num_shards, got "
                             f"num_shards={num_shards}, index={index}")
        return _Remap(self, positions.Shard(int(num_shards), int(index)))

    def apply(self, transformation_func: Callable[[Dataset], Dataset]) -> Dataset:
        """``transformation_func(self)`` (for the ``tf.data.experimental`` transformations)."""
        return transformation_func(self)

    def prefetch(self, buffer_size: Any) -> Dataset:
        """The same dataset (elements are computed when ``get_next`` runs)."""
        return self

# ------------------------------------------------------------------------------ sources


class _TensorSlices(Dataset):
    _vectorized = True

    def __init__(self, tensors: Any) -> None:
        self._tensors = tensors
        leaves = structure.flatten(tensors)
        firsts = set()
        for t in leaves:
            if t.shape.rank == 0:
                raise ValueError(f"from_tensor_slices: component {t.name} is a scalar; every "
                                 "component needs a first dimension to slice")
            if t.shape.rank is not None and t.shape.as_list()[0] is not None:
                firsts.add(t.shape.as_list()[0])
        if len(firsts) > 1:
            raise ValueError(f"from_tensor_slices: components have different first dimensions "
                             f"{sorted(firsts)}")

    def _sources(self) -> list[Tensor]:
        return structure.flatten(self._tensors)

    def _spec(self) -> Any:
        return structure.map_structure(
            lambda t: structure.Spec(t.dtype, t.shape[1:] if t.shape.rank is not None
                                     else TensorShape(None)), self._tensors)

    def _leaves(self, capture: Capture) -> list[Tensor]:
        return [capture(t) for t in structure.flatten(self._tensors)]

    def _size(self, capture: Capture) -> Tensor:
        first = self._leaves(capture)[0]
        known = first.shape.as_list()[0] if first.shape.rank else None
        return _i64(known if known is not None else array_ops.shape(first)[0])

    def _element(self, index: Tensor, epoch: Tensor, capture: Capture) -> Any:
        return structure.pack_as(self._tensors, [array_index.gather(t, index)
                                                 for t in self._leaves(capture)])

    def _elements(self, indices: Tensor, epochs: Tensor, capture: Capture) -> Any:
        return self._element(indices, epochs, capture)


class _Tensors(Dataset):
    _vectorized = True

    def __init__(self, tensors: Any) -> None:
        self._tensors = tensors

    def _sources(self) -> list[Tensor]:
        return structure.flatten(self._tensors)

    def _spec(self) -> Any:
        return structure.map_structure(lambda t: structure.Spec(t.dtype, t.shape), self._tensors)

    def _size(self, capture: Capture) -> Tensor:
        return _i64(1)

    def _element(self, index: Tensor, epoch: Tensor, capture: Capture) -> Any:
        return structure.map_structure(capture, self._tensors)

    def _elements(self, indices: Tensor, epochs: Tensor, capture: Capture) -> Any:
        zeros = math_ops.multiply(indices, 0)
        return structure.map_structure(
            lambda t: array_index.gather(array_ops.expand_dims(capture(t), 0), zeros),
            self._tensors)


class _Range(Dataset):
    _vectorized = True

    def __init__(self, start: Any, stop: Any, step: Any) -> None:
        self._args = tuple(a if isinstance(a, Tensor) else convert_to_tensor(a, dtype_hint=dtypes.int64)
                           for a in (start, stop, step))

    def _sources(self) -> list[Tensor]:
        return list(self._args)

    def _spec(self) -> Any:
        return structure.Spec(dtypes.int64, TensorShape([]))

    def _size(self, capture: Capture) -> Tensor:
        start, stop, step = (_i64(capture(a)) for a in self._args)
        span = math_ops.subtract(stop, start)
        # ceil(span / step) for either sign of step, never below 0
        count = math_ops.floordiv(math_ops.add(span, math_ops.subtract(
            step, math_ops.sign(step))), step)
        return math_ops.maximum(count, _i64(0))

    def _element(self, index: Tensor, epoch: Tensor, capture: Capture) -> Any:
        start, _, step = (_i64(capture(a)) for a in self._args)
        return math_ops.add(start, math_ops.multiply(index, step))

    def _elements(self, indices: Tensor, epochs: Tensor, capture: Capture) -> Any:
        return self._element(indices, epochs, capture)


class _Zip(Dataset):
    def __init__(self, datasets: Any) -> None:
        self._datasets = datasets
        self._vectorized = all(d._vectorized for d in structure.flatten(datasets))

    def _sources(self) -> list[Tensor]:
        return [t for d in structure.flatten(self._datasets) for t in d._sources()]

    def _spec(self) -> Any:
        return structure.pack_as(self._datasets,
                                 [d._spec() for d in structure.flatten(self._datasets)])

    def _size(self, capture: Capture) -> Tensor:
        sizes = [d._size(capture) for d in structure.flatten(self._datasets)]
        size = sizes[0]
        for s in sizes[1:]:  # the shortest, where -1 (endless) is the longest
            size = math_ops.where(math_ops.less(size, 0), s, math_ops.where(
                math_ops.less(s, 0), size, math_ops.minimum(size, s)))
        return size

    def _element(self, index: Tensor, epoch: Tensor, capture: Capture) -> Any:
        return structure.pack_as(self._datasets, [
            d._element(index, epoch, capture) for d in structure.flatten(self._datasets)])

    def _elements(self, indices: Tensor, epochs: Tensor, capture: Capture) -> Any:
        return structure.pack_as(self._datasets, [
            d._elements(indices, epochs, capture) for d in structure.flatten(self._datasets)])


# ------------------------------------------------------------------------------ transformations


class _Map(Dataset):
    def __init__(self, upstream: Dataset, fn: Callable[..., Any]) -> None:
        self._upstream, self._fn = upstream, fn
        self._traced: Any = None

    def _spec(self) -> Any:
        """Traced once on placeholders of the upstream's spec (ops nothing runs)."""
        if self._traced is None:
            with get_default_graph().name_scope("map_spec"):
                value = structure.map_structure(
                    lambda s: placeholder(s.dtype, s.shape), self._upstream._spec())
                out = self._fn(*value) if isinstance(value, tuple) else self._fn(value)
                self._traced = structure.map_structure(
                    lambda t: structure.Spec(t.dtype, t.shape), structure.normalize(out))
        return self._traced

    def _interleave_of(self, names: DatasetBase, argument: Tensor, cycle_length: int,
                       block_length: int) -> Any:
        files = self._upstream._interleave_of(names, argument, cycle_length, block_length)
        return _Map(files, self._fn) if files is not None else None

    def _size(self, capture: Capture) -> Tensor:
        return self._upstream._size(capture)

    def _element(self, index: Tensor, epoch: Tensor, capture: Capture) -> Any:
        value = self._upstream._element(index, epoch, capture)
        out = self._fn(*value) if isinstance(value, tuple) else self._fn(value)
        return structure.normalize(out)


class _Filter(Dataset):
    def __init__(self, upstream: Dataset, predicate: Callable[..., Any]) -> None:
        self._upstream, self._predicate = upstream, predicate
        self._vectorized = upstream._vectorized

    def _kept(self, capture: Capture) -> Tensor:
        self._upstream._size(capture)  # what the upstream materializes comes first
        return capture.materialize(id(self), lambda c: materialize.kept_positions(
            self._upstream, self._predicate, c))

    def _size(self, capture: Capture) -> Tensor:
        return _i64(array_ops.size(self._kept(capture)))

    def _element(self, index: Tensor, epoch: Tensor, capture: Capture) -> Any:
        # the positions are of the upstream's first pass
        return self._upstream._element(array_index.gather(self._kept(capture), index),
                                       math_ops.multiply(epoch, 0), capture)

    def _elements(self, indices: Tensor, epochs: Tensor, capture: Capture) -> Any:
        return self._upstream._elements(array_index.gather(self._kept(capture), indices),
                                        math_ops.multiply(epochs, 0), capture)


class _Interleave(Dataset):
    def __init__(self, upstream: Dataset, fn: Callable[..., Any], spec: Any, cycle: int,
                 block: int) -> None:
        self._upstream, self._fn, self._inner_spec = upstream, fn, spec
        self._cycle, self._block = cycle, block

    def _spec(self) -> Any:
        return self._inner_spec

    def _table(self, capture: Capture) -> Tensor:
        self._upstream._size(capture)  # what the upstream materializes comes first
        return capture.materialize(id(self), lambda c: materialize.interleave_table(
            self._upstream, self._fn, self._cycle, self._block, c))

    def _size(self, capture: Capture) -> Tensor:
        return _i64(array_ops.shape(self._table(capture))[0])

    def _element(self, index: Tensor, epoch: Tensor, capture: Capture) -> Any:
        return materialize.interleave_element(self._upstream, self._fn, self._table(capture),
                                              index, capture)


class _Batch(Dataset):
    def __init__(self, upstream: Dataset, batch_size: int, drop_remainder: bool,
                 padding: batching.Padding | None = None) -> None:
        self._upstream, self._n, self._drop = upstream, batch_size, drop_remainder
        self._padding = padding  # padded_batch's shapes and values, per component

    def _spec(self) -> Any:
        return batching.batch_spec(self._upstream._spec(), self._n, self._drop, self._padding)

    def _size(self, capture: Capture) -> Tensor:
        return batching.batch_count(self._upstream._size(capture), self._n, self._drop)

    def _element(self, index: Tensor, epoch: Tensor, capture: Capture) -> Any:
        return batching.batch_element(self._upstream, index, epoch, capture, self._n,
                                      self._drop, self._padding)


class _Shuffle(Dataset):
    def __init__(self, upstream: Dataset, buffer_size: int, seed: int | None,
                 reshuffle: bool) -> None:
        self._upstream, self._buffer, self._reshuffle = upstream, buffer_size, reshuffle
        self._seed = seed
        self._vectorized = upstream._vectorized

    def _order(self, index: Tensor, epoch: Tensor, capture: Capture) -> Tensor:
        seed, seed2 = get_seed(self._seed)
        return make_op("DatasetShuffleIndex",  # type: ignore[no-any-return]
                       [index, epoch, self._upstream._size(capture)],
                       {"buffer_size": self._buffer, "seed": seed or 0, "seed2": seed2 or 0,
                        "reshuffle_each_iteration": bool(self._reshuffle)},
                       name="ShuffleIndex")

    def _size(self, capture: Capture) -> Tensor:
        return self._upstream._size(capture)

    def _element(self, index: Tensor, epoch: Tensor, capture: Capture) -> Any:
        return self._upstream._element(self._order(index, epoch, capture), epoch, capture)

    def _elements(self, indices: Tensor, epochs: Tensor, capture: Capture) -> Any:
        return self._upstream._elements(self._order(indices, epochs, capture), epochs, capture)


class _Remap(Dataset):
    """Element ``i`` is an upstream element at another position (``positions.py``)."""

    def __init__(self, upstream: Dataset, positions: Any) -> None:
        self._upstream, self._positions = upstream, positions
        self._vectorized = upstream._vectorized

    def _size(self, capture: Capture) -> Tensor:
        return self._positions.size(self._upstream._size(capture))  # type: ignore[no-any-return]

    def _source(self, index: Tensor, epoch: Tensor, capture: Capture) -> tuple[Tensor, Tensor]:
        return self._positions.source(  # type: ignore[no-any-return]
            index, epoch, lambda: self._upstream._size(capture))

    def _element(self, index: Tensor, epoch: Tensor, capture: Capture) -> Any:
        return self._upstream._element(*self._source(index, epoch, capture), capture)

    def _elements(self, indices: Tensor, epochs: Tensor, capture: Capture) -> Any:
        return self._upstream._elements(*self._source(indices, epochs, capture), capture)
