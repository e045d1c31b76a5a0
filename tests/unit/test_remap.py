"""The remapper pass (compiler/remap.py): Conv2D + bias add (+ Relu) fused into one _FusedConv2D
node only where nothing else reads the intermediate results, and the fused kernel computing what
the separate ops do (strides, dilations, SAME/VALID, odd sizes, batch 1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
import tensorgrid.nn as nn
from tensorgrid.compiler import passes
from tensorgrid.compiler.infer import infer_graph
from tensorgrid.compiler.prune import prune
from tensorgrid.compiler.remap import fuse_conv_bias_relu
from tensorgrid.core import dtypes, errors
from tensorgrid.core.ir import NodeDef
from tensorgrid.core.registry import TensorSpec
from tensorgrid.framework.convert import make_op

RNG = np.random.default_rng(7)


def optimized(g: tf.Graph, feeds: Sequence[Any], fetches: Sequence[Any]) -> list[NodeDef]:
    """The graph's nodes for a step feeding ``feeds`` and fetching ``fetches``, after every
    pass (fed inputs, so that folding leaves the convolutions to the remapper)."""
    nodes = g.as_graph_def().nodes
    specs = infer_graph(nodes)
    pruned = prune(nodes, specs, [t.name for t in feeds], [t.name for t in fetches], [])
    arg_specs = {n.name: [TensorSpec(n.attrs["T"], n.attrs["shape"])] for n in pruned.nodes
                 if n.op == "_Arg"}
    return passes.optimize(pruned.nodes, {**specs, **arg_specs}, frozenset())


def ops_of(nodes: Sequence[NodeDef]) -> dict[str, str]:
    return {n.name: n.op for n in nodes}


def ref_conv(x: np.ndarray, f: np.ndarray, s: tuple[int, int], d: tuple[int, int],
             padding: str) -> np.ndarray:
    """Direct loops over output pixels and taps, as TensorFlow defines SAME/VALID."""
    n, h, w, _ = x.shape
    kh, kw, _, oc = f.shape

    def axis(size: int, k: int, st: int, dl: int) -> tuple[int, int]:
        eff = (k - 1) * dl + 1
        if padding == "VALID":
            return (size - eff) // st + 1, 0
        out = -(-size // st)
        return out, max((out - 1) * st + eff - size, 0) // 2

    (oh, pt), (ow, pl) = axis(h, kh, s[0], d[0]), axis(w, kw, s[1], d[1])
    out = np.zeros((n, oh, ow, oc))
    for y in range(oh):
        for xx in range(ow):
            for i in range(kh):
                for j in range(kw):
                    r, c = y * s[0] + i * d[0] - pt, xx * s[1] + j * d[1] - pl
                    if 0 <= r < h and 0 <= c < w:
                        out[:, y, xx, :] += x[:, r, c, :] @ f[i, j]
    return out


def conv_bias_relu(x: Any, f: np.ndarray, b: np.ndarray, **kw: Any) -> tuple[Any, Any]:
    """(conv + b, relu(conv + b)) built with the python API."""
    pre = nn.conv2d(x, tf.constant(f), **kw) + tf.constant(b)
    return pre, nn.relu(pre)


# ------------------------------------------------------------------------------ the pass


def test_conv_add_relu_becomes_one_node_named_after_the_relu() -> None:
    x = RNG.standard_normal((2, 6, 6, 3), dtype=np.float32)
    f = RNG.standard_normal((3, 3, 3, 4), dtype=np.float32)
    b = RNG.standard_normal(4, dtype=np.float32)
    g = tf.Graph()
    with g.as_default():
        xin = tf.placeholder(tf.float32, x.shape)
        _, out = conv_bias_relu(xin, f, b, strides=[1, 1, 1, 1], padding="SAME")
    nodes = optimized(g, [xin], [out])
    ops = ops_of(nodes)
    assert ops[out.op.name] == "_FusedConv2D"
    assert "Conv2D" not in ops.values() and "AddV2" not in ops.values()
    fused = {n.name: n for n in nodes}[out.op.name]
    assert list(fused.attrs["fused_ops"]) == ["BiasAdd", "Relu"]
    with tf.Session(graph=g) as sess:
        got = sess.run(out, {xin: x})
    want = np.maximum(ref_conv(x, f, (1, 1), (1, 1), "SAME") + b, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_bias_first_and_bias_add_without_relu_are_fused() -> None:
    x = RNG.standard_normal((1, 5, 7, 2), dtype=np.float32)
    f = RNG.standard_normal((2, 3, 2, 3), dtype=np.float32)
    b = RNG.standard_normal(3, dtype=np.float32)
    g = tf.Graph()
    with g.as_default():
        xin = tf.placeholder(tf.float32, x.shape)
        conv = nn.conv2d(xin, tf.constant(f), strides=[1, 1, 1, 1], padding="VALID")
        first = tf.constant(b) + conv  # bias on the left
        conv2 = nn.conv2d(xin, tf.constant(f), strides=[1, 2, 2, 1], padding="SAME")
        biased = nn.bias_add(conv2, tf.constant(b))  # BiasAdd, no relu
        total = tf.reduce_sum(first) + tf.reduce_sum(biased)
    nodes = optimized(g, [xin], [total])
    fused = [n for n in nodes if n.op == "_FusedConv2D"]
    assert sorted(n.name for n in fused) == sorted([first.op.name, biased.op.name])
    assert all(list(n.attrs["fused_ops"]) == ["BiasAdd"] for n in fused)
    with tf.Session(graph=g) as sess:
        got = sess.run(total, {xin: x})
    want = (ref_conv(x, f, (1, 1), (1, 1), "VALID") + b).sum() + \
        (ref_conv(x, f, (2, 2), (1, 1), "SAME") + b).sum()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_nothing_is_fused_when_an_intermediate_has_another_reader() -> None:
    x = RNG.standard_normal((1, 4, 4, 2), dtype=np.float32)
    f = RNG.standard_normal((3, 3, 2, 2), dtype=np.float32)
    b = RNG.standard_normal(2, dtype=np.float32)
    g = tf.Graph()
    with g.as_default():
        xin = tf.placeholder(tf.float32, x.shape)
        pre, out = conv_bias_relu(xin, f, b, strides=[1, 1, 1, 1], padding="SAME")
        conv = pre.op.inputs[0]
        also = tf.reduce_sum(conv)  # the convolution read twice
    ops = ops_of(optimized(g, [xin], [out, also]))
    assert "_FusedConv2D" not in ops.values() and ops[conv.op.name] == "Conv2D"
    # the pre-activation fetched: conv + bias fuse, the relu stays its own node
    ops = ops_of(optimized(g, [xin], [out, pre]))
    assert ops[pre.op.name] == "_FusedConv2D" and ops[out.op.name] == "Relu"
    with tf.Session(graph=g) as sess:
        got_out, got_pre = sess.run([out, pre], {xin: x})
    want = ref_conv(x, f, (1, 1), (1, 1), "SAME") + b
    np.testing.assert_allclose(got_pre, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_out, np.maximum(want, 0), rtol=1e-4, atol=1e-4)


def test_an_add_that_is_no_bias_is_left_alone() -> None:
    x = RNG.standard_normal((2, 4, 4, 2), dtype=np.float32)
    f = RNG.standard_normal((3, 3, 2, 3), dtype=np.float32)
    g = tf.Graph()
    with g.as_default():
        xin = tf.placeholder(tf.float32, x.shape)
        conv = nn.conv2d(xin, tf.constant(f), strides=[1, 1, 1, 1], padding="SAME")
        full = nn.relu(conv + tf.constant(np.ones((2, 4, 4, 3), np.float32)))  # not a vector
        scalar = nn.relu(nn.conv2d(xin, tf.constant(f), [1, 1, 1, 1], "SAME") + 1.0)
    ops = ops_of(optimized(g, [xin], [full, scalar]))
    assert "_FusedConv2D" not in ops.values()


def test_nodes_on_different_devices_are_left_alone() -> None:
    f32 = dtypes.float32
    specs = {"conv": [TensorSpec(f32, tf.TensorShape([1, 4, 4, 3]))],
             "b": [TensorSpec(f32, tf.TensorShape([3]))]}

    def graph(add_device: str) -> list[NodeDef]:
        return [NodeDef("x", "Placeholder"), NodeDef("f", "Placeholder"),
                NodeDef("b", "Placeholder"),
                NodeDef("conv", "Conv2D", ("x", "f"), "/job:a/cpu:0"),
                NodeDef("add", "AddV2", ("conv", "b", "^x"), add_device),
                NodeDef("out", "Identity", ("add",))]

    apart = graph("/job:b/cpu:0")
    assert fuse_conv_bias_relu(apart, specs) == apart
    together = fuse_conv_bias_relu(graph("/job:a/cpu:0"), specs)
    fused = {n.name: n for n in together}["add"]
    assert fused.op == "_FusedConv2D" and fused.inputs == ("x", "f", "b", "^x")
    assert [n.name for n in together] == ["x", "f", "b", "add", "out"]


# ------------------------------------------------------------------------------ the fused kernel


@pytest.mark.parametrize("shape,k,s,d,padding,relu", [
    ((1, 7, 5, 3), (3, 3), (1, 1), (1, 1), "SAME", True),
    ((2, 9, 8, 4), (5, 5), (2, 2), (1, 1), "SAME", True),
    ((3, 8, 9, 2), (3, 2), (1, 1), (2, 2), "VALID", False),
    ((2, 6, 6, 8), (1, 1), (1, 1), (1, 1), "VALID", True),
    ((5, 11, 11, 3), (5, 5), (3, 2), (1, 1), "VALID", True),
])
def test_fused_kernel_matches_conv_plus_bias_plus_relu(shape, k, s, d, padding, relu) -> None:
    x = RNG.standard_normal(shape, dtype=np.float32)
    f = RNG.standard_normal((*k, shape[3], 5), dtype=np.float32)
    b = RNG.standard_normal(5, dtype=np.float32)
    fused_ops = ["BiasAdd", "Relu"] if relu else ["BiasAdd"]
    with tf.Graph().as_default():
        out = make_op("_FusedConv2D", [tf.constant(x), tf.constant(f), tf.constant(b)],
                      {"strides": [1, *s, 1], "dilations": [1, *d, 1], "padding": padding,
                       "fused_ops": fused_ops}, name="fused")
        with tf.Session() as sess:
            got = sess.run(out)
    want = ref_conv(x.astype(np.float64), f.astype(np.float64), s, d, padding) + b
    if relu:
        want = np.maximum(want, 0)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_fused_kernel_refuses_a_bias_of_the_wrong_size() -> None:
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [1, 4, 4, 2])
        b = tf.placeholder(tf.float32, [None])
        f = tf.constant(np.ones((3, 3, 2, 3), np.float32))
        out = make_op("_FusedConv2D", [x, f, b], {"strides": [1, 1, 1, 1], "padding": "SAME",
                                                  "fused_ops": ["BiasAdd", "Relu"]},
                      name="fused")
        with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="bias"):
            sess.run(out, {x: np.ones((1, 4, 4, 2), np.float32), b: np.ones(2, np.float32)})


# ------------------------------------------------------------------------------ pool gradient


def pool_grads(x: np.ndarray, g: np.ndarray, ksize: list[int], strides: list[int],
               padding: str) -> tuple[np.ndarray, np.ndarray]:
    """(the fused kernel's result, ReluGrad(MaxPoolGrad) run as two nodes) in one step: the
    separate pair stays unfused because its MaxPoolGrad is fetched too."""
    attrs = {"ksize": ksize, "strides": strides, "padding": padding}
    with tf.Graph().as_default():
        xt, gt = tf.constant(x), tf.constant(g)
        y = nn.max_pool(xt, ksize, strides, padding)
        fused = make_op("_FusedMaxPoolGrad", [xt, y, gt], {**attrs, "fused_ops": ["ReluGrad"]},
                        name="fused")
        pool_grad = make_op("MaxPoolGrad", [xt, y, gt], attrs)
        separate = make_op("ReluGrad", [pool_grad, xt])
        got, want, _ = run_all([fused, separate, pool_grad])
    return got, want


def run_all(fetches: list[Any]) -> list[np.ndarray]:
    with tf.Session() as sess:
        return sess.run(fetches)


@pytest.mark.parametrize("shape,ksize,strides,padding", [
    ((3, 8, 6, 8), [1, 2, 2, 1], [1, 2, 2, 1], "VALID"),  # tiled: the masked maxima
    ((2, 7, 9, 3), [1, 3, 3, 1], [1, 2, 2, 1], "SAME"),  # overlapping and padded
    ((1, 6, 6, 16), [1, 2, 2, 1], [1, 2, 2, 1], "SAME"),  # tiled, ties on 64-bit words
])
def test_fused_pool_grad_equals_max_pool_grad_then_relu_grad(shape, ksize, strides,
                                                             padding) -> None:
    x = np.maximum(RNG.standard_normal(shape), 0).astype(np.float32)  # a relu's output: ties
    x[0, 0, 0, 0] = np.nan if padding == "VALID" else x[0, 0, 0, 0]  # NaN: the per-tap path
    with tf.Graph().as_default():
        y_shape = nn.max_pool(tf.constant(x), ksize, strides, padding).shape.as_list()
    g = RNG.standard_normal(y_shape).astype(np.float32)
    got, want = pool_grads(x, g, ksize, strides, padding)
    np.testing.assert_array_equal(got, want)
    x2 = np.maximum(RNG.standard_normal(shape), 0).astype(np.float32)
    got, want = pool_grads(x2, g, ksize, strides, padding)
    np.testing.assert_array_equal(got, want)
    assert np.count_nonzero(got) < got.size


def test_relu_then_max_pool_gradient_is_fused_only_when_the_pool_grad_is_read_once() -> None:
    x = RNG.standard_normal((2, 6, 6, 4), dtype=np.float32)
    g = tf.Graph()
    with g.as_default():
        xin = tf.placeholder(tf.float32, x.shape)
        act = nn.relu(xin)
        loss = tf.reduce_sum(nn.max_pool(act, [1, 2, 2, 1], [1, 2, 2, 1], "VALID") ** 2)
        (dx,) = tf.gradients(loss, [xin])
    nodes = optimized(g, [xin], [dx])
    ops = ops_of(nodes)
    assert ops[dx.op.name] == "_FusedMaxPoolGrad" and "MaxPoolGrad" not in ops.values()
    with tf.Session(graph=g) as sess:
        got = sess.run(dx, {xin: x})
    pool_grad = dx.op.inputs[0]
    assert pool_grad.op.type == "MaxPoolGrad"
    ops = ops_of(optimized(g, [xin], [dx, pool_grad]))  # the pool's gradient fetched as well
    assert ops[dx.op.name] == "ReluGrad" and ops[pool_grad.op.name] == "MaxPoolGrad"
    with tf.Session(graph=g) as sess:
        want, _ = sess.run([dx, pool_grad], {xin: x})
    np.testing.assert_array_equal(got, want)
