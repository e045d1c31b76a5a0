"""``DashboardScalarsHook``: fetch loss-like tensors with the training step and send them to the
master's dashboard, where they are drawn as live charts (``tensorgrid.client.dashboard``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from tensorgrid.client.dashboard import log_scalars
from tensorgrid.client.train.hooks import (
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    _global_step_read,
)
from tensorgrid.core import errors

__all__ = ["DashboardScalarsHook"]

_log = logging.getLogger(__name__)


class DashboardScalarsHook(SessionRunHook):
    """Every ``every_n_steps`` runs (or ``every_n_secs`` seconds), fetch ``tags``' tensors with
    the run and log their values to the dashboard of the session's HTTP master, at the global
    step when the graph has one (else at the master's step count).

    The values ride on the training step's own run (no extra step); sending them is one small
    HTTP request. A failure to send is logged once and does not stop the training: the dashboard
    is a view, not part of the model.

    Args:
        tags: chart name -> a scalar tensor (``{"loss": loss}``).
        every_n_steps, every_n_secs: how often; at most one (every run when both are None).

    Raises:
        ValueError: no tags, or both intervals given.
    """

    def __init__(self, tags: Mapping[str, Any], every_n_steps: int | None = None,
                 every_n_secs: float | None = None) -> None:
        if not tags:
            raise ValueError("DashboardScalarsHook needs at least one tag")
        if every_n_steps is None and every_n_secs is None:
            every_n_steps = 1
        self._tags = dict(tags)
        self._timer = SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_steps)
        self._iter = 0
        self._step_tensor: Any = None
        self._warned = False
        self._due = False

    def begin(self) -> None:
        self._step_tensor = _global_step_read()
        self._iter = 0
        self._timer.reset()

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        self._due = self._timer.should_trigger_for_step(self._iter)
        if not self._due:
            return None
        fetches: dict[str, Any] = {"tags": self._tags}
        if self._step_tensor is not None:
            fetches["step"] = self._step_tensor
        return SessionRunArgs(fetches)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if self._due:
            self._timer.update_last_triggered_step(self._iter)
            results = run_values.results
            step = results.get("step")
            try:
                log_scalars(run_context.session, results["tags"],
                            None if step is None else int(step))
            except errors.OpError as exc:
                if not self._warned:
                    self._warned = True
                    _log.warning("DashboardScalarsHook: the scalars could not be logged (%s); "
                                 "training goes on", exc)
        self._iter += 1
