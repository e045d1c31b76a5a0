"""Pulls of different tensors from one peer overlap on its data-plane stream: a small tensor
asked for after a big one arrives before the big one has finished, and a tensor not produced yet
holds up no other. Real sockets on 127.0.0.1; the producer reports another host, so tensors
cross as RAW frames, not shared memory."""

from __future__ import annotations

import asyncio

import numpy as np

from tensorgrid.core.rendezvous_key import make_key
from tensorgrid.pb import worker_pb2
from tensorgrid.runtime.worker import WorkerCore
from tensorgrid.transport.channels import ChannelPool
from tensorgrid.transport.server import TaskServer
from tensorgrid.transport.streams import RecvTensorStreamClient
from tensorgrid.transport.worker_client import data_plane_for

PS = "/job:ps/replica:0/task:0"
PS_DEV = f"{PS}/device:CPU:0"
WORKER_DEV = "/job:worker/replica:0/task:0/device:CPU:0"
STEP = 7
MB = 1 << 20


async def _producer() -> tuple[TaskServer, WorkerCore, ChannelPool, RecvTensorStreamClient]:
    core = WorkerCore(PS)
    server = TaskServer("127.0.0.1:0", worker=core, host_id="another-host")
    port = await server.start()
    pool = ChannelPool()
    address = f"127.0.0.1:{port}"
    client = RecvTensorStreamClient(lambda: pool.worker(address), PS, address,
                                    data_plane=data_plane_for(pool, None))
    return server, core, pool, client


def _key(core: WorkerCore, name: str) -> str:
    return make_key(PS_DEV, core.incarnation, WORKER_DEV, f"{name}:0")


async def _ask(client: RecvTensorStreamClient, key: str) -> asyncio.Future:
    fut = asyncio.get_running_loop().create_future()
    await client.request(worker_pb2.RecvTensorRequest(step_id=STEP, keys=[key],
                                                      host_id="this-host"), [fut])
    return fut


async def test_a_small_pull_after_a_big_one_finishes_first() -> None:
    server, core, pool, client = await _producer()
    try:
        big = np.arange(128 * MB // 4, dtype=np.float32)
        small = np.full(MB // 4, 3.0, dtype=np.float32)
        rdv = core.rendezvous.find_or_create(STEP)
        rdv.send(_key(core, "big"), big)
        rdv.send(_key(core, "small"), small)
        order: list[str] = []
        big_f = await _ask(client, _key(core, "big"))
        small_f = await _ask(client, _key(core, "small"))
        big_f.add_done_callback(lambda _f: order.append("big"))
        small_f.add_done_callback(lambda _f: order.append("small"))
        got_big, got_small = await asyncio.wait_for(asyncio.gather(big_f, small_f), 60)
        # the small tensor's piece went out between the big one's pieces
        assert order == ["small", "big"]
        np.testing.assert_array_equal(got_big, big)
        np.testing.assert_array_equal(got_small, small)
        assert server.data_plane is not None and server.data_plane.raw_bytes >= big.nbytes
    finally:
        client.close()
        await server.stop(0.5)
        await pool.close()


async def test_a_tensor_not_produced_yet_holds_up_no_other_pull() -> None:
    server, core, pool, client = await _producer()
    try:
        rdv = core.rendezvous.find_or_create(STEP)
        late_f = await _ask(client, _key(core, "late"))
        rdv.send(_key(core, "ready"), np.ones(8 * MB // 4, dtype=np.float32))
        ready = await asyncio.wait_for(await _ask(client, _key(core, "ready")), 30)
        assert ready.sum() == 2 * MB and not late_f.done()
        late = np.arange(6 * MB // 8, dtype=np.float64)
        rdv.send(_key(core, "late"), late)
        np.testing.assert_array_equal(await asyncio.wait_for(late_f, 30), late)
    finally:
        client.close()
        await server.stop(0.5)
        await pool.close()
