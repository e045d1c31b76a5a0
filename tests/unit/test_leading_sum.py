"""Sum over the leading axes of a large float tensor (a bias gradient) runs as a matrix-vector
product: same shapes as numpy's sum, keep_dims included, at least numpy's float32 accuracy; other
axes, small tensors, integers and strided views take numpy's path with the same results."""

from __future__ import annotations

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.kernels.math_reduce import GEMV_SUM_ELEMENTS, _leading_sum


@pytest.mark.parametrize(("shape", "axes", "keep"), [
    ((64, 28, 28, 32), [0, 1, 2], False), ((64, 28, 28, 32), [0, 1, 2], True),
    ((512, 300), [0], False), ((4, 100, 200), [0, 1], True), ((300, 300), [1], False),
    ((64, 28, 28, 32), [0, 1, 2, 3], False), ((64, 28, 28, 32), [-4, -3, -2], False),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sums_match_a_float64_reference(shape: tuple[int, ...], axes: list[int], keep: bool,
                                        dtype: type) -> None:
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    with tf.Graph().as_default():
        s = tf.reduce_sum(tf.constant(x), axis=axes, keepdims=keep)
        with tf.Session() as sess:
            got = sess.run(s)
    want = x.astype(np.float64).sum(axis=tuple(a % len(shape) for a in axes), keepdims=keep)
    assert got.shape == want.shape and got.dtype == dtype
    numpy_err = np.abs(x.sum(axis=tuple(a % len(shape) for a in axes), keepdims=keep)
                       - want).max()
    assert np.abs(got - want).max() <= max(numpy_err, 1e-9) * 1.01 + 1e-6


def test_the_gemv_path_applies_only_where_it_is_exact_in_meaning() -> None:
    big = np.ones((GEMV_SUM_ELEMENTS // 16, 16), np.float32)
    assert _leading_sum(big, (0,), False) is not None
    assert _leading_sum(big, (1,), False) is None                    # not leading
    assert _leading_sum(big, (0, 1), False) is None                  # every axis: numpy's sum
    assert _leading_sum(big[:, ::2], (0,), False) is None            # not contiguous
    assert _leading_sum(big.astype(np.int32), (0,), False) is None   # integers
    assert _leading_sum(big[:100], (0,), False) is None              # small
    np.testing.assert_array_equal(_leading_sum(big, (0,), True), big.sum(axis=0, keepdims=True))


def test_nan_and_inf_propagate_as_in_numpy() -> None:
    x = np.ones((GEMV_SUM_ELEMENTS // 4, 4), np.float32)
    x[3, 1], x[5, 2] = np.nan, np.inf
    got = _leading_sum(x, (0,), False)
    assert np.isnan(got[1]) and np.isinf(got[2]) and got[0] == x.shape[0]
