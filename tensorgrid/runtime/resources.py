"""Per-device resources: variables (by container and shared name), other named resources (queues,
accumulators) and cached stateful kernels.

The variables' own type (``Var``, and the ``VarRef`` that ops pass around) is in
``tensorgrid.core.variable``, below the kernels that use it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from tensorgrid.core import dtypes, errors
from tensorgrid.core.shapes import TensorShape
from tensorgrid.core.variable import Var
from tensorgrid.runtime.update_thread import UpdateThread


class ResourceMgr:
    """Variables and other stateful resources of one device, keyed by (container, name)."""

    def __init__(self) -> None:
        self._vars: dict[tuple[str, str], Var] = {}
        self._resources: dict[tuple[str, str], Any] = {}
        self._kernels: dict[Any, Any] = {}
        self._lock = threading.Lock()
        # where the updates of this device's large variables run (``runtime.update_thread``)
        self.updates = UpdateThread()

    def variable(self, container: str, name: str, dtype: dtypes.DType, shape: TensorShape) -> Var:
        """The variable of that name, created on first use.

        Raises:
            InvalidArgumentError: it exists with another dtype or an incompatible shape.
        """
        key = (container, name)
        with self._lock:
            var = self._vars.get(key)
            if var is None:
                var = self._vars[key] = Var(name, dtype, shape)
                return var
        if var.dtype is not dtype or not var.shape.is_compatible_with(shape):
            raise errors.InvalidArgumentError(
                f"Variable {name} exists with dtype {var.dtype.name} and shape {var.shape}, but a "
                f"node asks for dtype {dtype.name} and shape {shape}", node_name=name,
            )
        return var

    def lookup_or_create(self, container: str, name: str, create: Callable[[], Any]) -> Any:
        """The resource (a queue, an accumulator) of that name, made by ``create()`` on first use;
        every graph registered on the device shares it by name. The caller checks its kind."""
        key = (container, name)
        with self._lock:
            found = self._resources.get(key)
            if found is None:
                found = self._resources[key] = create()
            return found

    def lookup(self, container: str, name: str) -> Var | None:
        return self._vars.get((container, name))

    def delete(self, container: str, name: str) -> bool:
        """Drop the variable of that name (DestroyResourceOp); False when there is none."""
        with self._lock:
            return self._vars.pop((container, name), None) is not None

    def variables(self) -> Iterator[tuple[tuple[str, str], Var]]:
        return iter(list(self._vars.items()))

    def reset(self, containers: list[str] | None = None) -> None:
        """Drop the variables and resources of the given containers (all when None)."""
        with self._lock:
            if containers is None:
                self._vars.clear()
                self._resources.clear()
                self._kernels.clear()
            else:
                for key in [k for k in self._vars if k[0] in containers]:
                    del self._vars[key]
                for key in [k for k in self._resources if k[0] in containers]:
                    del self._resources[key]

    def cached_kernel(self, key: Any, build: Callable[[], Any]) -> Any:
        """A stateful kernel shared by every plan that runs the same node (random ops keep their
        stream across fetch signatures this way)."""
        found = self._kernels.get(key)
        if found is None:
            found = self._kernels[key] = build()
        return found
