"""Large products pick BLAS's threads or one thread by measured speed (``kernels.parallel``)."""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import tensorgrid as tf
from tensorgrid.kernels import parallel
from tensorgrid.kernels.parallel import BlasChooser


def blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_chooser_measures_both_then_keeps_the_faster() -> None:
    c = BlasChooser(probe_s=1.0)
    assert c.pick(0.0) is True  # nothing measured: BLAS's threads first
    c.record(True, 0.0, 4e-3, 1_000_000)
    assert c.pick(0.0) is False  # then one thread
    c.record(False, 0.0, 1e-3, 1_000_000)
    assert c.pick(0.5) is False  # one thread measured faster
    assert c.pick(1.5) is True  # the slower setting is tried again after probe_s


def test_one_slow_probe_after_a_quiet_spell_switches_back_at_once() -> None:
    c = BlasChooser(probe_s=1.0)
    c.record(True, 0.0, 1e-3, 1_000_000)  # threads fast (a quiet machine)
    c.record(False, 0.0, 2e-3, 1_000_000)
    assert c.pick(0.1) is True
    c.record(False, 5.0, 2e-3, 1_000_000)  # (the slower one keeps being probed)
    c.record(True, 10.0, 30e-3, 1_000_000)  # the machine got busy: a probe ten times slower
    assert c.pick(10.0) is False  # replaced, not averaged in


def test_large_products_equal_numpy_and_restore_the_blas_threads() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 784), dtype=np.float32)
    b = rng.standard_normal((784, 256), dtype=np.float32)
    want = a @ b
    with threadpool_limits(2, user_api="blas"):
        before = blas_threads()
        for _ in range(6):  # both settings get used
            np.testing.assert_allclose(parallel.matmul(a, b), want, rtol=1e-4, atol=1e-3)
        assert blas_threads() == before
    assert parallel.matmul(a[:3], b).shape == (3, 256)  # small: numpy's own call
    assert parallel.matmul(a.astype(np.float64), b).dtype == np.float64  # mixed: numpy's rules


def test_matmul_kernel_transposes_through_the_chooser() -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((784, 128), dtype=np.float32)
    b = rng.standard_normal((256, 784), dtype=np.float32)
    with tf.Graph().as_default():
        prod = tf.matmul(tf.constant(a), tf.constant(b), transpose_a=True, transpose_b=True)
        with tf.Session() as sess:
            np.testing.assert_allclose(sess.run(prod), a.T @ b.T, rtol=1e-4, atol=1e-3)
