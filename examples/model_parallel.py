"""Model parallelism: an MLP whose layers live on different workers, trained from one client.

The first hidden layer runs on ``/job:worker/task:0``, the second hidden layer and the output
layer on ``/job:worker/task:1``; every variable lives on ``/job:ps/task:0``. Activations cross
from worker 0 to worker 1 on the forward pass and their gradients come back on the backward pass
(``colocate_gradients_with_ops=True`` keeps each layer's backward ops on its worker).

Synthetic data only (there is no network to download a data set from): Gaussian blobs, one per
class, drawn with a fixed seed (``mlp.py``).

    python examples/model_parallel.py                  # launches ps, 2 workers and a master
    python examples/model_parallel.py --steps 30       # a short run
    python examples/model_parallel.py --target http://127.0.0.1:8080

Without ``--target`` it starts its own cluster (``python -m services.ps``, two
``python -m services.worker`` and the HTTP master) on free loopback ports and stops it (by PID)
at the end.

Prints ``step S loss L`` and ``final loss L accuracy A``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from launch import run_on_cluster
from mlp import CLASSES, FEATURES, fit

import tensorgrid as tf


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="",
                        help="a master (http://HOST:PORT); default: launch a cluster of processes")
    parser.add_argument("--steps", type=int, default=200, help="training steps (default: 200)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=32, help="units of each hidden layer")
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--log-every", type=int, default=0,
                        help="print the loss every N steps (default: steps / 10)")
    return parser


def dense(x: tf.Tensor, n_in: int, n_out: int, name: str, seed: int) -> tf.Tensor:
    """``x @ W + b``: the math where the caller's device scope says, the variables on the ps."""
    with tf.device("/job:ps/task:0"):
        w = tf.Variable(tf.truncated_normal([n_in, n_out], stddev=0.3, seed=seed),
                        name=f"{name}/weights")
        b = tf.Variable(tf.zeros([n_out]), name=f"{name}/biases")
    return tf.matmul(x, w) + b


@dataclass
class Model:
    """The graph's handles: what to feed, what to run."""

    x: tf.Tensor
    labels: tf.Tensor
    loss: tf.Tensor
    accuracy: tf.Tensor
    train_op: tf.Operation
    global_step: tf.Variable

    def feed_dict(self, xs: np.ndarray, ys: np.ndarray) -> dict[Any, np.ndarray]:
        return {self.x: xs, self.labels: ys}


def build(args: argparse.Namespace) -> Model:
    """The split MLP in the default graph: layer 1 on worker 0, layers 2 and 3 on worker 1."""
    with tf.device("/job:ps/task:0"):
        global_step = tf.train.get_or_create_global_step()
    x = tf.placeholder(tf.float32, [None, FEATURES], name="x")
    labels = tf.placeholder(tf.int32, [None], name="labels")
    with tf.device("/job:worker/task:0"):
        hidden1 = tf.nn.relu(dense(x, FEATURES, args.hidden, "hidden1", seed=1))
    with tf.device("/job:worker/task:1"):
        hidden2 = tf.nn.relu(dense(hidden1, args.hidden, args.hidden, "hidden2", seed=2))
        logits = dense(hidden2, args.hidden, CLASSES, "logits", seed=3)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits), name="loss")
        correct = tf.equal(tf.cast(tf.argmax(logits, 1), tf.int32), labels)
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32), name="accuracy")
    train_op = tf.train.GradientDescentOptimizer(args.learning_rate).minimize(
        loss, global_step=global_step, colocate_gradients_with_ops=True)
    return Model(x, labels, loss, accuracy, train_op, global_step)


def run(target: str, args: argparse.Namespace) -> None:
    """Build the model and train it on the master at ``target``."""
    model = build(args)
    with tf.Session(target) as sess:
        fit(sess, model, args.steps, args.batch_size, args.log_every)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run_on_cluster(args.target, lambda target: run(target, args), ps=1, workers=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
