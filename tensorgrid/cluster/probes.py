"""Health probes of the processes of a cluster: the master's ``GET /healthz`` and a task's gRPC
health service (``grpc.health.v1.Health/Check``). Both are synchronous, bounded by a timeout, and
answer False rather than raise, so supervisors and healthchecks can poll them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

SERVING = "SERVING"


def http_healthy(url: str, timeout: float = 2.0, verify: Any = True) -> bool:
    """Whether ``GET url`` answers 200 (``url`` is the master's base URL, or ends in a path such
    as ``/healthz``: a bare ``http://host:port`` gets ``/healthz`` appended). ``verify``: how
    an ``https`` master is verified (an ``ssl.SSLContext`` trusting the cluster's CA)."""
    import httpx

    target = url.rstrip("/")
    if target.count("/") <= 2:  # scheme://host:port with no path
        target += "/healthz"
    try:
        return httpx.get(target, timeout=timeout, verify=verify).status_code == 200
    except httpx.HTTPError:
        return False


def grpc_health(address: str, service: str = "", timeout: float = 2.0,
                credentials: Any = None) -> str:
    """The gRPC health status of ``service`` ('' = the server as a whole) at ``host:port``:
    'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN', ..., or 'UNREACHABLE' when nothing answers.
    ``credentials``: the gRPC channel credentials of a TLS server (None: plaintext)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    target = address.removeprefix("grpc://")
    channel = grpc.insecure_channel(target) if credentials is None else \
        grpc.secure_channel(target, credentials)
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            return "SERVICE_UNKNOWN" if code == grpc.StatusCode.NOT_FOUND else "UNREACHABLE"
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


def grpc_healthy(address: str, service: str = "", timeout: float = 2.0,
                 credentials: Any = None) -> bool:
    """Whether the gRPC server at ``host:port`` reports ``service`` as SERVING."""
    return grpc_health(address, service, timeout, credentials) == SERVING


def wait_until(check: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """Call ``check`` until it returns True or ``timeout`` seconds pass; returns the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
