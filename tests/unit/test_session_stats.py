"""The bounded per-session records behind the dashboard: step time windows, scalar logs and the
trace sampler."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tensorgrid.core import errors
from tensorgrid.master.session_stats import (
    ScalarLog,
    StepTimes,
    TraceSampler,
    percentile,
    summary_scalars,
)
from tensorgrid.pb import summary_pb2


def test_percentile_matches_numpy_linear():
    values = sorted(np.random.default_rng(0).exponential(size=101).tolist())
    for q in (0.0, 0.5, 0.9, 0.99, 1.0):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q * 100)))
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_step_times_cover_the_latest_window_and_count_all():
    times = StepTimes(window=10)
    assert times.summary()["p50"] is None
    for i in range(100):
        times.record(float(i))
    s = times.summary()
    assert s["count"] == 100 and s["window"] == 10
    assert s["p50"] == pytest.approx(94.5) and s["max_s"] == 99.0
    assert s["mean_s"] == pytest.approx(94.5)
    assert times.total_s == sum(range(100))


def test_scalar_log_is_a_ring_per_tag_with_a_tag_cap():
    log = ScalarLog(points=3, max_tags=2)
    for step in range(5):
        log.log({"loss": 1.0 / (step + 1)}, step, wall_time=100.0 + step)
    assert log.series()["loss"] == [[2, 102.0, 1 / 3], [3, 103.0, 0.25], [4, 104.0, 0.2]]
    log.log({"loss": math.nan, "acc": 0.5}, 5)
    assert log.series()["loss"][-1][2] is None
    assert log.logged == 7
    with pytest.raises(errors.ResourceExhaustedError, match="more than 2 scalar tags"):
        log.log({"loss": 1.0, "third": 1.0}, 6)
    assert log.series()["loss"][-1][0] == 5  # all or nothing
    with pytest.raises(errors.InvalidArgumentError, match="tag"):
        log.log({"": 1.0}, 7)
    with pytest.raises(errors.InvalidArgumentError, match="number"):
        log.log({"loss": "low"}, 7)  # type: ignore[dict-item]


def test_trace_sampler_traces_on_request_and_one_in_n():
    never = TraceSampler()
    assert not any(never.take() for _ in range(10))
    never.request_next()
    assert never.pending and never.take() and not never.take()
    every3 = TraceSampler(3)
    assert [every3.take() for _ in range(7)] == [False, False, True, False, False, True, False]
    with pytest.raises(ValueError):
        TraceSampler(-1)


def test_summary_scalars_reads_simple_values_only():
    summary = summary_pb2.Summary(value=[
        summary_pb2.Summary.Value(tag="loss", simple_value=0.5),
        summary_pb2.Summary.Value(tag="img", image=summary_pb2.Summary.Image(height=1))])
    raw = summary.SerializeToString()
    assert summary_scalars(np.array(raw, dtype=object)) == {"loss": 0.5}
    assert summary_scalars(np.array([raw, raw], dtype=object)) == {}
    assert summary_scalars(np.float32(1.0)) == {}
    assert summary_scalars(np.array(b"\xff\xff not a proto", dtype=object)) == {}


def test_log_fitting_leaves_out_tags_past_the_cap():
    log = ScalarLog(max_tags=2)
    log.log_fitting({"a": 1.0, "b": 2.0, "c": 3.0, "": 4.0}, 1)
    log.log_fitting({"a": 5.0, "d": 6.0}, 2)
    assert {t: [p[2] for p in ps] for t, ps in log.series().items()} == {"a": [1.0, 5.0],
                                                                         "b": [2.0]}
