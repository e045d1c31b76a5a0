"""Cluster health for the HTTP master: the core's monitor (heartbeats and polls)."""

from tensorgrid.master.health import HealthMonitor

__all__ = ["HealthMonitor"]
