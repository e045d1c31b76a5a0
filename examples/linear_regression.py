"""Linear regression, the classic TensorFlow 1.x way: placeholders X and Y, a weight and a bias
Variable, the squared loss and a GradientDescentOptimizer, trained in a ``tf.Session``.

Synthetic data only (there is no network to download a data set from): ``y = 0.3 x + 0.7`` plus
noise, drawn here with a fixed seed.

    python examples/linear_regression.py                       # in this process: tf.Session()
    python examples/linear_regression.py --steps 50            # a short run (what the tests do)
    python examples/linear_regression.py --target http://127.0.0.1:8080

With ``--target`` the same graph runs on a cluster through its master (the HTTP master of
``python -m services.master``, or ``grpc://`` of a ``tf.train.Server``): the variables live on
``/job:ps/task:0`` and the math runs on ``/job:worker/task:0``.

Prints ``step N loss L`` every ``--log-every`` steps, then ``final loss L W w b b``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence

import numpy as np

import tensorgrid as tf

TRUE_W, TRUE_B = 0.3, 0.7


def synthetic_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points of ``y = 0.3 x + 0.7 + noise`` with ``x`` in [0, 10)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 10.0, n).astype(np.float32)
    y = (TRUE_W * x + TRUE_B + rng.normal(0.0, 0.05, n)).astype(np.float32)
    return x, y


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="",
                        help="a master to run on (http://HOST:PORT or grpc://HOST:PORT); "
                             "default: this process")
    parser.add_argument("--steps", type=int, default=500, help="training steps (default: 500)")
    parser.add_argument("--learning-rate", type=float, default=0.04)
    parser.add_argument("--samples", type=int, default=100, help="synthetic points")
    parser.add_argument("--log-every", type=int, default=0,
                        help="print the loss every N steps (default: steps / 10)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    train_x, train_y = synthetic_data(args.samples)
    log_every = args.log_every or max(1, args.steps // 10)
    on_cluster = bool(args.target)

    # on a cluster: the variables on the parameter server, the math on a worker
    ps = tf.device("/job:ps/task:0") if on_cluster else contextlib.nullcontext()
    worker = tf.device("/job:worker/task:0") if on_cluster else contextlib.nullcontext()
    X = tf.placeholder(tf.float32, name="X")  # the classic example's names
    Y = tf.placeholder(tf.float32, name="Y")
    with ps:
        W = tf.Variable(0.0, name="weight")
        b = tf.Variable(0.0, name="bias")
    with worker:
        pred = tf.add(tf.multiply(X, W), b)
        cost = tf.reduce_sum(tf.pow(pred - Y, 2)) / (2 * args.samples)
        optimizer = tf.train.GradientDescentOptimizer(args.learning_rate).minimize(cost)
    init = tf.global_variables_initializer()

    feed = {X: train_x, Y: train_y}
    with tf.Session(args.target) as sess:
        sess.run(init)
        for step in range(1, args.steps + 1):
            _, loss = sess.run([optimizer, cost], feed_dict=feed)
            if step % log_every == 0 or step == 1:
                print(f"step {step} loss {loss:.6f}", flush=True)
        loss, w, bias = sess.run([cost, W, b], feed_dict=feed)
    print(f"final loss {loss:.6f} W {w:.4f} b {bias:.4f} (true W {TRUE_W} b {TRUE_B})",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
