"""``kernels.conv.conv_by_filter_rows`` (a convolution as one matmul per filter row over copies of
the horizontal taps only, which the input gradient of a stride-1 convolution runs as) against a
direct sum over the filter's taps: padding on every side, horizontal strides, dilations, odd
sizes, batch 1, one channel, a one-row filter, dtypes, and blocks of images on threads."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import tensorgrid.kernels.conv as kconv
from tensorgrid.kernels.windows import Geometry
from tensorgrid.ops.nn import Window

RNG = np.random.default_rng(31)


def ref_conv(x: np.ndarray, f: np.ndarray, win: Window, geo: Geometry) -> np.ndarray:
    """Sum over taps in float64: tap (i, j) of output (y, q) reads padded (y + i*dh, q*sw + j*dw)."""
    pt, pb, pl, pr = geo.pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    (_, sw), (dh, dw) = win.strides, win.dilations
    out = np.zeros((x.shape[0], geo.oh, geo.ow, f.shape[3]))
    for i in range(f.shape[0]):
        for j in range(f.shape[1]):
            tap = xp[:, i * dh:i * dh + geo.oh, j * dw:j * dw + sw * (geo.ow - 1) + 1:sw, :]
            out += np.einsum("nhwc,co->nhwo", tap, f[i, j].astype(np.float64))
    return out


# (batch, h, w, c, kh, kw, oc, horizontal stride, dilations, padding)
CASES = [
    (2, 7, 6, 8, 3, 3, 5, 1, (1, 1), "SAME"),
    (1, 9, 5, 3, 5, 5, 4, 1, (1, 1), "SAME"),  # batch 1, filter wider than half the input
    (3, 8, 9, 4, 3, 2, 6, 2, (1, 1), "VALID"),
    (2, 9, 10, 5, 2, 3, 3, 1, (2, 3), "SAME"),
    (1, 6, 7, 1, 3, 3, 2, 1, (1, 1), (2, 0, 1, 2)),  # one channel, uneven explicit padding
    (2, 5, 6, 6, 1, 3, 4, 1, (1, 1), "VALID"),  # one filter row: no sum
]


def window(stride: int, dil: tuple[int, int], padding) -> Window:
    if isinstance(padding, tuple):
        return Window((1, stride), dil, "EXPLICIT", padding)
    return Window((1, stride), dil, padding)


@pytest.mark.parametrize("case", CASES)
def test_conv_by_filter_rows_matches_a_sum_over_taps(case) -> None:
    n, h, w, c, kh, kw, oc, sw, dil, padding = case
    x = RNG.standard_normal((n, h, w, c)).astype(np.float32)
    f = RNG.standard_normal((kh, kw, c, oc)).astype(np.float32)
    win = window(sw, dil, padding)
    geo = Geometry(win, h, w, kh, kw)
    got = kconv.conv_by_filter_rows(np, x, f, win, geo, kconv._Scratch(np))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref_conv(x, f, win, geo), rtol=1e-5, atol=1e-5)
    # the same as the im2col path
    np.testing.assert_allclose(got, kconv.conv_forward(np, x, f, win, geo, kconv._Scratch(np)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,tol", [(np.float16, 2e-2), (np.float64, 1e-12)])
def test_conv_by_filter_rows_keeps_the_dtype(dtype, tol) -> None:
    x = RNG.standard_normal((2, 6, 5, 3)).astype(dtype)
    f = RNG.standard_normal((3, 3, 3, 4)).astype(dtype)
    win = Window((1, 1), (1, 1), "SAME")
    geo = Geometry(win, 6, 5, 3, 3)
    got = kconv.conv_by_filter_rows(np, x, f, win, geo, kconv._Scratch(np))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, ref_conv(x, f, win, geo), rtol=tol, atol=tol)


def test_conv_by_filter_rows_in_blocks_on_threads(monkeypatch) -> None:
    """Every image its own block, the blocks on two threads, each with its own scratch: the
    whole batch's result (up to BLAS's summation order)."""
    x = RNG.standard_normal((7, 6, 6, 8)).astype(np.float32)
    f = RNG.standard_normal((3, 3, 8, 5)).astype(np.float32)
    win = Window((1, 1), (1, 1), "SAME")
    geo = Geometry(win, 6, 6, 3, 3)
    whole = kconv.conv_by_filter_rows(np, x, f, win, geo, kconv._Scratch(np))
    monkeypatch.setattr(kconv, "BLOCK_BYTES", 1)
    monkeypatch.setattr(kconv, "MIN_ROWS", 1)
    scratch = kconv._Scratch(np)
    with threadpool_limits(2, user_api="blas"):
        for _ in range(2):  # again with the scratch already made
            np.testing.assert_allclose(
                kconv.conv_by_filter_rows(np, x, f, win, geo, scratch), whole, rtol=1e-6,
                atol=1e-6)
    empty = kconv.conv_by_filter_rows(np, x[:0], f, win, geo, scratch)
    assert empty.shape == (0, 6, 6, 5)
