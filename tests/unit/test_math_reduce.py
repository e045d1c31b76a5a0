"""Reductions, arg-reductions and scans against numpy: every axis form, keepdims, dtypes kept or
widened as TensorFlow does, partial shapes, and the errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mathcheck import BF16, check, rand, run, tol

import tensorgrid as tf
from tensorgrid.core import errors

# ------------------------------------------------------------------------------ reductions

REDUCTIONS = [
    (tf.reduce_sum, np.sum),
    (tf.reduce_mean, np.mean),
    (tf.reduce_max, np.max),
    (tf.reduce_min, np.min),
    (tf.reduce_prod, np.prod),
]


@pytest.mark.parametrize("fn,ref", REDUCTIONS, ids=lambda f: getattr(f, "__name__", ""))
@pytest.mark.parametrize("axis", [None, 0, 1, -1, [0, 2], [-1, 0], []])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_match_numpy(fn: Any, ref: Any, axis: Any, keepdims: bool) -> None:
    a = rand((2, 3, 4), np.float64, 0.5, 1.5)
    out = fn(tf.constant(a), axis=axis, keepdims=keepdims)
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    expected = ref(a, axis=np_axis, keepdims=keepdims)
    assert out.shape.as_list() == list(np.shape(expected))
    check(out, expected)


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32, np.int8, np.int32, np.int64,
                                   np.uint8])
def test_reduction_dtypes_are_kept(dtype: Any) -> None:
    a = rand((4, 5), dtype, 0, 5)
    x = tf.constant(a)
    for fn, ref in REDUCTIONS[:1] + REDUCTIONS[2:4]:
        out = fn(x, axis=1)
        assert out.dtype == tf.as_dtype(dtype)
        exp = ref(a.astype(np.float64), axis=1)
        check(out, exp if np.dtype(dtype).kind not in "iu" else exp.astype(dtype),
              **tol(dtype) if np.dtype(dtype).kind == "f" or dtype is BF16 else {})


def test_half_precision_sum_accumulates_in_float32() -> None:
    a = np.full(4096, 0.1, np.float16)
    got = run(tf.reduce_sum(tf.constant(a)))
    assert got.dtype == np.float16
    assert abs(float(got) - 409.6) < 0.5  # a float16 accumulator would stall near 256


def test_integer_mean_truncates_like_tensorflow() -> None:
    a = np.array([[-7, 2], [3, 4], [-1, -2]], np.int32)
    out = tf.reduce_mean(tf.constant(a), axis=1)
    assert out.dtype == tf.int32
    check(out, np.array([-2, 3, -1], np.int32))
    check(tf.reduce_mean(tf.constant(np.array([1, 2], np.uint8))), np.uint8(1))


def test_reduce_max_min_of_empty_axis() -> None:
    e = np.zeros((0, 3), np.float32)
    check(tf.reduce_max(tf.constant(e), axis=0), np.full(3, -np.inf, np.float32))
    check(tf.reduce_min(tf.constant(np.zeros((0, 2), np.int32)), axis=0),
          np.full(2, np.iinfo(np.int32).max, np.int32))


def test_reduce_any_all() -> None:
    c = np.array([[True, False], [False, False]])
    check(tf.reduce_any(tf.constant(c), axis=1), c.any(axis=1))
    check(tf.reduce_all(tf.constant(c)), c.all())
    check(tf.reduce_any(tf.constant(c), keepdims=True), c.any(keepdims=True))
    with pytest.raises(errors.InvalidArgumentError, match="bool"):
        tf.reduce_any(tf.constant([1.0]))


def test_reduction_api_spellings() -> None:
    a = rand((2, 3), np.float32)
    check(tf.reduce_sum(tf.constant(a), reduction_indices=[1], keep_dims=True),
          a.sum(axis=1, keepdims=True))
    with pytest.raises(ValueError):
        tf.reduce_sum(tf.constant(a), axis=0, reduction_indices=0)
    x = tf.constant(a)
    assert tf.reduce_sum(x).op.get_attr("keep_dims") is False


def test_reductions_with_partial_shapes_and_dynamic_axes() -> None:
    x = tf.placeholder(tf.float32, [None, 3])
    assert tf.reduce_sum(x, axis=0).shape.as_list() == [3]
    assert tf.reduce_sum(x, axis=1, keepdims=True).shape.as_list() == [None, 1]
    u = tf.placeholder(tf.float32)
    s = tf.reduce_sum(u)  # axis=None on unknown rank: every axis, found at run time
    assert s.shape.rank is None
    a = rand((2, 3, 2), np.float32)
    check(s, a.sum(), {u: a}, rtol=1e-5)
    axes = tf.placeholder(tf.int32, [None])
    dyn = tf.reduce_max(x, axis=axes)
    assert dyn.shape.rank is None
    b = rand((4, 3), np.float32)
    check(dyn, b.max(axis=1), {x: b, axes: np.array([-1], np.int32)})
    kept = tf.reduce_max(x, axis=axes, keepdims=True)
    assert kept.shape.as_list() == [None, None]
    check(kept, b.max(axis=1, keepdims=True), {x: b, axes: np.array([1], np.int32)})
    check(tf.reduce_sum(x, axis=tf.constant([0, 0, 1])), b.sum(), {x: b})  # repeats allowed


def test_reduction_axis_errors() -> None:
    with pytest.raises(errors.InvalidArgumentError, match="Invalid reduction dimension"):
        tf.reduce_sum(tf.constant(np.ones((2, 3))), axis=2)
    with pytest.raises(errors.InvalidArgumentError, match="int32 or int64"):
        tf.reduce_sum(tf.constant(np.ones((2, 3))), axis=tf.constant(1.0))
    axes = tf.placeholder(tf.int32, [None])
    out = tf.reduce_sum(tf.constant(np.ones((2, 3))), axis=axes, name="late_sum")
    with pytest.raises(errors.InvalidArgumentError, match="late_sum"):
        run(out, {axes: np.array([5], np.int32)})


def test_reduce_logsumexp() -> None:
    a = np.array([[1.0, 2.0, 3.0], [1000.0, 1000.0, -np.inf], [-np.inf] * 3])
    with np.errstate(all="ignore"):
        m = np.max(a, axis=1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
        ref = np.log(np.sum(np.exp(a - m), axis=1)) + m[:, 0]
    check(tf.reduce_logsumexp(tf.constant(a), axis=1), ref)
    b = rand((3, 4), np.float32)
    check(tf.reduce_logsumexp(tf.constant(b), axis=0, keepdims=True),
          np.log(np.exp(b.astype(np.float64)).sum(axis=0, keepdims=True)), rtol=1e-5)
    check(tf.reduce_logsumexp(tf.constant(b)), np.log(np.exp(b.astype(np.float64)).sum()),
          rtol=1e-5)
    u = tf.placeholder(tf.float32, [None, 4])
    check(tf.reduce_logsumexp(u, axis=1), np.log(np.exp(b.astype(np.float64)).sum(axis=1)),
          {u: b}, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.int32, np.uint8])
def test_argmax_argmin(dtype: Any) -> None:
    a = rand((3, 5), dtype, 0, 9)
    x = tf.constant(a)
    out = tf.argmax(x, axis=1)
    assert out.dtype == tf.int64 and out.shape == (3,)
    check(out, np.argmax(a, axis=1))
    check(tf.argmin(x, axis=0, output_type=tf.int32), np.argmin(a, axis=0).astype(np.int32))
    check(tf.argmax(x, dimension=-1), np.argmax(a, axis=-1))
    check(tf.argmin(x), np.argmin(a, axis=0))


def test_argmax_errors() -> None:
    with pytest.raises(errors.InvalidArgumentError, match="range"):
        tf.argmax(tf.constant(np.ones((2, 3))), axis=2)
    x = tf.placeholder(tf.float32, [None, 3])
    out = tf.argmax(x, axis=0, name="empty_argmax")
    with pytest.raises(errors.InvalidArgumentError, match="empty_argmax"):
        run(out, {x: np.zeros((0, 3), np.float32)})


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumsum_cumprod(exclusive: bool, reverse: bool, axis: int) -> None:
    a = rand((3, 4), np.float64, 0.5, 2)

    def ref(fn: Any, identity: float) -> np.ndarray:
        v = np.flip(a, axis) if reverse else a
        r = fn(v, axis=axis)
        if exclusive:
            r = np.concatenate([np.full_like(np.take(r, [0], axis=axis), identity),
                                np.delete(r, -1, axis=axis)], axis=axis)
        return np.flip(r, axis) if reverse else r

    x = tf.constant(a)
    check(tf.cumsum(x, axis, exclusive=exclusive, reverse=reverse), ref(np.cumsum, 0.0))
    check(tf.cumprod(x, axis, exclusive=exclusive, reverse=reverse), ref(np.cumprod, 1.0))


def test_cumsum_dtypes() -> None:
    check(tf.cumsum(tf.constant(np.array([1, 2, 3], np.int8))), np.array([1, 3, 6], np.int8))
    h = np.full(1000, 0.5, np.float16)
    got = check(tf.cumsum(tf.constant(h)), np.cumsum(h.astype(np.float64)), rtol=1e-3)
    assert got.dtype == np.float16
