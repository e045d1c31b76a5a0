"""The window geometry shared by the convolution and pooling kernels (NHWC data).

A ``Window`` (strides, dilations, padding; defined once in ``ops.nn``) and an input size give a
``Geometry``: the output size and the padding on each side. The helpers here pad a batch, view its
windows without copying (``windows``, or one tap at a time with ``tap_view``) and crop the padding
off again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tensorgrid.core import errors
from tensorgrid.core.registry import KernelContext
from tensorgrid.ops.nn import Window, parse_window


def window_of(ctx: KernelContext, dilated: bool) -> Window:
    """The node's Window; a malformed attr is an InvalidArgumentError naming the node."""
    try:
        return parse_window(ctx.attr, dilated)
    except ValueError as exc:
        raise ctx.error(errors.InvalidArgumentError, str(exc)) from None


class Geometry:
    """What one input size needs: output size, padding and the padded size."""

    __slots__ = ("h", "oh", "ow", "padded", "pads", "w")

    def __init__(self, win: Window, h: int, w: int, kh: int, kw: int) -> None:
        try:
            self.oh, self.ow, self.pads = win.output(h, w, kh, kw)
        except ValueError as exc:
            raise errors.InvalidArgumentError(str(exc)) from None
        pt, pb, pl, pr = self.pads
        self.h, self.w = h, w
        self.padded = (h + pt + pb, w + pl + pr)

    @property
    def has_padding(self) -> bool:
        return any(self.pads)


def geometry_cache(win: Window) -> Callable[[int, int, int, int], Geometry]:
    """``get(h, w, kh, kw) -> Geometry``, computed once per size (a training loop repeats them)."""
    cache: dict[tuple[int, int, int, int], Geometry] = {}

    def get(h: int, w: int, kh: int, kw: int) -> Geometry:
        key = (h, w, kh, kw)
        found = cache.get(key)
        if found is None:
            found = cache[key] = Geometry(win, h, w, kh, kw)
        return found

    return get


def pad(xp: Any, x: Any, geo: Geometry, fill: Any = 0) -> Any:
    """x with the geometry's padding around H and W (x itself when there is none)."""
    if not geo.has_padding:
        return x
    pt, pb, pl, pr = geo.pads
    n, h, w, c = x.shape
    out = xp.empty((n, h + pt + pb, w + pl + pr, c), dtype=x.dtype)
    # fill only the border: the interior is overwritten by x right after
    out[:, :pt] = fill
    out[:, pt + h:] = fill
    out[:, pt:pt + h, :pl] = fill
    out[:, pt:pt + h, pl + w:] = fill
    out[:, pt:pt + h, pl:pl + w, :] = x
    return out


def as_strided(xp: Any, a: Any, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    """A read-only strided view of ``a`` (numpy) or a plain one (array modules without the flag)."""
    if xp is np:
        return np.lib.stride_tricks.as_strided(a, shape, strides, writeable=False)
    return xp.lib.stride_tricks.as_strided(a, shape, strides)


def windows(xp: Any, xpad: Any, win: Window, geo: Geometry, kh: int, kw: int) -> Any:
    """A read-only (n, oh, ow, kh, kw, c) view of the windows of padded NHWC data (no copy)."""
    sn, sh, sw, sc = xpad.strides
    shape = (xpad.shape[0], geo.oh, geo.ow, kh, kw, xpad.shape[3])
    strides = (sn, sh * win.strides[0], sw * win.strides[1], sh * win.dilations[0],
               sw * win.dilations[1], sc)
    return as_strided(xp, xpad, shape, strides)


def row_windows(xp: Any, xpad: Any, win: Window, ow: int, kw: int) -> Any:
    """A read-only (n, padded h, ow, kw, c) view of padded NHWC data: for every padded row, the
    kw horizontal taps of each output column (the windows of a 1-row filter, every row kept)."""
    sn, sh, sw, sc = xpad.strides
    shape = (xpad.shape[0], xpad.shape[1], ow, kw, xpad.shape[3])
    return as_strided(xp, xpad, shape, (sn, sh, sw * win.strides[1], sw * win.dilations[1], sc))


def tap_view(a: Any, win: Window, geo: Geometry, i: int, j: int) -> Any:
    """The (n, oh, ow, c) slice of padded data that window tap (i, j) reads, as a basic-index view
    (writable when ``a`` is): the strided-slice form of one tap of ``windows``."""
    sh, sw = win.strides
    top, left = i * win.dilations[0], j * win.dilations[1]
    return a[:, top:top + sh * (geo.oh - 1) + 1:sh, left:left + sw * (geo.ow - 1) + 1:sw, :]


def crop(xp: Any, xpad: Any, geo: Geometry) -> Any:
    """The interior of padded data (a contiguous copy), or ``xpad`` itself without padding."""
    if not geo.has_padding:
        return xpad
    pt, _, pl, _ = geo.pads
    return xp.ascontiguousarray(xpad[:, pt:pt + geo.h, pl:pl + geo.w, :])


def int_sizes(v: Any, what: str) -> tuple[int, ...]:
    """The 4 sizes held by a shape tensor (input_sizes, filter_sizes, orig_input_shape).

    Raises:
        InvalidArgumentError: not 4 sizes, or a negative one.
    """
    sizes = tuple(int(d) for d in np.asarray(v).reshape(-1).tolist())
    if len(sizes) != 4 or min(sizes) < 0:
        raise errors.InvalidArgumentError(f"{what} must hold 4 non-negative sizes, got "
                                          f"{list(sizes)}")
    return sizes
