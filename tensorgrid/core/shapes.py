"""TensorShape: a possibly partial shape (unknown rank, or unknown dimensions as None)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from tensorgrid.core import errors


class TensorShape:
    """A shape known fully, partly (some dimensions None) or not at all (``dims is None``)."""

    __slots__ = ("dims",)

    def __init__(self, dims: Any = None) -> None:
        if isinstance(dims, TensorShape):
            self.dims: tuple[int | None, ...] | None = dims.dims
        elif dims is None:
            self.dims = None
        elif isinstance(dims, int):
            self.dims = (_dim(dims),)
        else:
            self.dims = tuple(_dim(d) for d in dims)

    # construction helpers
    @classmethod
    def unknown(cls) -> TensorShape:
        return cls(None)

    @classmethod
    def scalar(cls) -> TensorShape:
        return cls(())

    # queries
    @property
    def rank(self) -> int | None:
        return None if self.dims is None else len(self.dims)

    @property
    def ndims(self) -> int | None:
        return self.rank

    def is_fully_defined(self) -> bool:
        return self.dims is not None and all(d is not None for d in self.dims)

    def as_list(self) -> list[int | None]:
        if self.dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self.dims)

    def as_tuple(self) -> tuple[int | None, ...] | None:
        return self.dims

    def num_elements(self) -> int | None:
        if not self.is_fully_defined():
            return None
        n = 1
        for d in self.dims or ():
            n *= d  # type: ignore[operator]
        return n

    def is_compatible_with(self, other: Any) -> bool:
        other = as_shape(other)
        if self.dims is None or other.dims is None:
            return True
        if len(self.dims) != len(other.dims):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self.dims, other.dims))

    def merge_with(self, other: Any) -> TensorShape:
        other = as_shape(other)
        if self.dims is None:
            return other
        if other.dims is None:
            return self
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        return TensorShape(a if a is not None else b for a, b in zip(self.dims, other.dims))

    def most_specific_compatible_shape(self, other: Any) -> TensorShape:
        other = as_shape(other)
        if self.dims is None or other.dims is None or len(self.dims) != len(other.dims):
            return TensorShape(None)
        return TensorShape(a if a == b else None for a, b in zip(self.dims, other.dims))

    def concatenate(self, other: Any) -> TensorShape:
        other = as_shape(other)
        if self.dims is None or other.dims is None:
            return TensorShape(None)
        return TensorShape(self.dims + other.dims)

    def with_rank(self, rank: int) -> TensorShape:
        if self.dims is None:
            return TensorShape([None] * rank)
        if len(self.dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")
        return self

    def assert_is_compatible_with(self, other: Any) -> None:
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {as_shape(other)} are incompatible")

    # python protocol
    def __len__(self) -> int:
        if self.dims is None:
            raise ValueError("Cannot take the length of a shape with unknown rank.")
        return len(self.dims)

    def __iter__(self) -> Iterator[int | None]:
        if self.dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self.dims)

    def __getitem__(self, key: Any) -> Any:
        if self.dims is None:
            return TensorShape(None) if isinstance(key, slice) else None
        if isinstance(key, slice):
            return TensorShape(self.dims[key])
        return self.dims[key]

    def __eq__(self, other: object) -> bool:
        try:
            other_shape = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self.dims == other_shape.dims

    def __hash__(self) -> int:
        return hash(self.dims)

    def __bool__(self) -> bool:
        return self.dims is not None

    def __repr__(self) -> str:
        return f"TensorShape({None if self.dims is None else list(self.dims)})"

    def __str__(self) -> str:
        if self.dims is None:
            return "<unknown>"
        inner = ", ".join("?" if d is None else str(d) for d in self.dims)
        return f"({inner},)" if len(self.dims) == 1 else f"({inner})"


def _dim(d: Any) -> int | None:
    if d is None:
        return None
    if hasattr(d, "value") and not isinstance(d, int):  # TF1 Dimension-like objects
        d = d.value
        if d is None:
            return None
    d = int(d)
    if d < 0:
        return None  # -1 means unknown, as in TensorShapeProto
    return d


def as_shape(value: Any) -> TensorShape:
    if isinstance(value, TensorShape):
        return value
    return TensorShape(value)


def unknown_shape(rank: int | None = None) -> TensorShape:
    return TensorShape(None if rank is None else [None] * rank)


def broadcast_shapes(a: TensorShape, b: TensorShape) -> TensorShape:
    """The numpy/TensorFlow broadcast of two (possibly partial) shapes.

    Raises:
        InvalidArgumentError: the shapes are known to be incompatible.
    """
    if a.dims is None or b.dims is None:
        return TensorShape(None)
    n = max(len(a.dims), len(b.dims))
    one: list[int | None] = [1]
    x = one * (n - len(a.dims)) + list(a.dims)
    y = one * (n - len(b.dims)) + list(b.dims)
    out: list[int | None] = []
    for p, q in zip(x, y):
        if p == 1:
            out.append(q)
        elif q == 1:
            out.append(p)
        elif p is None or q is None:
            out.append(q if p is None else p)  # the known one, or None when both are unknown
        elif p == q:
            out.append(p)
        else:
            raise errors.InvalidArgumentError(
                f"Incompatible shapes for broadcasting: {a} and {b}"
            )
    return TensorShape(out)


def dims_from(values: Iterable[Any]) -> TensorShape:
    """A shape from a sequence of dimension values where negative means unknown."""
    return TensorShape(list(values))
