"""The rendezvous of a step: one value per key, to one receiver; aborts fail what waits and what
comes later. And the outbox that orders a stream's answers."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tensorgrid.core import errors
from tensorgrid.runtime.rendezvous import Rendezvous, RendezvousMgr
from tensorgrid.transport.worker_service import _Outbox


def test_send_before_and_after_recv() -> None:
    async def main() -> None:
        rdv = Rendezvous(1)
        rdv.send("a", 1)
        assert await rdv.recv("a") == 1
        assert rdv.is_empty()
        waiting = asyncio.ensure_future(rdv.recv("b"))
        await asyncio.sleep(0)
        rdv.send("b", 2)
        assert await waiting == 2
        assert rdv.is_empty()
        rdv.send("c", 3)
        with pytest.raises(errors.InternalError, match="Duplicate send of rendezvous key c"):
            rdv.send("c", 4)

    asyncio.run(main())


def test_recv_future_done_when_sent_pending_otherwise() -> None:
    async def main() -> None:
        rdv = Rendezvous(1)
        rdv.send("a", 1)
        fut = rdv.recv_future("a")
        assert fut.done() and fut.result() == 1 and rdv.is_empty()
        later = rdv.recv_future("b")
        assert not later.done()
        rdv.send("b", 2)
        assert later.result() == 2 and rdv.is_empty()

    asyncio.run(main())


def test_forget_keeps_a_later_send() -> None:
    async def main() -> None:
        rdv = Rendezvous(1)
        fut = rdv.recv_future("a")
        rdv.forget("a", fut)
        assert fut.cancelled() and rdv.is_empty()
        rdv.send("a", 5)  # not lost: a new request takes it
        assert rdv.recv_future("a").result() == 5

    asyncio.run(main())


def test_abort_fails_pending_and_later_calls() -> None:
    async def main() -> None:
        mgr = RendezvousMgr()
        rdv = mgr.find_or_create(7)
        fut = rdv.recv_future("a")
        mgr.abort(7, errors.AbortedError("worker 1 died"))
        with pytest.raises(errors.AbortedError, match="worker 1 died"):
            fut.result()
        with pytest.raises(errors.AbortedError, match="worker 1 died"):
            rdv.recv_future("b")
        with pytest.raises(errors.AbortedError, match="worker 1 died"):
            rdv.send("c", 1)

    asyncio.run(main())


def test_outbox_keeps_order_and_bounds_puts() -> None:
    async def main() -> None:
        out = _Outbox(maxsize=2)
        for i in range(2):
            await out.put(i)
        third = asyncio.ensure_future(out.put(2))
        await asyncio.sleep(0)
        assert not third.done() and len(out) == 2  # full: the writer has to take one first
        assert out.take() == 0
        await asyncio.wait_for(third, 1.0)
        assert [out.take(), out.take()] == [1, 2]
        waiter = asyncio.ensure_future(out.wait())
        await asyncio.sleep(0)
        assert not waiter.done()
        out.put_nowait(3)
        await asyncio.wait_for(waiter, 1.0)
        assert out.take() == 3 and len(out) == 0

    asyncio.run(main())


def test_pending_bytes_count_values_sent_and_not_received() -> None:
    async def main() -> None:
        mgr = RendezvousMgr()
        one, two = mgr.find_or_create(1), mgr.find_or_create(2)
        one.send("a", np.zeros(10, np.float32))
        two.send("b", np.zeros((2, 3), np.float64))
        waiting = asyncio.ensure_future(two.recv("c"))  # a receiver waiting holds nothing
        await asyncio.sleep(0)
        assert mgr.pending_bytes() == 40 + 48
        assert (await one.recv("a")).nbytes == 40
        assert mgr.pending_bytes() == 48 and one.pending_bytes() == 0
        two.send("c", np.int64(7))
        await waiting
        assert mgr.pending_bytes() == 48

    asyncio.run(main())
