"""Clusters of separate processes on this machine: ``LocalCluster`` (``tensorgrid local``) starts
a Redis, the HTTP master, ps and worker tasks, waits until they are healthy and restarts any that
dies; ``probes`` holds the health checks it (and ``tensorgrid health``) uses."""

from tensorgrid.cluster.local import LocalCluster
from tensorgrid.cluster.process import ProcessInfo

__all__ = ["LocalCluster", "ProcessInfo"]
