"""nn ops: values against numpy references (naive loops for convolutions and pools), dtypes kept,
shapes inferred at build time (partial shapes too), build-time and run-time errors naming the node."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tensorgrid as tf
import tensorgrid.nn as nn
from tensorgrid.core import errors

RNG = np.random.default_rng(7)


def run(fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed)


def np_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# ------------------------------------------------------------------------------ activations

ACTIVATIONS = {
    "relu": (nn.relu, lambda x: np.maximum(x, 0)),
    "relu6": (nn.relu6, lambda x: np.clip(x, 0, 6)),
    "elu": (nn.elu, lambda x: np.where(x > 0, x, np.expm1(x))),
    "leaky_relu": (lambda x: nn.leaky_relu(x, alpha=0.1), lambda x: np.where(x > 0, x, 0.1 * x)),
    "softplus": (nn.softplus, lambda x: np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)),
    "softsign": (nn.softsign, lambda x: x / (1 + np.abs(x))),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activation_values_and_dtype(name: str, dtype: type) -> None:
    fn, ref = ACTIVATIONS[name]
    x = (RNG.standard_normal((4, 5)) * 5).astype(dtype)
    ph = tf.placeholder(tf.as_dtype(dtype), [None, 5])
    y = fn(ph)
    assert y.dtype is tf.as_dtype(dtype) and y.shape.as_list() == [None, 5]
    out = run(y, {ph: x})
    assert out.dtype == dtype
    np.testing.assert_allclose(out, ref(x.astype(np.float64)), rtol=1e-6, atol=1e-6)


def test_relu_of_integers_and_softplus_of_extremes() -> None:
    xi = np.array([-3, 0, 4], np.int32)
    xf = np.array([-1000.0, 0.0, 1000.0], np.float32)
    ri, sp = run([nn.relu(tf.constant(xi)), nn.softplus(tf.constant(xf))])
    assert ri.dtype == np.int32
    np.testing.assert_array_equal(ri, [0, 0, 4])
    np.testing.assert_allclose(sp, [0.0, np.log(2.0), 1000.0], rtol=1e-6)


def test_activation_rejects_wrong_dtype_naming_the_node() -> None:
    with pytest.raises(errors.InvalidArgumentError, match="'my_elu'.*Elu|my_elu"):
        nn.elu(tf.constant([1, 2]), name="my_elu")


# ------------------------------------------------------------------------------ softmax


def test_softmax_is_stable_for_large_logits() -> None:
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -1000.0]], np.float32)
    sm, lsm = run([nn.softmax(tf.constant(x)), nn.log_softmax(tf.constant(x))])
    assert sm.dtype == np.float32 and lsm.dtype == np.float32
    ref = np_softmax(x.astype(np.float64))
    np.testing.assert_allclose(sm, ref, rtol=1e-6)
    np.testing.assert_allclose(lsm, np.log(ref), rtol=1e-5)
    assert np.all(np.isfinite(lsm))


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
def test_softmax_over_any_axis(axis: int) -> None:
    x = RNG.standard_normal((2, 3, 4))
    t = tf.constant(x)
    sm, lsm = run([nn.softmax(t, axis=axis), nn.log_softmax(t, axis=axis)])
    np.testing.assert_allclose(sm, np_softmax(x, axis), rtol=1e-12)
    np.testing.assert_allclose(lsm, np.log(np_softmax(x, axis)), rtol=1e-12)
    assert nn.softmax(t, dim=axis).shape.as_list() == [2, 3, 4]


def test_softmax_errors() -> None:
    with pytest.raises(ValueError, match="out of range"):
        nn.softmax(tf.constant(np.zeros((2, 3))), axis=2)
    with pytest.raises(errors.InvalidArgumentError, match="Softmax"):
        nn.softmax(tf.constant(np.zeros(3, np.int32)))
    with pytest.raises(errors.InvalidArgumentError, match="scalar"):
        nn.softmax(tf.constant(1.0))


# ------------------------------------------------------------------------------ bias, l2


def test_bias_add_nhwc_and_nchw() -> None:
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    b5 = RNG.standard_normal(5).astype(np.float32)
    b3 = RNG.standard_normal(3).astype(np.float32)
    nhwc = nn.bias_add(tf.constant(x), tf.constant(b5))
    nchw = nn.bias_add(tf.constant(x), tf.constant(b3), data_format="NCHW")
    a, c = run([nhwc, nchw])
    assert a.dtype == np.float32
    np.testing.assert_allclose(a, x + b5, rtol=1e-6)
    np.testing.assert_allclose(c, x + b3[None, :, None, None], rtol=1e-6)


def test_bias_add_shape_checks_name_the_node() -> None:
    x = tf.placeholder(tf.float32, [None, 4])
    assert nn.bias_add(x, tf.zeros_like(tf.constant(np.zeros(4, np.float32)))).shape.as_list() == \
        [None, 4]
    with pytest.raises(errors.InvalidArgumentError, match="'bad_bias'"):
        nn.bias_add(x, tf.constant(np.zeros(3, np.float32)), name="bad_bias")
    with pytest.raises(errors.InvalidArgumentError, match="1-dimensional"):
        nn.bias_add(x, tf.constant(np.zeros((1, 4), np.float32)))
    with pytest.raises(errors.InvalidArgumentError, match="at least 2"):
        nn.bias_add(tf.constant(np.zeros(4, np.float32)), tf.constant(np.zeros(4, np.float32)))


def test_xw_plus_b_and_l2_loss() -> None:
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    w = RNG.standard_normal((4, 2)).astype(np.float32)
    b = RNG.standard_normal(2).astype(np.float32)
    y, l2 = run([nn.xw_plus_b(x, w, b), nn.l2_loss(tf.constant(x))])
    np.testing.assert_allclose(y, x @ w + b, rtol=1e-5)
    assert l2.dtype == np.float32 and l2.shape == ()
    np.testing.assert_allclose(l2, (x.astype(np.float64) ** 2).sum() / 2, rtol=1e-5)


# ------------------------------------------------------------------------------ cross-entropy


def test_softmax_cross_entropy_matches_formula() -> None:
    logits = (RNG.standard_normal((5, 4)) * 30).astype(np.float32)
    labels = np_softmax(RNG.standard_normal((5, 4))).astype(np.float32)
    loss = nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
    old = nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    assert loss.shape.as_list() == [5] and loss.dtype is tf.float32
    a, b = run([loss, old])
    x = logits.astype(np.float64)
    ref = -(labels * (x - x.max(1, keepdims=True) - np.log(np.exp(
        x - x.max(1, keepdims=True)).sum(1, keepdims=True)))).sum(1)
    assert a.dtype == np.float32
    np.testing.assert_allclose(a, ref, rtol=1e-5)
    np.testing.assert_allclose(b, ref, rtol=1e-5)


def test_softmax_cross_entropy_raw_op_outputs_and_other_axes() -> None:
    logits = RNG.standard_normal((3, 4))
    labels = np_softmax(RNG.standard_normal((3, 4)))
    op_outputs = tf.get_default_graph().create_op(
        "SoftmaxCrossEntropyWithLogits", [tf.constant(logits), tf.constant(labels)],
        {"T": tf.float64}).outputs
    loss, backprop = run(op_outputs)
    np.testing.assert_allclose(backprop, np_softmax(logits) - labels, rtol=1e-12)
    np.testing.assert_allclose(loss, -(labels * np.log(np_softmax(logits))).sum(1), rtol=1e-12)
    # a class axis other than the last, and more than 2 dims
    x3, z3 = RNG.standard_normal((2, 4, 3)), np_softmax(RNG.standard_normal((2, 4, 3)), 1)
    l3 = nn.softmax_cross_entropy_with_logits_v2(labels=z3, logits=x3, axis=1)
    assert l3.shape.as_list() == [2, 3]
    np.testing.assert_allclose(run(l3), -(z3 * np.log(np_softmax(x3, 1))).sum(1), rtol=1e-12)


def test_sparse_softmax_cross_entropy_matches_formula() -> None:
    logits = (RNG.standard_normal((6, 5)) * 50).astype(np.float32)
    labels = np.array([0, 4, 2, 2, 1, 3], np.int32)
    ph = tf.placeholder(tf.float32, [None, 5])
    loss = nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=ph)
    assert loss.shape.as_list() == [6] and loss.dtype is tf.float32  # batch from the labels
    backprop = loss.op.outputs[1]
    out, bp = run([loss, backprop], {ph: logits})
    lsm = np.log(np_softmax(logits.astype(np.float64)))
    assert out.dtype == np.float32 and bp.dtype == np.float32
    np.testing.assert_allclose(out, -lsm[np.arange(6), labels], rtol=1e-5, atol=1e-5)
    onehot = np.eye(5)[labels]
    np.testing.assert_allclose(bp, np.exp(lsm) - onehot, atol=1e-6)
    # 3-D logits with 2-D int64 labels
    x3 = RNG.standard_normal((2, 3, 4))
    z3 = RNG.integers(0, 4, (2, 3))
    l3 = nn.sparse_softmax_cross_entropy_with_logits(labels=z3, logits=x3)
    ref = -np.take_along_axis(np.log(np_softmax(x3)), z3[..., None], -1)[..., 0]
    np.testing.assert_allclose(run(l3), ref, rtol=1e-12)


def test_cross_entropies_with_rows_far_apart_and_a_nan_row() -> None:
    # rows thousands apart (one shift for all would underflow the low rows), and a NaN row that
    # must not spoil the others
    logits = np.array([[3000.0, 3001.0, 2999.0], [-5000.0, -5002.0, -5001.0],
                       [0.0, np.nan, 1.0]], np.float32)
    labels = np.array([1, 0, 2], np.int32)
    dense = np.eye(3, dtype=np.float32)[labels]
    sparse = nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    full = nn.softmax_cross_entropy_with_logits_v2(labels=dense, logits=logits)
    sm = nn.softmax(logits)
    a, b, c = run([sparse, full, sm])
    ref = -np.log(np_softmax(logits[:2].astype(np.float64)))[[0, 1], labels[:2]]
    for out in (a, b):
        np.testing.assert_allclose(out[:2], ref, rtol=1e-5)
        assert np.isnan(out[2])
    np.testing.assert_allclose(c[:2], np_softmax(logits[:2].astype(np.float64)), rtol=1e-5)


def test_sparse_xent_fetching_only_the_loss_of_the_raw_op() -> None:
    logits = RNG.standard_normal((2, 3))
    loss, _ = tf.get_default_graph().create_op(
        "SparseSoftmaxCrossEntropyWithLogits",
        [tf.constant(logits), tf.constant(np.array([1, 2], np.int64))],
        {"T": tf.float64, "Tlabels": tf.int64}).outputs
    np.testing.assert_allclose(run(loss * 2.0), -2 * np.log(np_softmax(logits))[[0, 1], [1, 2]])


def test_sparse_xent_errors() -> None:
    logits = tf.placeholder(tf.float32, [None, 3])
    labels = tf.placeholder(tf.int32, [None])
    loss = nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits, name="xent")
    with pytest.raises(errors.InvalidArgumentError, match="label value of 3.*xent"):
        run(loss, {logits: np.zeros((2, 3), np.float32), labels: [0, 3]})
    with pytest.raises(errors.InvalidArgumentError, match="label value of -1"):
        run(loss, {logits: np.zeros((2, 3), np.float32), labels: [-1, 0]})
    with pytest.raises(ValueError, match="Rank mismatch"):
        nn.sparse_softmax_cross_entropy_with_logits(labels=[[1]], logits=np.zeros((1, 3)))
    with pytest.raises(ValueError, match="keyword"):
        nn.sparse_softmax_cross_entropy_with_logits([1], np.zeros((1, 3)))
    with pytest.raises(ValueError, match="Shape mismatch"):
        nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.placeholder(tf.int32, [4]), logits=tf.placeholder(tf.float32, [3, 2]))
    with pytest.raises(errors.InvalidArgumentError, match="batch size.*'raw'"):
        tf.get_default_graph().create_op(
            "SparseSoftmaxCrossEntropyWithLogits",
            [tf.placeholder(tf.float32, [3, 2]), tf.placeholder(tf.int32, [4])],
            {"T": tf.float32, "Tlabels": tf.int32}, name="raw")
    with pytest.raises(errors.InvalidArgumentError, match="int32 or int64"):
        tf.get_default_graph().create_op(
            "SparseSoftmaxCrossEntropyWithLogits",
            [tf.constant(np.zeros((1, 2))), tf.constant([0.0])], {"T": tf.float64})


def test_softmax_xent_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="same shape"):
        nn.softmax_cross_entropy_with_logits_v2(labels=np.zeros((2, 3)), logits=np.zeros((2, 4)))


def test_sigmoid_cross_entropy_is_stable() -> None:
    x = np.array([-1000.0, -5.0, 0.0, 3.0, 1000.0], np.float32)
    z = np.array([0.0, 1.0, 0.5, 0.0, 1.0], np.float32)
    out = run(nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x))
    xd = x.astype(np.float64)
    ref = np.maximum(xd, 0) - xd * z + np.log1p(np.exp(-np.abs(xd)))
    assert out.dtype == np.float32 and np.all(np.isfinite(out))
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="same shape"):
        nn.sigmoid_cross_entropy_with_logits(labels=np.zeros(2), logits=np.zeros(3))


# ------------------------------------------------------------------------------ dropout


def test_dropout_keeps_and_scales() -> None:
    x = np.ones((200, 100), np.float32)
    out = run(nn.dropout(tf.constant(x), keep_prob=0.75, seed=3))
    assert out.dtype == np.float32
    kept = out != 0
    np.testing.assert_allclose(out[kept], 1 / 0.75, rtol=1e-6)
    assert abs(kept.mean() - 0.75) < 0.02
    out2 = run(nn.dropout(tf.constant(x), rate=0.5, noise_shape=[200, 1], seed=3))
    assert abs((out2 != 0).mean() - 0.5) < 0.1
    assert np.all((out2 == 0).all(axis=1) | (out2 == 2).all(axis=1))  # whole rows dropped


def test_dropout_identity_cases_and_errors() -> None:
    t = tf.constant([1.0, 2.0])
    assert nn.dropout(t, keep_prob=1.0) is t
    assert nn.dropout(t, rate=0.0) is t
    with pytest.raises(ValueError):
        nn.dropout(t)
    with pytest.raises(ValueError):
        nn.dropout(t, keep_prob=0.5, rate=0.5)
    with pytest.raises(ValueError):
        nn.dropout(t, rate=1.0)
    kp = tf.placeholder(tf.float32, [])
    out = run(nn.dropout(tf.constant(np.ones(1000, np.float32)), keep_prob=kp), {kp: 0.5})
    assert set(np.unique(out)) <= {0.0, 2.0} and 400 < (out == 2).sum() < 600


# ------------------------------------------------------------------------------ convolution


def naive_conv2d(x, f, strides, dilations, pads):
    """Direct loops: out[n, i, j, o] = sum over (a, b, c) of xpad[...] * f[a, b, c, o]."""
    (pt, pb), (pl, pr) = pads
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    kh, kw, _, oc = f.shape
    sh, sw = strides
    dh, dw = dilations
    oh = (xp.shape[1] - (kh - 1) * dh - 1) // sh + 1
    ow = (xp.shape[2] - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((x.shape[0], oh, ow, oc))
    for i, j in itertools.product(range(oh), range(ow)):
        for a, b in itertools.product(range(kh), range(kw)):
            out[:, i, j, :] += xp[:, i * sh + a * dh, j * sw + b * dw, :] @ f[a, b]
    return out


def same_pads(size, k, s, d=1):
    out = -(-size // s)
    need = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    return need // 2, need - need // 2


CONV_CASES = [
    # (input hw, kernel hw, strides, dilations, padding)
    ((5, 6), (3, 3), (1, 1), (1, 1), "VALID"),
    ((5, 6), (3, 2), (1, 1), (1, 1), "SAME"),
    ((7, 8), (3, 3), (2, 2), (1, 1), "SAME"),
    ((7, 8), (2, 3), (2, 3), (1, 1), "VALID"),
    ((7, 7), (3, 3), (1, 1), (2, 2), "SAME"),
    ((7, 7), (2, 2), (1, 1), (2, 3), "VALID"),
    ((5, 5), (3, 3), (2, 1), (1, 1), [[0, 0], [1, 2], [0, 1], [0, 0]]),
    ((4, 4), (1, 1), (1, 1), (1, 1), "VALID"),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}k{c[1]}s{c[2]}d{c[3]}{c[4]}")
def test_conv2d_matches_naive_loops(case) -> None:
    (h, w), (kh, kw), strides, dil, padding = case
    x = RNG.standard_normal((2, h, w, 3)).astype(np.float32)
    f = RNG.standard_normal((kh, kw, 3, 4)).astype(np.float32)
    y = nn.conv2d(tf.constant(x), tf.constant(f), strides=[1, *strides, 1], padding=padding,
                  dilations=[1, *dil, 1])
    if padding == "SAME":
        pads = (same_pads(h, kh, strides[0], dil[0]), same_pads(w, kw, strides[1], dil[1]))
    elif padding == "VALID":
        pads = ((0, 0), (0, 0))
    else:
        pads = (tuple(padding[1]), tuple(padding[2]))
    ref = naive_conv2d(x.astype(np.float64), f.astype(np.float64), strides, dil, pads)
    assert y.shape.as_list() == list(ref.shape)
    out = run(y)
    assert out.dtype == np.float32 and out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("size,k,s,padding,want", [
    (28, 5, 1, "SAME", 28), (28, 5, 1, "VALID", 24), (28, 3, 2, "SAME", 14), (28, 3, 2, "VALID", 13),
    (7, 2, 2, "SAME", 4), (7, 2, 2, "VALID", 3), (1, 3, 1, "SAME", 1),
])
def test_same_and_valid_output_sizes(size, k, s, padding, want) -> None:
    x = tf.placeholder(tf.float32, [None, size, size, 1])
    f = tf.placeholder(tf.float32, [k, k, 1, 2])
    assert nn.conv2d(x, f, strides=s, padding=padding).shape.as_list() == [None, want, want, 2]
    pooled = nn.max_pool(x, ksize=k, strides=s, padding=padding)
    assert pooled.shape.as_list() == [None, want, want, 1]


def test_conv2d_partial_shapes() -> None:
    x = tf.placeholder(tf.float32, [None, None, 9, 3])
    f = tf.placeholder(tf.float32, [3, 3, 3, 8])
    assert nn.conv2d(x, f, [1, 1, 1, 1], "VALID").shape.as_list() == [None, None, 7, 8]
    unknown = tf.placeholder(tf.float32)
    assert nn.conv2d(unknown, f, [1, 2, 2, 1], "SAME").shape.as_list() == [None, None, None, 8]
    out = run(nn.conv2d(x, f, [1, 1, 1, 1], "VALID"),
              {x: np.ones((1, 4, 9, 3), np.float32), f: np.ones((3, 3, 3, 8), np.float32)})
    np.testing.assert_allclose(out, np.full((1, 2, 7, 8), 27.0))


def test_conv2d_build_errors_name_the_node() -> None:
    x = tf.placeholder(tf.float32, [1, 5, 5, 3])
    with pytest.raises(errors.InvalidArgumentError, match="in_channels.*'c1'|'c1'"):
        nn.conv2d(x, tf.placeholder(tf.float32, [3, 3, 2, 4]), 1, "SAME", name="c1")
    with pytest.raises(errors.InvalidArgumentError, match="4-dimensional"):
        nn.conv2d(tf.placeholder(tf.float32, [5, 5, 3]), tf.placeholder(tf.float32, [3, 3, 3, 4]),
                  1, "SAME")
    f = tf.placeholder(tf.float32, [3, 3, 3, 4])
    with pytest.raises(errors.InvalidArgumentError, match="batch and depth"):
        nn.conv2d(x, f, [2, 1, 1, 1], "SAME")
    with pytest.raises(errors.InvalidArgumentError, match="padding"):
        nn.conv2d(x, f, 1, "FULL")
    with pytest.raises(errors.InvalidArgumentError, match="negative"):
        nn.conv2d(x, tf.placeholder(tf.float32, [7, 7, 3, 4]), 1, "VALID")
    with pytest.raises(errors.InvalidArgumentError, match="NHWC"):
        nn.conv2d(x, f, 1, "SAME", data_format="NCHW")
    with pytest.raises(errors.InvalidArgumentError, match="floating"):
        nn.conv2d(tf.placeholder(tf.int32, [1, 5, 5, 3]), tf.placeholder(tf.int32, [3, 3, 3, 4]),
                  1, "SAME")


def test_conv2d_backprops_are_adjoints() -> None:
    # <conv(x, f), dy> == <x, backprop_input(dy)> == <f, backprop_filter(dy)>
    x = RNG.standard_normal((2, 6, 5, 3))
    f = RNG.standard_normal((3, 2, 3, 4))
    for strides, padding in (([1, 2, 1, 1], "SAME"), ([1, 1, 2, 1], "VALID")):
        y = nn.conv2d(x, f, strides, padding)
        dy = RNG.standard_normal(y.shape.as_list())
        dx = nn.conv2d_backprop_input([2, 6, 5, 3], f, dy, strides, padding)
        df = nn.conv2d_backprop_filter(x, [3, 2, 3, 4], dy, strides, padding)
        assert dx.shape.as_list() == [2, 6, 5, 3] and df.shape.as_list() == [3, 2, 3, 4]
        yv, dxv, dfv = run([y, dx, df])
        lhs = (yv * dy).sum()
        np.testing.assert_allclose((x * dxv).sum(), lhs, rtol=1e-10)
        np.testing.assert_allclose((f * dfv).sum(), lhs, rtol=1e-10)


def test_conv2d_transpose_and_backprop_shape_errors() -> None:
    value = RNG.standard_normal((1, 3, 3, 4))
    f = RNG.standard_normal((2, 2, 5, 4))
    up = nn.conv2d_transpose(value, f, [1, 6, 6, 5], strides=[1, 2, 2, 1], padding="SAME")
    assert up.shape.as_list() == [1, 6, 6, 5]
    assert run(up).shape == (1, 6, 6, 5)
    with pytest.raises(errors.InvalidArgumentError, match="out_backprop"):
        nn.conv2d_backprop_input([1, 6, 6, 5], f, value, [1, 1, 1, 1], "SAME")


# ------------------------------------------------------------------------------ pools


def naive_pool(x, k, s, padding, reduce):
    n, h, w, c = x.shape
    if padding == "SAME":
        (pt, _), (pl, _) = same_pads(h, k[0], s[0]), same_pads(w, k[1], s[1])
        oh, ow = -(-h // s[0]), -(-w // s[1])
    else:
        pt = pl = 0
        oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    out = np.zeros((n, oh, ow, c), x.dtype)
    for i, j in itertools.product(range(oh), range(ow)):
        r0, c0 = i * s[0] - pt, j * s[1] - pl
        win = x[:, max(r0, 0):r0 + k[0], max(c0, 0):c0 + k[1], :]  # the part inside the input
        out[:, i, j, :] = reduce(win, axis=(1, 2))
    return out


POOL_CASES = [((2, 2), (2, 2), "VALID"), ((3, 3), (2, 2), "SAME"), ((3, 2), (1, 2), "SAME"),
              ((2, 3), (3, 1), "VALID"), ((3, 3), (1, 1), "SAME")]


@pytest.mark.parametrize("k,s,padding", POOL_CASES)
def test_pools_match_naive_loops(k, s, padding) -> None:
    x = RNG.standard_normal((2, 7, 6, 3)).astype(np.float32)
    mp = nn.max_pool(tf.constant(x), [1, *k, 1], [1, *s, 1], padding)
    ap = nn.avg_pool(tf.constant(x), [1, *k, 1], [1, *s, 1], padding)
    ref_max = naive_pool(x, k, s, padding, np.max)
    ref_avg = naive_pool(x.astype(np.float64), k, s, padding, np.mean)  # padding not counted
    assert mp.shape.as_list() == list(ref_max.shape) == ap.shape.as_list()
    m, a = run([mp, ap])
    assert m.dtype == np.float32 and a.dtype == np.float32
    np.testing.assert_array_equal(m, ref_max)
    # float32 sums of unit-sized values: an average near zero keeps only their absolute error
    np.testing.assert_allclose(a, ref_avg, rtol=1e-5, atol=1e-6)


def test_max_pool_of_integers_with_same_padding() -> None:
    x = -RNG.integers(1, 100, (1, 5, 5, 2)).astype(np.int32)  # all negative: padding must not win
    out = run(nn.max_pool(tf.constant(x), 3, 2, "SAME"))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, naive_pool(x, (3, 3), (2, 2), "SAME", np.max))


def test_pool_errors() -> None:
    x = tf.placeholder(tf.float32, [1, 4, 4, 1])
    with pytest.raises(errors.InvalidArgumentError, match="batch and depth"):
        nn.max_pool(x, [2, 2, 2, 1], [1, 1, 1, 1], "VALID")
    with pytest.raises(errors.InvalidArgumentError, match="SAME or VALID"):
        nn.avg_pool(x, 2, 2, "EXPLICIT")
    with pytest.raises(errors.InvalidArgumentError, match="4-dimensional"):
        nn.max_pool(tf.placeholder(tf.float32, [4, 4, 1]), 2, 2, "VALID")
    with pytest.raises(errors.InvalidArgumentError, match="AvgPool"):
        nn.avg_pool(tf.placeholder(tf.int32, [1, 4, 4, 1]), 2, 2, "VALID")


def test_max_pool_grad_routes_to_the_first_maximum() -> None:
    x = np.array([[1.0, 3.0], [3.0, 2.0]]).reshape(1, 2, 2, 1)
    y = nn.max_pool(tf.constant(x), 2, 2, "VALID")
    g = tf.gradients(y, [y.op.inputs[0]], grad_ys=np.full((1, 1, 1, 1), 5.0))[0]
    np.testing.assert_array_equal(run(g).reshape(2, 2), [[0.0, 5.0], [0.0, 0.0]])


# ------------------------------------------------------------------------------ more of tf.nn


def test_weighted_cross_entropy_matches_formula() -> None:
    x = np.array([-800.0, -2.0, 0.0, 1.5, 900.0])
    z = np.array([1.0, 0.0, 0.3, 1.0, 0.0])
    out = run(nn.weighted_cross_entropy_with_logits(labels=z, logits=x, pos_weight=3.0))
    sig = 1 / (1 + np.exp(-x[1:4]))
    ref = -(3.0 * z[1:4] * np.log(sig) + (1 - z[1:4]) * np.log(1 - sig))
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out[1:4], ref, rtol=1e-10)
    np.testing.assert_allclose(out[[0, 4]], [3.0 * 800.0, 900.0], rtol=1e-10)


def test_l2_normalize_moments_and_batch_normalization() -> None:
    x = RNG.standard_normal((4, 3, 2))
    n0, n_all = run([nn.l2_normalize(x, axis=0), nn.l2_normalize(x)])
    np.testing.assert_allclose(n0, x / np.sqrt((x ** 2).sum(0, keepdims=True)), rtol=1e-12)
    np.testing.assert_allclose(n_all, x / np.sqrt((x ** 2).sum()), rtol=1e-12)
    assert run(nn.l2_normalize(np.zeros(3))).tolist() == [0.0, 0.0, 0.0]
    mean, var = nn.moments(tf.constant(x), axes=[0, 1])
    kmean, kvar = nn.moments(tf.constant(x), axes=[0], keep_dims=True)
    assert mean.shape.as_list() == [2] and kvar.shape.as_list() == [1, 3, 2]
    m, v, km, kv = run([mean, var, kmean, kvar])
    np.testing.assert_allclose(m, x.mean((0, 1)), rtol=1e-12)
    np.testing.assert_allclose(v, x.var((0, 1)), rtol=1e-12)
    np.testing.assert_allclose(kv, x.var(0, keepdims=True), rtol=1e-12)
    hm, hv = run(nn.moments(tf.constant(x.astype(np.float16)), axes=[0]))
    assert hm.dtype == np.float16 and hv.dtype == np.float16
    bn = nn.batch_normalization(x, m, v, offset=np.array([1.0, 2.0]), scale=np.array([3.0, 4.0]),
                                variance_epsilon=1e-3)
    bare = nn.batch_normalization(x, m, v, None, None, 1e-3)
    ref = (x - m) / np.sqrt(v + 1e-3)
    b, r = run([bn, bare])
    np.testing.assert_allclose(b, ref * [3.0, 4.0] + [1.0, 2.0], rtol=1e-10)
    np.testing.assert_allclose(r, ref, rtol=1e-10)


def test_in_top_k() -> None:
    preds = np.array([[0.1, 0.8, 0.1, 0.0], [0.5, 0.2, 0.2, 0.1], [0.3, np.nan, 0.2, 0.1],
                      [0.4, 0.4, 0.1, 0.1]], np.float32)
    targets = np.array([1, 2, 0, 1], np.int32)
    k1 = nn.in_top_k(preds, targets, 1)
    assert k1.dtype is tf.bool and k1.shape.as_list() == [4]
    a, b = run([k1, nn.in_top_k(preds, targets, 2)])
    np.testing.assert_array_equal(a, [True, False, False, True])  # a tie counts as in
    np.testing.assert_array_equal(b, [True, True, False, True])  # only 0.5 is larger than 0.2
    assert run(nn.in_top_k(preds, np.array([1, 2, 0, 7]), 3)).tolist() == [True, True, False, False]
    with pytest.raises(errors.InvalidArgumentError, match="float32"):
        nn.in_top_k(preds.astype(np.float64), targets, 1)


def test_relu_layer() -> None:
    x, w, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2)), RNG.standard_normal(2)
    np.testing.assert_allclose(run(nn.relu_layer(x, w, b)), np.maximum(x @ w + b, 0), rtol=1e-12)


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16], ids=lambda d: d.name)
def test_half_precision_dtypes_are_kept(dtype) -> None:
    x = RNG.standard_normal((2, 4, 4, 3)).astype(dtype.np)
    f = RNG.standard_normal((2, 2, 3, 2)).astype(dtype.np)
    t, ft = tf.constant(x), tf.constant(f)
    logits = tf.constant(x[:, 0, 0, :])
    outs = [nn.relu(t), nn.softmax(t), nn.log_softmax(t), nn.elu(t), nn.softplus(t), nn.l2_loss(t),
            nn.max_pool(t, 2, 2, "SAME"), nn.avg_pool(t, 2, 2, "SAME"), nn.conv2d(t, ft, 1, "SAME"),
            nn.sparse_softmax_cross_entropy_with_logits(labels=[0, 2], logits=logits),
            nn.bias_add(t, f[0, 0, 0, :].repeat(2)[:3])]
    y = outs[8]
    dy = tf.constant(RNG.standard_normal(y.shape.as_list()).astype(dtype.np))
    outs += tf.gradients(y, [t, ft], grad_ys=dy)
    outs += tf.gradients(outs[6], t) + tf.gradients(outs[7], t) + tf.gradients(outs[0], t)
    for v in run(outs):
        assert v.dtype == dtype.np
    sm = run(nn.softmax(t)).astype(np.float32)
    np.testing.assert_allclose(sm, np_softmax(x.astype(np.float32)), atol=1e-2)
