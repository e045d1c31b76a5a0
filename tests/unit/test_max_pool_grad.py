"""Where the max-pool gradients (kernels/pool_grad.py) send each window's gradient: TensorFlow's
scan (the first element inside the input, replaced by each later one strictly greater), checked
against a direct-loop reference of that scan on every path (2x2 tiles, other tiles, padded and
overlapping windows), with NaNs in the input, NaNs and infinities in the incoming gradient, ties,
integer data, the relu fused in, and MaxPoolGradGrad (each window's first maximum, NaNs passed
over); plus answers TensorFlow gave."""

from __future__ import annotations

import numpy as np
import pytest
from test_conv_kernels import ref_max_pool_grad
from threadpoolctl import threadpool_limits

import tensorgrid as tf
import tensorgrid.kernels.parallel as kparallel
import tensorgrid.nn as nn
from tensorgrid.framework.convert import make_op

RNG = np.random.default_rng(29)

# (ksize, strides, padding, input H, W): the 2x2 tiles, 3x3 tiles, overlapping padded windows,
# and 2x2 SAME on odd sizes (padded, not tiled)
GEOMETRIES = [
    ((2, 2), (2, 2), "VALID", 6, 8),
    ((3, 3), (3, 3), "VALID", 6, 9),
    ((3, 3), (2, 2), "SAME", 7, 6),
    ((2, 2), (2, 2), "SAME", 5, 7),
    ((2, 3), (1, 2), "VALID", 5, 7),
]


def out_and_pad(size: int, k: int, s: int, padding: str) -> tuple[int, int]:
    if padding == "VALID":
        return (size - k) // s + 1, 0
    out = -(-size // s)
    return out, max((out - 1) * s + k - size, 0) // 2


def ref_winners(x: np.ndarray, k: tuple[int, int], s: tuple[int, int], padding: str,
                skip_nan: bool = False) -> np.ndarray:
    """(n, oh, ow, c, 2): the (row, column) each window's gradient goes to, by the scan; with
    ``skip_nan`` the scan passes over NaNs (MaxPoolGradGrad's first maximum; (-1, -1) for a
    window of NaNs)."""
    n, h, w, c = x.shape
    oh, pt = out_and_pad(h, k[0], s[0], padding)
    ow, pl = out_and_pad(w, k[1], s[1], padding)
    where = np.zeros((n, oh, ow, c, 2), dtype=np.int64)
    for b in range(n):
        for y in range(oh):
            for q in range(ow):
                for ch in range(c):
                    best, at = None, None
                    for r in range(y * s[0] - pt, y * s[0] - pt + k[0]):
                        for col in range(q * s[1] - pl, q * s[1] - pl + k[1]):
                            if not (0 <= r < h and 0 <= col < w):
                                continue
                            v = x[b, r, col, ch]
                            if skip_nan and np.isnan(v):
                                continue
                            if at is None or v > best:
                                best, at = v, (r, col)
                    where[b, y, q, ch] = at or (-1, -1)
    return where


def pool_grads(x: np.ndarray, g: np.ndarray, gg: np.ndarray, k: tuple[int, int],
               s: tuple[int, int], padding: str) -> list[np.ndarray]:
    """[MaxPoolGrad, _FusedMaxPoolGrad (relu), MaxPoolGradGrad] of one step."""
    attrs = {"ksize": [1, *k, 1], "strides": [1, *s, 1], "padding": padding}
    with tf.Graph().as_default():
        xt = tf.constant(x)
        y = nn.max_pool(xt, attrs["ksize"], attrs["strides"], padding)
        outs = [make_op("MaxPoolGrad", [xt, y, tf.constant(g)], attrs),
                make_op("_FusedMaxPoolGrad", [xt, y, tf.constant(g)],
                        {**attrs, "fused_ops": ["ReluGrad"]}, name="fused"),
                make_op("MaxPoolGradGrad", [xt, y, tf.constant(gg)], attrs)]
        with tf.Session() as sess:
            return sess.run(outs)


def check(x: np.ndarray, g: np.ndarray, gg: np.ndarray, k: tuple[int, int], s: tuple[int, int],
          padding: str) -> np.ndarray:
    """Every kernel against the reference; returns MaxPoolGrad's result."""
    where = ref_winners(x, k, s, padding)
    grad, fused, gradgrad = pool_grads(x, g, gg, k, s, padding)
    want = ref_max_pool_grad(x, g, where).astype(x.dtype)
    # (overlapping windows add their gradients in another order: equal up to rounding)
    np.testing.assert_allclose(grad, want, rtol=1e-6, atol=1e-6)
    with np.errstate(invalid="ignore"):  # ReluGrad: NaN * 0 stays NaN
        np.testing.assert_allclose(fused, want * (x > 0), rtol=1e-6, atol=1e-6)
    # MaxPoolGradGrad: gg at each window's first maximum, NaNs of the input passed over
    first = ref_winners(x, k, s, padding, skip_nan=True)
    n, oh, ow, c, _ = first.shape
    b, ch = np.meshgrid(np.arange(n), np.arange(c), indexing="ij")
    want_gg = np.stack([np.where(first[:, y, q, :, 0] < 0, 0,
                                 gg[b, first[:, y, q, :, 0], first[:, y, q, :, 1], ch])
                        for y in range(oh) for q in range(ow)], axis=1).reshape(n, oh, ow, c)
    np.testing.assert_array_equal(gradgrad, want_gg)
    return grad


@pytest.mark.parametrize("k,s,padding,h,w", GEOMETRIES)
def test_ties_go_to_the_first_maximum_in_row_major_order(k, s, padding, h, w) -> None:
    # small integers: many windows hold their maximum twice or more, in every arrangement
    x = RNG.integers(-2, 3, (3, h, w, 8)).astype(np.float32)
    g = RNG.standard_normal((3, *out_shape(h, w, k, s, padding), 8)).astype(np.float32)
    check(x, g, RNG.standard_normal(x.shape).astype(np.float32), k, s, padding)


def out_shape(h: int, w: int, k: tuple[int, int], s: tuple[int, int],
              padding: str) -> tuple[int, int]:
    return out_and_pad(h, k[0], s[0], padding)[0], out_and_pad(w, k[1], s[1], padding)[0]


@pytest.mark.parametrize("k,s,padding,h,w", GEOMETRIES)
def test_a_nan_or_inf_in_the_gradient_lands_on_the_winner_only(k, s, padding, h, w) -> None:
    x = RNG.standard_normal((2, h, w, 3)).astype(np.float32)
    g = RNG.standard_normal((2, *out_shape(h, w, k, s, padding), 3)).astype(np.float32)
    g[0, 0, 0, 0], g[1, -1, -1, 2], g[1, 0, -1, 1] = np.nan, np.inf, -np.inf
    gg = RNG.standard_normal(x.shape).astype(np.float32)
    gg[0, 0, 0, 0], gg[1, -1, -1, 1] = np.nan, np.inf
    grad = check(x, g, gg, k, s, padding)
    assert np.isnan(grad).sum() == 1  # not spread over the window


@pytest.mark.parametrize("k,s,padding,h,w", GEOMETRIES)
def test_a_nan_in_the_input_wins_its_window_only_when_scanned_first(k, s, padding, h,
                                                                    w) -> None:
    x = np.maximum(RNG.standard_normal((2, h, w, 4)), 0).astype(np.float32)  # ties at 0
    x[0, 0, 0, 0] = np.nan  # first in its window(s)
    x[0, 1, 1, 1] = np.nan  # last or inside: never taken where an element came before it
    x[1, h - 1, w - 1, 3] = np.nan
    g = RNG.standard_normal((2, *out_shape(h, w, k, s, padding), 4)).astype(np.float32)
    check(x, g, RNG.standard_normal(x.shape).astype(np.float32), k, s, padding)


def test_integers_and_a_batch_of_one() -> None:
    x = RNG.integers(-50, 50, (1, 6, 4, 3)).astype(np.int32)
    g = RNG.integers(-5, 5, (1, 3, 2, 3)).astype(np.int32)
    check(x, g, RNG.integers(-5, 5, x.shape).astype(np.int32), (2, 2), (2, 2), "VALID")


def test_the_paired_2x2_path_split_over_threads_with_nan_and_inf(monkeypatch) -> None:
    """A batch split into blocks of images on the block runner gives the whole batch's answer,
    also when one block meets a NaN in its input or its gradient (the scan takes over)."""
    x = np.maximum(RNG.standard_normal((9, 8, 6, 8)), 0).astype(np.float32)
    g = RNG.standard_normal((9, 4, 3, 8)).astype(np.float32)
    x_nan, g_nan = x.copy(), g.copy()
    x_nan[7, 3, 2, 5], g_nan[2, 1, 1, 1] = np.nan, np.nan
    for xs, gs in ((x, g), (x_nan, g), (x, g_nan)):
        whole = check(xs, gs, np.ones_like(xs), (2, 2), (2, 2), "VALID")
        with monkeypatch.context() as m, threadpool_limits(2, user_api="blas"):
            m.setattr(kparallel, "SPLIT_BYTES", 1)  # every batch split into blocks of images
            split = check(xs, gs, np.ones_like(xs), (2, 2), (2, 2), "VALID")
        np.testing.assert_array_equal(whole, split)


def test_answers_tensorflow_gave() -> None:
    """MaxPoolGrad and MaxPoolGradGrad of tensorflow-cpu 2.21 on these inputs: the gradient
    follows the scan (a NaN first in its window takes it), the gradient's gradient the window's
    maximum without NaNs."""
    x = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [1, 2, 3, 4], [5, 6, 7, 8]],
                 np.float32).reshape(1, 4, 4, 1)
    x[0, 0, 0, 0] = x[0, 0, 3, 0] = x[0, 3, 3, 0] = np.nan  # first, second and last in a window
    g = np.array([1, 2, 3, 4], np.float32).reshape(1, 2, 2, 1)
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}
    x2 = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    g2 = g.copy()
    g2[0, 0, 0, 0], g2[0, 1, 1, 0] = np.nan, np.inf
    x3 = np.arange(25, dtype=np.float32).reshape(1, 5, 5, 1)
    g3 = np.ones((1, 3, 3, 1), np.float32)
    g3[0, 0, 0, 0] = np.nan
    with tf.Graph().as_default():
        outs = []
        for xs, gs, padding in ((x, g, "VALID"), (x2, g2, "VALID"), (x3, g3, "SAME")):
            xt = tf.constant(xs)
            y = nn.max_pool(xt, [1, 2, 2, 1], [1, 2, 2, 1], padding)
            outs.append(make_op("MaxPoolGrad", [xt, y, tf.constant(gs)],
                                {**attrs, "padding": padding}))
        gg = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1) + 100
        gg2 = gg.copy()
        gg2[0, 0, 0, 0], gg2[0, 3, 3, 0] = np.nan, np.inf
        for xs, ggs in ((x, gg), (x2, gg2)):
            xt = tf.constant(xs)
            y = nn.max_pool(xt, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
            outs.append(make_op("MaxPoolGradGrad", [xt, y, tf.constant(ggs)], attrs))
        with tf.Session() as sess:
            got = [v[0, :, :, 0] for v in sess.run(outs)]
    nan, inf = np.nan, np.inf
    np.testing.assert_array_equal(got[0], [[1, 0, 0, 0], [0, 0, 0, 2], [0, 0, 0, 0],
                                           [0, 3, 4, 0]])
    np.testing.assert_array_equal(got[1], [[0, 0, 0, 0], [0, nan, 0, 2], [0, 0, 0, 0],
                                           [0, 3, 0, inf]])
    np.testing.assert_array_equal(got[2], [[0, 0, 0, 0, 0], [0, nan, 0, 1, 1], [0, 0, 0, 0, 0],
                                           [0, 1, 0, 1, 1], [0, 1, 0, 1, 1]])
    np.testing.assert_array_equal(got[3], [[105, 107], [113, 114]])
    np.testing.assert_array_equal(got[4], [[105, 107], [113, inf]])


def test_max_pool_passes_over_nans_as_tensorflow() -> None:
    """MaxPool of tensorflow-cpu 2.21 on these inputs: a NaN never wins a window, a window of
    NaNs gives the type's lowest finite value, a real -inf stays -inf, padding never wins."""
    x = np.array([[1, np.nan, 3, 4], [np.nan, np.nan, 0, -1], [np.nan, np.nan, np.inf, 2],
                  [np.nan, np.nan, -np.inf, np.nan]]).reshape(1, 4, 4, 1)
    ninf = np.array([[-np.inf, np.nan], [np.nan, np.nan]]).reshape(1, 2, 2, 1)
    with tf.Graph().as_default(), tf.Session() as sess:
        for dt in (np.float32, np.float64):
            got = sess.run(nn.max_pool(tf.constant(x.astype(dt)), [1, 2, 2, 1], [1, 2, 2, 1],
                                       "VALID"))
            np.testing.assert_array_equal(got.reshape(-1), [1, 4, np.finfo(dt).min, np.inf])
            assert got.dtype == dt
        same = sess.run(nn.max_pool(tf.constant(np.full((1, 3, 3, 1), np.nan, np.float32)),
                                    [1, 2, 2, 1], [1, 2, 2, 1], "SAME"))
        np.testing.assert_array_equal(same.reshape(-1), [np.finfo(np.float32).min] * 4)
        got = sess.run(nn.max_pool(tf.constant(ninf.astype(np.float32)), [1, 2, 2, 1],
                                   [1, 2, 2, 1], "SAME"))
        np.testing.assert_array_equal(got.reshape(-1), [-np.inf])
        ints = np.arange(16, dtype=np.int32).reshape(1, 4, 4, 1) - 20
        got = sess.run(nn.max_pool(tf.constant(ints), [1, 3, 3, 1], [1, 2, 2, 1], "SAME"))
        np.testing.assert_array_equal(got.reshape(-1), [-10, -9, -6, -5])


def test_a_pooled_output_that_is_not_the_max_pool_changes_nothing() -> None:
    """The tiled path reads each window's maximum from ``orig_output``; given one that is not
    the input's max pool (TensorFlow's CPU kernel never reads its values), the gradient is still
    the scan's: a window with no element equal to it sends the kernel to the scan."""
    x = np.maximum(RNG.standard_normal((2, 4, 6, 8)), 0).astype(np.float32)
    g = RNG.standard_normal((2, 2, 3, 8)).astype(np.float32)
    want = ref_max_pool_grad(x, g, ref_winners(x, (2, 2), (2, 2), "VALID")).astype(np.float32)
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}
    with tf.Graph().as_default():
        xt, gt = tf.constant(x), tf.constant(g)
        outs = [make_op(op, [xt, tf.constant(y), gt], {**attrs, **extra}, name=f"grad{i}{k}")
                for i, y in enumerate((np.full_like(g, 0.5), g))
                for k, (op, extra) in enumerate((("MaxPoolGrad", {}), (
                    "_FusedMaxPoolGrad", {"fused_ops": ["ReluGrad"]})))]
        with tf.Session() as sess:
            got = sess.run(outs)
    for i, out in enumerate(got):
        np.testing.assert_array_equal(out, want * (x > 0) if i % 2 else want)


def test_relu_fused_ties_among_positive_maxima_split_over_threads(monkeypatch) -> None:
    """After a relu (no negative input): the all-zero windows take no gradient, and windows
    whose positive maximum appears twice give it to the first; the same on blocks of images."""
    x = RNG.integers(0, 3, (6, 8, 6, 16)).astype(np.float32)  # many ties, at 0 and above
    g = RNG.standard_normal((6, 4, 3, 16)).astype(np.float32)
    whole = check(x, g, np.ones_like(x), (2, 2), (2, 2), "VALID")
    with monkeypatch.context() as m, threadpool_limits(2, user_api="blas"):
        m.setattr(kparallel, "SPLIT_BYTES", 1)
        split = check(x, g, np.ones_like(x), (2, 2), (2, 2), "VALID")
    np.testing.assert_array_equal(whole, split)
    xi = RNG.integers(0, 3, (2, 4, 4, 8)).astype(np.int32)  # integers: no NaN to compare with
    check(xi, RNG.integers(-5, 5, (2, 2, 2, 8)).astype(np.int32), np.ones_like(xi), (2, 2),
          (2, 2), "VALID")


@pytest.mark.parametrize("k", [(2, 2), (3, 3)])
def test_nans_after_a_windows_first_element_leave_the_tiled_path_right(k) -> None:
    """NaNs only after each window's first element (never taken by the scan; the tiled path
    checks the first elements alone), a window whose only number is its first, ties at 0."""
    h, w = 2 * k[0], 3 * k[1]
    x = np.maximum(RNG.standard_normal((2, h, w, 8)), 0).astype(np.float32)
    x[0, 0, 1, 0] = x[0, 1, 0, 3] = x[1, h - 1, w - 1, 7] = np.nan  # second, below, last
    x[1, 0:k[0], 0:k[1], 2] = np.nan
    x[1, 0, 0, 2] = 0.5  # the window's first element, its only number
    g = RNG.standard_normal((2, 2, 3, 8)).astype(np.float32)
    check(x, g, RNG.standard_normal(x.shape).astype(np.float32), k, k, "VALID")
