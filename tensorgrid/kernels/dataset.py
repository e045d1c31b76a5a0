"""Kernels of the ``tf.data`` ops (see ``ops/dataset.py``): the iterator position and the
shuffled order."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

import tensorgrid.ops.dataset  # noqa: F401 - registers the op definitions
from tensorgrid.core import errors
from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.kernels.dataset_files import interleave_order

_MASK64 = (1 << 64) - 1


class IteratorPosition:
    """The position of one iterator on its device (a resource shared by name)."""

    def __init__(self, initialized: bool) -> None:
        self.lock = threading.Lock()
        self.position = 0
        self.limit = -1  # an initializable iterator's end, set by its reset
        self.initialized = initialized


def _position(ctx: KernelContext, initialized: bool) -> IteratorPosition:
    name = ctx.attr("shared_name") or ctx.name
    found = ctx.resources.lookup_or_create(ctx.attr("container"), name,
                                           lambda: IteratorPosition(initialized))
    if not isinstance(found, IteratorPosition):
        raise ctx.error(errors.InvalidArgumentError,
                        f"Resource '{name}' on {ctx.device} is a {type(found).__name__}, not an "
                        "iterator position")
    return found


@kernel("DatasetIteratorNext", "CPU")
def _iterator_next(ctx: KernelContext) -> Callable[[Any], Any]:
    require_init = bool(ctx.attr("require_init"))
    state = _position(ctx, initialized=not require_init)

    def run(limit: Any) -> Any:
        with state.lock:
            if not state.initialized:
                raise ctx.error(errors.FailedPreconditionError,
                                "GetNext() failed because the iterator has not been "
                                "initialized. Ensure that you have run the initializer "
                                "operation for this iterator before getting the next element.")
            end = state.limit if require_init else int(limit)
            if 0 <= end <= state.position:
                raise ctx.error(errors.OutOfRangeError, "End of sequence")
            index = state.position
            state.position += 1
        return np.int64(index)

    return run


@kernel("DatasetIteratorReset", "CPU")
def _iterator_reset(ctx: KernelContext) -> Callable[[Any], None]:
    state = _position(ctx, initialized=False)

    def run(limit: Any) -> None:
        with state.lock:
            state.position = 0
            state.limit = int(limit)
            state.initialized = True

    return run


def buffered_shuffle_order(n: int | None, buffer_size: int, rng: np.random.Generator,
                           count: int) -> np.ndarray:
    """The first ``count`` input positions a buffered shuffle emits over an input of ``n``
    elements (None: endless): fill a buffer of ``buffer_size``, then emit a random slot and
    refill it with the next input, draining the buffer in random order at the end."""
    out = np.empty(count, np.int64)
    size = min(buffer_size, n) if n is not None else buffer_size
    buffer = list(range(size))
    next_in = size
    for k in range(count):
        if not buffer:
            return out[:k]
        slot = int(rng.integers(len(buffer)))
        out[k] = buffer[slot]
        if n is None or next_in < n:
            buffer[slot] = next_in
            next_in += 1
        else:
            buffer[slot] = buffer[-1]
            buffer.pop()
    return out


@kernel("DatasetShuffleIndex", "CPU")
def _shuffle_index(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    buffer_size = int(ctx.attr("buffer_size"))
    seed, seed2 = int(ctx.attr("seed")) & _MASK64, int(ctx.attr("seed2")) & _MASK64
    if seed == 0 and seed2 == 0:  # unseeded: fixed for this kernel, so an epoch's order holds
        seed, seed2 = (int(v) for v in np.random.SeedSequence().generate_state(2, np.uint64))
    reshuffle = bool(ctx.attr("reshuffle_each_iteration"))
    lock = threading.Lock()
    orders: dict[int, np.ndarray] = {}  # epoch -> order (finite inputs)
    stream: list[np.ndarray] = []  # the order so far (endless inputs), grown on demand

    def rng(epoch: int) -> np.random.Generator:
        key = np.array([seed, (seed2 + (epoch if reshuffle else 0)) & _MASK64], np.uint64)
        return np.random.Generator(np.random.Philox(key=key))

    def finite(index: np.ndarray, epoch: np.ndarray, n: int) -> np.ndarray:
        out = np.empty(index.shape, np.int64)
        for e in np.unique(epoch):
            order = orders.get(int(e))
            if order is None:
                if len(orders) > 4:  # keep the few epochs in flight
                    orders.pop(min(orders))
                order = orders[int(e)] = buffered_shuffle_order(n, buffer_size, rng(int(e)), n)
            mask = epoch == e
            out[mask] = order[index[mask]]
        return out

    def endless(index: np.ndarray) -> np.ndarray:
        need = int(index.max()) + 1 if index.size else 0
        have = stream[0].size if stream else 0
        if need > have:
            grow = max(need, 2 * have, 1024)
            stream[:] = [buffered_shuffle_order(None, buffer_size, rng(0), grow)]
        return stream[0][index]

    def run(index: Any, epoch: Any, n: Any) -> Any:
        idx = np.asarray(index, np.int64)
        ep = np.asarray(epoch, np.int64)
        total = int(n)
        if idx.size and (idx.min() < 0 or (total >= 0 and idx.max() >= total)):
            raise ctx.error(errors.InvalidArgumentError,
                            f"shuffle position out of range [0, {total}): {idx}")
        with lock:
            return finite(idx, ep, total) if total >= 0 else endless(idx)

    return run


@kernel("DatasetInterleaveOrder", "CPU")
def _interleave_order(ctx: KernelContext) -> Callable[[Any], Any]:
    cycle, block = int(ctx.attr("cycle_length")), int(ctx.attr("block_length"))

    def run(sizes: Any) -> Any:
        counts = np.asarray(sizes, np.int64).reshape(-1)
        if (counts < 0).any():
            raise ctx.error(errors.InvalidArgumentError,
                            f"dataset {int(np.flatnonzero(counts < 0)[0])} made by "
                            "interleave/flat_map's function is endless; they must be finite")
        order = interleave_order(counts.tolist(), cycle, block) if cycle > 1 else \
            np.arange(int(counts.sum()), dtype=np.int64)
        ends = np.cumsum(counts)
        which = np.searchsorted(ends, order, side="right")
        return np.stack([which, order - (ends[which] - counts[which])], 1).astype(np.int64)

    return run
