"""The transformations whose element ``i`` is an upstream element at another position: for
``repeat``, ``take``, ``skip`` and ``shard``, how many elements there are and where element
``i`` (of pass ``epoch``) comes from. One ``Remap`` dataset applies any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tensorgrid import math as math_ops
from tensorgrid.core import dtypes
from tensorgrid.framework.convert import convert_to_tensor
from tensorgrid.framework.graph import Tensor

__all__ = ["Repeat", "Shard", "Skip", "Take"]

UpstreamSize = Callable[[], Tensor]


def _i64(value: object) -> Tensor:
    return math_ops.cast(convert_to_tensor(value), dtypes.int64)


@dataclass(frozen=True)
class Repeat:
    """The upstream ``count`` times (-1: endlessly); pass ``p`` of it is epoch
    ``epoch * count + p`` of the upstream, so a shuffle inside draws a new order each pass."""

    count: int
    EPOCH_STRIDE = 1 << 31  # epochs of an endless repeat nested in an outer one stay apart

    def size(self, up: Tensor) -> Tensor:
        if self.count < 0:
            return math_ops.where(math_ops.equal(up, 0), up, _i64(-1))
        return math_ops.where(math_ops.less(up, 0), up, math_ops.multiply(up, self.count))

    def source(self, index: Tensor, epoch: Tensor, up: UpstreamSize) -> tuple[Tensor, Tensor]:
        n = up()
        # an endless upstream is never wrapped (divided by 2**62, which no index reaches)
        safe = math_ops.where(math_ops.less(n, 1), _i64(1 << 62), n)
        stride = self.count if self.count > 0 else self.EPOCH_STRIDE
        return (math_ops.floormod(index, safe),
                math_ops.add(math_ops.multiply(epoch, stride), math_ops.floordiv(index, safe)))


@dataclass(frozen=True)
class Take:
    """The first ``count`` elements (-1: all)."""

    count: int

    def size(self, up: Tensor) -> Tensor:
        if self.count < 0:
            return up
        return math_ops.where(math_ops.less(up, 0), _i64(self.count),
                              math_ops.minimum(up, self.count))

    def source(self, index: Tensor, epoch: Tensor, up: UpstreamSize) -> tuple[Tensor, Tensor]:
        return index, epoch


@dataclass(frozen=True)
class Skip:
    """All but the first ``count`` elements."""

    count: int

    def size(self, up: Tensor) -> Tensor:
        return math_ops.where(math_ops.less(up, 0), up,
                              math_ops.maximum(math_ops.subtract(up, self.count), 0))

    def source(self, index: Tensor, epoch: Tensor, up: UpstreamSize) -> tuple[Tensor, Tensor]:
        return math_ops.add(index, self.count), epoch


@dataclass(frozen=True)
class Shard:
    """Every ``num_shards``-th element, from position ``index`` on (one worker's share)."""

    num_shards: int
    index: int

    def size(self, up: Tensor) -> Tensor:
        # ceil((up - index) / num_shards), never below 0
        left = math_ops.maximum(math_ops.subtract(up, self.index), 0)
        count = math_ops.floordiv(math_ops.add(left, self.num_shards - 1), self.num_shards)
        return math_ops.where(math_ops.less(up, 0), up, count)

    def source(self, index: Tensor, epoch: Tensor, up: UpstreamSize) -> tuple[Tensor, Tensor]:
        return math_ops.add(math_ops.multiply(index, self.num_shards), self.index), epoch
