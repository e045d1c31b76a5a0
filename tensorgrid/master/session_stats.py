"""What the master keeps of one session for the dashboard, each bounded whatever the session does:

* ``StepTimes``: the durations of the session's latest successful steps (a window of fixed size),
  for its step time percentiles;
* ``ScalarLog``: loss-like scalars that the session's client logs, a ring buffer per tag, with a
  cap on the number of tags;
  Scalar summaries that a step fetches (``tf.summary.scalar``, or a merge of summaries) are
  logged there too (``summary_scalars``);
* ``TraceSampler``: which untraced steps the master traces itself (the next one on request, and
  one step in N when asked), so that the session's latest timeline stays fresh.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from tensorgrid.core import errors
from tensorgrid.pb import summary_pb2

# the latest steps whose durations make a session's percentiles
STEP_WINDOW = 1024
# points kept per scalar tag, and tags per session
SCALAR_POINTS = 1000
MAX_SCALAR_TAGS = 32
MAX_TAG_CHARS = 128
# the ops whose output is a serialized Summary that may hold scalars
SCALAR_SUMMARY_OPS = frozenset({"ScalarSummary", "MergeSummary"})


def percentile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of sorted values, interpolated between the closest ranks
    (numpy's default "linear" method)."""
    if not ordered:
        raise ValueError("percentile of no values")
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class StepTimes:
    """The durations (seconds, from planning to the last task's answer) of a session's latest
    ``window`` successful steps, and the count and total of all of them."""

    def __init__(self, window: int = STEP_WINDOW) -> None:
        self._recent: deque[float] = deque(maxlen=window)
        self.count = 0
        self.total_s = 0.0

    def record(self, seconds: float) -> None:
        """Count one successful step of ``seconds``."""
        self._recent.append(seconds)
        self.count += 1
        self.total_s += seconds

    def summary(self) -> dict[str, Any]:
        """``count`` (all steps), ``window`` (how many the percentiles cover), ``p50``, ``p90``,
        ``p99``, ``max_s`` and ``mean_s`` of the window (None before the first step)."""
        ordered = sorted(self._recent)
        out: dict[str, Any] = {"count": self.count, "window": len(ordered)}
        for q in (0.5, 0.9, 0.99):
            out[f"p{round(q * 100)}"] = percentile(ordered, q) if ordered else None
        out["max_s"] = ordered[-1] if ordered else None
        out["mean_s"] = sum(ordered) / len(ordered) if ordered else None
        return out


class ScalarLog:
    """Scalars logged by a session's client: per tag, the latest ``points`` values with the step
    and the time they were logged at; at most ``max_tags`` tags."""

    def __init__(self, points: int = SCALAR_POINTS, max_tags: int = MAX_SCALAR_TAGS) -> None:
        self.points = points
        self.max_tags = max_tags
        self._tags: dict[str, deque[tuple[int, float, float]]] = {}
        self.logged = 0  # values logged, all tags together (the newest point's sequence number)

    def log(self, values: Mapping[str, float], step: int, wall_time: float | None = None) -> None:
        """Add one value per tag at ``step``; all or nothing.

        Raises:
            InvalidArgumentError: a tag is empty or too long, or a value is not a number.
            ResourceExhaustedError: the values would make more than ``max_tags`` tags.
        """
        clean: dict[str, float] = {}
        for tag, value in values.items():
            if not isinstance(tag, str) or not tag or len(tag) > MAX_TAG_CHARS:
                raise errors.InvalidArgumentError(
                    f"Scalar tag {tag!r} must be a string of 1 to {MAX_TAG_CHARS} characters")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise errors.InvalidArgumentError(
                    f"Scalar {tag!r} must be a number, got {type(value).__name__}")
            clean[tag] = float(value)
        new = [t for t in clean if t not in self._tags]
        if len(self._tags) + len(new) > self.max_tags:
            raise errors.ResourceExhaustedError(
                f"Logging {', '.join(map(repr, new))} would give the session more than "
                f"{self.max_tags} scalar tags (it has {len(self._tags)})")
        at = time.time() if wall_time is None else wall_time
        for tag, value in clean.items():
            self._tags.setdefault(tag, deque(maxlen=self.points)).append((step, at, value))
        self.logged += len(clean)

    def log_fitting(self, values: Mapping[str, float], step: int) -> None:
        """Log the values whose tags are kept or still fit under ``max_tags`` (the rest are
        left out: a step's summaries must not fail it)."""
        room = self.max_tags - len(self._tags)
        fitting: dict[str, float] = {}
        for tag, value in values.items():
            if not tag or len(tag) > MAX_TAG_CHARS:
                continue
            if tag not in self._tags:
                if room <= 0:
                    continue
                room -= 1
            fitting[tag] = value
        if fitting:
            self.log(fitting, step)

    def tags(self) -> list[str]:
        return list(self._tags)

    def series(self) -> dict[str, list[list[float | int | None]]]:
        """Per tag, ``[step, wall_time, value]`` oldest first (a non-finite value is None, as
        JSON has no NaN)."""
        return {tag: [[s, t, v if math.isfinite(v) else None] for s, t, v in points]
                for tag, points in self._tags.items()}


def summary_scalars(value: Any) -> dict[str, float]:
    """The ``simple_value`` entries of a fetched serialized ``Summary`` (a string scalar), by
    tag; {} for anything else (a value that does not parse is not a summary)."""
    arr = np.asarray(value)
    if arr.size != 1:
        return {}
    raw = arr.reshape(-1)[0]
    if not isinstance(raw, bytes):
        return {}
    try:
        summary = summary_pb2.Summary.FromString(raw)
    except DecodeError:
        return {}
    return {v.tag: float(v.simple_value) for v in summary.value
            if v.WhichOneof("value") == "simple_value"}


class TraceSampler:
    """Decides whether the master traces a step the client did not ask to trace: the next step
    after ``request_next``, and one step in ``every_n`` (0: never)."""

    def __init__(self, every_n: int = 0) -> None:
        if every_n < 0:
            raise ValueError(f"every_n must be >= 0, got {every_n}")
        self.every_n = every_n
        self._next = False
        self._seen = 0

    def request_next(self) -> None:
        """Trace the session's next step."""
        self._next = True

    @property
    def pending(self) -> bool:
        return self._next

    def take(self) -> bool:
        """Whether to trace the step starting now (counts it)."""
        self._seen += 1
        if self._next:
            self._next = False
            return True
        return self.every_n > 0 and self._seen % self.every_n == 0
