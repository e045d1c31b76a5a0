"""MonitoredSession and friends on a local session: hook call order, the finalized graph, merged
fetches, feeds and options, stopping, closing, the Scaffold, the chief's initialization, a worker's
bounded wait, and recovery from UnavailableError/AbortedError."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.client import train
from tensorgrid.client.config import RunOptions
from tensorgrid.client.train.coordinator import Coordinator
from tensorgrid.client.train.hooks import SessionRunArgs, SessionRunHook, StopAtStepHook
from tensorgrid.client.train.monitored_session import (
    ChiefSessionCreator,
    MonitoredSession,
    MonitoredTrainingSession,
    Scaffold,
    SingularMonitoredSession,
    WorkerSessionCreator,
)
from tensorgrid.core import errors
from tensorgrid.framework.graph import GraphKeys


class Recorder(SessionRunHook):
    """Records every call, and what the graph and session looked like at the time."""

    def __init__(self, log: list, name: str = "h", fetches=None, feeds=None, options=None):
        self.log, self.name = log, name
        self.fetches, self.feeds, self.options = fetches, feeds, options
        self.results: list = []
        self.run_options: list = []

    def begin(self):
        g = tf.get_default_graph()
        self.log.append((self.name, "begin", g.finalized))
        tf.constant(1.0, name=f"{self.name}_made_in_begin")  # the graph is still open

    def after_create_session(self, session, coord):
        self.log.append((self.name, "after_create_session", session.graph.finalized))

    def before_run(self, run_context):
        self.log.append((self.name, "before_run", run_context.original_args.fetches))
        if self.fetches is None and self.feeds is None and self.options is None:
            return None
        return SessionRunArgs(self.fetches, self.feeds, self.options)

    def after_run(self, run_context, run_values):
        self.log.append((self.name, "after_run"))
        self.results.append(run_values.results)
        self.run_options.append(run_values.options)

    def end(self, session):
        # the session still runs when end() is called
        self.log.append((self.name, "end", session.run(self.fetches) if self.fetches is not None else None))


def _calls(log, what):
    return [e for e in log if e[1] == what]


# ------------------------------------------------------------------------------ lifecycle


def test_hook_order_and_graph_finalized_after_begin():
    v = tf.Variable(3.0, name="v")
    log: list = []
    hooks = [Recorder(log, "a"), Recorder(log, "b")]
    g = tf.get_default_graph()
    sess = MonitoredSession(hooks=hooks)
    assert g.finalized
    with pytest.raises(RuntimeError, match="finalized"):
        tf.constant(2.0)
    assert sess.run(v) == 3.0
    sess.close()
    assert not g.finalized  # it was not finalized before
    assert log == [
        ("a", "begin", False), ("b", "begin", False),
        ("a", "after_create_session", True), ("b", "after_create_session", True),
        ("a", "before_run", v), ("b", "before_run", v), ("a", "after_run"), ("b", "after_run"),
        ("a", "end", None), ("b", "end", None),
    ]
    assert sess.should_stop()
    with pytest.raises(RuntimeError, match="already closed"):
        sess.close()
    with pytest.raises(RuntimeError, match="closed"):
        sess.run(v)


def test_end_runs_before_the_session_closes():
    v = tf.Variable(5.0, name="v")
    log: list = []
    hook = Recorder(log, fetches=v.value())
    with MonitoredSession(hooks=[hook]) as sess:
        raw = sess._tf_sess()
        sess.run(v)
    assert log[-1] == ("h", "end", 5.0)
    with pytest.raises(RuntimeError, match="closed Session"):
        raw.run(v)


def test_a_graph_finalized_before_stays_finalized():
    tf.Variable(1.0, name="v")
    g = tf.get_default_graph()
    Scaffold().finalize()
    assert g.finalized
    with MonitoredSession():
        pass
    assert g.finalized


def test_context_manager_swallows_out_of_range_and_stop_iteration():
    log: list = []
    v = tf.Variable(1.0, name="v")
    with MonitoredSession(hooks=[Recorder(log)]) as sess:
        sess.run(v)
        raise errors.OutOfRangeError("End of sequence")
    assert _calls(log, "end")  # a clean end: hooks' end ran
    with MonitoredSession() as sess:
        raise StopIteration
    log.clear()
    with pytest.raises(ValueError, match="boom"):
        with MonitoredSession(hooks=[Recorder(log)]) as sess:
            raise ValueError("boom")
    assert not _calls(log, "end")
    assert not tf.get_default_graph().finalized


# ------------------------------------------------------------------------------ merging


def test_fetches_of_hooks_and_caller_are_merged_by_structure():
    a = tf.constant([1.0, 2.0], name="a")
    b = tf.constant(3.0, name="b")
    c = a * b
    log: list = []
    h1 = Recorder(log, "h1", fetches={"b": b, "pair": (a, c)})
    h2 = Recorder(log, "h2", fetches=[c])
    h3 = Recorder(log, "h3")  # asks for nothing
    with MonitoredSession(hooks=[h1, h2, h3]) as sess:
        out = sess.run({"sum": c, "list": [a, b]})
    assert set(out) == {"sum", "list"}
    np.testing.assert_allclose(out["sum"], [3.0, 6.0])
    np.testing.assert_allclose(out["list"][0], [1.0, 2.0])
    assert out["list"][1] == 3.0
    r1 = h1.results[0]
    assert set(r1) == {"b", "pair"} and isinstance(r1["pair"], tuple)
    np.testing.assert_allclose(r1["pair"][1], [3.0, 6.0])
    assert isinstance(h2.results[0], list)
    np.testing.assert_allclose(h2.results[0][0], [3.0, 6.0])
    assert h3.results == [None]


def test_feeds_of_hooks_and_caller_are_merged():
    x = tf.placeholder(tf.float32, [], name="x")
    y = tf.placeholder(tf.float32, [], name="y")
    s = x + y
    with MonitoredSession(hooks=[Recorder([], feeds={x: 2.0})]) as sess:
        assert sess.run(s, feed_dict={y: 5.0}) == 7.0
        assert sess.run(s, feed_dict={"y:0": 1.0}) == 3.0


def test_a_tensor_fed_twice_is_a_clear_error():
    x = tf.placeholder(tf.float32, [], name="x")
    with MonitoredSession(hooks=[Recorder([], feeds={x: 2.0})]) as sess:
        # the same tensor, once by name and once as a Tensor
        with pytest.raises(RuntimeError, match=r"by a SessionRunHook and user.*'x:0'"):
            sess.run(x, feed_dict={"x:0": 1.0})
    with MonitoredSession(hooks=[Recorder([], "a", feeds={x: 2.0}),
                                 Recorder([], "b", feeds={"x:0": 3.0})]) as sess:
        with pytest.raises(RuntimeError, match=r"two hooks.*'x:0'"):
            sess.run(x)


def test_run_options_are_merged_without_touching_the_callers():
    x = tf.constant(1.0, name="x")
    h1 = Recorder([], "h1", options=RunOptions(timeout_in_ms=5000))
    h2 = Recorder([], "h2", options=RunOptions(timeout_in_ms=2000, output_partition_graphs=True))
    mine = RunOptions(timeout_in_ms=3000)
    with MonitoredSession(hooks=[h1, h2]) as sess:
        assert sess.run(x, options=mine) == 1.0
    seen = h1.run_options[0]
    assert seen is h2.run_options[0]
    assert seen.timeout_in_ms == 5000 and seen.output_partition_graphs
    assert mine == RunOptions(timeout_in_ms=3000)


def test_should_stop_via_stop_at_step_hook():
    gs = train.get_or_create_global_step()
    train_op = tf.assign_add(gs, 1)
    steps = []
    with MonitoredSession(hooks=[StopAtStepHook(last_step=5)]) as sess:
        assert not sess.should_stop()
        while not sess.should_stop():
            steps.append(int(sess.run(train_op)))
        with pytest.raises(RuntimeError, match="should_stop requested"):
            sess.run(train_op)
    assert steps == [1, 2, 3, 4, 5]


def test_run_step_fn():
    x = tf.placeholder(tf.float32, [], name="x")
    v = x + 4.0
    log: list = []

    def step_fn(step_context):
        if step_context.session.run(v, feed_dict={x: 0.5}) <= 4.5:
            step_context.request_stop()
        return step_context.run_with_hooks(v, feed_dict={x: 1.0})

    with MonitoredSession(hooks=[Recorder(log)]) as sess:
        with pytest.raises(ValueError, match="step_context"):
            sess.run_step_fn(lambda ctx: None)
        sess.run_step_fn(step_fn)
    assert sess.should_stop()
    assert not _calls(log, "before_run")  # the stop came before run_with_hooks


# ------------------------------------------------------------------------------ scaffold, creators


def test_chief_initializes_globals_and_locals_and_calls_init_fn():
    v = tf.Variable([1.0, 2.0], name="v")
    local = tf.Variable(7.0, name="local", collections=[GraphKeys.LOCAL_VARIABLES])
    called = []
    scaffold = Scaffold(init_fn=lambda sc, sess: called.append(sc))
    with MonitoredSession(ChiefSessionCreator(scaffold=scaffold)) as sess:
        np.testing.assert_allclose(sess.run(v), [1.0, 2.0])
        assert sess.run(local) == 7.0
    assert called == [scaffold]
    assert scaffold.ready_op is not None and scaffold.local_init_op is not None
    assert tf.get_collection(GraphKeys.INIT_OP) == [scaffold.init_op]


def test_scaffold_uses_the_collections_and_copies():
    v = tf.Variable(1.0, name="v")
    custom_init = tf.group(v.initializer, name="custom_init")
    tf.add_to_collection(GraphKeys.INIT_OP, custom_init)
    scaffold = Scaffold()
    with MonitoredSession(ChiefSessionCreator(scaffold=scaffold)) as sess:
        assert sess.run(v) == 1.0
    assert scaffold.init_op is custom_init
    copy = Scaffold(copy_from_scaffold=scaffold, init_feed_dict={"a:0": 1})
    assert copy.init_op is custom_init and copy.init_feed_dict == {"a:0": 1}
    with pytest.raises(TypeError, match="not a Scaffold"):
        Scaffold(copy_from_scaffold="nope")
    tf.add_to_collection(GraphKeys.READY_OP, tf.constant(1))
    tf.add_to_collection(GraphKeys.READY_OP, tf.constant(2))
    with pytest.raises(RuntimeError, match="More than one item"):
        Scaffold().finalize()


def test_init_op_that_does_not_make_the_model_ready_is_an_error():
    tf.Variable(1.0, name="v")
    scaffold = Scaffold(init_op=tf.no_op(name="noop"))
    with pytest.raises(RuntimeError, match="did not make model ready.*v"):
        MonitoredSession(ChiefSessionCreator(scaffold=scaffold))
    assert not tf.get_default_graph().finalized


def test_worker_waits_a_bounded_time_for_an_uninitialized_model():
    tf.Variable(1.0, name="never_initialized")
    t0 = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError,
                       match=r"not ready after waiting.*never_initialized.*chief"):
        MonitoredTrainingSession(is_chief=False, max_wait_secs=0.5, recovery_wait_secs=0.1)
    assert time.monotonic() - t0 < 10
    assert not tf.get_default_graph().finalized


def test_worker_runs_at_once_when_the_model_is_ready():
    x = tf.placeholder(tf.float32, [], name="x")
    y = x * 3.0
    creator = WorkerSessionCreator(max_wait_secs=1, recovery_wait_secs=0.1)
    with MonitoredSession(creator) as sess:
        assert sess.run(y, {x: 2.0}) == 6.0


def test_monitored_training_session_chief_only_hooks():
    gs = train.get_or_create_global_step()
    train_op = tf.assign_add(gs, 1)
    log: list = []
    with MonitoredTrainingSession(hooks=[StopAtStepHook(last_step=3), Recorder(log, "all")],
                                  chief_only_hooks=[Recorder(log, "chief")]) as sess:
        while not sess.should_stop():
            sess.run(train_op)
    assert {e[0] for e in _calls(log, "end")} == {"all", "chief"}
    # a worker leaves the chief-only hooks out (and here has nothing to wait for: a fresh
    # local session's variables are not initialized, so it gives up quickly)
    log.clear()
    with pytest.raises(errors.DeadlineExceededError):
        MonitoredTrainingSession(is_chief=False, hooks=[Recorder(log, "all")],
                                 chief_only_hooks=[Recorder(log, "chief")], max_wait_secs=0.2,
                                 recovery_wait_secs=0.05)
    assert [e[0] for e in _calls(log, "begin")] == ["all"]


# ------------------------------------------------------------------------------ recovery


class FailingHook(SessionRunHook):
    """Raises a retryable error from after_run: the first ``times`` runs, or always."""

    def __init__(self, error: type[errors.OpError], times: int | None = None) -> None:
        self.error, self.times, self.raised, self.created = error, times, 0, 0

    def after_create_session(self, session, coord):
        self.created += 1

    def after_run(self, run_context, run_values):
        if self.times is None or self.raised < self.times:
            self.raised += 1
            raise self.error(f"task /job:ps/replica:0/task:0 went away ({self.raised})")


def test_a_retryable_error_recreates_the_session_and_retries_the_call(caplog):
    v = tf.Variable(1.0, name="v")
    bump = tf.assign_add(v, 1.0)
    hook = FailingHook(errors.UnavailableError, times=1)
    with MonitoredSession(hooks=[hook], recovery_backoff_secs=0.01) as sess:
        first_raw = sess._tf_sess()
        # the first attempt bumps v to 2 and fails; the chief re-initializes the new session
        # (this local session's variables died with it) and the retry bumps it to 2 again
        assert sess.run(bump) == 2.0
        assert sess._tf_sess() is not first_raw
        assert sess.run(bump) == 3.0
    assert hook.created == 2
    assert any("Re-creating the session" in r.getMessage() for r in caplog.records)


def test_recovery_is_bounded_in_attempts():
    v = tf.Variable(1.0, name="v")
    hook = FailingHook(errors.AbortedError)
    sess = MonitoredSession(hooks=[hook], max_recovery_attempts=2, recovery_backoff_secs=0.01)
    with pytest.raises(errors.AbortedError, match="gave up after 3 failed attempt"):
        sess.run(v)
    assert hook.created == 3
    sess.close()


def test_recovery_is_bounded_in_time():
    v = tf.Variable(1.0, name="v")
    hook = FailingHook(errors.UnavailableError)
    sess = MonitoredSession(hooks=[hook], max_recovery_attempts=1000, max_recovery_secs=0.3,
                            recovery_backoff_secs=0.05)
    t0 = time.monotonic()
    with pytest.raises(errors.UnavailableError, match="gave up"):
        sess.run(v)
    assert time.monotonic() - t0 < 5
    assert 2 <= hook.created < 1000
    sess.close()


def test_other_errors_are_not_retried_and_singular_sessions_do_not_recover():
    v = tf.Variable(1.0, name="v")
    hook = FailingHook(errors.InvalidArgumentError, times=1)
    with MonitoredSession(hooks=[hook]) as sess:
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(v)
    assert hook.created == 1
    hook = FailingHook(errors.UnavailableError, times=1)
    with SingularMonitoredSession(hooks=[hook]) as sess:
        assert sess.raw_session().run(v) == 1.0  # the raw session runs without hooks
        with pytest.raises(errors.UnavailableError):
            sess.run(v)
    assert hook.created == 1


# ------------------------------------------------------------------------------ coordinator


class ThreadHook(SessionRunHook):
    """Starts a thread under the session's coordinator that runs ``body(coord)``."""

    def __init__(self, body) -> None:
        self.body, self.coords, self.threads = body, [], []

    def after_create_session(self, session, coord):
        assert isinstance(coord, Coordinator)
        thread = threading.Thread(target=self.body, args=(coord,), daemon=True)
        coord.register_thread(thread)
        thread.start()
        self.coords.append(coord)
        self.threads.append(thread)


def test_threads_stop_with_the_session_and_can_request_a_stop():
    v = tf.Variable(1.0, name="v")
    hook = ThreadHook(lambda coord: coord.wait_for_stop(30))
    sess = MonitoredSession(hooks=[hook])
    assert sess.run(v) == 1.0 and not sess.should_stop()
    sess.close()
    assert not hook.threads[0].is_alive()  # close() stopped and joined it
    stopper = ThreadHook(lambda coord: coord.request_stop())
    with MonitoredSession(hooks=[stopper]) as sess:
        stopper.threads[0].join(10)
        assert sess.should_stop()


def test_an_error_reported_by_a_thread_surfaces_at_close():
    tf.Variable(1.0, name="v")
    hook = ThreadHook(lambda coord: coord.request_stop(ValueError("the input thread broke")))
    sess = MonitoredSession(hooks=[hook])
    hook.threads[0].join(10)
    assert sess.should_stop()
    with pytest.raises(ValueError, match="the input thread broke"):
        sess.close()


def test_a_preemption_reported_by_a_thread_recreates_the_session():
    tf.Variable(1.0, name="v")
    reported = []

    def body(coord):
        if not reported:
            reported.append(True)
            coord.request_stop(errors.UnavailableError("lost the ps (test)"))

    hook = ThreadHook(body)
    with MonitoredSession(hooks=[hook], recovery_backoff_secs=0.01) as sess:
        hook.threads[0].join(10)
        assert not sess.should_stop()  # recovered instead
        assert len(hook.coords) == 2
        assert not sess.should_stop()
