"""Fetch structures: a single fetch, or a list, tuple, namedtuple, dict or any nesting of them.

``FetchMapper`` flattens a structure into unique graph elements once, and rebuilds the same structure
from their values after each run (an op's value is None).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from tensorgrid.framework.graph import Graph, Operation, Tensor


class FetchMapper:
    """Flattened view of a fetch structure.

    Attributes:
        tensors: unique fetched tensors, in first-seen order.
        ops: unique target operations (fetched ops), in first-seen order.
    """

    def __init__(self, graph: Graph, fetches: Any) -> None:
        self.tensors: list[Tensor] = []
        self.ops: list[Operation] = []
        self._tensor_pos: dict[Tensor, int] = {}
        self._build: Callable[[list[Any]], Any] = self._compile(graph, fetches)

    def _leaf(self, graph: Graph, fetch: Any) -> Callable[[list[Any]], Any]:
        try:
            el = graph.as_graph_element(fetch)
        except (TypeError, ValueError, KeyError) as exc:
            raise type(exc)(f"Fetch argument {fetch!r} cannot be interpreted as a Tensor. ({exc})") \
                from None
        if isinstance(el, Operation):
            if el not in self.ops:
                self.ops.append(el)
            return lambda values: None
        pos = self._tensor_pos.get(el)
        if pos is None:
            pos = self._tensor_pos[el] = len(self.tensors)
            self.tensors.append(el)
        return operator.itemgetter(pos)

    def _compile(self, graph: Graph, fetches: Any) -> Callable[[list[Any]], Any]:
        if fetches is None:
            raise TypeError("Fetch argument None has invalid type <class 'NoneType'>")
        if isinstance(fetches, list):
            parts = [self._compile(graph, f) for f in fetches]
            return lambda v: [p(v) for p in parts]
        if isinstance(fetches, tuple):
            parts = [self._compile(graph, f) for f in fetches]
            if hasattr(fetches, "_fields"):  # namedtuple
                tuple_cls = type(fetches)
                return lambda v: tuple_cls(*[p(v) for p in parts])
            return lambda v: tuple(p(v) for p in parts)
        if isinstance(fetches, Mapping):
            cls = type(fetches)
            items = [(k, self._compile(graph, f)) for k, f in fetches.items()]

            def build(v: list[Any]) -> Any:
                out = {k: p(v) for k, p in items}
                return out if cls is dict else _rebuild_mapping(cls, out)

            return build
        return self._leaf(graph, fetches)

    def build(self, values: list[Any]) -> Any:
        return self._build(values)


def _rebuild_mapping(cls: type, items: dict[Any, Any]) -> Any:
    try:
        return cls(items)
    except TypeError:
        return items
