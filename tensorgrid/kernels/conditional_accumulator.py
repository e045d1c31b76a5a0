"""The state of a conditional accumulator: the gradients applied since the last take, for
synchronous replicas. A take waits (``waitable``) until enough gradients arrived.
"""

from __future__ import annotations

from typing import Any

from tensorgrid.core import dtypes, errors
from tensorgrid.core.shapes import TensorShape
from tensorgrid.kernels.waitable import NOT_YET, WaitableResource


class ConditionalAccumulator(WaitableResource):
    """The state of a ``ConditionalAccumulator``: the running sum of the gradients applied since
    the last take, their count, and the accumulator's global step.

    A gradient whose local step is older than the global step is stale and dropped. A take of
    ``n`` waits until ``count >= n``, returns the mean (or sum), resets, and advances the global
    step by one. Counters (for diagnostics and tests): ``applied`` and ``stale_dropped``
    gradients, ``takes``, and ``gradients_taken`` (the gradients those takes aggregated).
    """

    def __init__(self, name: str, dtype: dtypes.DType, shape: TensorShape,
                 reduction_type: str = "MEAN") -> None:
        super().__init__(name)
        self.dtype = dtype
        self.shape = shape
        self.reduction_type = reduction_type
        self.global_step = 0
        self.applied = 0
        self.stale_dropped = 0
        self.takes = 0
        self.gradients_taken = 0
        self._sum: Any = None
        self._count = 0

    @property
    def num_accumulated(self) -> int:
        return self._count

    def matches(self, dtype: dtypes.DType, shape: TensorShape, reduction_type: str) -> str | None:
        """Why an accumulator op with these attrs cannot share this one (None: it can)."""
        if dtype is not self.dtype or shape != self.shape or reduction_type != self.reduction_type:
            return (f"Shared accumulator '{self.name}' has dtype {self.dtype.name}, shape "
                    f"{self.shape} and reduction {self.reduction_type}, but a node asks for "
                    f"{dtype.name}, {shape} and {reduction_type}")
        return None

    def apply(self, local_step: int, grad: Any) -> bool:
        """Add a gradient computed at ``local_step``; False when it was stale and dropped.

        Raises:
            InvalidArgumentError: the gradient's dtype or shape does not fit.
        """
        if getattr(grad, "dtype", None) != self.dtype.np:
            raise errors.InvalidArgumentError(
                f"Accumulator '{self.name}' takes {self.dtype.name} gradients, got "
                f"{getattr(grad, 'dtype', type(grad))}")
        if self.shape.dims is not None and not self.shape.is_compatible_with(grad.shape):
            raise errors.InvalidArgumentError(
                f"Shape mismatch: accumulator '{self.name}' expects shape {self.shape}, got "
                f"{list(grad.shape)}")
        with self._lock:
            if local_step < self.global_step:
                self.stale_dropped += 1
                return False
            if self._count == 0:
                self._sum = grad.copy()
            else:
                if self._sum.shape != grad.shape:
                    raise errors.InvalidArgumentError(
                        f"Shape mismatch: accumulator '{self.name}' holds gradients of shape "
                        f"{list(self._sum.shape)}, got {list(grad.shape)}")
                self._sum = self._sum + grad
            self._count += 1
            self.applied += 1
            self._changed()
            return True

    async def take(self, num_required: int) -> Any:
        """Wait until at least ``num_required`` gradients are in; their mean (or sum).

        Raises:
            InvalidArgumentError: ``num_required`` < 1.
        """
        _check_required(self.name, num_required)

        def attempt() -> Any:
            if self._count < num_required:
                return NOT_YET
            total, count = self._sum, self._count
            self._sum, self._count = None, 0
            self.global_step += 1
            self.takes += 1
            self.gradients_taken += count
            self._changed()
            if self.reduction_type == "SUM":
                return total
            return (total / count).astype(self.dtype.np, copy=False)

        return await self._wait_until(attempt)

    async def wait_for(self, num_required: int) -> int:
        """Wait until at least ``num_required`` gradients are in; takes nothing; the count."""
        _check_required(self.name, num_required)

        def attempt() -> Any:
            return self._count if self._count >= num_required else NOT_YET

        return int(await self._wait_until(attempt))

    def set_global_step(self, step: int) -> None:
        with self._lock:
            self.global_step = int(step)
            self._changed()


def _check_required(name: str, num_required: int) -> None:
    if num_required < 1:
        raise errors.InvalidArgumentError(
            f"Argument num_required must be positive, got {num_required} (accumulator '{name}')")
