"""Shared checks of the math-op tests: run a fetch, compare with numpy at a tolerance fitting the
dtype, and assert that the value's dtype and shape agree with what inference said."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

import tensorgrid as tf

BF16 = ml_dtypes.bfloat16
FLOATS = [np.float16, BF16, np.float32, np.float64]
INTS = [np.int8, np.int32, np.int64, np.uint8]


def run(fetches: Any, feed: dict | None = None) -> Any:
    with tf.Session() as sess:
        return sess.run(fetches, feed)


def tol(dtype: Any) -> dict[str, float]:
    dt = np.dtype(dtype)
    if dt == np.float16:
        return {"rtol": 2e-3, "atol": 2e-3}
    if dt == np.dtype(BF16):
        return {"rtol": 1.6e-2, "atol": 1.6e-2}
    if dt in (np.float32, np.complex64):
        return {"rtol": 1e-5, "atol": 1e-5}
    return {"rtol": 1e-12, "atol": 1e-12}


def check(t: tf.Tensor, expected: np.ndarray, feed: dict | None = None, **kw: Any) -> np.ndarray:
    """Run t; assert its dtype is what inference said, its shape agrees with the static shape,
    and its value matches."""
    got = np.asarray(run(t, feed))
    assert got.dtype == t.dtype.np, (got.dtype, t.dtype)
    assert t.shape.is_compatible_with(got.shape), (t.shape, got.shape)
    expected = np.asarray(expected)
    assert got.shape == expected.shape
    if got.dtype.kind in "fc" or got.dtype == np.dtype(BF16):
        np.testing.assert_allclose(got.astype(np.complex128 if got.dtype.kind == "c"
                                              else np.float64),
                                   expected.astype(np.complex128 if got.dtype.kind == "c"
                                                   else np.float64), **(kw or tol(got.dtype)))
    else:
        np.testing.assert_array_equal(got, expected)
    return got


rng = np.random.default_rng(0)


def rand(shape: tuple[int, ...], dtype: Any, lo: float = -3, hi: float = 3) -> np.ndarray:
    if np.dtype(dtype).kind in "iu":
        lo = max(lo, np.iinfo(dtype).min)
        return rng.integers(int(lo), int(hi) + 1, size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)
