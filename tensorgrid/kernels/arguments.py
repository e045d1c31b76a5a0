"""What kernels do with their arguments: shape-like inputs as python ints, remembered per input,
and the error for bad input values.

Shape-like inputs (shapes, axes, perms, paddings) are usually the same constant array at every
step, so their conversion to python ints is remembered by identity (``memo``).
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from tensorgrid.core import errors

_T = TypeVar("_T")


def ints(v: Any) -> tuple[int, ...]:
    """A numpy/cupy array or scalar as a tuple of python ints."""
    return tuple(v.reshape(-1).tolist()) if hasattr(v, "reshape") else (int(v),)


def rememberable(value: Any) -> bool:
    """Whether a value derived from ``value`` may be reused while the same object comes back:
    constants and variable values are read-only, and kernels never write their inputs, but a
    writeable numpy array is a fed value its owner may change in place."""
    return not (type(value) is np.ndarray and value.flags.writeable)


def memo(fn: Callable[..., _T]) -> Callable[..., _T]:
    """``fn``, remembering its result for the last arguments seen (compared by identity)."""
    if len(inspect.signature(fn).parameters) == 1:
        key: Any = None
        value: Any = None

        def one(a: Any) -> _T:
            nonlocal key, value
            if a is key:
                return value  # type: ignore[no-any-return]
            v = fn(a)
            if rememberable(a):
                key, value = a, v
            return v

        return one
    keys: tuple[Any, ...] = ()
    result: Any = None

    def many(*args: Any) -> _T:
        nonlocal keys, result
        if len(args) == len(keys) and all(map(operator.is_, args, keys)):
            return result  # type: ignore[no-any-return]
        v = fn(*args)
        if all(map(rememberable, args)):
            keys, result = args, v
        return v

    return many


def invalid(message: str) -> errors.InvalidArgumentError:
    """The error a kernel raises for bad input values (the executor adds node, op and device)."""
    return errors.InvalidArgumentError(message)
