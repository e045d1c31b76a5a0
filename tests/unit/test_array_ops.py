"""Array ops: values against numpy over several dtypes (strings where TensorFlow allows them),
the dtypes and (partial) shapes inferred while building, and errors at build and run time naming
the node. (Indexing ops are tested in test_array_index.py.)"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.core import errors

RNG = np.random.default_rng(11)
STR = np.array([[b"a", b"bb", b"c"], [b"d", b"", b"ff"]], dtype=object)


def _flat(x: Any) -> list[Any]:
    if isinstance(x, dict):
        return [v for k in x for v in _flat(x[k])]
    if isinstance(x, list | tuple):
        return [v for i in x for v in _flat(i)]
    return [x]


def run(fetches: Any, feed: dict | None = None) -> Any:
    """Run, and check every fetched value against its tensor's inferred dtype and shape."""
    with tf.Session() as sess:
        out = sess.run(fetches, feed)
    for t, v in zip(_flat(fetches), _flat(out)):
        if isinstance(t, tf.Tensor) and not isinstance(v, bytes):
            assert np.asarray(v).dtype == t.dtype.np, (t, np.asarray(v).dtype)
            assert t.shape.is_compatible_with(np.shape(v)), (t, np.shape(v))
    return out


def ph(value: np.ndarray, shape: Any = "same") -> tuple[tf.Tensor, dict]:
    """A placeholder for ``value`` (its full shape, or ``shape``) and the feed for it."""
    p = tf.placeholder(tf.as_dtype(value.dtype), value.shape if shape == "same" else shape)
    return p, {p: value}


def sample(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    if dtype is object:
        return np.array([str(i).encode() for i in range(int(np.prod(shape)))],
                        dtype=object).reshape(shape)
    if np.dtype(dtype) == np.bool_:
        return RNG.random(shape) > 0.5
    return (RNG.standard_normal(shape) * 10).astype(dtype)


DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_, object]


# ------------------------------------------------------------------------------ shapes


def test_shape_size_rank_and_shape_n() -> None:
    x = sample((2, 3, 4), np.float32)
    p, feed = ph(x, [None, 3, None])
    s, n, r = tf.shape(p), tf.size(p, out_type=tf.int64), tf.rank(p)
    a, b = tf.shape_n([p, p[0]], out_type=tf.int64)
    assert s.shape.as_list() == [3] and n.dtype is tf.int64 and r.shape.as_list() == []
    vs, vn, vr, va, vb = run([s, n, r, a, b], feed)
    np.testing.assert_array_equal(vs, [2, 3, 4])
    assert vs.dtype == np.int32 and vn == 24 and vr == 3
    np.testing.assert_array_equal(vb, [3, 4])
    assert va.dtype == np.int64
    unknown = tf.placeholder(tf.float32)
    assert tf.shape(unknown).shape.as_list() == [None]


# ------------------------------------------------------------------------------ reshape


@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_values_every_dtype(dtype: Any) -> None:
    x = sample((2, 3, 4), dtype)
    p, feed = ph(x, [None, 3, 4])
    y = tf.reshape(p, [-1, 2])
    assert y.shape.as_list() == [None, 2] and y.dtype is p.dtype
    np.testing.assert_array_equal(run(y, feed), x.reshape(-1, 2))


def test_reshape_static_and_dynamic_targets() -> None:
    x = sample((2, 3, 4), np.float32)
    assert tf.reshape(tf.constant(x), [4, -1]).shape.as_list() == [4, 6]
    assert tf.reshape(tf.constant(x), tf.TensorShape([6, 4])).shape.as_list() == [6, 4]
    p, feed = ph(x)
    target = tf.placeholder(tf.int32, [3])
    y = tf.reshape(p, target)
    assert y.shape.as_list() == [None, None, None]
    out = run(y, {**feed, target: [3, -1, 2]})
    np.testing.assert_array_equal(out, x.reshape(3, -1, 2))


def test_reshape_errors_name_the_node() -> None:
    x = tf.constant(np.zeros((2, 3)))
    with pytest.raises(errors.InvalidArgumentError, match=r"6 values.*node 'bad'"):
        tf.reshape(x, [4, 2], name="bad")
    with pytest.raises(errors.InvalidArgumentError, match="only infer one"):
        tf.reshape(x, [-1, -1])
    with pytest.raises(errors.InvalidArgumentError, match="not compatible"):
        tf.reshape(x, [4, -1])
    with pytest.raises(errors.InvalidArgumentError, match="int32 or int64"):
        tf.reshape(x, tf.constant([6.0]))
    p = tf.placeholder(tf.float32)
    y = tf.reshape(p, [5], name="late")
    with pytest.raises(errors.InvalidArgumentError, match="6 values") as info:
        run(y, {p: np.zeros((2, 3), np.float32)})
    assert info.value.node_name == "late"


def test_expand_dims_and_squeeze() -> None:
    x = sample((2, 1, 3), np.int64)
    p, feed = ph(x, [None, 1, 3])
    e0, e1 = tf.expand_dims(p, 0), tf.expand_dims(p, axis=-1)
    s_all, s1 = tf.squeeze(tf.constant(x)), tf.squeeze(p, [-2])
    assert e0.shape.as_list() == [1, None, 1, 3] and e1.shape.as_list() == [None, 1, 3, 1]
    assert s_all.shape.as_list() == [2, 3] and s1.shape.as_list() == [None, 3]
    assert tf.squeeze(p).shape.dims is None  # which dims are 1 is known only at run time
    outs = run([e0, e1, s_all, s1, tf.squeeze(p), tf.expand_dims(p, dim=3)], feed)
    for got, want in zip(outs, [x[None], x[..., None], x.squeeze(), x.squeeze(-2),
                                x.squeeze(), x[..., None]]):
        np.testing.assert_array_equal(got, want)
        assert got.shape == want.shape


def test_expand_dims_and_squeeze_errors() -> None:
    x = tf.constant(np.zeros((2, 1, 3)))
    with pytest.raises(errors.InvalidArgumentError, match="expand dim index 4.*node 'e'"):
        tf.expand_dims(x, 4, name="e")
    with pytest.raises(errors.InvalidArgumentError, match=r"squeeze dim\[2\].*got 3"):
        tf.squeeze(x, [2])
    with pytest.raises(errors.InvalidArgumentError, match="squeeze dim index 3"):
        tf.squeeze(x, [3])
    with pytest.raises(ValueError, match="axis"):
        tf.expand_dims(x)
    p = tf.placeholder(tf.float32, [None, None])
    with pytest.raises(errors.InvalidArgumentError, match="squeeze") as info:
        run(tf.squeeze(p, [1], name="sq"), {p: np.zeros((2, 2), np.float32)})
    assert info.value.node_name == "sq"


# ------------------------------------------------------------------------------ transpose


@pytest.mark.parametrize("dtype", [np.float32, np.int32, object])
def test_transpose(dtype: Any) -> None:
    x = sample((2, 3, 4), dtype)
    p, feed = ph(x, [2, None, 4])
    t_def, t_perm = tf.transpose(p), tf.transpose(p, [1, 2, 0])
    assert t_def.shape.as_list() == [4, None, 2] and t_perm.shape.as_list() == [None, 4, 2]
    a, b = run([t_def, t_perm], feed)
    np.testing.assert_array_equal(a, x.T)
    np.testing.assert_array_equal(b, x.transpose(1, 2, 0))


def test_transpose_of_unknown_rank_and_dynamic_perm() -> None:
    x = sample((2, 3, 4), np.float32)
    p = tf.placeholder(tf.float32)
    perm = tf.placeholder(tf.int32, [3])
    assert tf.transpose(p, perm).shape.as_list() == [None, None, None]
    a, b = run([tf.transpose(p), tf.transpose(p, perm)], {p: x, perm: [2, 0, 1]})
    np.testing.assert_array_equal(a, x.T)
    np.testing.assert_array_equal(b, x.transpose(2, 0, 1))


def test_conjugate_transpose_and_invert_permutation() -> None:
    z = (RNG.standard_normal((2, 3)) + 1j * RNG.standard_normal((2, 3))).astype(np.complex64)
    y = tf.transpose(tf.constant(z), conjugate=True)
    assert y.op.type == "ConjugateTranspose"
    inv = tf.invert_permutation([2, 0, 3, 1])
    a, b = run([y, inv])
    np.testing.assert_array_equal(a, z.conj().T)
    np.testing.assert_array_equal(b, np.argsort([2, 0, 3, 1]))
    p = tf.placeholder(tf.int32, [None])
    with pytest.raises(errors.InvalidArgumentError, match="duplicate"):
        run(tf.invert_permutation(p), {p: [0, 0, 1]})
    with pytest.raises(errors.InvalidArgumentError, match="permutation"):
        tf.transpose(tf.constant(z), [0, 0])
    with pytest.raises(errors.InvalidArgumentError, match="size 2"):
        tf.transpose(tf.constant(z), [0, 1, 2])


# ------------------------------------------------------------------------------ concat / stack


@pytest.mark.parametrize("dtype", DTYPES)
def test_concat_every_dtype(dtype: Any) -> None:
    a, b = sample((2, 3), dtype), sample((2, 1), dtype)
    pa, fa = ph(a, [None, 3])
    pb, fb = ph(b, [None, None])
    y = tf.concat([pa, pb], -1)
    assert y.shape.as_list() == [None, None] and y.dtype is pa.dtype
    np.testing.assert_array_equal(run(y, {**fa, **fb}), np.concatenate([a, b], -1))
    z = tf.concat([tf.constant(a), tf.constant(a)], 0)
    assert z.shape.as_list() == [4, 3]


def test_concat_partial_shapes_and_single_value() -> None:
    p = tf.placeholder(tf.float32, [None, 3])
    q = tf.placeholder(tf.float32, [2, None])
    assert tf.concat([p, q], 0).shape.as_list() == [None, 3]
    assert tf.concat([p, q], 1).shape.as_list() == [2, None]
    assert tf.concat([q, q], 0).shape.as_list() == [4, None]
    assert tf.concat([p, tf.placeholder(tf.float32)], 1).shape.as_list() == [None, None]
    axis = tf.placeholder(tf.int32, [])
    assert tf.concat([p, q], axis).shape.as_list() == [None, None]
    one = tf.concat([p], 0)
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(run(one, {p: x}), x)


def test_concat_errors() -> None:
    a = tf.constant(np.zeros((2, 3)))
    b = tf.constant(np.zeros((3, 3)))
    with pytest.raises(errors.InvalidArgumentError, match=r"Dimension 0.*node 'cat'"):
        tf.concat([a, b], 1, name="cat")
    with pytest.raises(errors.InvalidArgumentError, match="range"):
        tf.concat([a, b], 2)
    with pytest.raises(errors.InvalidArgumentError, match="rank"):
        tf.concat([a, tf.constant(np.zeros(3))], 0)
    with pytest.raises(errors.InvalidArgumentError, match="scalars"):
        tf.concat([tf.constant(1.0), tf.constant(2.0)], 0)
    with pytest.raises(errors.InvalidArgumentError, match="dtype"):
        tf.concat([a, tf.constant(np.zeros((2, 3), np.int32))], 0)
    p = tf.placeholder(tf.float64, [None, 3])
    with pytest.raises(errors.InvalidArgumentError) as info:
        run(tf.concat([a, p], 1, name="late"), {p: np.zeros((4, 3))})
    assert info.value.node_name == "late"


@pytest.mark.parametrize("dtype", [np.float32, np.int64, object])
def test_stack_unstack(dtype: Any) -> None:
    a, b = sample((2, 3), dtype), sample((2, 3), dtype)
    pa, fa = ph(a, [None, 3])
    s = tf.stack([pa, tf.constant(b)], axis=-1)
    assert s.shape.as_list() == [2, 3, 2]
    parts = tf.unstack(tf.constant(a), axis=-1)
    assert len(parts) == 3 and parts[0].shape.as_list() == [2]
    outs = run([s, *parts, tf.unstack(pa, num=2)[1]], fa)
    np.testing.assert_array_equal(outs[0], np.stack([a, b], -1))
    for k in range(3):
        np.testing.assert_array_equal(outs[1 + k], a[:, k])
    np.testing.assert_array_equal(outs[4], a[1])


def test_stack_unstack_errors() -> None:
    with pytest.raises(errors.InvalidArgumentError, match="Shapes of all inputs"):
        tf.stack([tf.zeros([2]), tf.zeros([3])])
    with pytest.raises(errors.InvalidArgumentError, match="axis 3"):
        tf.stack([tf.zeros([2]), tf.zeros([2])], axis=3)
    with pytest.raises(ValueError, match="Cannot infer num"):
        tf.unstack(tf.placeholder(tf.float32, [None, 2]))
    p = tf.placeholder(tf.float32, [None])
    with pytest.raises(errors.InvalidArgumentError, match="num = 2"):
        run(tf.unstack(p, num=2)[0], {p: np.zeros(3, np.float32)})


def test_split_equal_and_sized() -> None:
    x = sample((4, 6), np.float64)
    p, feed = ph(x, [None, 6])
    halves = tf.split(p, 2, axis=1)
    sized = tf.split(p, [1, -1, 2], axis=-1)
    by_tensor = tf.split(p, tf.constant([2, 4]), 1)
    assert [h.shape.as_list() for h in halves] == [[None, 3]] * 2
    assert [s.shape.as_list() for s in sized] == [[None, 1], [None, 3], [None, 2]]
    outs = run([*halves, *sized, *by_tensor, tf.split(p, 1)[0]], feed)
    refs = [*np.split(x, 2, 1), *np.split(x, [1, 4], 1), *np.split(x, [2], 1), x]
    for got, want in zip(outs, refs):
        np.testing.assert_array_equal(got, want)


def test_split_errors() -> None:
    x = tf.constant(np.zeros((4, 5)))
    with pytest.raises(errors.InvalidArgumentError, match=r"evenly divide.*node 'sp'"):
        tf.split(x, 2, axis=1, name="sp")
    with pytest.raises(errors.InvalidArgumentError, match="Determined shape"):
        tf.split(x, [1, 2], axis=1)
    with pytest.raises(errors.InvalidArgumentError, match="one dimension"):
        tf.split(x, [-1, -1, 5], axis=1)
    with pytest.raises(errors.InvalidArgumentError, match="split_dim 2"):
        tf.split(x, 2, axis=2)
    with pytest.raises(ValueError, match="num"):
        tf.split(x, tf.placeholder(tf.int32, [None]), axis=1)
    p = tf.placeholder(tf.float32, [None])
    with pytest.raises(errors.InvalidArgumentError, match="evenly"):
        run(tf.split(p, 2), {p: np.zeros(3, np.float32)})
    with pytest.raises(errors.InvalidArgumentError, match="Determined shape"):
        run(tf.split(p, [1, 1]), {p: np.zeros(3, np.float32)})


# ------------------------------------------------------------------------------ tile / pad


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, object])
def test_tile(dtype: Any) -> None:
    x = sample((2, 3), dtype)
    p, feed = ph(x, [None, 3])
    y = tf.tile(p, [2, 3])
    assert y.shape.as_list() == [None, 9]
    np.testing.assert_array_equal(run(y, feed), np.tile(x, (2, 3)))
    with pytest.raises(errors.InvalidArgumentError, match="length 2"):
        tf.tile(p, [2])
    m = tf.placeholder(tf.int32, [None])
    with pytest.raises(errors.InvalidArgumentError, match="multiples"):
        run(tf.tile(p, m), {**feed, m: [1, 2, 3]})


@pytest.mark.parametrize("dtype", [np.float32, np.int64, object])
def test_pad_constant(dtype: Any) -> None:
    x = sample((2, 3), dtype)
    p, feed = ph(x, [None, 3])
    y = tf.pad(p, [[1, 0], [2, 1]])
    assert y.shape.as_list() == [None, 6] and y.op.type == "Pad"
    fill_value = b"" if dtype is object else 0
    want = np.full((3, 6), fill_value, dtype=x.dtype)
    want[1:, 2:5] = x
    np.testing.assert_array_equal(run(y, feed), want)


def test_pad_v2_and_mirror_modes() -> None:
    x = sample((3, 4), np.float64)
    p, feed = ph(x)
    pads = [[1, 2], [2, 1]]
    outs = run([tf.pad(p, pads, constant_values=7.5), tf.pad(p, pads, "REFLECT"),
                tf.pad(p, [[3, 1], [0, 4]], mode="symmetric")], feed)
    np.testing.assert_array_equal(outs[0], np.pad(x, pads, constant_values=7.5))
    np.testing.assert_array_equal(outs[1], np.pad(x, pads, mode="reflect"))
    np.testing.assert_array_equal(outs[2], np.pad(x, [[3, 1], [0, 4]], mode="symmetric"))
    s = tf.pad(tf.constant(STR), [[0, 1], [1, 0]], constant_values="z")
    assert run(s)[2, 0] == b"z"


def test_pad_of_a_string_scalar_keeps_the_element() -> None:
    # a rank-0 string input: the padded copy holds the string itself (constant folding hashes it)
    s = tf.pad(tf.constant(b"ab"), tf.zeros([0, 2], tf.int32))
    out = run([s, tf.strings.join([s, s])])
    assert out[0] == b"ab" and type(out[0]) is bytes and out[1] == b"abab"


def test_pad_errors() -> None:
    x = tf.constant(np.zeros((2, 3)))
    with pytest.raises(errors.InvalidArgumentError, match="rank of inputs"):
        tf.pad(x, [[1, 1]])
    with pytest.raises(errors.InvalidArgumentError, match="non-negative"):
        tf.pad(x, [[1, -1], [0, 0]])
    with pytest.raises(errors.InvalidArgumentError, match="REFLECT.*node 'mp'"):
        tf.pad(x, [[2, 0], [0, 0]], "REFLECT", name="mp")
    with pytest.raises(ValueError, match="mode"):
        tf.pad(x, [[0, 0], [0, 0]], "WRAP")
    p = tf.placeholder(tf.float64, [None, 3])
    with pytest.raises(errors.InvalidArgumentError, match="too large"):
        run(tf.pad(p, [[0, 2], [0, 0]], "SYMMETRIC"), {p: np.zeros((1, 3))})


# ------------------------------------------------------------------------------ fill / zeros


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64, tf.int32, tf.int64, tf.bool])
def test_zeros_ones_fill(dtype: tf.DType) -> None:
    z, o = tf.zeros([2, 3], dtype), tf.ones((4,), dtype)
    assert z.op.type == "Const" and z.dtype is dtype and z.shape.as_list() == [2, 3]
    big = tf.zeros([40, 40], dtype)
    assert big.op.type == "Fill" and big.shape.as_list() == [40, 40]
    n = tf.placeholder(tf.int32, [])
    dyn = tf.ones(tf.stack([n, 2]), dtype)
    assert dyn.op.type == "Fill" and dyn.shape.as_list() == [None, None]
    vz, vo, vb, vd = run([z, o, big, dyn], {n: 3})
    np.testing.assert_array_equal(vz, np.zeros((2, 3), dtype.np))
    np.testing.assert_array_equal(vo, np.ones(4, dtype.np))
    np.testing.assert_array_equal(vb, np.zeros((40, 40), dtype.np))
    np.testing.assert_array_equal(vd, np.ones((3, 2), dtype.np))
    f = tf.fill([2, 2], tf.constant(np.ones((), dtype.np)))
    assert run(f).dtype == dtype.np


def test_fill_strings_and_errors() -> None:
    np.testing.assert_array_equal(run(tf.fill([2], "ab")), np.array([b"ab", b"ab"], object))
    assert run(tf.zeros([2], tf.string)).tolist() == [b"", b""]
    with pytest.raises(errors.InvalidArgumentError, match="scalar"):
        tf.fill([2], [1.0, 2.0])
    with pytest.raises(errors.InvalidArgumentError, match="non-negative"):
        tf.fill([-1], 1.0)
    d = tf.placeholder(tf.int32, [None])
    with pytest.raises(errors.InvalidArgumentError, match="non-negative"):
        run(tf.fill(d, 1.0), {d: [2, -3]})


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_zeros_like_ones_like(dtype: Any) -> None:
    x = sample((2, 3), dtype)
    p, feed = ph(x, [None, 3])
    zl, ol = tf.zeros_like(p), tf.ones_like(p, dtype=tf.float64)
    static = tf.zeros_like(tf.constant(x))
    assert zl.op.type == "ZerosLike" and zl.dtype is p.dtype and ol.dtype is tf.float64
    assert static.op.type == "Const" and static.shape.as_list() == [2, 3]
    vz, vo, vs = run([zl, ol, static], feed)
    np.testing.assert_array_equal(vz, np.zeros_like(x))
    np.testing.assert_array_equal(vo, np.ones((2, 3)))
    np.testing.assert_array_equal(vs, np.zeros_like(x))
    assert tf.ones_like(p, optimize=False).op.type == "OnesLike"


# ------------------------------------------------------------------------------ one_hot / range


def test_one_hot() -> None:
    idx = np.array([[0, 2], [5, -1]], np.int32)
    p, feed = ph(idx)
    last = tf.one_hot(p, 3)
    first = tf.one_hot(p, 3, on_value=5, off_value=-1, axis=0)
    mid = tf.one_hot(tf.constant(idx.astype(np.int64)), 4, axis=1, dtype=tf.float64)
    assert last.shape.as_list() == [2, 2, 3] and last.dtype is tf.float32
    assert first.shape.as_list() == [3, 2, 2] and first.dtype is tf.int32
    assert mid.shape.as_list() == [2, 4, 2] and mid.dtype is tf.float64
    a, b, c = run([last, first, mid], feed)
    eye = np.eye(3, dtype=np.float32)
    ref = np.where((idx[..., None] >= 0) & (idx[..., None] < 3), eye[np.clip(idx, 0, 2)], 0)
    np.testing.assert_array_equal(a, ref)
    np.testing.assert_array_equal(b, np.where(np.moveaxis(ref, -1, 0) > 0, 5, -1))
    np.testing.assert_array_equal(c, (idx[:, None, :] == np.arange(4)[None, :, None]))
    with pytest.raises(TypeError, match="on_value"):
        tf.one_hot(p, 3, on_value=tf.constant(1.0), dtype=tf.int32)
    with pytest.raises(errors.InvalidArgumentError, match="axis"):
        tf.one_hot(p, 3, axis=4)
    b_hot = tf.one_hot([1], 2, dtype=tf.bool)
    assert run(b_hot).tolist() == [[False, True]]


def test_range_values_and_dtypes() -> None:
    cases = [
        (tf.range(5), np.arange(5, dtype=np.int32)),
        (tf.range(2, 11, 3), np.arange(2, 11, 3, dtype=np.int32)),
        (tf.range(10, 2, -3), np.arange(10, 2, -3, dtype=np.int32)),
        (tf.range(0, 1, 0.25), np.arange(0, 1, 0.25, dtype=np.float32)),
        (tf.range(3, dtype=tf.float64), np.arange(3, dtype=np.float64)),
        (tf.range(tf.constant(4, tf.int64)), np.arange(4, dtype=np.int64)),
        (tf.range(1, tf.constant(2.5, tf.float64)), np.arange(1, 2.5, dtype=np.float64)),
        (tf.range(3, 3), np.zeros(0, np.int32)),
    ]
    for t, want in cases:
        assert t.shape.as_list() == [len(want)] and t.dtype.np == want.dtype
    outs = run([t for t, _ in cases])
    for got, (_, want) in zip(outs, cases):
        np.testing.assert_allclose(got, want)
    n = tf.placeholder(tf.int32, [])
    r = tf.range(n)
    assert r.shape.as_list() == [None]
    np.testing.assert_array_equal(run(r, {n: 4}), np.arange(4))


def test_range_errors() -> None:
    with pytest.raises(errors.InvalidArgumentError, match="delta != 0"):
        tf.range(0, 5, 0)
    with pytest.raises(errors.InvalidArgumentError, match="start <= limit"):
        tf.range(5, 1)
    with pytest.raises(errors.InvalidArgumentError, match="start >= limit"):
        tf.range(1, 5, -1)
    n = tf.placeholder(tf.int32, [])
    with pytest.raises(errors.InvalidArgumentError, match="delta != 0") as info:
        run(tf.range(0, 4, n, name="r"), {n: 0})
    assert info.value.node_name == "r"


# ------------------------------------------------------------------------------ broadcast / reverse


@pytest.mark.parametrize("dtype", [np.float32, np.int64, object])
def test_broadcast_to_and_reverse(dtype: Any) -> None:
    x = sample((3, 1), dtype)
    p, feed = ph(x, [None, 1])
    b = tf.broadcast_to(p, [2, 3, 4])
    r = tf.reverse(p, [0])
    r2 = tf.reverse(tf.constant(sample((2, 3), dtype)), [-1, 0])
    assert b.shape.as_list() == [2, 3, 4] and r.shape.as_list() == [None, 1]
    vb, vr, vr2 = run([b, r, r2], feed)
    np.testing.assert_array_equal(vb, np.broadcast_to(x, (2, 3, 4)))
    np.testing.assert_array_equal(vr, x[::-1])
    assert vr2.shape == (2, 3)


def test_broadcast_to_and_reverse_errors() -> None:
    x = tf.constant(np.zeros((3, 2)))
    with pytest.raises(errors.InvalidArgumentError, match="Incompatible"):
        tf.broadcast_to(x, [3, 3])
    with pytest.raises(errors.InvalidArgumentError, match="more than once"):
        tf.reverse(x, [0, -2])
    with pytest.raises(errors.InvalidArgumentError, match="out of valid range"):
        tf.reverse(x, [2])
    s = tf.placeholder(tf.int32, [2])
    y = tf.broadcast_to(tf.constant(np.zeros((1, 2))), s)
    assert y.shape.as_list() == [None, 2]
    with pytest.raises(errors.InvalidArgumentError, match="Incompatible"):
        run(y, {s: [3, 3]})


def test_ops_build_in_their_inputs_graph() -> None:
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(np.arange(24.0).reshape(2, 3, 4))
        i = tf.constant(1)
    # another graph is the default: constants for python arguments must go to x's graph
    outs = [tf.reshape(x, [4, -1]), x[1, i:, None], tf.concat([x, x], 1), tf.split(x, 2, 2)[0],
            tf.gather(x, [0, 1], axis=1), tf.pad(x, [[0, 0], [1, 1], [0, 0]]),
            tf.tile(x, [1, 1, 2]), tf.boolean_mask(x, [True, False]), tf.zeros_like(x),
            tf.gradients(tf.reduce_sum(tf.tile(x[:, 1:], [2, 1, 1])), x)[0]]
    assert all(o.graph is g for o in outs)
    assert not tf.get_default_graph().get_operations()
    with tf.Session(graph=g) as sess:
        got = sess.run(outs)
    np.testing.assert_array_equal(got[1], np.arange(24.0).reshape(2, 3, 4)[1, 1:, None])
    assert got[-1].sum() == 2 * 16
