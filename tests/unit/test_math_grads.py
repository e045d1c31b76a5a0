"""Gradient rules of the math ops against finite differences (float64), with broadcasting, with
shapes known only at run time, second derivatives, and the shape of the graphs the rules build."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.core import registry
from tensorgrid.framework.convert import make_op
from tensorgrid.testing import check_gradients

rng = np.random.default_rng(1)


def r(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return rng.uniform(lo, hi, size=shape)


def pos(*shape: int) -> np.ndarray:
    return r(*shape, lo=0.5, hi=2.0)


def unknown(t: tf.Tensor) -> tf.Tensor:
    """t with its static shape forgotten: downstream rules must find shapes at run time."""
    return tf.placeholder_with_default(t, shape=None)


def run(fetches: Any, feed: dict | None = None) -> Any:
    with tf.Session() as sess:
        return sess.run(fetches, feed)


# ------------------------------------------------------------------------------ binary ops

BINARY = {
    "add": tf.add,
    "sub": tf.subtract,
    "mul": tf.multiply,
    "realdiv": tf.realdiv,
    "truediv": tf.truediv,
    "pow": tf.pow,
    "maximum": tf.maximum,
    "minimum": tf.minimum,
    "squared_difference": tf.squared_difference,
    "floormod": tf.floormod,
}
SHAPES = [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3)), ((4, 1, 3), (2, 1))]


def _binary_point(name: str, sa: tuple, sb: tuple) -> list[np.ndarray]:
    if name in ("realdiv", "truediv", "pow", "floormod"):
        a, b = pos(*sa) + 1.0, pos(*sb)
        if name == "floormod":  # keep away from the jumps of x mod y
            a = np.floor(a / b) * b + b * rng.uniform(0.2, 0.8, np.broadcast_shapes(sa, sb))
            a = a.reshape(np.broadcast_shapes(sa, sb))
            return [a, b]
        return [a, b]
    return [r(*sa), r(*sb)]


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_binary_rules_static_shapes(name: str, sa: tuple, sb: tuple) -> None:
    a, b = _binary_point(name, sa, sb)
    check_gradients(BINARY[name], [a, b])


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("sa,sb", SHAPES[1:4])
def test_binary_rules_run_time_shapes(name: str, sa: tuple, sb: tuple) -> None:
    a, b = _binary_point(name, sa, sb)
    check_gradients(lambda x, y: BINARY[name](unknown(x), unknown(y)), [a, b])


def test_legacy_add_and_div_rules() -> None:
    def legacy(op_type: str) -> Any:
        return lambda x, y: make_op(op_type, [x, y], {"T": x.dtype})

    check_gradients(legacy("Add"), [r(2, 3), r(3)])
    check_gradients(legacy("Div"), [r(2, 3), pos(2, 1)])


def test_static_shapes_build_no_shape_ops() -> None:
    x = tf.placeholder(tf.float64, [4, 3])
    y = tf.placeholder(tf.float64, [3])
    z = tf.placeholder(tf.float64, [4, 3])
    before = len(tf.get_default_graph().get_operations())
    gx, gy, gz = tf.gradients(x * y + z, [x, y, z])
    new = tf.get_default_graph().get_operations()[before:]
    types = [op.type for op in new]
    assert "BroadcastGradientArgs" not in types and "Shape" not in types
    # one reduction only: y's gradient over axis 0; x and z have the output's shape
    assert types.count("Sum") == 1 and "Reshape" not in types
    assert gx.shape == (4, 3) and gy.shape == (3,) and gz.shape == (4, 3)


def test_partial_shapes_that_decide_the_axes_build_no_shape_ops() -> None:
    # a bias added to a batch of unknown size: the bias sums over axis 0, x keeps its gradient
    x = tf.placeholder(tf.float64, [None, 3])
    b = tf.placeholder(tf.float64, [3])
    c = tf.placeholder(tf.float64, [None, 1])
    before = len(tf.get_default_graph().get_operations())
    gx, gb = tf.gradients(x + b, [x, b])
    types = [op.type for op in tf.get_default_graph().get_operations()[before:]]
    assert "BroadcastGradientArgs" not in types and "Shape" not in types
    assert types.count("Sum") == 1
    # (None, 1) times (3,): c's size-1 axis is summed and kept, the vector's axis 0 dropped
    gc, = tf.gradients(c * tf.constant(np.ones(3)), [c])
    assert "BroadcastGradientArgs" not in [op.type for op in tf.get_default_graph().get_operations()]
    a, v, w = r(5, 3), r(3), r(4, 1)
    vx, vb, vc = run([gx, gb, gc], {x: a, b: v, c: w})
    np.testing.assert_allclose(vx, np.ones((5, 3)))
    np.testing.assert_allclose(vb, np.full(3, 5.0))
    np.testing.assert_allclose(vc, np.full((4, 1), 3.0))


def test_run_time_shapes_use_broadcast_gradient_args() -> None:
    x = tf.placeholder(tf.float64, [None, 3])
    y = tf.placeholder(tf.float64, [None, 3])  # either batch size may be 1 at run time
    gx, gy = tf.gradients(tf.reduce_sum(x * y), [x, y])
    types = [op.type for op in tf.get_default_graph().get_operations()]
    assert "BroadcastGradientArgs" in types
    a, b = r(5, 3), r(1, 3)
    vx, vy = run([gx, gy], {x: a, y: b})
    np.testing.assert_allclose(vx, np.broadcast_to(b, (5, 3)))
    np.testing.assert_allclose(vy, a.sum(axis=0, keepdims=True))


def test_maximum_minimum_ties_go_to_x() -> None:
    x = tf.constant([1.0, 2.0, 3.0], dtype=tf.float64)
    y = tf.constant([1.0, 1.0, 4.0], dtype=tf.float64)
    gx, gy = run(tf.gradients(tf.maximum(x, y), [x, y]))
    assert gx.tolist() == [1, 1, 0] and gy.tolist() == [0, 0, 1]
    gx, gy = run(tf.gradients(tf.minimum(x, y), [x, y]))
    assert gx.tolist() == [1, 0, 1] and gy.tolist() == [0, 1, 0]


def test_pow_gradient_is_finite_at_non_positive_base() -> None:
    x = tf.constant([0.0, -2.0, 3.0], dtype=tf.float64)
    y = tf.constant([2.0, 2.0, 2.0], dtype=tf.float64)
    gx, gy = run(tf.gradients(tf.pow(x, y), [x, y]))
    np.testing.assert_allclose(gx, [0.0, -4.0, 6.0])
    np.testing.assert_allclose(gy, [0.0, 0.0, 9.0 * np.log(3.0)])


# ------------------------------------------------------------------------------ unary ops

UNARY = {
    "negative": (tf.negative, r),
    "abs": (tf.abs, r),
    "square": (tf.square, r),
    "sqrt": (tf.sqrt, pos),
    "rsqrt": (tf.rsqrt, pos),
    "exp": (tf.exp, r),
    "log": (tf.log, pos),
    "log1p": (tf.log1p, pos),
    "sin": (tf.sin, r),
    "cos": (tf.cos, r),
    "tanh": (tf.tanh, r),
    "sigmoid": (tf.sigmoid, r),
    "reciprocal": (tf.reciprocal, pos),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_rules(name: str) -> None:
    fn, point = UNARY[name]
    check_gradients(fn, [point(3, 4)])
    check_gradients(lambda x: fn(unknown(x)), [point(2, 3)])


@pytest.mark.parametrize("name", ["sqrt", "rsqrt", "tanh", "sigmoid", "reciprocal", "exp", "log",
                                  "sin", "square"])
def test_second_derivatives(name: str) -> None:
    fn, point = UNARY[name]
    check_gradients(lambda x: tf.gradients(fn(x), x)[0], [point(2, 3)])


@pytest.mark.parametrize("helper", ["SigmoidGrad", "TanhGrad", "RsqrtGrad", "SqrtGrad",
                                    "ReciprocalGrad"])
def test_helper_op_rules(helper: str) -> None:
    check_gradients(lambda y, dy: make_op(helper, [y, dy], {"T": y.dtype}), [pos(2, 3), r(2, 3)])


def test_piecewise_constant_ops_have_no_gradient() -> None:
    x = tf.placeholder(tf.float64, [3])
    for fn in (tf.sign, tf.floor, tf.ceil, tf.round):
        assert tf.gradients(fn(x), x) == [None]
    assert tf.gradients(tf.floordiv(x, 2.0), x) == [None]
    assert tf.gradients(tf.truncatediv(x, 2.0), x) == [None]


def test_abs_gradient_values() -> None:
    x = tf.constant([-2.0, 3.0], dtype=tf.float64)
    assert run(tf.gradients(tf.abs(x), x)[0]).tolist() == [-1.0, 1.0]


# ------------------------------------------------------------------------------ matmul, cast


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_rule_uses_flags_not_transposes(ta: bool, tb: bool) -> None:
    a = r(4, 3) if ta else r(3, 4)
    b = r(5, 4) if tb else r(4, 5)
    check_gradients(lambda x, y: tf.matmul(x, y, transpose_a=ta, transpose_b=tb), [a, b])
    g = tf.Graph()
    with g.as_default():
        x, y = tf.constant(a), tf.constant(b)
        tf.gradients(tf.matmul(x, y, transpose_a=ta, transpose_b=tb), [x, y])
    types = {op.type for op in g.get_operations()}
    assert "Transpose" not in types and "ConjugateTranspose" not in types


def test_matmul_rule_with_unknown_batch_dim() -> None:
    check_gradients(lambda x, y: tf.matmul(tf.placeholder_with_default(x, [None, 4]), y),
                    [r(3, 4), r(4, 2)])


@pytest.mark.parametrize("sa,sb,adj_x,adj_y", [
    ((2, 3, 4), (2, 4, 5), False, False),
    ((2, 4, 3), (2, 4, 5), True, False),
    ((2, 3, 4), (2, 5, 4), False, True),
    ((2, 4, 3), (2, 5, 4), True, True),
    ((2, 1, 3, 4), (3, 4, 2), False, False),  # broadcast batch dims
    ((3, 4), (2, 4, 5), False, False),
])
def test_batch_matmul_rules(sa: tuple, sb: tuple, adj_x: bool, adj_y: bool) -> None:
    def fn(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        return make_op("BatchMatMulV2", [x, y], {"T": x.dtype, "adj_x": adj_x, "adj_y": adj_y})

    check_gradients(fn, [r(*sa), r(*sb)])
    check_gradients(lambda x, y: fn(unknown(x), unknown(y)), [r(*sa), r(*sb)])


def test_batch_matmul_v1_rule() -> None:
    check_gradients(lambda x, y: make_op("BatchMatMul", [x, y], {"T": x.dtype, "adj_x": True}),
                    [r(2, 4, 3), r(2, 4, 5)])


def test_cast_rule() -> None:
    # float32 in the middle: a coarse step keeps its rounding out of the finite differences
    check_gradients(lambda x: tf.square(tf.cast(x, tf.float32)), [r(3)], eps=1e-3, rtol=1e-3,
                    atol=1e-3)
    x64 = tf.constant([1.0, 2.0], dtype=tf.float64)
    g = tf.gradients(tf.cast(x64, tf.float32) * 3.0, x64)[0]
    assert g.dtype == tf.float64 and run(g).tolist() == [3.0, 3.0]
    x = tf.placeholder(tf.float64, [2])
    assert tf.gradients(tf.cast(tf.cast(x, tf.int32), tf.float64), x) == [None]


def test_add_n_rule() -> None:
    check_gradients(lambda a, b, c: tf.add_n([a, b, c]) * a, [r(2, 3), r(2, 3), r(2, 3)])


# ------------------------------------------------------------------------------ selection


def test_select_rules() -> None:
    cond = np.array([[True, False, True], [False, True, True]])
    check_gradients(lambda c, x, y: tf.where_v2(c, x, y), [cond, r(2, 3), r(3)])
    check_gradients(lambda c, x, y: tf.where_v2(c, unknown(x), unknown(y)), [cond, r(2, 3), r(3)])
    rows = np.array([True, False])
    check_gradients(lambda c, x, y: tf.where(c, x, y), [rows, r(2, 3), r(2, 3)])
    check_gradients(lambda c, x, y: tf.where(c, x, y), [cond, r(2, 3), r(2, 3)])


def test_clip_rules() -> None:
    t = np.array([[-3.0, -0.5, 0.2], [0.7, 2.5, 1.1]])
    check_gradients(lambda x: tf.clip_by_value(x, -1.0, 1.0), [t])
    check_gradients(
        lambda x, lo, hi: make_op("ClipByValue", [x, lo, hi], {"T": x.dtype}),
        [t, np.array([-1.0, -2.0, 0.5]), np.array(1.0)])
    check_gradients(
        lambda x, lo, hi: make_op("ClipByValue", [unknown(x), unknown(lo), hi], {"T": x.dtype}),
        [t, np.array([-1.0, -2.0, 0.5]), np.array(1.0)])


# ------------------------------------------------------------------------------ reductions

REDUCE = {
    "sum": tf.reduce_sum,
    "mean": tf.reduce_mean,
    "max": tf.reduce_max,
    "min": tf.reduce_min,
    "prod": tf.reduce_prod,
    "logsumexp": tf.reduce_logsumexp,
}


@pytest.mark.parametrize("name", sorted(REDUCE))
@pytest.mark.parametrize("axis,keep", [(None, False), (1, False), ([0, 2], True), (-1, True),
                                       ([], False)])
def test_reduction_rules(name: str, axis: Any, keep: bool) -> None:
    x = pos(2, 3, 2)
    check_gradients(lambda t: REDUCE[name](t, axis=axis, keepdims=keep), [x])


@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduction_rules_run_time_shapes(name: str) -> None:
    x = pos(2, 3, 2)
    check_gradients(lambda t: REDUCE[name](unknown(t), axis=1), [x])
    check_gradients(lambda t: REDUCE[name](unknown(t), axis=[0, -1], keepdims=True), [x])
    check_gradients(lambda t: REDUCE[name](tf.placeholder_with_default(t, [None, 3, 2]),
                                           axis=[1]), [x])


def test_reduction_rule_with_run_time_axes() -> None:
    x = pos(3, 4)
    for fn in (tf.reduce_sum, tf.reduce_mean, tf.reduce_max, tf.reduce_prod):
        check_gradients(lambda t: fn(t, axis=tf.placeholder_with_default(
            np.array([-1], np.int32), [None])), [x])
        check_gradients(lambda t: fn(unknown(t), axis=tf.placeholder_with_default(
            np.array([0], np.int32), [None]), keepdims=True), [x])


def test_mean_gradient_divides_by_the_reduced_count() -> None:
    x = tf.placeholder(tf.float64, [4, 5])
    g = tf.gradients(tf.reduce_mean(x, axis=0), x)[0]
    np.testing.assert_allclose(run(g, {x: r(4, 5)}), np.full((4, 5), 0.25))
    u = tf.placeholder(tf.float64)
    g = tf.gradients(tf.reduce_mean(u), u)[0]
    np.testing.assert_allclose(run(g, {u: r(2, 5)}), np.full((2, 5), 0.1))


def test_max_gradient_splits_ties_evenly() -> None:
    x = tf.constant([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]], dtype=tf.float64)
    g = run(tf.gradients(tf.reduce_max(x, axis=1), x)[0])
    np.testing.assert_allclose(g, [[0, 0.5, 0.5], [1, 0, 0]])
    g = run(tf.gradients(tf.reduce_min(x), x)[0])
    np.testing.assert_allclose(g, [[0, 0, 0], [0, 1, 0]])


def test_prod_gradient_with_zeros() -> None:
    x = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 4.0], [1.5, 2.0, -1.0]])
    check_gradients(lambda t: tf.reduce_prod(t, axis=1), [x])
    check_gradients(lambda t: tf.reduce_prod(unknown(t), axis=0), [x])
    g = run(tf.gradients(tf.reduce_prod(tf.constant(x), axis=1), tf.constant(x))[0]
            if False else tf.gradients(tf.reduce_prod(c := tf.constant(x), axis=1), c)[0])
    np.testing.assert_allclose(g, [[6.0, 0, 0], [0, 0, 0], [-2.0, -1.5, 3.0]])


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_rules(exclusive: bool, reverse: bool) -> None:
    x = pos(3, 4)
    for fn in (tf.cumsum, tf.cumprod):
        check_gradients(lambda t: fn(t, axis=1, exclusive=exclusive, reverse=reverse), [x])
        check_gradients(lambda t: fn(unknown(t), axis=0, exclusive=exclusive, reverse=reverse),
                        [x])


# ------------------------------------------------------------------------------ coverage


def test_every_math_op_has_a_rule_or_a_declaration() -> None:
    from tensorgrid.ops import math as math_ops  # noqa: F401 - its ops are registered

    math_ops_registered = [name for name, d in registry.registered_ops().items()
                           if "/ops/math" in d.source]
    assert len(math_ops_registered) > 60
    missing = [n for n in math_ops_registered if registry.gradient_status(n) == "missing"]
    assert missing == []
    for name in ("Equal", "ArgMax", "Where", "BroadcastGradientArgs", "LogicalNot"):
        assert registry.gradient_status(name) == "none"


def test_reductions_of_scalars() -> None:
    for fn in REDUCE.values():
        check_gradients(lambda t: fn(t), [np.array(1.5)])
        check_gradients(lambda t: fn(unknown(t)), [np.array(1.5)])
