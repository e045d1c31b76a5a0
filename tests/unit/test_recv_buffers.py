"""Received tensors' memory reused once nothing views it (``transport.recvbuf``), alone and under
the RecvTensor assembler; never handed out while any view of it lives."""

from __future__ import annotations

import gc
import threading

import numpy as np

from tensorgrid.pb import worker_pb2
from tensorgrid.transport import tensors, wire
from tensorgrid.transport.recvbuf import ReceiveBuffers

MB = 1 << 20
PEER = "/job:ps/replica:0/task:0"


def _address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def test_a_collected_buffer_is_handed_to_the_next_tensor_of_its_size() -> None:
    pool = ReceiveBuffers()
    a = pool.take(2 * MB)
    a[:] = 7
    where = _address(a)
    del a
    gc.collect()
    assert pool.free_bytes == 2 * MB
    b = pool.take(2 * MB)
    assert _address(b) == where and (pool.reused, pool.allocated) == (1, 1)
    assert b.flags.writeable and b.nbytes == 2 * MB
    c = pool.take(3 * MB)  # another size: memory of its own
    assert _address(c) != where and pool.allocated == 2


def test_a_buffer_is_not_reused_while_any_view_of_it_lives() -> None:
    pool = ReceiveBuffers()
    a = pool.take(4 * MB)
    where = _address(a)
    view = a.view(np.float32).reshape(1024, -1)[::2]
    del a
    gc.collect()
    b = pool.take(4 * MB)  # the view still reads the first buffer
    assert _address(b) != where and pool.free_bytes == 0
    del view
    gc.collect()
    assert pool.free_bytes == 4 * MB
    assert _address(pool.take(4 * MB)) == where


def test_small_tensors_are_not_pooled_and_free_memory_is_bounded() -> None:
    pool = ReceiveBuffers(max_bytes=5 * MB, min_bytes=MB)
    small = pool.take(1000)
    del small
    gc.collect()
    assert pool.free_bytes == 0 and pool.allocated == 0
    held = [pool.take(2 * MB), pool.take(2 * MB), pool.take(3 * MB)]
    first = _address(held[0])
    for i in range(3):  # given back in this order
        held[i] = None
        gc.collect()
    # 2 + 2 + 3 MB given back into 5 MB: the oldest free one went to make room
    assert pool.free_bytes == 5 * MB
    assert _address(pool.take(2 * MB)) != first  # the first given back was dropped
    too_big = pool.take(6 * MB)
    del too_big
    gc.collect()
    assert pool.free_bytes <= 5 * MB


def test_buffers_come_back_from_other_threads() -> None:
    pool = ReceiveBuffers()
    arrays = [pool.take(MB + i * 4096) for i in range(8)]

    def drop(i: int) -> None:
        arrays[i] = None  # type: ignore[call-overload]

    threads = [threading.Thread(target=drop, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    assert pool.free_bytes == sum(MB + i * 4096 for i in range(8))


def _pull(asm: tensors.Assembler, value: np.ndarray) -> np.ndarray:
    """``value`` through RAW frames into ``asm``: the rebuilt tensor."""
    reader = wire.FrameReader(wire.RECV_RESP, PEER, lambda m, n: asm.target(m.chunk, n))
    data = b""
    for piece in tensors.encode(0, value, False, None, raw=True):
        msg = worker_pb2.RecvTensorStreamResponse(request_id=1, chunk=piece.meta)
        data += wire.raw_head(msg, len(piece.payload)) + bytes(piece.payload)
    at, done = 0, None
    while at < len(data):
        buf = reader.buffer()
        n = min(len(buf), len(data) - at)
        buf[:n] = data[at:at + n]
        at += n
        reader.received(n)
        for item in reader.take():
            done = asm.landed(item.message.chunk, item.nbytes) or done
    assert done is not None
    return done[1]  # type: ignore[no-any-return]


def test_the_assembler_lands_each_pull_in_the_memory_of_the_last_one() -> None:
    pool = ReceiveBuffers()
    first = np.arange(3 * MB // 4, dtype=np.float32).reshape(3, -1)
    got = _pull(tensors.Assembler(peer=PEER, buffers=pool), first)
    np.testing.assert_array_equal(got, first)
    where = _address(got)
    del got
    gc.collect()
    second = -first
    got = _pull(tensors.Assembler(peer=PEER, buffers=pool), second)
    assert _address(got) == where and pool.reused == 1
    np.testing.assert_array_equal(got, second)  # every old byte was overwritten
    assert got.dtype == np.float32 and got.shape == (3, MB // 4)
