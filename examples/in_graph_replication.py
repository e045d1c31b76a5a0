"""In-graph replication: one client builds one graph with a tower of the model on each worker
(``/job:worker/task:0`` and ``/job:worker/task:1``), averages the towers' gradients on the
parameter server and applies them there: synchronous data-parallel training from one client.

Synthetic data only (there is no network to download a data set from): Gaussian blobs, one per
class, drawn with a fixed seed (``mlp.py``). Each tower gets its own half of every batch.

    python examples/in_graph_replication.py                  # launches ps, 2 workers and a master
    python examples/in_graph_replication.py --steps 30       # a short run
    python examples/in_graph_replication.py --target http://127.0.0.1:8080

Without ``--target`` it starts its own cluster: ``python -m services.ps``, two
``python -m services.worker`` and the HTTP master ``python -m services.master``, on free loopback
ports, and stops them (by PID) at the end. With ``--target`` the master's cluster must have a
``ps`` job and a ``worker`` job with two tasks.

Prints ``step S loss L`` (the towers' mean loss) and ``final loss L accuracy A``.
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

TOWERS = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="",
                        help="a master (http://HOST:PORT); default: launch a cluster of processes")
    parser.add_argument("--steps", type=int, default=200, help="training steps (default: 200)")
    parser.add_argument("--batch-size", type=int, default=64, help="split across the towers")
    parser.add_argument("--hidden", type=int, default=16, help="hidden units")
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--log-every", type=int, default=0,
                        help="print the loss every N steps (default: steps / 10)")
    return parser


def make_params(hidden: int) -> list[tf.Variable]:
    """The MLP's variables: hidden weights and biases, output weights and biases."""
    return [tf.Variable(tf.truncated_normal([FEATURES, hidden], stddev=0.3, seed=1), name="w1"),
            tf.Variable(tf.zeros([hidden]), name="b1"),
            tf.Variable(tf.truncated_normal([hidden, CLASSES], stddev=0.3, seed=2), name="w2"),
            tf.Variable(tf.zeros([CLASSES]), name="b2")]


def tower(x: tf.Tensor, labels: tf.Tensor, params: list[tf.Variable]
          ) -> tuple[tf.Tensor, tf.Tensor]:
    """One replica of the model: its loss and its number of correct predictions."""
    w1, b1, w2, b2 = params
    logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
    correct = tf.reduce_sum(tf.cast(tf.equal(tf.cast(tf.argmax(logits, 1), tf.int32), labels),
                                    tf.float32))
    return loss, correct


def average_gradients(tower_grads: list[list[tuple[Any, Any]]]) -> list[tuple[Any, Any]]:
    """The mean of each variable's gradients over the towers (TensorFlow's multi-GPU recipe)."""
    averaged = []
    for grads_and_var in zip(*tower_grads):
        var = grads_and_var[0][1]
        grad = tf.add_n([g for g, _ in grads_and_var]) / float(len(grads_and_var))
        averaged.append((grad, var))
    return averaged


@dataclass
class Model:
    """The graph's handles: each tower's placeholders, and what to run."""

    feeds: list[tuple[tf.Tensor, tf.Tensor]]
    loss: tf.Tensor
    accuracy: tf.Tensor
    train_op: tf.Operation
    global_step: tf.Variable

    def feed_dict(self, xs: np.ndarray, ys: np.ndarray) -> dict[Any, np.ndarray]:
        """Each tower its share of the batch."""
        out: dict[Any, np.ndarray] = {}
        parts = zip(np.array_split(xs, len(self.feeds)), np.array_split(ys, len(self.feeds)))
        for (x, labels), (x_part, label_part) in zip(self.feeds, parts):
            out[x], out[labels] = x_part, label_part
        return out


def build(args: argparse.Namespace) -> Model:
    """The replicated graph in the default graph: variables, averaging and the update on the
    ps, one tower per worker."""
    opt = tf.train.GradientDescentOptimizer(args.learning_rate)
    with tf.device("/job:ps/task:0"):
        global_step = tf.train.get_or_create_global_step()
        params = make_params(args.hidden)
    feeds, losses, corrects, counts, tower_grads = [], [], [], [], []
    for i in range(TOWERS):
        with tf.device(f"/job:worker/task:{i}"), tf.name_scope(f"tower_{i}"):
            x = tf.placeholder(tf.float32, [None, FEATURES], name="x")
            labels = tf.placeholder(tf.int32, [None], name="labels")
            loss, correct = tower(x, labels, params)
            tower_grads.append(opt.compute_gradients(loss, var_list=params))
            counts.append(tf.cast(tf.shape(x)[0], tf.float32))
        feeds.append((x, labels))
        losses.append(loss)
        corrects.append(correct)
    with tf.device("/job:ps/task:0"):
        train_op = opt.apply_gradients(average_gradients(tower_grads), global_step=global_step)
        mean_loss = tf.add_n(losses) / float(TOWERS)  # the towers' losses, for printing
        accuracy = tf.add_n(corrects) / tf.add_n(counts)
    return Model(feeds, mean_loss, accuracy, train_op, global_step)


def run(target: str, args: argparse.Namespace) -> None:
    """Build the replicated model and train it on the master at ``target``."""
    model = build(args)
    with tf.Session(target) as sess:
        fit(sess, model, args.steps, args.batch_size, args.log_every)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run_on_cluster(args.target, lambda target: run(target, args), ps=1, workers=TOWERS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
