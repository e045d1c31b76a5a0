"""Serve a parameter-server task: ``services.worker.main.serve``, the same WorkerService."""

from __future__ import annotations

from services.worker.main import serve

__all__ = ["serve"]
