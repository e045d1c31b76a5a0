"""The contract of every ``tf.data`` dataset: computing its element ``i`` from ``i``.

Every dataset implements:

* ``_size()``: its number of elements, an int64 scalar tensor (-1: endless);
* ``_element(index, epoch)``: the structure of tensors of element ``index`` (an int64 scalar);
  ``epoch`` counts the passes of an enclosing ``repeat``, so a ``shuffle`` inside it draws a
  new order each pass;
* ``_elements(indices, epochs)`` when ``_vectorized``: several elements at once, stacked along
  a new first dimension (what ``batch`` uses instead of building one copy per element).

``capture`` (given by the iterator, ``iterator.Capture``) replaces each source tensor by a
variable assigned when the iterator is initialized, so fed placeholders are read once, at
initialization, as in TensorFlow; it also keeps the values a dataset materializes (a filter's
kept positions) from one initialization (or a one-shot iterator's first use) to the next.
"""

from __future__ import annotations

from typing import Any

from tensorgrid.data import structure
from tensorgrid.data.iterator import Capture, Iterator
from tensorgrid.framework.graph import Tensor

__all__ = ["Capture", "DatasetBase"]

class DatasetBase:
    """What every dataset implements (see the module docstring), its element types and shapes,
    and its iterators."""

    _vectorized = False

    # ---------------------------------------------------------------- the contract
    def _size(self, capture: Capture) -> Tensor:
        raise NotImplementedError

    def _element(self, index: Tensor, epoch: Tensor, capture: Capture) -> Any:
        raise NotImplementedError

    def _elements(self, indices: Tensor, epochs: Tensor, capture: Capture) -> Any:
        raise NotImplementedError(f"{type(self).__name__} computes one element at a time")

    def _spec(self) -> Any:
        """The structure of ``Spec``s of an element (what ``output_types``/``_shapes`` read)."""
        return self._upstream._spec()  # type: ignore[attr-defined]

    @property
    def output_types(self) -> Any:
        """The dtypes of an element's components, in the element's structure."""
        return structure.map_structure(lambda s: s.dtype, self._spec())

    @property
    def output_shapes(self) -> Any:
        """The static shapes of an element's components, in the element's structure."""
        return structure.map_structure(lambda s: s.shape, self._spec())

    @property
    def output_classes(self) -> Any:
        """The class of each component (always ``Tensor`` here)."""
        return structure.map_structure(lambda s: Tensor, self._spec())

    def _interleave_of(self, names: DatasetBase, argument: Tensor, cycle_length: int,
                       block_length: int) -> Any:
        """This dataset (made by ``interleave``'s function of ``argument``) for each element of
        ``names``, interleaved, when it knows a better way than the general one (file sources
        of ``argument`` and maps of them: one table of all the files' records); else None."""
        return None

    def _sources(self) -> list[Tensor]:
        """The tensors the dataset reads (what an initializable iterator captures)."""
        return self._upstream._sources()  # type: ignore[attr-defined,no-any-return]

    # ---------------------------------------------------------------- iterators
    def make_one_shot_iterator(self) -> Iterator:
        """An iterator that needs no initialization and reads the dataset once."""
        return Iterator(self, initializable=False)

    def make_initializable_iterator(self, shared_name: str | None = None) -> Iterator:
        """An iterator to (re)start with ``sess.run(iterator.initializer, feed_dict=...)``."""
        return Iterator(self, initializable=True, shared_name=shared_name)
