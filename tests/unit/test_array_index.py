"""Indexing ops: ``Tensor.__getitem__`` against numpy's basic indexing (hypothesis), Slice and
StridedSlice masks, gathers, scatters, segment sums, masks and ``unique``: values, dtypes,
(partial) shapes inferred while building, and errors at build and run time naming the node."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorgrid as tf
from tensorgrid.core import errors

RNG = np.random.default_rng(5)


def run(fetches: Any, feed: dict | None = None) -> Any:
    with tf.Session() as sess:
        out = sess.run(fetches, feed)
    pairs = zip(fetches, out) if isinstance(fetches, list) else [(fetches, out)]
    for t, v in pairs:  # kernels give what inference promised
        if not isinstance(v, bytes):
            assert np.asarray(v).dtype == t.dtype.np and t.shape.is_compatible_with(np.shape(v))
    return out


# ------------------------------------------------------------------------------ __getitem__


@st.composite
def index_keys(draw: Any) -> tuple[tuple[int, ...], tuple[Any, ...]]:
    """A shape and a valid numpy basic index for it: ints in range and slices (any bounds and
    steps) for some dims, at most one Ellipsis, and None anywhere."""
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=4)))
    rank = len(shape)
    k = draw(st.integers(0, rank))  # entries that use a dim
    ellipsis = draw(st.booleans())
    before = draw(st.integers(0, k)) if ellipsis else k
    dims = list(range(before)) + list(range(rank - (k - before), rank))
    bound = st.one_of(st.none(), st.integers(-6, 6))
    entries: list[Any] = []
    for d in dims:
        if shape[d] > 0 and draw(st.booleans()):
            entries.append(draw(st.integers(-shape[d], shape[d] - 1)))
        else:
            step = draw(st.one_of(st.none(), st.sampled_from([-3, -2, -1, 1, 2, 3])))
            entries.append(slice(draw(bound), draw(bound), step))
    if ellipsis:
        entries.insert(before, Ellipsis)
    for _ in range(draw(st.integers(0, 2))):
        entries.insert(draw(st.integers(0, len(entries))), None)
    return shape, tuple(entries)


@settings(max_examples=120, deadline=None)
@given(index_keys(), st.booleans())
def test_getitem_matches_numpy(case: tuple[tuple[int, ...], tuple[Any, ...]],
                               as_tensors: bool) -> None:
    shape, key = case
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    want = x[key]
    with tf.Graph().as_default():
        p = tf.placeholder(tf.float32, shape)
        feeds: dict = {p: x}
        tkey: list[Any] = []
        for k in key:  # optionally turn ints (and slice bounds) into int tensors fed at run time
            if as_tensors and isinstance(k, int):
                t = tf.placeholder(tf.int32, [])
                feeds[t] = k
                tkey.append(t)
            elif as_tensors and isinstance(k, slice) and k.start is not None:
                t = tf.placeholder(tf.int64, [])
                feeds[t] = k.start
                tkey.append(slice(t, k.stop, k.step))
            else:
                tkey.append(k)
        y = p[tuple(tkey)]
        assert y.shape.is_compatible_with(want.shape)
        if not as_tensors:
            assert y.shape.as_list() == list(want.shape)  # fully known while building
        with tf.Session() as sess:
            got = sess.run(y, feeds)
    assert np.shape(got) == want.shape
    np.testing.assert_array_equal(got, want)


def test_getitem_forms() -> None:
    x = np.arange(60).reshape(3, 4, 5).astype(np.int64)
    p = tf.placeholder(tf.int64, [None, 4, 5])
    i = tf.placeholder(tf.int32, [])
    cases = [
        (p[1], x[1]), (p[-1, :, ::-2], x[-1, :, ::-2]), (p[..., 1], x[..., 1]),
        (p[tf.newaxis, 0, ..., None], x[None, 0, ..., None]), (p[:, 1:3, -1], x[:, 1:3, -1]),
        (p[i], x[2]), (p[1:, i:], x[1:, 2:]), (p[::-1, ..., ::2], x[::-1, ..., ::2]),
        (p[()], x), (p[0, 0, 0], x[0, 0, 0]),
    ]
    assert cases[0][0].shape.as_list() == [4, 5]
    assert cases[1][0].shape.as_list() == [4, 3]
    assert cases[2][0].shape.as_list() == [None, 4]
    assert cases[5][0].shape.as_list() == [4, 5]
    assert cases[4][0].shape.as_list() == [None, 2]
    outs = run([c for c, _ in cases], {p: x, i: 2})
    for got, (_, want) in zip(outs, cases):
        np.testing.assert_array_equal(got, want)
        assert np.shape(got) == want.shape


def test_getitem_strings_and_bad_indices() -> None:
    s = tf.constant(np.array([[b"a", b"b"], [b"c", b"d"]], dtype=object))
    assert run(s[1, ::-1]).tolist() == [b"d", b"c"]
    assert run(s[0, 1]) == b"b"
    x = tf.zeros([2, 3])
    for bad in ([0, 1], 1.5, True, tf.constant([0, 1]), tf.constant(1.0)):
        with pytest.raises(TypeError, match="valid indices"):
            x[bad]
    with pytest.raises(errors.InvalidArgumentError, match="out of bounds"):
        x[2]
    with pytest.raises(errors.InvalidArgumentError, match="out of bounds"):
        x[:, -4]
    with pytest.raises(errors.InvalidArgumentError, match="Index out of range"):
        x[0, 0, 0]
    with pytest.raises(errors.InvalidArgumentError, match="non-zero"):
        x[::0]
    p = tf.placeholder(tf.float32, [None])
    with pytest.raises(errors.InvalidArgumentError, match="out of bounds") as info:
        run(p[3], {p: np.zeros(3, np.float32)})
    assert "strided_slice" in info.value.node_name


def test_strided_slice_masks_directly() -> None:
    x = np.arange(24).reshape(2, 3, 4).astype(np.float64)
    c = tf.constant(x)
    cases = [
        # begin, end, strides, masks (begin, end, ellipsis, new_axis, shrink), numpy key
        ([0, 1], [2, 3], [1, 1], (0, 0, 0, 0, 0), np.s_[0:2, 1:3]),
        ([1, 5], [0, -1], [1, 1], (0, 1, 0, 0, 1), np.s_[1, 5:]),
        ([0, 2], [0, 0], [1, -1], (1, 3, 1, 0, 0), np.s_[..., 2::-1]),
        ([0, 0, 1], [0, 0, 2], [1, 1, 1], (3, 3, 0, 2, 4), np.s_[:, None, 1]),
        # bits past the spec's length are ignored
        ([1], [2], [1], (2 ** 5, 2 ** 5, 2 ** 5, 2 ** 5, 2 ** 5), np.s_[1:2]),
    ]
    ts = [tf.strided_slice(c, b, e, s, *m) for b, e, s, m, _ in cases]
    outs = run(ts)
    for t, got, (*_, key) in zip(ts, outs, cases):
        np.testing.assert_array_equal(got, x[key])
        assert t.shape.as_list() == list(x[key].shape)
    with pytest.raises(errors.InvalidArgumentError, match="Multiple ellipses.*node 'ss'"):
        tf.strided_slice(c, [0, 0], [0, 0], [1, 1], ellipsis_mask=3, name="ss")
    with pytest.raises(errors.InvalidArgumentError, match="same length"):
        tf.strided_slice(c, [0, 0], [1], [1, 1])
    default_strides = tf.strided_slice(c, [1], [2])
    np.testing.assert_array_equal(run(default_strides), x[1:2])


def test_strided_slice_partial_shapes() -> None:
    p = tf.placeholder(tf.float32, [None, 5, None])
    assert p[:, 1:4].shape.as_list() == [None, 3, None]
    assert p[0, ::2, 1].shape.as_list() == [3]
    assert tf.placeholder(tf.float32)[0].shape.dims is None
    b = tf.placeholder(tf.int32, [2])
    y = tf.strided_slice(p, b, [3, 3], [1, 1], shrink_axis_mask=1)
    assert y.shape.as_list() == [None, None]
    assert tf.strided_slice(p, b, b, [1, -1], begin_mask=2, end_mask=2).shape.as_list() == \
        [None, 5, None]


def test_slice() -> None:
    x = np.arange(24).reshape(2, 3, 4).astype(np.int32)
    p = tf.placeholder(tf.int32, [None, 3, 4])
    y = tf.slice(p, [1, 0, 1], [-1, 2, 3])
    assert y.shape.as_list() == [None, 2, 3]
    s = tf.slice(tf.constant(np.array([[b"a", b"b", b"c"]], dtype=object)), [0, 1], [1, 2])
    b = tf.placeholder(tf.int32, [3])
    z = tf.slice(p, b, [1, 1, 1])
    assert z.shape.as_list() == [1, 1, 1]
    vy, vs, vz = run([y, s, z], {p: x, b: [1, 2, 3]})
    np.testing.assert_array_equal(vy, x[1:, 0:2, 1:4])
    assert vs.tolist() == [[b"b", b"c"]]
    np.testing.assert_array_equal(vz, x[1:2, 2:3, 3:4])
    with pytest.raises(errors.InvalidArgumentError, match=r"size\[1\].*node 'sl'"):
        tf.slice(p, [0, 2, 0], [1, 2, 1], name="sl")
    with pytest.raises(errors.InvalidArgumentError, match="begin and size"):
        tf.slice(p, [0, 0], [1, 1])
    with pytest.raises(errors.InvalidArgumentError, match=r"size\[0\]") as info:
        run(tf.slice(p, [1, 0, 0], [2, 1, 1], name="late"), {p: x})
    assert info.value.node_name == "late"
    with pytest.raises(errors.InvalidArgumentError, match=r"begin\[2\]"):
        run(z, {p: x, b: [0, 0, 5]})


# ------------------------------------------------------------------------------ gather


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, object])
def test_gather_dtypes_and_axes(dtype: Any) -> None:
    x = np.arange(24).reshape(2, 3, 4)
    x = x.astype(dtype) if dtype is not object else \
        np.array([str(v).encode() for v in x.ravel()], dtype=object).reshape(x.shape)
    p = tf.placeholder(tf.as_dtype(x.dtype), [None, 3, 4])
    idx = np.array([[2, 0], [1, 1]], np.int32)
    g0 = tf.gather(p, [1, 0, 1])
    g1 = tf.gather(p, idx, axis=1)
    g2 = tf.gather(p, tf.constant(np.array([3, 0], np.int64)), axis=-1)
    gs = tf.gather(p, 1, axis=1)
    assert g0.shape.as_list() == [3, 3, 4] and g1.shape.as_list() == [None, 2, 2, 4]
    assert g2.shape.as_list() == [None, 3, 2] and gs.shape.as_list() == [None, 4]
    outs = run([g0, g1, g2, gs], {p: x})
    for got, want in zip(outs, [x[[1, 0, 1]], np.take(x, idx, 1), x[..., [3, 0]], x[:, 1]]):
        np.testing.assert_array_equal(got, want)


def test_gather_batch_dims() -> None:
    x = RNG.standard_normal((2, 3, 4, 5))
    idx = np.array([[0, 2, 2], [1, 0, 1]], np.int32)
    p = tf.placeholder(tf.float64, [None, 3, 4, 5])
    g1 = tf.gather(p, idx, axis=1, batch_dims=1)
    g2 = tf.gather(p, idx, axis=2, batch_dims=1)
    g3 = tf.gather(p, idx, axis=-1, batch_dims=-1)
    assert g1.shape.as_list() == [2, 3, 4, 5] and g2.shape.as_list() == [2, 3, 3, 5]
    assert g3.shape.as_list() == [2, 3, 4, 3]
    a, b, c = run([g1, g2, g3], {p: x})
    np.testing.assert_array_equal(a, np.stack([x[i][idx[i]] for i in range(2)]))
    np.testing.assert_array_equal(b, np.stack([x[i][:, idx[i]] for i in range(2)]))
    np.testing.assert_array_equal(c, np.stack([x[i][..., idx[i]] for i in range(2)]))
    with pytest.raises(errors.InvalidArgumentError, match="batch_dims"):
        tf.gather(p, idx, axis=0, batch_dims=1)


def test_gather_errors() -> None:
    p = tf.placeholder(tf.float32, [3, 2])
    with pytest.raises(errors.InvalidArgumentError, match=r"axis in the range.*node 'g'"):
        tf.gather(p, [0], axis=2, name="g")
    with pytest.raises(errors.InvalidArgumentError, match="int32 or int64"):
        tf.gather(p, [0.0])
    i = tf.placeholder(tf.int32, [None])
    y = tf.gather(p, i, name="late")
    x = np.zeros((3, 2), np.float32)
    for bad, where in (([0, 3], r"indices\[1\] = 3 is not in \[0, 3\)"), ([-1], "-1")):
        with pytest.raises(errors.InvalidArgumentError, match=where) as info:
            run(y, {p: x, i: bad})
        assert info.value.node_name == "late"


def test_gather_nd() -> None:
    x = np.arange(24).reshape(2, 3, 4).astype(np.float32)
    p = tf.placeholder(tf.float32, [None, 3, 4])
    full = tf.gather_nd(p, [[0, 1, 2], [1, 2, 3]])
    rows = tf.gather_nd(p, [[[1, 0]], [[0, 2]]])
    strs = tf.gather_nd(tf.constant(np.array([[b"a", b"b"]], dtype=object)), [[0, 1]])
    assert full.shape.as_list() == [2] and rows.shape.as_list() == [2, 1, 4]
    a, b, c = run([full, rows, strs], {p: x})
    np.testing.assert_array_equal(a, [x[0, 1, 2], x[1, 2, 3]])
    np.testing.assert_array_equal(b, [[x[1, 0]], [x[0, 2]]])
    assert c.tolist() == [b"b"]
    with pytest.raises(errors.InvalidArgumentError, match="params.rank"):
        tf.gather_nd(p, [[0, 0, 0, 0]])
    with pytest.raises(errors.InvalidArgumentError, match="does not index"):
        run(tf.gather_nd(p, [[2, 0]]), {p: x})


def test_scatter_nd_and_unsorted_segment_sum() -> None:
    upd = np.array([1.0, 2.0, 3.0, 4.0])
    s = tf.scatter_nd([[1], [3], [1], [0]], upd, [5])
    rows = tf.scatter_nd([[0, 1], [1, 0]], np.ones((2, 3)), tf.constant([2, 2, 3]))
    assert s.shape.as_list() == [5] and rows.shape.as_list() == [2, 2, 3]
    data = np.arange(12.0).reshape(2, 3, 2)
    ids = np.array([[0, 2, -1], [2, 2, 0]], np.int32)
    p = tf.placeholder(tf.float64, [None, 3, 2])
    seg = tf.unsorted_segment_sum(p, ids, 4)
    seg_int = tf.unsorted_segment_sum(tf.constant([1, 2, 3]), [1, 1, 0], 2)
    assert seg.shape.as_list() == [4, 2]
    a, b, c, d = run([s, rows, seg, seg_int], {p: data})
    np.testing.assert_array_equal(a, [4.0, 4.0, 0.0, 2.0, 0.0])
    want_rows = np.zeros((2, 2, 3))
    want_rows[0, 1] = want_rows[1, 0] = 1
    np.testing.assert_array_equal(b, want_rows)
    want = np.zeros((4, 2))
    for (i, j), k in np.ndenumerate(ids):
        if k >= 0:
            want[k] += data[i, j]
    np.testing.assert_array_equal(c, want)
    np.testing.assert_array_equal(d, [3, 3])
    assert d.dtype == np.int32
    with pytest.raises(errors.InvalidArgumentError, match="does not start with"):
        tf.unsorted_segment_sum(p, [[0, 1]], 2)
    with pytest.raises(errors.InvalidArgumentError, match="out of range") as info:
        run(tf.unsorted_segment_sum(p, ids, 2, name="seg"), {p: data})
    assert info.value.node_name == "seg"
    with pytest.raises(errors.InvalidArgumentError, match="must have shape"):
        tf.scatter_nd([[0]], np.ones(2), [2, 3])


# ------------------------------------------------------------------------------ masks / unique


def test_boolean_mask() -> None:
    x = RNG.standard_normal((3, 4, 2))
    p = tf.placeholder(tf.float64, [None, 4, 2])
    m1 = np.array([True, False, True])
    m2 = RNG.random((3, 4)) > 0.5
    a = tf.boolean_mask(p, m1)
    b = tf.boolean_mask(p, tf.constant(m2))
    c = tf.boolean_mask(p, [True, False, False, True], axis=1)
    d = tf.boolean_mask(tf.constant(x), m2)
    assert a.shape.as_list() == [None, 4, 2] and c.shape.as_list() == [None, None, 2]
    assert d.shape.as_list() == [None, 2]
    outs = run([a, b, c, d], {p: x})
    for got, want in zip(outs, [x[m1], x[m2], x[:, [True, False, False, True]], x[m2]]):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="scalar"):
        tf.boolean_mask(p, True)
    with pytest.raises(ValueError, match="incompatible"):
        tf.boolean_mask(p, [[True, False]])
    with pytest.raises(ValueError, match="mask dimensions"):
        tf.boolean_mask(p, tf.placeholder(tf.bool))


def test_sequence_mask_and_unique() -> None:
    lens = tf.placeholder(tf.int32, [None])
    m = tf.sequence_mask(lens, 4)
    mf = tf.sequence_mask(lens, dtype=tf.float32)
    u = tf.unique(tf.constant([4, 1, 4, 7, 1, 1]))
    us = tf.unique(tf.constant(np.array([b"x", b"y", b"x"], dtype=object)), out_idx=tf.int64)
    vm, vmf, y, idx, ys, idxs = run([m, mf, u.y, u.idx, us.y, us.idx], {lens: [1, 3, 0]})
    np.testing.assert_array_equal(vm, np.arange(4) < np.array([1, 3, 0])[:, None])
    np.testing.assert_array_equal(vmf, (np.arange(3) < np.array([1, 3, 0])[:, None]) * 1.0)
    np.testing.assert_array_equal(y, [4, 1, 7])
    np.testing.assert_array_equal(idx, [0, 1, 0, 2, 1, 1])
    assert ys.tolist() == [b"x", b"y"] and idxs.tolist() == [0, 1, 0] and idxs.dtype == np.int64
    with pytest.raises(errors.InvalidArgumentError, match="1D"):
        tf.unique(tf.zeros([2, 2]))
