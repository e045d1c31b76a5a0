"""``tf.data`` iterators: the position op plus the ops computing the element at it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from tensorgrid import math as math_ops
from tensorgrid.core import dtypes
from tensorgrid.framework import array_create_ops as array_create
from tensorgrid.framework.control_flow_ops import cond
from tensorgrid.framework.convert import make_op, make_op_operation
from tensorgrid.framework.core_ops import group, identity
from tensorgrid.framework.graph import Operation, Tensor, get_default_graph
from tensorgrid.framework.resource_variable_ops import ResourceVariable
from tensorgrid.framework.state_ops import assign, is_variable_initialized
from tensorgrid.framework.variables import Variable

__all__ = ["Capture", "Iterator", "make_initializable_iterator", "make_one_shot_iterator"]


class Capture:
    """What a dataset reads its sources through, given by an iterator: ``capture(t)`` is the
    value of source ``t`` captured at initialization (``t`` itself when not captured), and
    ``materialize(key, build)`` the value ``build(capture)`` computed once per initialization:

    * ``initialize`` (an initializer): computed, and kept in a variable (its assignment is in
      ``initializers``, which the iterator's initializer runs);
    * ``read`` (an initializable iterator's ``get_next``): the value kept at initialization;
    * ``first_use`` (a one-shot iterator): computed the first time it runs, kept after.

    Values built on others must ask for those first, outside their own control flow (a
    filter asks for its upstream's size before it scans it), so each is made once, here.
    """

    def __init__(self, iterator: Iterator, mode: str) -> None:
        self._iterator, self._mode = iterator, mode
        self._reads: dict[int, Tensor] = {}
        self.initializers: list[Operation] = []

    def __call__(self, t: Tensor) -> Tensor:
        found = self._iterator._captured.get(id(t))
        if found is None:
            return t
        if id(t) not in self._reads:
            read = identity(found[0].op.outputs[0])  # a new read, under the deps in force
            read.set_shape(found[1].shape)
            self._reads[id(t)] = read
        return self._reads[id(t)]

    def materialize(self, key: int, build: Callable[[Capture], Tensor]) -> Tensor:
        """The value ``build(self)`` of the dataset ``key`` (its id), as the mode says.

        Raises:
          ValueError: an initializable iterator's ``get_next`` asks for a value its
            initializer did not compute.
        """
        if key in self._reads:
            return self._reads[key]
        variables = self._iterator._materialized
        if self._mode == "initialize":
            value = build(self)
            var = ResourceVariable(value, trainable=False, collections=[],
                                   validate_shape=False, name="materialized")
            variables[key] = var
            self.initializers.append(var.initializer)
        elif self._mode == "read":
            if key not in variables:
                raise ValueError("the iterator's initializer did not compute this dataset's "
                                 "materialized values")
            value = variables[key].read_value()
        else:
            if key not in variables:
                with get_default_graph().control_dependencies(None):
                    variables[key] = ResourceVariable(
                        array_create.zeros([0], dtypes.int64), trainable=False, collections=[],
                        validate_shape=False, name="materialized")
            var = variables[key]
            value = cond(is_variable_initialized(var), var.read_value,
                         lambda: assign(var, build(self), validate_shape=False))
        self._reads[key] = value
        return value


class Iterator:
    """Reads a dataset element by element: ``get_next()`` builds the ops that take the next
    position and compute its element; running them past the end raises ``OutOfRangeError``.

    An initializable iterator must first run ``initializer``, which (re)starts it at the first
    element and captures the current values of the tensors the dataset reads (so placeholders
    are fed to the initializer only). A one-shot iterator starts by itself and cannot restart.
    """

    def __init__(self, dataset: Any, initializable: bool, shared_name: str | None = None) -> None:
        self._dataset = dataset
        self._initializable = initializable
        g = get_default_graph()
        with g.name_scope("Iterator" if initializable else "OneShotIterator") as scope:
            base = scope[:-1]
            # unique per program: a worker's resources outlive one client's graph
            self._shared_name = shared_name or f"{base}_{uuid.uuid4().hex}"
            self._captured: dict[int, tuple[Variable, Tensor]] = {}
            # the values datasets materialize (a filter's kept positions), by dataset
            self._materialized: dict[int, ResourceVariable] = {}
            self._initializer: Operation | None = None
            if initializable:
                assigns = [self._capture_source(t) for t in dataset._sources()]
                assigns = [a for a in assigns if a is not None]
                # the size is taken at initialization, from the values just captured (and
                # what is materialized is computed from them then)
                with g.control_dependencies(assigns):
                    reader = self._reader("initialize")
                    size = dataset._size(reader)
                reset = make_op_operation("DatasetIteratorReset", [size],
                                {"shared_name": self._shared_name}, name="reset")
                self._initializer = group(*assigns, *reader.initializers, reset,
                                          name="initializer")

    def _capture_source(self, t: Tensor) -> Any:
        """A variable holding ``t``'s value from the last initialization (None for constants,
        read as they are)."""
        if t.op.type == "Const" or id(t) in self._captured:
            return None
        var = Variable(t, trainable=False, collections=[], validate_shape=False,
                       name="captured")
        self._captured[id(t)] = (var, t)
        return var.initializer

    def _reader(self, mode: str = "read") -> Capture:
        """A capture reading each captured source once (created where it is called, so under
        the caller's control dependencies); ``mode`` says how it gives materialized values
        (see ``Capture``)."""
        return Capture(self, mode)

    @property
    def output_types(self) -> Any:
        return self._dataset.output_types

    @property
    def output_shapes(self) -> Any:
        return self._dataset.output_shapes

    @property
    def output_classes(self) -> Any:
        return self._dataset.output_classes

    @property
    def initializer(self) -> Operation:
        """The op that (re)starts an initializable iterator.

        Raises:
          ValueError: a one-shot iterator has none.
        """
        if self._initializer is None:
            raise ValueError("A one-shot iterator has no initializer: use "
                             "make_initializable_iterator() to restart an iterator")
        return self._initializer

    def get_next(self, name: str | None = None) -> Any:
        """The next element (a tensor, tuple or dict, as the dataset's elements are).

        Running it after the last element raises ``OutOfRangeError``; before an initializable
        iterator's initializer, ``FailedPreconditionError``.
        """
        g = get_default_graph()
        with g.name_scope(name or "IteratorGetNext"):
            # an initializable iterator's size was taken by its initializer (-1: use that)
            reader = self._reader("read" if self._initializable else "first_use")
            size = math_ops.cast(-1, dtypes.int64) if self._initializable else \
                self._dataset._size(reader)
            index = make_op("DatasetIteratorNext", [size],
                            {"shared_name": self._shared_name,
                             "require_init": self._initializable}, name="next_index")
            # captured values are read after the position, so an uninitialized iterator
            # fails on its position first, with the message that says what to do
            with g.control_dependencies([index]):
                epoch = math_ops.multiply(index, 0)
                return self._dataset._element(index, epoch, reader)


def make_one_shot_iterator(dataset: Any) -> Iterator:
    """``dataset.make_one_shot_iterator()``."""
    return Iterator(dataset, initializable=False)


def make_initializable_iterator(dataset: Any, shared_name: str | None = None) -> Iterator:
    """``dataset.make_initializable_iterator()``."""
    return Iterator(dataset, initializable=True, shared_name=shared_name)


