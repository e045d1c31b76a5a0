"""The graphs the benchmarks run (chain, seed, linreg, MLP, CNN), written once against the TF1 names of ``frameworks.Api``.

The data are fixed synthetic batches drawn with numpy's ``default_rng(seed)`` and held as constants
on the device that computes with them, so no feed and no input pipeline is measured, and both
frameworks see the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from frameworks import Api

CHAIN_LENGTH = 100
SEED_VALUE = 20.0  # [[1, 2, 3, 4]] @ [[2], [2], [2], [2]]


def build_chain(api: Api) -> Any:
    """A chain of ``CHAIN_LENGTH`` scalar adds: x = 0; x = x + 1 (100 times). Evaluates to 100.

    The 100 adds share one constant 1.0, so common-subexpression elimination, on or off, leaves the
    same 102 nodes on both frameworks.
    """
    tf = api.tf
    x = tf.constant(0.0)
    one = tf.constant(1.0)
    for _ in range(CHAIN_LENGTH):
        x = tf.add(x, one)
    return x


def build_seed(api: Api) -> tuple[Any, Any, Any]:
    """The seed example: ``matmul(Variable([[1,2,3,4]]), Variable([[2],[2],[2],[2]]))``.

    Returns:
        (x, w, matmul), where the matmul evaluates to [[20.]].
    """
    tf = api.tf
    x = tf.Variable([[1.0, 2.0, 3.0, 4.0]], name="x")
    w = tf.Variable([[2.0], [2.0], [2.0], [2.0]], name="w")
    return x, w, tf.matmul(x, w)


@dataclass
class Model:
    """A training graph: what to run, what to read, and how many examples one step consumes."""

    name: str
    train_op: Any
    loss: Any
    global_step: Any
    optimizer: Any
    batch: int


OptimizerWrap = Callable[[Any], Any] | None


def _optimizer(api: Api, lr: float, wrap: OptimizerWrap, name: str = "GradientDescent") -> Any:
    opt = api[f"train.{name}Optimizer"](lr)
    return wrap(opt) if wrap is not None else opt


def build_linreg(api: Api, wrap: OptimizerWrap = None, batch: int = 256, features: int = 1000,
                 seed: int = 0, lr: float = 0.01) -> Model:
    """Linear regression, ``features`` inputs, mean squared error, gradient descent.

    y = X w_true + 0.5 + noise; w and b start at zero.
    """
    tf = api.tf
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, features), dtype=np.float32)
    w_true = rng.standard_normal((features, 1), dtype=np.float32)
    y = x @ w_true + 0.5 + 0.01 * rng.standard_normal((batch, 1), dtype=np.float32)
    gs = api["train.get_or_create_global_step"]()
    zeros = api["zeros_initializer"]
    w = api["get_variable"]("w", [features, 1], initializer=zeros())
    b = api["get_variable"]("b", [], initializer=zeros())
    pred = tf.matmul(tf.constant(x), w) + b
    loss = tf.reduce_mean(tf.square(pred - tf.constant(y.astype(np.float32))))
    opt = _optimizer(api, lr, wrap)
    return Model("linreg", opt.minimize(loss, global_step=gs), loss, gs, opt, batch)


def build_mlp(api: Api, wrap: OptimizerWrap = None, batch: int = 128, seed: int = 0,
              lr: float = 0.01, hidden: int = 256, optimizer: str = "GradientDescent",
              name: str = "mlp", fresh: bool = False) -> Model:
    """MLP 784-``hidden``-10: relu hidden layer, sparse softmax cross-entropy, ``optimizer``
    (default: 784-256-10, gradient descent).

    Weights start glorot-uniform, biases at zero; labels are uniform in [0, 10). With ``fresh``
    every step draws a new batch in the graph (standard normal images, uniform labels), so the
    model can never fit it: the gradients stay as noisy as the first ones and every update moves
    the weights as much as the early ones do (a fixed batch is fitted within a few hundred
    steps, after which the updates shrink).
    """
    tf = api.tf
    rng = np.random.default_rng(seed)
    x: Any = rng.standard_normal((batch, 784), dtype=np.float32)
    labels: Any = rng.integers(0, 10, size=(batch,)).astype(np.int32)
    if fresh:
        x = tf.random_normal([batch, 784], seed=seed + 1)
        labels = tf.random_uniform([batch], 0, 10, dtype=tf.int32, seed=seed + 2)
    gs = api["train.get_or_create_global_step"]()
    glorot, zeros = api["glorot_uniform_initializer"], api["zeros_initializer"]
    w1 = api["get_variable"]("W1", [784, hidden], initializer=glorot())
    b1 = api["get_variable"]("b1", [hidden], initializer=zeros())
    w2 = api["get_variable"]("W2", [hidden, 10], initializer=glorot())
    b2 = api["get_variable"]("b2", [10], initializer=zeros())
    h = api["nn.relu"](tf.matmul(x if fresh else tf.constant(x), w1) + b1)
    logits = tf.matmul(h, w2) + b2
    xent = api["nn.sparse_softmax_cross_entropy_with_logits"](
        labels=labels if fresh else tf.constant(labels), logits=logits)
    loss = tf.reduce_mean(xent)
    opt = _optimizer(api, lr, wrap, optimizer)
    return Model(name, opt.minimize(loss, global_step=gs), loss, gs, opt, batch)


def build_wide(api: Api, wrap: OptimizerWrap = None, batch: int = 64, seed: int = 0,
               lr: float = 0.001) -> Model:
    """MLP 784-1024-10 trained with Adam: 3.2 MB of hidden weights pulled from the ps and 3.2 MB
    of their gradient pushed back per step, the traffic a cross-host link is measured with."""
    return build_mlp(api, wrap, batch, seed, lr, hidden=1024, optimizer="Adam", name="wide")


def build_wide_fresh(api: Api, wrap: OptimizerWrap = None, batch: int = 64, seed: int = 0,
                     lr: float = 0.001) -> Model:
    """``build_wide`` on a new random batch every step: the same traffic, with updates that never
    shrink (what a delta of the weights on the wire is measured against at its least favourable)."""
    return build_mlp(api, wrap, batch, seed, lr, hidden=1024, optimizer="Adam",
                     name="wide_fresh", fresh=True)


def build_cnn(api: Api, wrap: OptimizerWrap = None, batch: int = 64, seed: int = 0,
              lr: float = 0.01) -> Model:
    """LeNet-style CNN on 28x28x1 images: conv 5x5 SAME 32 + relu, max pool 2x2, conv 5x5 SAME 64
    + relu, max pool 2x2, dense 1024 + relu, dense 10; sparse softmax cross-entropy, gradient
    descent.

    Weights start glorot-uniform, biases at zero; images are standard normal, labels uniform in
    [0, 10).
    """
    tf = api.tf
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, 28, 28, 1), dtype=np.float32)
    labels = rng.integers(0, 10, size=(batch,)).astype(np.int32)
    gs = api["train.get_or_create_global_step"]()
    glorot, zeros = api["glorot_uniform_initializer"], api["zeros_initializer"]
    relu, conv2d, max_pool = api["nn.relu"], api["nn.conv2d"], api["nn.max_pool"]
    h = tf.constant(x)
    for i, (c_in, c_out) in enumerate(((1, 32), (32, 64)), start=1):
        k = api["get_variable"](f"conv{i}/W", [5, 5, c_in, c_out], initializer=glorot())
        b = api["get_variable"](f"conv{i}/b", [c_out], initializer=zeros())
        h = relu(conv2d(h, k, strides=[1, 1, 1, 1], padding="SAME") + b)
        h = max_pool(h, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
    h = tf.reshape(h, [batch, 7 * 7 * 64])
    w3 = api["get_variable"]("fc1/W", [7 * 7 * 64, 1024], initializer=glorot())
    b3 = api["get_variable"]("fc1/b", [1024], initializer=zeros())
    w4 = api["get_variable"]("fc2/W", [1024, 10], initializer=glorot())
    b4 = api["get_variable"]("fc2/b", [10], initializer=zeros())
    hidden = relu(tf.matmul(h, w3) + b3)
    logits = tf.matmul(hidden, w4) + b4
    xent = api["nn.sparse_softmax_cross_entropy_with_logits"](labels=tf.constant(labels),
                                                              logits=logits)
    loss = tf.reduce_mean(xent)
    opt = _optimizer(api, lr, wrap)
    return Model("cnn", opt.minimize(loss, global_step=gs), loss, gs, opt, batch)


MODELS: dict[str, Callable[..., Model]] = {"linreg": build_linreg, "mlp": build_mlp,
                                           "wide": build_wide, "wide_fresh": build_wide_fresh,
                                           "cnn": build_cnn}
