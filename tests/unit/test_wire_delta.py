"""Variables on the wire as deltas of what the reader holds: the frame round-trips every float
type bit for bit, the producer and consumer caches agree on versions (a mismatch costs one full
send), the caches stay in their bounds, bad frames fail clearly, the partitioner marks variable
reads (and only those), and training across real gRPC tasks with deltas is bit-identical to the
same training without them."""

from __future__ import annotations

from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest
from test_wire_compression import _graph as one_edge_graph

import tensorgrid as tf
from tensorgrid.client import train
from tensorgrid.client.train.device_setter import replica_device_setter
from tensorgrid.client.train.server import ClusterSpec, Server, free_port
from tensorgrid.compiler.partition import partition
from tensorgrid.compiler.wire import (
    DELTA_CODEC_ATTR,
    DELTA_LEVEL_ATTR,
    WireCodec,
    WireDelta,
    WirePolicy,
)
from tensorgrid.core import dtypes, errors, serde
from tensorgrid.core.ir import NodeDef
from tensorgrid.core.registry import TensorSpec
from tensorgrid.core.rendezvous_key import make_key
from tensorgrid.core.shapes import TensorShape
from tensorgrid.master.master_session import SessionOptions
from tensorgrid.pb import worker_pb2
from tensorgrid.settings import ClientSettings
from tensorgrid.transport import delta as delta_mod
from tensorgrid.transport import delta_frames
from tensorgrid.transport.delta import (
    KEEP_VERSIONS,
    PROBE_EVERY,
    DeltaReceiver,
    DeltaSender,
    DeltaStream,
    delta_keys,
)
from tensorgrid.transport.delta_frames import decode_delta, delta_blocks, encode_delta
from tensorgrid.transport.tensors import Assembler, Versioned

PS_TASK, WORKER_TASK = "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"
PS, WORKER = PS_TASK + "/device:CPU:0", WORKER_TASK + "/device:CPU:0"
KEY = make_key(PS, 7, WORKER, "w/read:0")
RNG = np.random.default_rng(0)


def _adam_like(w: np.ndarray, lr: float = 1e-3) -> np.ndarray:
    """``w`` after an update of about ``lr`` per element, in ``w``'s type."""
    step = lr * np.sign(RNG.standard_normal(w.shape))
    return (w.astype(np.float64) - step).astype(w.dtype)


def _weights(shape, dtype) -> np.ndarray:
    return RNG.uniform(-0.07, 0.07, shape).astype(dtype)


# ------------------------------------------------------------------------------------ frames

@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16, np.float64])
@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_a_delta_turns_the_base_into_the_new_value_bit_for_bit(dtype, codec):
    base = _weights((384, 512), dtype)
    base.reshape(-1)[:4] = np.array([np.nan, -0.0, np.inf, -np.inf]).astype(dtype)
    new = _adam_like(base)
    new.reshape(-1)[4] = np.asarray(np.nan).astype(dtype)  # a NaN where a number was
    frame = encode_delta(new, base, 5, codec)
    assert frame.dtype == np.uint8 and frame.nbytes < new.nbytes
    out = decode_delta(frame, base, 5)
    assert out.dtype == new.dtype and out.shape == new.shape
    assert out.tobytes() == new.tobytes()
    assert out is not base and base.tobytes() != new.tobytes()  # the base is left as it was


def test_an_unchanged_bfloat16_tensor_costs_almost_nothing():
    w = _weights((784, 1024), np.float32)
    a = w.astype(ml_dtypes.bfloat16)
    b = _adam_like(w, 1e-5).astype(ml_dtypes.bfloat16)  # below bfloat16's resolution mostly
    frame = encode_delta(b, a, 1)
    assert frame.nbytes < 0.2 * a.nbytes
    assert decode_delta(frame, a, 1).tobytes() == b.tobytes()


@pytest.mark.parametrize("mangle,message", [
    (lambda f: f[:10], "shorter than its header"),
    (lambda f: np.concatenate([np.frombuffer(b"XXXX", np.uint8), f[4:]]), "not a delta frame"),
    (lambda f: np.concatenate([f[:-1], (f[-1:] ^ 0xFF)]), "checksum"),
    (lambda f: np.concatenate([f[:100], f[101:]]), "cut short"),
    (lambda f: np.concatenate([f[:30], f[30:40] ^ 0x5A, f[40:]]), "checksum"),
])
def test_a_corrupt_delta_frame_fails_with_what_is_wrong(mangle, message):
    base = _weights((256, 256), np.float32)
    frame = encode_delta(_adam_like(base), base, 9)
    with pytest.raises(errors.DataLossError, match=message):
        decode_delta(mangle(frame), base, 9)


def test_a_frame_against_another_version_or_shape_is_refused():
    base = _weights((256, 256), np.float32)
    frame = encode_delta(_adam_like(base), base, 9)
    with pytest.raises(errors.DataLossError, match="cannot be applied to version"):
        decode_delta(frame, base, 10)
    with pytest.raises(errors.DataLossError, match="does not fit its base"):
        decode_delta(frame, base[:128], 9)
    with pytest.raises(ValueError, match="equal types and shapes"):
        encode_delta(base.astype(np.float64), base, 1)


# ------------------------------------------------------------------------------------ blocks

def _block_heads(frames) -> list[tuple]:
    """(flags, bytes, offset) of each block of a list of block frames."""
    heads = []
    for f in frames:
        _m, _c, _len, flags, n, _r, off, _v = delta_frames._HEAD.unpack(f[:delta_frames._HEAD.size]
                                                                      .tobytes())
        heads.append((flags, n, off))
    return heads


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float64])
@pytest.mark.parametrize("shape", [(1000, 37), (3,), (4096,)])
def test_block_frames_round_trip_bit_for_bit_when_the_size_is_no_multiple_of_a_block(dtype,
                                                                                      shape):
    base = _weights(shape, dtype)
    new = _adam_like(base)
    keep = np.empty_like(new)
    blocks = list(delta_blocks(new, base, 4, block_bytes=4096, keep=keep))
    assert keep.tobytes() == new.tobytes()  # the producer's copy, made block by block
    heads = _block_heads(blocks)
    assert [h[2] for h in heads] == list(range(0, new.nbytes, 4096))
    assert sum(h[1] for h in heads) == new.nbytes
    cached = np.empty_like(base)
    for frames in (blocks, np.concatenate(blocks)):  # streamed, or one frame
        out = decode_delta(frames, base, 4, keep=cached)
        assert out.tobytes() == new.tobytes() and cached.tobytes() == new.tobytes()
    one = encode_delta(new, base, 4, block_bytes=4096)
    assert decode_delta(one, base, 4).tobytes() == new.tobytes()


def test_a_block_that_does_not_pack_travels_raw_beside_delta_blocks():
    base = _weights((64, 1024), np.float32)  # 256 KiB: 4 blocks of 64 KiB
    new = base.copy()
    new[:32] = _adam_like(base[:32])  # the first half moves a little: deltas pack
    # the rest is new, every bit of it: raw
    new[32:] = RNG.integers(0, 2**32, (32, 1024), dtype=np.uint32).view(np.float32)
    blocks = list(delta_blocks(new, base, 2, block_bytes=64 * 1024))
    assert [h[0] for h in _block_heads(blocks)] == [0, 0, 1, 1]
    raw = blocks[-1][delta_frames._HEAD.size:]
    assert raw.tobytes() == new.reshape(-1).view(np.uint8)[-64 * 1024:].tobytes()
    assert decode_delta(blocks, base, 2).tobytes() == new.tobytes()


def test_one_corrupt_block_fails_clearly_and_a_missing_one_too():
    base = _weights((64, 1024), np.float32)
    new = _adam_like(base)
    blocks = list(delta_blocks(new, base, 6, block_bytes=64 * 1024))
    bad = [b.copy() for b in blocks]
    bad[2][delta_frames._HEAD.size + 10] ^= 0x40  # one bit of the third block's body
    with pytest.raises(errors.DataLossError, match="checksum"):
        decode_delta(bad, base, 6)
    bad = [b.copy() for b in blocks]
    bad[1][30] ^= 0x01  # the offset field of the second block's header
    with pytest.raises(errors.DataLossError, match="checksum"):
        decode_delta(bad, base, 6)
    with pytest.raises(errors.DataLossError, match="covers 196608 of the 262144 bytes"):
        decode_delta(blocks[:3], base, 6)
    with pytest.raises(errors.DataLossError, match="block of 65536 bytes at offset 131072"):
        decode_delta([blocks[0], blocks[2], blocks[1], blocks[3]], base, 6)
    with pytest.raises(errors.DataLossError, match="cannot be applied to version"):
        decode_delta(blocks, base, 7)
    with pytest.raises(ValueError, match="multiple of 8"):
        list(delta_blocks(new, base, 6, block_bytes=1001))


def test_a_streamed_answer_decodes_from_its_blocks_and_the_producer_keeps_it_after_the_last():
    sender, receiver = DeltaSender(), DeltaReceiver()
    w = _weights((700, 1024), np.float32)  # 2.7 MiB: 6 blocks
    held = receiver.held(PS_TASK, KEY)
    first = sender.begin(KEY, w, 0, "lz4", 1)  # nothing held: the whole tensor
    assert not isinstance(first, DeltaStream)
    receiver.accept(PS_TASK, KEY, first.version, first.payload, False, held)
    w2 = _adam_like(w)
    held = receiver.held(PS_TASK, KEY)
    stream = sender.begin(KEY, w2, held[0], "lz4", 1)
    assert isinstance(stream, DeltaStream) and stream.count == 6
    frames = [stream.next_block() for _ in range(stream.count - 1)]
    assert sender.cache.get(WORKER_TASK, KEY, stream.version) is None  # not kept before the last
    frames.append(stream.next_block())
    assert sender.cache.get(WORKER_TASK, KEY, stream.version) is not None
    with pytest.raises(IndexError, match="only 6 blocks"):
        stream.next_block()
    got = receiver.accept(PS_TASK, KEY, stream.version, frames, True, held)
    assert got.tobytes() == w2.tobytes()
    assert receiver.held(PS_TASK, KEY)[1].tobytes() == w2.tobytes()
    assert sender.delta_sends == 1 and sender.full_sends == 1
    assert sender.bytes_sent == w.nbytes + sum(f.nbytes for f in frames)


def test_block_chunks_are_assembled_into_their_frames_and_bad_ones_refused():
    w = _weights((300, 1024), np.float32)
    frames = list(delta_blocks(_adam_like(w), w, 8))
    dtype, shape = serde.dtype_to_enum(w.dtype), serde.shape_to_proto(TensorShape(w.shape))

    def chunk(f, version=5, last=False):
        return worker_pb2.RecvTensorChunk(index=1, dtype=dtype, shape=shape, data=f.tobytes(),
                                          delta=True, delta_block=True, version=version,
                                          delta_last=last)

    asm = Assembler()
    assert asm.add(chunk(frames[0])) is None and asm.add(chunk(frames[1])) is None
    i, got = asm.add(chunk(frames[2], last=True))
    assert i == 1 and isinstance(got, Versioned) and got.delta and got.version == 5
    assert [g.tobytes() for g in got.value] == [f.tobytes() for f in frames]
    asm = Assembler()
    asm.add(chunk(frames[0]))
    with pytest.raises(errors.DataLossError, match="mixes blocks of different answers"):
        asm.add(chunk(frames[1], version=6))
    asm = Assembler()
    with pytest.raises(errors.DataLossError, match="bytes of blocks for a tensor of"):
        for _ in range(4):
            asm.add(chunk(np.zeros(w.nbytes, np.uint8)))


def test_a_key_whose_deltas_pack_poorly_is_sent_whole_for_a_while_then_probed():
    sender, receiver = DeltaSender(), DeltaReceiver()
    w = _weights((256, 256), np.float32)
    _exchange(sender, receiver, w)
    kinds = []
    for _ in range(delta_mod.POOR_WINDOW + PROBE_EVERY + 1):
        # every bit moves: no delta packs
        w = RNG.integers(0, 2**32, w.shape, dtype=np.uint32).view(np.float32)
        got, delta = _exchange(sender, receiver, w)
        assert got is not None and got.tobytes() == w.tobytes()
        kinds.append(delta)
    # the first deltas are tried (sent whole, as their frames are not smaller), then the key
    # is sent whole without trying for PROBE_EVERY answers, then probed again
    assert sender.skipped == PROBE_EVERY and not any(kinds)
    tried = sender.bytes_sent - sender.bytes_raw  # nothing saved, nothing lost
    assert tried == 0
    # a probe that packs well resumes deltas at once
    w = _weights(w.shape, np.float32)
    for _ in range(PROBE_EVERY):
        _exchange(sender, receiver, w)
    kinds = []
    for _ in range(3):
        w = _adam_like(w)
        kinds.append(_exchange(sender, receiver, w)[1])
    assert kinds == [True, True, True]


# ------------------------------------------------------------------------------- the protocol

def _exchange(sender: DeltaSender, receiver: DeltaReceiver, value: np.ndarray,
              deliver: bool = True) -> tuple[np.ndarray | None, bool]:
    """One pull of ``KEY``: what the consumer gets (None when the answer is lost: its step was
    aborted) and whether it travelled as a delta."""
    held = receiver.held(PS_TASK, KEY)
    answer = sender.answer(KEY, value, held[0] if held else 0, "lz4", 1)
    if not deliver:
        return None, answer.delta
    got = receiver.accept(PS_TASK, KEY, answer.version, answer.payload, answer.delta, held)
    return got, answer.delta


def test_the_first_pull_is_whole_and_the_next_are_deltas_of_the_held_version():
    sender, receiver = DeltaSender(), DeltaReceiver()
    w = _weights((256, 256), np.float32)
    kinds = []
    for _ in range(5):
        got, delta = _exchange(sender, receiver, w)
        assert got is not None and got.tobytes() == w.tobytes()
        kinds.append(delta)
        w[...] = _adam_like(w)  # in place, as an optimizer updates a variable
    assert kinds == [False, True, True, True, True]
    assert sender.bytes_sent < sender.bytes_raw


def test_a_lost_answer_still_gets_a_delta_and_a_version_the_producer_lost_a_full_send():
    sender, receiver = DeltaSender(), DeltaReceiver()
    w = _weights((256, 256), np.float32)
    _exchange(sender, receiver, w)
    w = _adam_like(w)
    assert _exchange(sender, receiver, w, deliver=False)[1]  # this step was aborted
    w = _adam_like(w)
    got, delta = _exchange(sender, receiver, w)  # against the version before the lost one
    assert delta and got is not None and got.tobytes() == w.tobytes()
    for _ in range(KEEP_VERSIONS):  # more aborted steps than the producer keeps versions
        w = _adam_like(w)
        _exchange(sender, receiver, w, deliver=False)
    w = _adam_like(w)
    got, delta = _exchange(sender, receiver, w)
    assert not delta and got is not None and got.tobytes() == w.tobytes()


def test_a_restarted_producer_or_consumer_costs_one_full_send():
    sender, receiver = DeltaSender(), DeltaReceiver()
    w = _weights((256, 256), np.float32)
    _exchange(sender, receiver, w)
    assert not _exchange(DeltaSender(), receiver, _adam_like(w))[1]  # producer restarted
    assert not _exchange(sender, DeltaReceiver(), _adam_like(w))[1]  # consumer restarted


def test_a_delta_that_names_no_held_version_is_refused():
    receiver = DeltaReceiver()
    with pytest.raises(errors.DataLossError, match="holds no version"):
        receiver.accept(PS_TASK, KEY, 3, np.zeros(16, np.uint8), True, None)


def test_an_unknown_codec_is_refused_by_the_producer():
    with pytest.raises(errors.InvalidArgumentError, match="codec 'brotli'"):
        DeltaSender().answer(KEY, np.zeros(4, np.float32), 0, "brotli", 1)


def test_the_caches_stay_within_their_bounds_least_recently_used_first():
    w = _weights((64, 64), np.float32)  # 16 KiB
    sender = DeltaSender(max_bytes=8 * w.nbytes)  # one consumer: at most 4 of them
    keys = [make_key(PS, 7, WORKER, f"v{i}:0") for i in range(3)]
    for k in keys:
        sender.answer(k, w, 0, "lz4", 1)
        sender.answer(k, w, 0, "lz4", 1)  # two versions of each
    assert sender.cache.nbytes <= 4 * w.nbytes and sender.cache.evicted
    assert sender.cache.get(WORKER_TASK, keys[0]) is None  # the oldest went first
    assert sender.cache.get(WORKER_TASK, keys[2]) is not None
    other = make_key(PS, 7, WORKER_TASK.replace("task:0", "task:1") + "/device:CPU:0", "v0:0")
    sender.answer(other, w, 0, "lz4", 1)  # another consumer has a bound of its own
    assert sender.cache.nbytes <= 8 * w.nbytes
    receiver = DeltaReceiver(max_bytes=w.nbytes)  # smaller than a peer's share: not kept
    receiver.accept(PS_TASK, KEY, 5, w, False, None)
    assert receiver.held(PS_TASK, KEY) is None and receiver.cache.nbytes == 0


def test_a_deregistered_graph_takes_its_cached_values_along():
    nodes, specs = _var_graph()
    parts = partition(nodes, specs, WirePolicy(None, delta=WireDelta()))
    ps = {"g1": SimpleNamespace(nodes=parts[PS_TASK])}
    worker = {"g2": SimpleNamespace(nodes=parts[WORKER_TASK])}
    sender, receiver = DeltaSender(), DeltaReceiver()
    sender.sync(ps)
    receiver.sync(worker)
    (key,) = delta_keys(parts[WORKER_TASK], "_Recv")
    assert receiver.wants(key) == ("lz4", 1) and key in delta_keys(parts[PS_TASK], "_Send")
    held = receiver.held(PS_TASK, key)
    answer = sender.answer(key, _weights((256, 256), np.float32), 0, "lz4", 1)
    receiver.accept(PS_TASK, key, answer.version, answer.payload, answer.delta, held)
    assert receiver.held(PS_TASK, key) is not None and len(sender.cache) == 1
    receiver.sync({})
    sender.sync({})
    assert receiver.wants(key) is None and receiver.held(PS_TASK, key) is None
    assert len(sender.cache) == 0


# ------------------------------------------------------------------------------- the policy

def _var_graph(dtype=dtypes.float32, shape=(256, 256), read="Identity"):
    """A variable on the ps read (through ``read``) by a node on the worker."""
    nodes = [NodeDef("w", "VariableV2", (), PS, {"dtype": dtype, "shape": TensorShape(shape)}),
             NodeDef("w/read", read, ("w",), PS, {"T": dtype}),
             NodeDef("y", "Identity", ("w/read",), WORKER, {"T": dtype})]
    spec = TensorSpec(dtype, TensorShape(shape))
    return nodes, {"w": [spec], "w/read": [spec], "y": [spec]}


def _ops(parts, task, op):
    return [n for n in parts.get(task, ()) if n.op == op]


def test_a_variable_read_is_marked_and_gets_no_codec_nodes():
    nodes, specs = _var_graph()
    parts = partition(nodes, specs, WirePolicy(None, delta=WireDelta("zstd", 2)))
    (send,) = _ops(parts, PS_TASK, "_Send")
    (recv,) = _ops(parts, WORKER_TASK, "_Recv")
    for n in (send, recv):
        assert (n.attrs[DELTA_CODEC_ATTR], n.attrs[DELTA_LEVEL_ATTR]) == ("zstd", 2)
    assert recv.attrs["tensor_type"] is dtypes.float32


def test_with_bfloat16_and_a_codec_the_cast_stays_and_the_codec_goes():
    nodes, specs = _var_graph()
    parts = partition(nodes, specs, WirePolicy(dtypes.bfloat16, codec=WireCodec(),
                                               delta=WireDelta()))
    (cast,) = _ops(parts, PS_TASK, "Cast")
    (send,) = _ops(parts, PS_TASK, "_Send")
    assert send.inputs == (cast.name,) and send.attrs["T"] is dtypes.bfloat16
    assert send.attrs[DELTA_CODEC_ATTR] == "lz4"
    assert not _ops(parts, PS_TASK, "_WireEncode") and not _ops(parts, WORKER_TASK, "_WireDecode")


@pytest.mark.parametrize("nodes_specs", [
    one_edge_graph(dtypes.float32, (256, 256), "w", WORKER),  # a Const, not a variable
    _var_graph(shape=(64, 64)),                               # 16 KB: under 64 KiB
    _var_graph(dtypes.int32),                                 # not floating
], ids=["const", "small", "int"])
def test_edges_that_are_not_big_float_variable_reads_are_not_marked(nodes_specs):
    nodes, specs = nodes_specs
    parts = partition(nodes, specs, WirePolicy(None, delta=WireDelta()))
    assert not any(DELTA_CODEC_ATTR in n.attrs for p in parts.values() for n in p)


def test_a_resource_variable_read_is_marked_and_one_host_is_left_alone_unless_asked():
    nodes, specs = _var_graph(read="Identity")
    nodes = [nodes[0].with_(op="ReadVariableOp"), *nodes[1:]]
    same = {PS_TASK: "hostA:boot", WORKER_TASK: "hostA:boot"}
    marked = [WirePolicy(None, delta=WireDelta()),
              WirePolicy(None, delta=WireDelta(cross_host_only=False)).with_hosts(same)]
    for policy in marked:
        (send,) = _ops(partition(nodes, specs, policy), PS_TASK, "_Send")
        assert send.attrs.get(DELTA_CODEC_ATTR) == "lz4"
    (send,) = _ops(partition(nodes, specs, WirePolicy(None, delta=WireDelta()).with_hosts(same)),
                   PS_TASK, "_Send")
    assert DELTA_CODEC_ATTR not in send.attrs


def test_a_delta_setting_out_of_range_is_refused():
    for kw, message in (({"codec": "zlib"}, "lz4, zstd"), ({"level": 10}, "1..9"),
                        ({"min_bytes": -1}, "min_bytes")):
        with pytest.raises(ValueError, match=message):
            WireDelta(**kw)


def test_the_delta_setting_reaches_the_session_over_grpc():
    from tensorgrid.client.remote import _options_proto, options_of
    from tensorgrid.transport.master_service import options_from_proto
    cfg = tf.ConfigProto(graph_options=tf.GraphOptions(wire_compression=tf.WireCompression(
        dtype="", delta="zstd", delta_level=3, delta_min_bytes=4096,
        delta_cross_host_only=False)))
    policy = options_from_proto(_options_proto(options_of(cfg))).wire_policy()
    assert policy is not None and policy.dtype is None and policy.codec is None
    assert policy.delta == WireDelta("zstd", 3, 4096, cross_host_only=False)
    assert SessionOptions(**options_of(tf.ConfigProto())).wire_policy() is None


# ------------------------------------------------------------------------- across real tasks

def _train(wire: tf.WireCompression | None, steps: int = 24, fail_at: int | None = 10,
           settings: ClientSettings | None = None, hidden: int = 256,
           reasons: tuple[str, ...] = ("wire_delta",)):
    """An MLP (96-``hidden``-10) with its variables on a ps Server, trained with Adam from a
    worker Server over gRPC, with one step at ``fail_at`` (None: none) that fails after its
    pulls; returns the weights, the losses, the plan's rows whose reason starts with one of
    ``reasons`` and the ps's delta counters."""
    spec = ClusterSpec({"ps": [f"127.0.0.1:{free_port()}"],
                        "worker": [f"127.0.0.1:{free_port()}"]})
    servers = [Server(spec, "ps", 0, settings=settings),
               Server(spec, "worker", 0, settings=settings)]
    try:
        rng = np.random.default_rng(1)
        x = rng.standard_normal((64, 96)).astype(np.float32)
        y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
        with tf.Graph().as_default():
            tf.set_random_seed(3)
            with tf.device(replica_device_setter(cluster=spec,
                                                 worker_device="/job:worker/task:0")):
                w1 = tf.get_variable("w1", [96, hidden],
                                     initializer=tf.glorot_uniform_initializer())
                w2 = tf.get_variable("w2", [hidden, 10],
                                     initializer=tf.glorot_uniform_initializer())
                h = tf.nn.relu(tf.matmul(tf.constant(x), w1))
                loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(
                    labels=tf.constant(y), logits=tf.matmul(h, w2)))
                step = train.AdamOptimizer(1e-3).minimize(loss)
                scale = tf.placeholder(tf.float32, [])
                checked = tf.check_numerics(tf.reduce_sum(h) * scale, "poisoned step")
            cfg = tf.ConfigProto(graph_options=tf.GraphOptions(wire_compression=wire))
            losses = []
            with tf.Session(servers[1].target, config=cfg) as sess:
                sess.run(tf.global_variables_initializer())
                for i in range(steps):
                    if i == fail_at:  # pulls w1, then fails (and updates nothing)
                        with pytest.raises(errors.InvalidArgumentError, match="poisoned"):
                            sess.run(checked, {scale: np.float32(np.nan)})
                    losses.append(float(sess.run([step, loss])[1]))
                weights = sess.run([w1, w2])
                plans = [reg.plan for s in servers[1].master.sessions.values()
                         for reg in s.plans.values()]
                rows = [r for p in plans for r in p.explain()
                        if r["reason"].startswith(reasons)]
        sender = servers[0]._server.worker_servicer.deltas
        return weights, losses, rows, (sender.delta_sends, sender.full_sends)
    finally:
        for s in servers:
            s.stop()


def test_training_across_tasks_with_deltas_is_bit_identical_to_without():
    plain_w, plain_losses, plain_rows, plain_counts = _train(None)
    # one host here: deltas must be told to work between tasks of one host
    wire = tf.WireCompression(dtype="", delta="lz4", delta_min_bytes=1024,
                              delta_cross_host_only=False)
    w, losses, rows, (deltas, fulls) = _train(wire)
    assert not plain_rows and plain_counts == (0, 0)
    # w1 (96 KB) and w2 (10 KB) are read as deltas; a full send starts each
    assert {r["node"].split("/")[0] for r in rows} >= {"w1", "w2"}, rows
    assert all("float32 variable read as deltas" in r["reason"] and "lz4-1" in r["reason"]
               for r in rows)
    assert deltas > 20 and fulls >= 2
    assert losses == plain_losses
    for a, b in zip(w, plain_w, strict=True):
        assert a.tobytes() == b.tobytes()


def test_training_with_bfloat16_deltas_matches_bfloat16_without():
    bf16 = tf.WireCompression(dtype="bfloat16", min_bytes=1024)
    both = tf.WireCompression(dtype="bfloat16", min_bytes=1024, delta="zstd",
                              delta_min_bytes=1024, delta_cross_host_only=False)
    plain_w, plain_losses, _, _ = _train(bf16, 12, 5)
    w, losses, rows, (deltas, _) = _train(both, 12, 5)
    assert any("bfloat16 variable read as deltas" in r["reason"] for r in rows)
    assert deltas > 0 and losses == plain_losses
    for a, b in zip(w, plain_w, strict=True):
        assert a.tobytes() == b.tobytes()


def test_deltas_travel_over_grpc_streams_and_respect_the_cache_setting():
    wire = tf.WireCompression(dtype="", delta="lz4", delta_min_bytes=1024,
                              delta_cross_host_only=False)
    plain_w, plain_losses, _, _ = _train(None, 8, 3)
    # the tensors' bytes inside the stream's messages (no framed data plane)
    w, losses, _, (deltas, _) = _train(wire, 8, 3, ClientSettings(data_plane="grpc"))
    assert deltas > 0 and losses == plain_losses
    for a, b in zip(w, plain_w, strict=True):
        assert a.tobytes() == b.tobytes()
    # caches too small for w1 (96 KB): it travels whole every step, still right
    tiny = ClientSettings(wire_delta_cache_bytes=64 * 1024)
    w, losses, _, (deltas, fulls) = _train(wire, 8, 3, tiny)
    assert fulls >= 8 and losses == plain_losses
    for a, b in zip(w, plain_w, strict=True):
        assert a.tobytes() == b.tobytes()


def test_a_variable_of_several_blocks_streams_bit_exact_over_both_data_planes():
    # w1 of 96x1536 float32 (576 KiB): two block frames, each put on the wire as it is made
    assert 96 * 1536 * 4 > delta_frames.BLOCK_BYTES
    wire = tf.WireCompression(dtype="", delta="lz4", delta_min_bytes=1024,
                              delta_cross_host_only=False)
    plain_w, plain_losses, _, _ = _train(None, 8, 3, hidden=1536)
    for settings in (None, ClientSettings(data_plane="grpc")):
        w, losses, _, (deltas, fulls) = _train(wire, 8, 3, settings, hidden=1536)
        assert deltas > 0 and fulls >= 2 and losses == plain_losses
        for a, b in zip(w, plain_w, strict=True):
            assert a.tobytes() == b.tobytes()
