"""The convolution and pooling kernels (kernels/conv.py, kernels/pool.py) against direct-loop
references written here, across SAME/VALID, strides, dilations, odd sizes and batch 1; both ways
of computing the input gradient (transposed convolution and col2im); blocks spread over threads;
dtypes kept (float32 stays float32); gradients against finite differences through the graph API;
and, when the TensorFlow venv exists, against TensorFlow itself."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import tensorgrid as tf
import tensorgrid.kernels.conv as kconv
import tensorgrid.kernels.parallel as kparallel
import tensorgrid.nn as nn
from tensorgrid.framework.convert import make_op
from tensorgrid.testing import check_gradients

RNG = np.random.default_rng(13)
TF_PYTHON = Path("/work/main/.venv-tf/bin/python")


def run(fetches):
    with tf.Session() as sess:
        return sess.run(fetches)


# ------------------------------------------------------------------------------ references


def same_or_valid(size: int, k: int, stride: int, dil: int, padding: str) -> tuple[int, int]:
    """(output size, padding before) along one axis, as TensorFlow defines them."""
    eff = (k - 1) * dil + 1
    if padding == "VALID":
        return (size - eff) // stride + 1, 0
    out = -(-size // stride)
    return out, max((out - 1) * stride + eff - size, 0) // 2


def ref_conv(x, f, s, d, padding):
    """Direct loops: every output pixel is a sum over its window's taps and channels."""
    n, h, w, _ = x.shape
    kh, kw, _, oc = f.shape
    oh, pt = same_or_valid(h, kh, s[0], d[0], padding)
    ow, pl = same_or_valid(w, kw, s[1], d[1], padding)
    out = np.zeros((n, oh, ow, oc))
    for y in range(oh):
        for xx in range(ow):
            for i in range(kh):
                for j in range(kw):
                    r, c = y * s[0] + i * d[0] - pt, xx * s[1] + j * d[1] - pl
                    if 0 <= r < h and 0 <= c < w:
                        out[:, y, xx, :] += x[:, r, c, :] @ f[i, j]
    return out


def ref_conv_grads(x, f, dy, s, d, padding):
    """(dx, df) of sum(conv(x, f) * dy), by the same loops run backwards."""
    n, h, w, _ = x.shape
    kh, kw = f.shape[:2]
    _, pt = same_or_valid(h, kh, s[0], d[0], padding)
    _, pl = same_or_valid(w, kw, s[1], d[1], padding)
    dx, df = np.zeros(x.shape), np.zeros(f.shape)
    for y in range(dy.shape[1]):
        for xx in range(dy.shape[2]):
            for i in range(kh):
                for j in range(kw):
                    r, c = y * s[0] + i * d[0] - pt, xx * s[1] + j * d[1] - pl
                    if 0 <= r < h and 0 <= c < w:
                        dx[:, r, c, :] += dy[:, y, xx, :] @ f[i, j].T
                        df[i, j] += x[:, r, c, :].T @ dy[:, y, xx, :]
    return dx, df


def ref_pool(x, k, s, padding):
    """(max, avg, first-max gradient routing) of each window; padding never counts."""
    n, h, w, c = x.shape
    oh, pt = same_or_valid(h, k[0], s[0], 1, padding)
    ow, pl = same_or_valid(w, k[1], s[1], 1, padding)
    mx, avg = np.zeros((n, oh, ow, c)), np.zeros((n, oh, ow, c))
    where = np.zeros((n, oh, ow, c, 2), dtype=int)  # input (row, col) of the first maximum
    for b in range(n):
        for y in range(oh):
            for xx in range(ow):
                for ch in range(c):
                    cells = [(r, q) for r in range(y * s[0] - pt, y * s[0] - pt + k[0])
                             for q in range(xx * s[1] - pl, xx * s[1] - pl + k[1])
                             if 0 <= r < h and 0 <= q < w]
                    vals = [x[b, r, q, ch] for r, q in cells]
                    best = int(np.argmax(vals))  # argmax picks the first of equal maxima
                    mx[b, y, xx, ch], avg[b, y, xx, ch] = vals[best], np.mean(vals)
                    where[b, y, xx, ch] = cells[best]
    return mx, avg, where


def ref_max_pool_grad(x, g, where):
    dx = np.zeros(x.shape)
    n, oh, ow, c = g.shape
    for b in range(n):
        for y in range(oh):
            for xx in range(ow):
                for ch in range(c):
                    r, q = where[b, y, xx, ch]
                    dx[b, r, q, ch] += g[b, y, xx, ch]
    return dx


# ------------------------------------------------------------------------------ convolution

# (batch, h, w, c, kh, kw, oc, strides, dilations): odd sizes, batch 1, a single channel, c >= 8
# with oc <= 4c (input gradient as a transposed convolution) and c < 8 (col2im)
CONV_CASES = [
    (1, 7, 5, 1, 3, 3, 4, (1, 1), (1, 1)),
    (2, 6, 7, 3, 2, 3, 5, (2, 2), (1, 1)),
    (1, 9, 8, 2, 3, 2, 3, (2, 1), (1, 1)),
    (3, 8, 9, 9, 3, 3, 6, (1, 1), (1, 1)),
    (2, 9, 7, 10, 3, 2, 12, (1, 1), (2, 2)),
    (1, 7, 7, 2, 2, 2, 3, (1, 1), (2, 1)),
    (2, 5, 6, 8, 1, 1, 4, (1, 1), (1, 1)),
    (1, 3, 3, 2, 5, 5, 2, (1, 1), (1, 1)),  # a filter larger than the input (SAME only)
    # one input channel: im2col built transposed, one row per tap
    (3, 9, 8, 1, 3, 3, 4, (2, 2), (1, 1)),
    (2, 8, 9, 1, 3, 2, 5, (1, 1), (2, 1)),
]


def conv_case(case, padding):
    n, h, w, c, kh, kw, oc, s, d = case
    if padding == "VALID" and ((h - (kh - 1) * d[0] - 1) < 0 or (w - (kw - 1) * d[1] - 1) < 0):
        pytest.skip("the filter does not fit the input without padding")
    x = RNG.standard_normal((n, h, w, c)).astype(np.float32)
    f = RNG.standard_normal((kh, kw, c, oc)).astype(np.float32)
    return x, f, s, d


def conv_nodes(x, f, dy, s, d, padding):
    strides, dil = [1, *s, 1], [1, *d, 1]
    y = nn.conv2d(tf.constant(x), tf.constant(f), strides=strides, padding=padding,
                  dilations=dil)
    dx = nn.conv2d_backprop_input(list(x.shape), tf.constant(f), tf.constant(dy), strides,
                                  padding, dilations=dil)
    df = nn.conv2d_backprop_filter(tf.constant(x), list(f.shape), tf.constant(dy), strides,
                                   padding, dilations=dil)
    return y, dx, df


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_kernels_match_direct_loops(case, padding) -> None:
    x, f, s, d = conv_case(case, padding)
    want_y = ref_conv(x.astype(np.float64), f.astype(np.float64), s, d, padding)
    dy = RNG.standard_normal(want_y.shape).astype(np.float32)
    want_dx, want_df = ref_conv_grads(x.astype(np.float64), f.astype(np.float64),
                                      dy.astype(np.float64), s, d, padding)
    y, dx, df = run(list(conv_nodes(x, f, dy, s, d, padding)))
    for got, want in ((y, want_y), (dx, want_dx), (df, want_df)):
        assert got.dtype == np.float32  # no float64 on the way
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", [CONV_CASES[3], CONV_CASES[4], CONV_CASES[1], CONV_CASES[8]])
def test_blocks_on_threads_give_the_same_result(monkeypatch, case) -> None:
    # a one-byte budget (and a one-row minimum) makes every image its own block: blocks then run
    # on the block runner's threads (when BLAS has several), each with its own scratch
    x, f, s, d = conv_case(case, "SAME")
    dy = RNG.standard_normal(ref_conv(x, f, s, d, "SAME").shape).astype(np.float32)
    whole = run(list(conv_nodes(x, f, dy, s, d, "SAME")))
    monkeypatch.setattr(kconv, "BLOCK_BYTES", 1)
    monkeypatch.setattr(kconv, "MIN_ROWS", 1)
    blocked = run(list(conv_nodes(x, f, dy, s, d, "SAME")))
    for a, b in zip(whole, blocked):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_both_input_gradient_methods_agree() -> None:
    from tensorgrid.kernels.windows import Geometry
    from tensorgrid.ops.nn import Window

    win = Window((1, 1), (1, 1), "SAME")
    f = RNG.standard_normal((3, 3, 8, 8)).astype(np.float32)
    dy = RNG.standard_normal((2, 6, 5, 8)).astype(np.float32)
    geo = Geometry(win, 6, 5, 3, 3)
    tw = kconv._transposed_window(win, geo, 3, 3, 8, 8)
    assert tw is not None
    scratch = kconv._Scratch(np)
    a = kconv._backprop_input_as_conv(np, f, dy, tw, 6, 5, scratch)
    b = kconv._backprop_input_col2im(np, f, dy, win, geo, 2, 8, scratch)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_conv_keeps_the_dtype(dtype) -> None:
    x = RNG.standard_normal((1, 5, 5, 3)).astype(dtype)
    f = RNG.standard_normal((3, 3, 3, 2)).astype(dtype)
    dy = RNG.standard_normal((1, 5, 5, 2)).astype(dtype)
    outs = run(list(conv_nodes(x, f, dy, (1, 1), (1, 1), "SAME")))
    want = ref_conv(x.astype(np.float64), f.astype(np.float64), (1, 1), (1, 1), "SAME")
    assert all(o.dtype == dtype for o in outs)
    tol = 2e-2 if dtype == np.float16 else 1e-10
    np.testing.assert_allclose(outs[0], want, rtol=tol, atol=tol)


def test_conv_bad_shapes_are_clear_errors() -> None:
    f = np.ones((3, 3, 2, 4), np.float32)
    dy = tf.placeholder(tf.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="out_backprop"):
        with tf.Session() as sess:
            sess.run(nn.conv2d_backprop_input([1, 5, 5, 2], f, dy, 1, "SAME"),
                     {dy: np.ones((1, 4, 4, 4), np.float32)})
    with pytest.raises(tf.errors.InvalidArgumentError, match="in_channels"):
        with tf.Session() as sess:
            sess.run(nn.conv2d_backprop_filter(tf.placeholder(tf.float32), [3, 3, 2, 4], dy, 1,
                                               "SAME"),
                     {"Placeholder_1:0": np.ones((1, 5, 5, 3), np.float32),
                      dy: np.ones((1, 5, 5, 4), np.float32)})


@pytest.mark.parametrize("strides,dilations,padding", [((1, 1), (1, 1), "SAME"),
                                                       ((2, 2), (1, 1), "VALID"),
                                                       ((1, 1), (2, 2), "SAME")])
def test_conv_gradients_match_finite_differences(strides, dilations, padding) -> None:
    x = RNG.standard_normal((1, 5, 6, 3))
    f = RNG.standard_normal((2, 3, 3, 2))
    s, d = [1, *strides, 1], [1, *dilations, 1]
    check_gradients(lambda a, b: nn.conv2d(a, b, strides=s, padding=padding, dilations=d), [x, f])


# ------------------------------------------------------------------------------ pools

POOL_CASES = [((2, 2), (2, 2)), ((3, 3), (2, 2)), ((2, 3), (1, 2)), ((3, 2), (3, 1))]


def raw(op_type, *inputs, **attrs):
    return make_op(op_type, list(inputs), {"T": inputs[-1].dtype, **attrs})


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("k,s", POOL_CASES)
def test_pool_kernels_match_direct_loops(k, s, padding) -> None:
    # small integers make ties: the gradient must go to the first maximum of each window
    x = RNG.integers(-3, 4, (2, 7, 6, 3)).astype(np.float32)
    want_max, want_avg, where = ref_pool(x, k, s, padding)
    g = RNG.standard_normal(want_max.shape).astype(np.float32)
    gg = RNG.standard_normal(x.shape).astype(np.float32)
    attrs = {"ksize": [1, *k, 1], "strides": [1, *s, 1], "padding": padding}
    xt = tf.constant(x)
    mp, ap = nn.max_pool(xt, attrs["ksize"], attrs["strides"], padding), \
        nn.avg_pool(xt, attrs["ksize"], attrs["strides"], padding)
    mg = raw("MaxPoolGrad", xt, mp, tf.constant(g), **attrs)
    mgg = raw("MaxPoolGradGrad", xt, mp, tf.constant(gg), **attrs)
    ag = raw("AvgPoolGrad", tf.constant(list(x.shape)), tf.constant(g), **attrs)
    got = run([mp, ap, mg, mgg, ag])
    assert all(v.dtype == np.float32 for v in got)
    np.testing.assert_array_equal(got[0], want_max)
    np.testing.assert_allclose(got[1], want_avg, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[2], ref_max_pool_grad(x, g, where), rtol=1e-6, atol=1e-6)
    want_gg = np.take_along_axis(
        gg[:, :, :, :].reshape(2, -1, 3),
        (where[..., 0] * x.shape[2] + where[..., 1]).reshape(2, -1, 3), axis=1
    ).reshape(want_max.shape)
    np.testing.assert_allclose(got[3], want_gg, rtol=1e-6, atol=1e-6)
    # AvgPoolGrad is AvgPool's adjoint: <avg(x), g> == <x, avg_grad(g)>
    np.testing.assert_allclose(np.vdot(got[1].astype(np.float64), g),
                               np.vdot(x.astype(np.float64), got[4]), rtol=1e-4)


@pytest.mark.parametrize("case", ["distinct", "ties", "ties_and_nan"])
def test_max_pool_grad_of_tiling_windows(case) -> None:
    # 2x2 windows of stride 2 tiling an 8x6 input: the paired comparisons, with the first maximum
    # winning alone where a window holds its maximum twice (or all-zero windows after a relu);
    # TensorFlow's scan when a window holds a NaN: a NaN first in its window takes the gradient
    x = (RNG.permutation(2 * 8 * 6 * 3) * 0.5).reshape(2, 8, 6, 3).astype(np.float32)
    if case != "distinct":
        x[1, 2:4, 4:6, 1] = 7.0
        x[0, 4:8, 0:4, 0] = 0.0
    if case == "ties_and_nan":
        x[0, 0, 0, 2] = np.float32("nan")
    _, _, where = ref_pool(np.nan_to_num(x, nan=np.inf), (2, 2), (2, 2), "VALID")
    g = RNG.standard_normal((2, 4, 3, 3)).astype(np.float32)
    xt = tf.constant(x)
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}
    got = run(raw("MaxPoolGrad", xt, nn.max_pool(xt, 2, 2, "VALID"), tf.constant(g), **attrs))
    want = ref_max_pool_grad(x, g, where)  # the NaN counted as +inf: the first, it wins
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_max_pool_of_integers_and_batch_one() -> None:
    x = RNG.integers(-100, 100, (1, 5, 5, 2)).astype(np.int32)
    got = run(nn.max_pool(tf.constant(x), [1, 3, 3, 1], [1, 2, 2, 1], "SAME"))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, ref_pool(x, (3, 3), (2, 2), "SAME")[0])


@pytest.mark.parametrize("k,s,padding", [((2, 2), (2, 2), "SAME"), ((3, 3), (2, 2), "VALID")])
def test_pool_gradients_match_finite_differences(k, s, padding) -> None:
    x = RNG.permutation(1 * 5 * 5 * 2).reshape(1, 5, 5, 2) * 0.1  # no ties
    check_gradients(lambda a: nn.max_pool(a, [1, *k, 1], [1, *s, 1], padding), [x])
    check_gradients(lambda a: nn.avg_pool(a, [1, *k, 1], [1, *s, 1], padding), [x])


# ------------------------------------------------------------------------------ TensorFlow

TF_SCRIPT = """
import json, sys, numpy as np, tensorflow as tf
d = np.load(sys.argv[1])
x, f, dy = d["x"], d["f"], d["dy"]
out = {}
for pad in ("SAME", "VALID"):
    for s, dil in (((1, 1), (1, 1)), ((2, 2), (1, 1)), ((1, 1), (2, 2))):
        xt, ft = tf.constant(x), tf.constant(f)
        with tf.GradientTape() as tape:
            tape.watch([xt, ft])
            y = tf.nn.conv2d(xt, ft, [1, *s, 1], pad, dilations=[1, *dil, 1])
        dx, df = tape.gradient(y, [xt, ft], output_gradients=tf.constant(dy[:, :y.shape[1],
                                                                          :y.shape[2]]))
        key = f"{pad}-{s[0]}-{dil[0]}"
        out[key] = [y.numpy().tolist(), dx.numpy().tolist(), df.numpy().tolist()]
    mp = tf.nn.max_pool2d(x, 3, 2, pad)
    out["max-" + pad] = tf.nn.max_pool2d(x, 3, 2, pad).numpy().tolist()
    out["avg-" + pad] = tf.nn.avg_pool2d(x, 3, 2, pad).numpy().tolist()
print(json.dumps(out))
"""


@pytest.mark.skipif(not TF_PYTHON.exists(), reason=f"no TensorFlow venv at {TF_PYTHON}")
def test_against_tensorflow(tmp_path) -> None:
    x = RNG.standard_normal((2, 9, 8, 9)).astype(np.float32)
    f = RNG.standard_normal((3, 3, 9, 5)).astype(np.float32)
    dy = RNG.standard_normal((2, 9, 8, 5)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x, f=f, dy=dy)
    (tmp_path / "tf_ref.py").write_text(TF_SCRIPT)
    proc = subprocess.run([str(TF_PYTHON), str(tmp_path / "tf_ref.py"), str(tmp_path / "in.npz")],
                          capture_output=True, text=True, timeout=300,
                          env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
    if proc.returncode != 0:
        pytest.skip(f"TensorFlow did not run: {proc.stderr[-300:]}")
    want = json.loads(proc.stdout.strip().splitlines()[-1])
    for pad in ("SAME", "VALID"):
        for s, dil in (((1, 1), (1, 1)), ((2, 2), (1, 1)), ((1, 1), (2, 2))):
            ty, tdx, tdf = (np.array(v, np.float32) for v in want[f"{pad}-{s[0]}-{dil[0]}"])
            got = run(list(conv_nodes(x, f, np.ascontiguousarray(dy[:, :ty.shape[1],
                                                                  :ty.shape[2]]),
                                      s, dil, pad)))
            for a, b in zip(got, (ty, tdx, tdf)):
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-3)
        mp, ap = run([nn.max_pool(tf.constant(x), 3, 2, pad), nn.avg_pool(tf.constant(x), 3, 2,
                                                                          pad)])
        np.testing.assert_array_equal(mp, np.array(want["max-" + pad], np.float32))
        np.testing.assert_allclose(ap, np.array(want["avg-" + pad], np.float32), rtol=1e-5,
                                   atol=1e-5)


# ------------------------------------------------------------------------------ block runner


def test_block_runner_keeps_order_raises_and_restores_blas_threads() -> None:
    from threadpoolctl import threadpool_info, threadpool_limits

    from tensorgrid.kernels.parallel import BlockRunner

    def blas_threads() -> list[int]:
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    with threadpool_limits(2, user_api="blas"):
        before = blas_threads()
        runner = BlockRunner()
        seen: list[list[int]] = []
        got = runner.run(lambda a, b: (seen.append(blas_threads()), (a, b))[1], 10, 3)
        assert got == [(0, 3), (3, 6), (6, 9), (9, 10)]
        if before and max(before) > 1:  # BLAS held at one thread while blocks ran
            assert all(max(s) == 1 for s in seen)

        def bad(a: int, b: int) -> None:
            if a == 6:
                raise ValueError("block at 6 failed")

        with pytest.raises(ValueError, match="block at 6"):
            runner.run(bad, 10, 3)
        assert blas_threads() == before


def test_tiled_max_pool_grad_split_over_threads_matches_one_block(monkeypatch) -> None:
    """A batch large enough to be split into blocks of images on the block runner gives the
    gradient one block does, ties (all-zero windows after a relu) and the NaN fallback included."""
    x = np.maximum(RNG.standard_normal((9, 8, 6, 4)), 0).astype(np.float32)  # many ties at 0
    g = RNG.standard_normal((9, 4, 3, 4)).astype(np.float32)
    xn = x.copy()
    xn[4, 2, 2, 1] = np.nan  # one window's max is a NaN: the per-tap path takes over
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}

    def grads() -> list[np.ndarray]:
        with tf.Graph().as_default():
            outs = []
            for data in (x, xn):
                y = nn.max_pool(tf.constant(data), [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
                outs.append(make_op("MaxPoolGrad", [tf.constant(data), y, tf.constant(g)], attrs))
            return run(outs)

    whole = grads()
    monkeypatch.setattr(kparallel, "SPLIT_BYTES", 1)  # every batch split into blocks of images
    with threadpool_limits(2, user_api="blas"):
        split = grads()
    for a, b in zip(whole, split):
        np.testing.assert_array_equal(a, b)
    # the first maximum of each window takes the whole gradient; an all-zero window its first tap
    _, _, where = ref_pool(x, (2, 2), (2, 2), "VALID")
    np.testing.assert_allclose(split[0], ref_max_pool_grad(x, g, where), rtol=1e-6)

