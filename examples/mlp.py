"""What the MLP examples share: synthetic data and the training loop.

Synthetic data only (there is no network here to download a data set from):
``classification_data`` draws Gaussian blobs, one per class, with a fixed seed, so every process of
an example draws the same points and can take its own shard of them.

``fit`` is the TensorFlow 1.x loop of the single-client examples (in-graph replication, model
parallelism): initialize, run mini-batch steps printing ``step S loss L``, evaluate on all the data
and print ``final loss L accuracy A global step G``.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

import tensorgrid as tf

FEATURES = 8
CLASSES = 3
SAMPLES = 2048


def classification_data(n: int = SAMPLES, features: int = FEATURES, classes: int = CLASSES,
                        seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points in ``features`` dimensions around one random center per class.

    Returns:
        (x, labels): float32 ``[n, features]`` and int32 ``[n]`` in ``[0, classes)``.
    """
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, 1.5, (classes, features))
    labels = rng.integers(0, classes, n)
    x = centers[labels] + rng.normal(0.0, 1.0, (n, features))
    return x.astype(np.float32), labels.astype(np.int32)


def batch(x: np.ndarray, labels: np.ndarray, step: int, size: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """The ``step``-th mini-batch of ``size`` points, cycling through the data."""
    start = (step * size) % len(x)
    idx = np.arange(start, start + size) % len(x)
    return x[idx], labels[idx]


class Model(Protocol):
    """What ``fit`` needs of an example's graph."""

    loss: tf.Tensor
    accuracy: tf.Tensor
    train_op: tf.Operation
    global_step: tf.Variable

    def feed_dict(self, xs: np.ndarray, ys: np.ndarray) -> dict[Any, np.ndarray]:
        """The feeds of a batch of inputs and labels."""
        ...


def fit(sess: tf.Session, model: Model, steps: int, batch_size: int, log_every: int = 0
        ) -> tuple[float, float]:
    """Initialize ``model``'s variables and train it for ``steps`` mini-batch steps, printing the
    loss every ``log_every`` steps (default: a tenth of them).

    Returns:
        The final loss and accuracy on the whole data set.
    """
    x_data, label_data = classification_data()
    log_every = log_every or max(1, steps // 10)
    sess.run(tf.global_variables_initializer())
    for step in range(1, steps + 1):
        xb, yb = batch(x_data, label_data, step - 1, batch_size)
        _, value = sess.run([model.train_op, model.loss], feed_dict=model.feed_dict(xb, yb))
        if step % log_every == 0 or step == 1:
            print(f"step {step} loss {value:.4f}", flush=True)
    loss, accuracy, global_step = sess.run([model.loss, model.accuracy, model.global_step],
                                           feed_dict=model.feed_dict(x_data, label_data))
    print(f"final loss {loss:.4f} accuracy {accuracy:.3f} global step {global_step}", flush=True)
    return float(loss), float(accuracy)
