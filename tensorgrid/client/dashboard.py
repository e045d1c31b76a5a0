"""Loss-like scalars for the master's dashboard: ``log_scalars(sess, {"loss": 0.25}, step=10)``
adds one point per tag to the session's live charts on the HTTP master that runs it
(``POST /v1/sessions/{id}/scalars``). The master keeps the latest 1000 points of at most 32 tags
per session, and drops them with the session. ``DashboardScalarsHook``
(``tensorgrid.client.train``) does it for a ``MonitoredTrainingSession``.

TensorBoard's event files are written by ``tf.summary.FileWriter``; this is only the dashboard's
live view, which needs no file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from tensorgrid.core import errors

__all__ = ["log_scalars"]


def _backend_of(sess: Any) -> Any:
    """The master backend of a ``Session`` (or of a session wrapping one: a monitored
    session's raw session)."""
    seen = 0
    while sess is not None and seen < 8:
        backend = getattr(sess, "_backend", None)
        if backend is not None:
            return backend
        # MonitoredSession and the wrappers it stacks hold the next session inward
        sess = getattr(sess, "_sess", None) or getattr(sess, "tf_sess", None)
        seen += 1
    return None


def log_scalars(sess: Any, scalars: Mapping[str, Any], step: int | None = None) -> None:
    """Add one point per tag to the dashboard's charts of ``sess``'s session on its master.

    Args:
        sess: a ``Session`` on an HTTP master (``Session("http://host:port")``), or a session
            wrapping one.
        scalars: tag -> a number (a Python or numpy scalar, or a one-element array).
        step: the step of the points; the session's step count on the master when None.

    Raises:
        InvalidArgumentError: a value is not a single number.
        UnimplementedError: the session does not run on an HTTP master.
        ResourceExhaustedError: the session would have more than 32 tags.
    """
    backend = _backend_of(sess)
    if backend is None or not hasattr(backend, "log_scalars"):
        raise errors.UnimplementedError(
            "Logging scalars to the dashboard needs a session on an HTTP master "
            "(Session('http://host:port')); this session runs in process")
    values: dict[str, float | None] = {}
    for tag, value in scalars.items():
        arr = np.asarray(value)
        if arr.size != 1 or arr.dtype.kind not in "iuf":
            raise errors.InvalidArgumentError(
                f"Scalar {tag!r} must be a single number, got {type(value).__name__} of dtype "
                f"{arr.dtype} and shape {list(arr.shape)}")
        number = float(arr.reshape(-1)[0])
        # JSON has no NaN or infinity: such a value travels as null, and the chart shows a gap
        values[str(tag)] = number if math.isfinite(number) else None
    backend.log_scalars(values, None if step is None else int(step))
