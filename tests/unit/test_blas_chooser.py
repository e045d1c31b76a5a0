"""Large products run on BLAS's threads, split over the block runner or on one thread, by
measured speed (``kernels.parallel``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import tensorgrid as tf
from tensorgrid.kernels import parallel
from tensorgrid.kernels.parallel import BLOCKS, MODES, SINGLE, THREADED, BlasChooser


def blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


Costs = Callable[[str, float], float]


def simulate(c: BlasChooser, t: float, seconds: dict[str, float] | Costs, until: float
             ) -> tuple[float, dict[str, float]]:
    """Back-to-back products of 1 MFLOP taking ``seconds[mode]`` (or ``seconds(mode, t)``) each,
    up to ``until``: the clock at the end and the time spent in each mode."""
    cost = seconds if callable(seconds) else (lambda mode, _t: seconds[mode])
    spent = dict.fromkeys(MODES, 0.0)
    while t < until:
        mode = c.pick(t)
        took = cost(mode, t)
        t += took
        spent[mode] += took
        c.record(t, 1_000_000)
    return t, spent


QUIET = {THREADED: 0.001, BLOCKS: 0.0015, SINGLE: 0.002}
BUSY = {THREADED: 0.02, BLOCKS: 0.004, SINGLE: 0.002}


def chooser() -> BlasChooser:
    return BlasChooser(probe_s=2.0, settled_probe_s=20.0, period_s=0.5, probe_period_s=0.1,
                       settle_s=0.05)


def test_chooser_keeps_to_the_fastest_mode_and_probes_the_others() -> None:
    c = chooser()
    _, spent = simulate(c, 0.0, QUIET, 10.0)
    assert spent[THREADED] > 0.9 * 10.0
    assert 0.0 < c.cost[THREADED] < c.cost[BLOCKS] < c.cost[SINGLE]
    c = chooser()
    _, spent = simulate(c, 0.0, BUSY, 10.0)  # busy: threads wait
    assert spent[SINGLE] > 0.8 * 10.0
    assert spent[THREADED] > 0.0 and spent[BLOCKS] > 0.0  # still tried now and then
    c = chooser()  # a convolution process: split products keep BLAS's threads from spinning
    _, spent = simulate(c, 0.0, {THREADED: 0.003, BLOCKS: 0.001, SINGLE: 0.002}, 10.0)
    assert spent[BLOCKS] > 0.8 * 10.0


def test_the_choice_settles_after_a_bounded_number_of_probes() -> None:
    c = chooser()
    t, _ = simulate(c, 0.0, QUIET, 5.0)
    early = c.probes
    assert 4 <= early <= 6  # each other mode measured twice, 2 s apart
    _, spent = simulate(c, t, QUIET, 65.0)
    # then a probe of each other mode per settled_probe_s (20 s) at most
    assert c.probes - early <= 2 * (60 // 20 + 1)
    assert spent[THREADED] > 0.98 * 60.0
    assert c.chosen == THREADED and c.reprobes == 0


def test_a_far_slower_mode_is_probed_less_often_while_one_core_is_chosen() -> None:
    def threaded_probes(seconds: dict[str, float]) -> int:
        c, t, tried, last = chooser(), 0.0, 0, None
        while t < 40.0:
            mode = c.pick(t)
            if mode == THREADED and last not in (None, THREADED):
                tried += 1
            last = mode
            t += seconds[mode]
            c.record(t, 1_000_000)
        assert c.chosen == SINGLE
        return tried

    near = threaded_probes({THREADED: 0.0012, BLOCKS: 0.0013, SINGLE: 0.001})
    far = threaded_probes({THREADED: 0.003, BLOCKS: 0.0013, SINGLE: 0.001})
    assert near >= 15  # about once per probe_s (2 s) once settled
    assert 5 <= far <= 0.65 * near


def test_one_disturbed_period_moves_nothing() -> None:
    c = chooser()
    t, _ = simulate(c, 0.0, QUIET, 12.0)
    probes = c.probes

    def burst(mode: str, now: float) -> float:  # 0.15 s of someone else's work
        return QUIET[mode] * (10.0 if t + 1.0 <= now < t + 1.15 else 1.0)

    t, spent = simulate(c, t, burst, t + 6.0)
    assert c.chosen == THREADED and c.reprobes == 0 and c.probes == probes
    assert spent[THREADED] > 0.99 * 6.0


def test_a_lucky_probe_is_measured_again_before_a_switch() -> None:
    c = chooser()
    t, _ = simulate(c, 0.0, BUSY, 12.0)
    assert c.chosen == SINGLE
    lucky: list[float] = []  # the start of the one threaded probe that ran fast

    def once(mode: str, now: float) -> float:
        if mode == THREADED and not lucky:
            lucky.append(c.start)
        fast = mode == THREADED and lucky and c.start == lucky[0]
        return 0.001 if fast else BUSY[mode]

    _, spent = simulate(c, t, once, t + 10.0)
    assert lucky and c.chosen == SINGLE
    assert spent[THREADED] < 0.05 * 10.0


def test_chooser_follows_a_change_of_load() -> None:
    c = chooser()
    t, _ = simulate(c, 0.0, QUIET, 5.0)
    t, spent = simulate(c, t, BUSY, 15.0)  # the machine got busy
    # seen in two short periods; threaded probes (10-20x slower now) end early
    assert spent[THREADED] < 0.1 * 10.0
    assert c.cost[THREADED] > c.cost[SINGLE] and c.chosen == SINGLE and c.reprobes == 1
    start = t
    switched: list[float] = []

    def quiet(mode: str, now: float) -> float:
        if c.chosen == THREADED and not switched:
            switched.append(now)
        return QUIET[mode]

    simulate(c, t, quiet, t + 10.0)  # quiet again: found by a (far) threaded probe
    assert switched and switched[0] - start <= 2 * 2.0 + 0.5


def test_a_passing_burst_of_load_is_left_behind_within_a_second_or_two() -> None:
    c = chooser()
    t, _ = simulate(c, 0.0, QUIET, 12.0)
    end = t + 2.0

    def burst(mode: str, now: float) -> float:
        return (BUSY if now < end else QUIET)[mode]

    back: list[float] = []

    def watch(mode: str, now: float) -> float:
        if now >= end and c.chosen == THREADED and not back:
            back.append(now)
        return burst(mode, now)

    _, spent = simulate(c, t, watch, t + 8.0)
    assert c.reprobes == 1 and back and back[0] - end < 2.5  # probes 0.5 s, then 2 s apart
    assert c.chosen == THREADED


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

    forgetting = mlp_after_cnn(forget_s=1.0)[THREADED]
    assert forgetting > 0.7 * 3.0
    # without forgetting, the change of the chosen mode's cost (the CNN's blocks measured on the
    # MLP) sends the modes to be measured again: found too, a few periods later
    assert 0.3 * 3.0 < mlp_after_cnn(forget_s=1e9)[THREADED] < forgetting


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


class Machine:
    """A machine's idle seconds (summed over its cores), advanced by the simulated products."""

    def __init__(self) -> None:
        self.idle = 0.0

    def seconds(self) -> float:
        return self.idle

    def costs(self, table: dict[str, float], spare: float) -> Costs:
        def cost(mode: str, _now: float) -> float:
            # the process itself keeps the other core busy in a mode that uses every core
            self.idle += table[mode] * (0.0 if mode in (THREADED, BLOCKS) else spare)
            return table[mode]

        return cost


def threaded_probes(c: BlasChooser, t: float, cost: Costs, until: float) -> tuple[float, int]:
    tried, last = 0, None
    while t < until:
        mode = c.pick(t)
        if mode == THREADED and last not in (None, THREADED):
            tried += 1
        last = mode
        t += cost(mode, t)
        c.record(t, 1_000_000)
    return t, tried


def test_threaded_is_probed_at_once_when_a_core_frees_up() -> None:
    def back_after(idle_figures: bool) -> float:
        machine = Machine()
        c = BlasChooser(probe_s=10.0, settled_probe_s=20.0, period_s=0.5, probe_period_s=0.1,
                        settle_s=0.05,
                        idle_seconds=machine.seconds if idle_figures else lambda: None)
        # another process keeps the other core busy: threaded waits for it
        t, _ = simulate(c, 0.0, machine.costs(BUSY, spare=0.0), 14.0)
        assert c.chosen == SINGLE and c.spare is (False if idle_figures else None)
        end = t
        back: list[float] = []

        def quiet(mode: str, now: float) -> float:  # it has stopped
            if c.chosen == THREADED and not back:
                back.append(now)
            return machine.costs(QUIET, spare=1.0)(mode, now)

        simulate(c, t, quiet, t + 25.0)
        assert back
        return back[0] - end

    assert back_after(idle_figures=True) < 1.5  # the next single-core period sees the idle core
    assert back_after(idle_figures=False) > 3.0  # threaded's next (far) probe is due later


def test_without_idle_figures_the_probes_keep_to_probe_s() -> None:
    c = BlasChooser(probe_s=2.0, settled_probe_s=20.0, period_s=0.5, probe_period_s=0.1,
                    settle_s=0.05, idle_seconds=lambda: None)
    t, _ = threaded_probes(c, 0.0, lambda mode, _t: BUSY[mode], 5.0)
    _, later = threaded_probes(c, t, lambda mode, _t: BUSY[mode], 35.0)
    assert c.chosen == SINGLE and c.spare is None
    assert 5 <= later <= 10  # every 2 * probe_s (threaded is far slower)


def test_machine_idle_seconds_reads_the_machines_idle_time() -> None:
    first = parallel.machine_idle_seconds()
    if first is None:  # not Linux: the chooser then goes by probe_s alone
        return
    second = parallel.machine_idle_seconds()
    assert second is not None and 0.0 < first <= second


def test_the_trace_lists_every_period_and_marks_the_probes() -> None:
    c = chooser()
    c.trace = []
    simulate(c, 0.0, QUIET, 3.0)
    modes = [(mode, probe) for _, mode, probe in c.trace]
    assert modes[0] == (THREADED, False)
    assert (BLOCKS, True) in modes and (SINGLE, True) in modes
    assert sum(probe for _, probe in modes) == c.probes
    assert parallel.blas_chooser().trace is None  # the process's own: off unless asked for


def test_a_disturbed_first_period_sets_no_figure_to_hold_the_chosen_mode_to() -> None:
    c = chooser()

    def slow_start(mode: str, now: float) -> float:  # threaded's first period met a burst
        return QUIET[mode] * (1.6 if now < 0.1 else 1.0)

    simulate(c, 0.0, slow_start, 20.0)
    assert c.chosen == THREADED and c.reprobes == 0
    assert abs(c.reference - c.cost[THREADED]) < 0.01 * c.cost[THREADED]


def test_a_displaced_mode_is_probed_again_soon_unless_far_slower() -> None:
    def first_threaded_probe(start: float, threaded: float, busy_from: float) -> float:
        c = chooser()
        c.trace = []

        def costs(mode: str, now: float) -> float:
            return threaded if mode == THREADED and now >= busy_from else QUIET[mode]

        simulate(c, start, costs, start + 8.0)
        return next(s for s, mode, probe in c.trace if mode == THREADED and probe) - start

    # displaced while the modes are first measured (its first period met a burst): half a
    # second later, or at the back-off's first step when measured 1.5x slower or more
    assert first_threaded_probe(1000.0, 0.002, busy_from=0.0) < 1.0
    assert first_threaded_probe(1000.0, 0.003, busy_from=0.0) >= 2.0
    # threaded ran for seconds before a burst displaced it (seen in ~0.5 s, the others measured
    # in ~0.35 s): the same
    assert first_threaded_probe(1000.0, 0.002, busy_from=1003.0) - 3.0 < 1.6
    assert first_threaded_probe(1000.0, 0.02, busy_from=1003.0) - 3.0 >= 2.5
