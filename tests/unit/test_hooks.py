"""Each standard SessionRunHook's behaviour inside a local MonitoredSession, and the timer."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.client import train
from tensorgrid.client.train.hooks import (
    FeedFnHook,
    FinalOpsHook,
    GlobalStepWaiterHook,
    LoggingTensorHook,
    NanLossDuringTrainingError,
    NanTensorHook,
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    StepCounterHook,
    StopAtStepHook,
)
from tensorgrid.client.train.monitored_session import (
    ChiefSessionCreator,
    MonitoredSession,
    Scaffold,
)
from tensorgrid.core import errors

HOOKS_LOG = "tensorgrid.client.train.hooks"


def _counter_model():
    """A global step and a train op that increments it."""
    gs = train.get_or_create_global_step()
    return gs, tf.assign_add(gs, 1)


def _messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == HOOKS_LOG]


def test_run_args_and_context():
    args = SessionRunArgs("x:0")
    assert args.fetches == "x:0" and args.feed_dict is None and args.options is None
    ctx = SessionRunContext(original_args=args, session="sess")
    assert ctx.original_args is args and ctx.session == "sess"
    assert not ctx.stop_requested
    ctx.request_stop()
    assert ctx.stop_requested
    # the base hook does nothing
    h = SessionRunHook()
    h.begin()
    assert h.before_run(ctx) is None


def test_second_or_step_timer():
    with pytest.raises(ValueError, match="Either every_secs or every_steps"):
        SecondOrStepTimer()
    with pytest.raises(ValueError, match="Can not provide both"):
        SecondOrStepTimer(every_secs=1, every_steps=1)
    timer = SecondOrStepTimer(every_steps=3)
    assert timer.should_trigger_for_step(0)
    assert timer.update_last_triggered_step(0) == (None, None)
    assert [timer.should_trigger_for_step(s) for s in (0, 1, 2, 3, 4)] == \
        [False, False, False, True, True]
    secs, steps = timer.update_last_triggered_step(4)
    assert steps == 4 and secs >= 0
    assert timer.last_triggered_step() == 4
    by_time = SecondOrStepTimer(every_secs=0.05)
    by_time.update_last_triggered_step(1)
    assert not by_time.should_trigger_for_step(2)
    time.sleep(0.06)
    assert by_time.should_trigger_for_step(2)
    assert not by_time.should_trigger_for_step(1)  # never twice for the same step


def test_logging_tensor_hook_every_n_iter(caplog):
    caplog.set_level(logging.INFO, logger=HOOKS_LOG)
    gs, train_op = _counter_model()
    double = tf.multiply(tf.cast(gs.value(), tf.float32), 2.0, name="double")
    hook = LoggingTensorHook({"step": gs.value(), "twice": "double:0"}, every_n_iter=2)
    with MonitoredSession(hooks=[hook]) as sess:
        for _ in range(5):
            sess.run(train_op)
    logged = _messages(caplog)
    assert len(logged) == 3  # iterations 0, 2 and 4
    # tags in sorted order; the values read in the same run as the increment
    assert logged[0].startswith("step = ") and ", twice = " in logged[0]
    assert logged[1].endswith(" sec)")
    assert double.name == "double:0"


def test_logging_tensor_hook_formatter_and_at_end(caplog):
    caplog.set_level(logging.INFO, logger=HOOKS_LOG)
    gs, train_op = _counter_model()
    hook = LoggingTensorHook([gs.value()], at_end=True,
                             formatter=lambda values: f"values {[int(v) for v in values.values()]}")
    with MonitoredSession(hooks=[hook]) as sess:
        for _ in range(3):
            sess.run(train_op)
    # only at the end, with the final value
    assert _messages(caplog) == ["values [3]"]


def test_logging_tensor_hook_argument_errors():
    with pytest.raises(ValueError, match="exactly one of every_n_iter and every_n_secs"):
        LoggingTensorHook(["x"])
    with pytest.raises(ValueError, match="exactly one of every_n_iter and every_n_secs"):
        LoggingTensorHook(["x"], every_n_iter=1, every_n_secs=1)
    with pytest.raises(ValueError, match="invalid every_n_iter"):
        LoggingTensorHook(["x"], every_n_iter=0)
    other = tf.Graph()
    with other.as_default():
        foreign = tf.constant(1.0)
    hook = LoggingTensorHook([foreign], every_n_iter=1)
    with pytest.raises(ValueError, match="graph"):
        hook.begin()


def test_stop_at_step_hook_last_step():
    gs, train_op = _counter_model()
    runs = 0
    with MonitoredSession(hooks=[StopAtStepHook(last_step=7)]) as sess:
        while not sess.should_stop():
            last = sess.run(train_op)
            runs += 1
        with pytest.raises(RuntimeError, match="should_stop"):
            sess.run(gs)
    assert runs == 7
    assert last == 7


def test_stop_at_step_hook_num_steps_counts_from_the_current_step():
    gs, train_op = _counter_model()
    set_step = tf.assign(gs, tf.constant(10, dtype=tf.int64))
    scaffold = Scaffold(init_fn=lambda scaffold, sess: sess.run(set_step))
    hook = StopAtStepHook(num_steps=4)
    runs = 0
    with MonitoredSession(ChiefSessionCreator(scaffold=scaffold), hooks=[hook]) as sess:
        while not sess.should_stop():
            sess.run(train_op)
            runs += 1
    assert runs == 4
    assert hook.last_step == 14


def test_stop_at_step_hook_arguments_and_global_step():
    with pytest.raises(ValueError, match="One of num_steps or last_step"):
        StopAtStepHook()
    with pytest.raises(ValueError, match="Only one of"):
        StopAtStepHook(num_steps=1, last_step=1)
    tf.Variable(1.0, name="v")
    with pytest.raises(RuntimeError, match="Global step should be created"):
        StopAtStepHook(last_step=3).begin()


def test_nan_tensor_hook_raises():
    x = tf.placeholder(tf.float32, [], name="x")
    loss = tf.square(x, name="loss")
    ends = []

    class End(SessionRunHook):
        def end(self, session):
            ends.append(True)

    with pytest.raises(NanLossDuringTrainingError, match="NaN loss during training"):
        with MonitoredSession(hooks=[NanTensorHook(loss), End()]) as sess:
            assert sess.run(loss, {x: 2.0}) == 4.0
            sess.run(loss, {x: np.nan})
    assert ends == []  # end() is skipped when the session closes on an error


def test_nan_tensor_hook_can_request_a_stop_instead(caplog):
    caplog.set_level(logging.WARNING, logger=HOOKS_LOG)
    x = tf.placeholder(tf.float32, [2], name="x")
    with MonitoredSession(hooks=[NanTensorHook(x, fail_on_nan_loss=False)]) as sess:
        sess.run(x, {x: [1.0, 2.0]})
        assert not sess.should_stop()
        sess.run(x, {x: [1.0, np.nan]})
        assert sess.should_stop()
    assert "Model diverged with loss = NaN." in _messages(caplog)


def test_step_counter_hook_logs_steps_per_second(caplog):
    caplog.set_level(logging.INFO, logger=HOOKS_LOG)
    _, train_op = _counter_model()
    hook = StepCounterHook(every_n_steps=2)
    with MonitoredSession(hooks=[hook]) as sess:
        for _ in range(6):
            sess.run(train_op)
    rates = [m for m in _messages(caplog) if m.startswith("global_step/sec: ")]
    assert len(rates) == 2
    assert hook.last_rate is not None and hook.last_rate > 0
    with pytest.raises(ValueError, match="exactly one of every_n_steps and every_n_secs"):
        StepCounterHook(every_n_steps=None)


def test_step_counter_hook_warns_when_the_step_does_not_move(caplog):
    caplog.set_level(logging.WARNING, logger=HOOKS_LOG)
    gs, _ = _counter_model()
    with MonitoredSession(hooks=[StepCounterHook(every_n_steps=1)]) as sess:
        for _ in range(3):
            sess.run(gs.value())
    assert sum("has not been increased" in m for m in _messages(caplog)) == 2


def test_final_ops_hook():
    gs, train_op = _counter_model()
    hook = FinalOpsHook({"step": gs.value(), "scaled": gs.value() * 10})
    with MonitoredSession(hooks=[hook]) as sess:
        for _ in range(3):
            sess.run(train_op)
        assert hook.final_ops_values is None
    assert hook.final_ops_values == {"step": 3, "scaled": 30}


def test_feed_fn_hook_feeds_every_run():
    x = tf.placeholder(tf.float32, [], name="x")
    y = x * 2.0
    values = iter([1.0, 2.0, 3.0])
    with MonitoredSession(hooks=[FeedFnHook(lambda: {x: next(values)})]) as sess:
        assert [float(sess.run(y)) for _ in range(3)] == [2.0, 4.0, 6.0]


def test_global_step_waiter_hook():
    gs, train_op = _counter_model()
    set_step = tf.assign(gs, tf.constant(5, dtype=tf.int64))
    # already there: the first run goes ahead
    scaffold = Scaffold(init_fn=lambda scaffold, sess: sess.run(set_step))
    with MonitoredSession(ChiefSessionCreator(scaffold=scaffold),
                          hooks=[GlobalStepWaiterHook(5)]) as sess:
        assert sess.run(train_op) == 6
    # never there: the wait is bounded
    hook = GlobalStepWaiterHook(100, poll_secs=0.02, max_wait_secs=0.2)
    t0 = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError, match="waiting"):
        with MonitoredSession(hooks=[hook]) as sess:
            sess.run(train_op)
    assert time.monotonic() - t0 < 10
