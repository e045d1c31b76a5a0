"""A streamed call whose peer died: the next write fails, and what gRPC's aio reports for it
(INTERNAL "Internal error from Core", grpc/grpc#36066) must reach the master as a retryable
``UnavailableError`` naming the task, for the request written and for those still waiting on the
stream. Fake calls, no network."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from tensorgrid.core import errors
from tensorgrid.pb import worker_pb2
from tensorgrid.transport.streams import RunGraphStreamClient

TASK = "/job:worker/replica:0/task:1"


class _DeadCall:
    """A RunGraphStream call after its peer was killed: reads wait, writes fail as in grpcio."""

    def __init__(self, fail_after: int) -> None:
        self.writes = 0
        self.fail_after = fail_after

    async def write(self, msg: Any) -> None:
        self.writes += 1
        if self.writes > self.fail_after:
            raise grpc.aio.AioRpcError(grpc.StatusCode.INTERNAL, grpc.aio.Metadata(),
                                       grpc.aio.Metadata(), details="Internal error from Core")

    def __aiter__(self) -> _DeadCall:
        return self

    async def __anext__(self) -> Any:
        await asyncio.Event().wait()  # the reader has not seen the end yet

    def cancel(self) -> bool:
        return True


class _Stub:
    def __init__(self, call: _DeadCall) -> None:
        self.call = call

    def RunGraphStream(self, metadata: Any = None, wait_for_ready: bool = False) -> _DeadCall:
        return self.call


async def test_a_failed_write_is_unavailable_for_every_request_of_the_stream() -> None:
    stub = _Stub(_DeadCall(fail_after=1))
    client = RunGraphStreamClient(lambda: stub, TASK, "127.0.0.1:1")
    request = worker_pb2.RunGraphRequest(graph_handle="g", step_id=1)
    waiting = asyncio.ensure_future(client.run_graph(request, timeout=30.0))
    await asyncio.sleep(0.01)  # written, waits for its answer
    with pytest.raises(errors.UnavailableError, match=f"Task {TASK} .* stream broke"):
        await client.run_graph(request, timeout=30.0)
    with pytest.raises(errors.UnavailableError, match=TASK):
        await asyncio.wait_for(waiting, 5.0)
    client.close()
