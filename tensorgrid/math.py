"""The ``tf.math`` namespace: the math ops under their TensorFlow 1.x ``tf.math.*`` names."""

from tensorgrid.ops.array import unsorted_segment_sum
from tensorgrid.ops.math import *  # noqa: F403
from tensorgrid.ops.math import __all__ as _math_all

__all__ = [*_math_all, "unsorted_segment_sum"]
