"""Large products pick BLAS's threads or one thread by measured speed (``kernels.parallel``)."""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import tensorgrid as tf
from tensorgrid.kernels import parallel
from tensorgrid.kernels.parallel import BlasChooser


def blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def simulate(c: BlasChooser, t: float, seconds: dict[bool, float], until: float
             ) -> tuple[float, dict[bool, float]]:
    """Back-to-back products of 1 MFLOP taking ``seconds[threaded]`` each, up to ``until``:
    the clock at the end and the time spent under each setting."""
    spent = {True: 0.0, False: 0.0}
    while t < until:
        threaded = c.pick(t)
        t += seconds[threaded]
        spent[threaded] += seconds[threaded]
        c.record(t, 1_000_000)
    return t, spent


def test_chooser_keeps_to_the_faster_setting_and_probes_the_other() -> None:
    c = BlasChooser(probe_s=2.0, period_s=0.5, probe_period_s=0.1)
    _, spent = simulate(c, 0.0, {True: 0.001, False: 0.002}, 10.0)  # a quiet machine
    assert spent[True] > 0.85 * 10.0
    assert 0.0 < c.cost[True] < c.cost[False]
    c = BlasChooser(probe_s=2.0, period_s=0.5, probe_period_s=0.1)
    _, spent = simulate(c, 0.0, {True: 0.02, False: 0.002}, 10.0)  # busy: threads wait
    assert spent[True] < 0.15 * 10.0
    assert spent[True] > 0.0  # still tried now and then


def test_chooser_follows_a_change_of_load() -> None:
    c = BlasChooser(probe_s=2.0, period_s=0.5, probe_period_s=0.1)
    t, _ = simulate(c, 0.0, {True: 0.001, False: 0.002}, 5.0)
    _, spent = simulate(c, t, {True: 0.02, False: 0.002}, 15.0)  # the machine got busy
    assert spent[True] < 0.2 * 10.0
    assert c.cost[True] > c.cost[False]


def test_a_pause_between_products_is_not_counted() -> None:
    c = BlasChooser(probe_s=2.0, period_s=0.5, probe_period_s=0.1, idle_s=0.05)
    t, _ = simulate(c, 0.0, {True: 0.001, False: 0.002}, 3.0)
    before = dict(c.cost)
    c.pick(t + 30.0)  # half a minute of something else: a new period starts, nothing measured
    assert c.cost == before


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
