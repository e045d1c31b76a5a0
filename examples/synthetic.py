"""Synthetic data for the MLP examples (there is no network here to download a data set from).

``classification_data`` draws Gaussian blobs, one per class, with a fixed seed, so every process of
an example draws the same points and can take its own shard of them.
"""

from __future__ import annotations

import numpy as np

FEATURES = 8
CLASSES = 3


def classification_data(n: int, features: int = FEATURES, classes: int = CLASSES,
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
