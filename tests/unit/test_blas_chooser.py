"""Large products run on BLAS's threads, split over the block runner or on one thread, by
measured speed (``kernels.parallel``)."""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import tensorgrid as tf
from tensorgrid.kernels import parallel
from tensorgrid.kernels.parallel import BLOCKS, SINGLE, THREADED, BlasChooser


def blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def simulate(c: BlasChooser, t: float, seconds: dict[str, float], until: float
             ) -> tuple[float, dict[str, float]]:
    """Back-to-back products of 1 MFLOP taking ``seconds[mode]`` each, up to ``until``:
    the clock at the end and the time spent in each mode."""
    spent = dict.fromkeys(seconds, 0.0)
    while t < until:
        mode = c.pick(t)
        t += seconds[mode]
        spent[mode] += seconds[mode]
        c.record(t, 1_000_000)
    return t, spent


QUIET = {THREADED: 0.001, BLOCKS: 0.0015, SINGLE: 0.002}
BUSY = {THREADED: 0.02, BLOCKS: 0.004, SINGLE: 0.002}


def chooser() -> BlasChooser:
    return BlasChooser(probe_s=2.0, period_s=0.5, probe_period_s=0.1, settle_s=0.05)


def test_chooser_keeps_to_the_fastest_mode_and_probes_the_others() -> None:
    c = chooser()
    _, spent = simulate(c, 0.0, QUIET, 10.0)
    assert spent[THREADED] > 0.75 * 10.0
    assert 0.0 < c.cost[THREADED] < c.cost[BLOCKS] < c.cost[SINGLE]
    c = chooser()
    _, spent = simulate(c, 0.0, BUSY, 10.0)  # busy: threads wait
    assert spent[SINGLE] > 0.6 * 10.0
    assert spent[THREADED] > 0.0 and spent[BLOCKS] > 0.0  # still tried now and then
    c = chooser()  # a convolution process: split products keep BLAS's threads from spinning
    _, spent = simulate(c, 0.0, {THREADED: 0.003, BLOCKS: 0.001, SINGLE: 0.002}, 10.0)
    assert spent[BLOCKS] > 0.6 * 10.0


def test_a_far_slower_mode_is_probed_less_often() -> None:
    def probes(seconds: dict[str, float]) -> int:
        c, t, tried, last = chooser(), 0.0, 0, None
        while t < 40.0:
            mode = c.pick(t)
            if mode == THREADED and last not in (None, THREADED):
                tried += 1
            last = mode
            t += seconds[mode]
            c.record(t, 1_000_000)
        return tried

    near = probes({THREADED: 0.0012, BLOCKS: 0.001, SINGLE: 0.0011})
    far = probes({THREADED: 0.003, BLOCKS: 0.001, SINGLE: 0.0011})
    assert near >= 12  # about once per probe_s (2 s)
    assert 2 <= far <= near // 2


def test_chooser_follows_a_change_of_load() -> None:
    c = chooser()
    t, _ = simulate(c, 0.0, QUIET, 5.0)
    _, spent = simulate(c, t, BUSY, 15.0)  # the machine got busy
    assert spent[THREADED] < 0.2 * 10.0
    assert c.cost[THREADED] > c.cost[SINGLE]


def test_a_period_after_a_threaded_one_is_measured_once_blas_threads_settle() -> None:
    c = BlasChooser(probe_s=2.0, period_s=0.5, probe_period_s=0.1, settle_s=0.2)
    assert c.pick(0.0) == THREADED
    t, _ = simulate(c, 0.0, {THREADED: 0.001, BLOCKS: 0.001, SINGLE: 0.001}, 0.11)
    assert c.pick(t) == BLOCKS  # the next mode, tried after the first period
    c.record(t + 0.01, 1_000_000)
    assert c.warming  # BLAS's threads still spin: not yet measured
    c.record(t + 0.21, 1_000_000)
    assert not c.warming and c.start == t + 0.21


def test_a_pause_between_products_is_not_counted() -> None:
    c = BlasChooser(probe_s=2.0, period_s=0.5, probe_period_s=0.1, idle_s=0.05, forget_s=2.0)
    t, _ = simulate(c, 0.0, QUIET, 3.0)
    before = dict(c.cost)
    c.pick(t + 0.5)  # half a second of something else: a new period starts, nothing measured
    assert c.cost == before


def test_after_a_long_pause_every_mode_is_measured_again() -> None:
    # a process that trains a CNN (split fastest; its costs per flop of the products count the
    # convolutions between them) and then an MLP (threaded fastest) must not judge the MLP by
    # the CNN's figures: threaded, measured far slower there, would wait for its slow-mode probe
    def mlp_after_cnn(forget_s: float) -> dict[str, float]:
        c = BlasChooser(probe_s=2.0, period_s=0.5, probe_period_s=0.1, settle_s=0.05,
                        forget_s=forget_s)
        t, _ = simulate(c, 0.0, {THREADED: 0.03, BLOCKS: 0.01, SINGLE: 0.02}, 5.0)
        assert c.mode == BLOCKS
        _, spent = simulate(c, t + 1.5, {THREADED: 0.001, BLOCKS: 0.0015, SINGLE: 0.002},
                            t + 4.5)
        return spent

    assert mlp_after_cnn(forget_s=1.0)[THREADED] > 0.7 * 3.0
    # what forgetting avoids: the MLP on the CNN's mode until threaded's slow-mode probe is due
    assert mlp_after_cnn(forget_s=1e9)[THREADED] < 0.4 * 3.0


def test_large_products_equal_numpy_and_restore_the_blas_threads() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 784), dtype=np.float32)
    b = rng.standard_normal((784, 256), dtype=np.float32)
    want = a @ b
    with threadpool_limits(2, user_api="blas"):
        before = blas_threads()
        np.testing.assert_allclose(parallel.matmul(a, b), want, rtol=1e-4, atol=1e-3)
        at = np.ascontiguousarray(a.T).T  # transposed views: blocks of them are strided
        bt = np.ascontiguousarray(b.T).T
        cases = [((a, b), "rows: 64 + 64"), ((at[:101], b[:, :24]), "rows: 51 + 50"),
                 ((a[:20], bt[:, :201]), "columns: 101 + 100"), ((a[:20], b[:, :24]), "one")]
        for (x, y), what in cases:
            got = parallel._matmul_on_blocks(x, y, 2)
            np.testing.assert_allclose(got, x @ y, rtol=1e-4, atol=1e-3, err_msg=what)
            assert got.dtype == np.float32
        np.testing.assert_allclose(parallel._matmul_single(a, b), want, rtol=1e-4, atol=1e-3)
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
