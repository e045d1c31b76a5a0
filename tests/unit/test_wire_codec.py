"""Lossless wire compression: ``_WireEncode``/``_WireDecode`` round-trip every numeric tensor
exactly, the partitioner puts them around the cross-task edges a WireCodec selects (after the
bfloat16 cast, if any), and training across real gRPC tasks with the codec on gives bit-identical
results to the same training without it."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from test_wire_compression import _graph as one_edge_graph
from test_wire_delta import _train as train_across_tasks

import tensorgrid as tf
from tensorgrid.compiler.partition import partition
from tensorgrid.compiler.wire import WireCodec, WirePolicy
from tensorgrid.core import dtypes, errors
from tensorgrid.core.shapes import TensorShape
from tensorgrid.kernels.wire_codec import CHUNK_BYTES, FRAME_ALIGN, PAD_FROM, decode, encode
from tensorgrid.master.master_session import SessionOptions

PS_TASK, WORKER_TASK = "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"
PS, WORKER = PS_TASK + "/device:CPU:0", WORKER_TASK + "/device:CPU:0"
RNG = np.random.default_rng(0)


# ------------------------------------------------------------------------------------- kernels

def _weights(shape, dtype=np.float32):
    return RNG.uniform(-0.07, 0.07, shape).astype(dtype)


@pytest.mark.parametrize("value", [
    _weights((784, 1024)),
    _weights((300, 7), ml_dtypes.bfloat16),
    _weights((1000,), np.float16),
    RNG.standard_normal((64, 33)),  # float64
    RNG.integers(-5, 5, (128, 9)).astype(np.int32),
    RNG.integers(0, 2, (50,)).astype(np.bool_),
    np.float32(-0.0),              # rank 0
    np.zeros((0, 5), np.float32),  # empty
    np.array([np.nan, np.inf, -np.inf, 1e-45], np.float32),
], ids=["float32", "bfloat16", "float16", "float64", "int32", "bool", "rank0", "empty", "special"])
@pytest.mark.parametrize("codec,shuffle", [("lz4", "bitshuffle"), ("zstd", "shuffle"),
                                           ("zlib", "none")])
def test_a_frame_decodes_to_the_same_bits(value, codec, shuffle):
    x = np.asarray(value)
    frame = encode(x, codec, 1, shuffle)
    assert frame.dtype == np.uint8 and frame.ndim == 1
    y = decode(frame)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert y.tobytes() == x.tobytes()  # bit for bit: -0.0, NaN payloads and all


def test_non_contiguous_input_is_encoded_as_its_values():
    x = _weights((64, 128))[::2, 5:77].T
    assert not x.flags.c_contiguous
    np.testing.assert_array_equal(decode(encode(x)), x)


def test_weights_shrink_and_random_bytes_cost_only_the_header():
    w = _weights((784, 1024))
    assert encode(w).size < 0.92 * w.nbytes  # the exponent bytes of weights repeat
    noise = RNG.integers(0, 256, 1 << 20, dtype=np.uint8)
    frame = encode(noise, "lz4", 9, "none")
    assert frame.size <= noise.size + FRAME_ALIGN  # a header, a chunk header, the padding
    np.testing.assert_array_equal(decode(frame), noise)


def test_big_frames_are_padded_to_a_few_sizes_that_receive_buffers_reuse():
    sizes = set()
    for seed in range(8):  # the same layer after different updates: other compressed sizes
        w = np.random.default_rng(seed).uniform(-0.07, 0.07, (784, 1024)).astype(np.float32)
        frame = encode(w)
        assert frame.size % FRAME_ALIGN == 0 and frame.size >= PAD_FROM
        assert decode(frame).tobytes() == w.tobytes()
        sizes.add(frame.size)
    assert len(sizes) <= 3, sizes
    small = encode(_weights((100, 10)))
    assert small.size < PAD_FROM and small.size % FRAME_ALIGN != 0  # small frames: as they are
    with pytest.raises(ValueError, match="padded"):
        decode(np.concatenate([frame, np.zeros(FRAME_ALIGN, np.uint8)]))


def test_the_frame_holds_one_chunk_per_chunk_bytes():
    # a tensor over CHUNK_BYTES would take seconds here; the header's count is checked instead
    frame = encode(np.zeros(10, np.float32))
    assert int(frame[8:12].view("<u4")[0]) == 1 and CHUNK_BYTES % 16 == 0


@pytest.mark.parametrize("mangle,message", [
    (lambda f: f[:6], "shorter than a wire frame's header"),
    (lambda f: np.concatenate([np.frombuffer(b"XXXX", np.uint8), f[4:]]), "not a wire frame"),
    (lambda f: f[:-10], "chunks need"),
    (lambda f: np.concatenate([f, np.zeros(3, np.uint8)]), "chunks need"),
])
def test_bad_frames_are_refused_with_what_is_wrong(mangle, message):
    frame = encode(_weights((100, 10)))
    with pytest.raises(ValueError, match=message):
        decode(mangle(frame))


def test_a_corrupt_chunk_fails_the_decode_node_by_name():
    frame = encode(_weights((100, 10)))
    bad = frame.copy()
    bad[-200:] ^= 0x5A  # the compressed data, past the blosc2 header
    bad2 = frame.copy()
    bad2[20 + 16 + 8 + 4:20 + 16 + 8 + 8] = 0xFF  # the chunk's header: its sizes
    big = encode(_weights((512, 1024)))
    big[-5000:] ^= 0x5A
    with tf.Graph().as_default() as g:
        for b, name in ((bad, "dec_data"), (bad2, "dec_head"),
                        (np.arange(40, dtype=np.uint8), "dec_junk"), (big, "dec_big")):
            out = g.create_op("_WireDecode", [tf.constant(b)], {"T": tf.float32},
                              name=name).outputs[0]
            with tf.Session() as sess, pytest.raises(errors.OpError) as info:
                sess.run(out)
            assert name in str(info.value) and "wire frame" in str(info.value)


def test_a_decode_of_another_dtype_names_both():
    frame = encode(np.arange(4, dtype=np.int32))
    with tf.Graph().as_default() as g:
        out = g.create_op("_WireDecode", [tf.constant(frame)], {"T": tf.float32},
                          name="dec").outputs[0]
        with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError,
                                                 match="int32.*float32"):
            sess.run(out)


@pytest.mark.parametrize("shape", [(256, 64), (512, 1024)])
def test_encode_and_decode_nodes_round_trip_in_a_session(shape):
    x = _weights(shape)
    with tf.Graph().as_default() as g:
        enc = g.create_op("_WireEncode", [tf.constant(x)],
                          {"T": tf.float32, "codec": "zstd", "level": 3, "shuffle": "shuffle"},
                          name="enc").outputs[0]
        dec = g.create_op("_WireDecode", [enc], {"T": tf.float32}, name="dec").outputs[0]
        assert dec.shape.rank is None  # the frame, not the graph, carries the shape
        with tf.Session() as sess:
            frame, back = sess.run([enc, dec])
    assert frame.dtype == np.uint8 and frame.size < x.nbytes
    assert back.tobytes() == x.tobytes()


def test_an_encode_of_a_string_or_an_unknown_codec_is_refused():
    with tf.Graph().as_default() as g:
        with pytest.raises((errors.InvalidArgumentError, ValueError), match="string"):
            g.create_op("_WireEncode", [tf.constant(["a"])],
                        {"T": tf.string, "codec": "lz4"}, name="e1")
        with pytest.raises((errors.InvalidArgumentError, ValueError), match="unknown codec"):
            g.create_op("_WireEncode", [tf.constant([1.0])],
                        {"T": tf.float32, "codec": "brotli"}, name="e2")


# ------------------------------------------------------------------------------------ partition

def _graph(dtype=dtypes.float32, shape=(256, 256), producer="w", consumer_device=WORKER):
    # 256 KiB by default: above the codec's 64 KiB floor
    return one_edge_graph(dtype, shape, producer, consumer_device)


def _ops(parts, task, op):
    return [n for n in parts.get(task, ()) if n.op == op]


def test_a_selected_edge_travels_encoded_between_encode_and_decode():
    nodes, specs = _graph()
    parts = partition(nodes, specs, WirePolicy(None, codec=WireCodec("zstd", level=3)))
    (enc,) = _ops(parts, PS_TASK, "_WireEncode")
    (send,) = _ops(parts, PS_TASK, "_Send")
    (recv,) = _ops(parts, WORKER_TASK, "_Recv")
    (dec,) = _ops(parts, WORKER_TASK, "_WireDecode")
    assert enc.inputs == ("w:0",) and enc.attrs["T"] is dtypes.float32
    assert (enc.attrs["codec"], enc.attrs["level"], enc.attrs["shuffle"]) == ("zstd", 3, "shuffle")
    assert send.inputs == (enc.name,) and send.attrs["T"] is dtypes.uint8
    assert recv.attrs["tensor_type"] is dtypes.uint8
    assert dec.inputs == (recv.name,) and dec.attrs["T"] is dtypes.float32
    assert dec.attrs["shape"] == TensorShape([256, 256])
    y = next(n for n in parts[WORKER_TASK] if n.name == "y")
    assert y.inputs == (dec.name,)
    assert not _ops(parts, PS_TASK, "Cast")


def test_with_bfloat16_the_cast_comes_first_and_the_codec_sees_bfloat16():
    nodes, specs = _graph()
    parts = partition(nodes, specs, WirePolicy(dtypes.bfloat16, codec=WireCodec()))
    (cast,) = _ops(parts, PS_TASK, "Cast")
    (enc,) = _ops(parts, PS_TASK, "_WireEncode")
    (dec,) = _ops(parts, WORKER_TASK, "_WireDecode")
    (back,) = _ops(parts, WORKER_TASK, "Cast")
    assert enc.inputs == (cast.name,) and enc.attrs["T"] is dtypes.bfloat16
    assert enc.attrs["shuffle"] == "bitshuffle"  # LZ4's usual filter
    assert dec.attrs["T"] is dtypes.bfloat16 and back.inputs == (dec.name,)


@pytest.mark.parametrize("policy,dtype,shape,producer,device", [
    (None, dtypes.float32, (256, 256), "w", WORKER),                           # off
    (WirePolicy(dtypes.bfloat16), dtypes.float32, (256, 256), "w", WORKER),   # cast only
    (WirePolicy(None, codec=WireCodec()), dtypes.float32, (64, 64), "w", WORKER),  # 16 KB
    (WirePolicy(None, codec=WireCodec()), dtypes.int32, (256, 256), "w", WORKER),  # no ints
    (WirePolicy(None, codec=WireCodec(edges="gradients")), dtypes.float32, (256, 256), "w",
     WORKER),
    (WirePolicy(None, codec=WireCodec(edges="non_gradients")), dtypes.float32, (256, 256),
     "gradients/MatMul_grad/MatMul", WORKER),
    (WirePolicy(None, codec=WireCodec()), dtypes.float32, (256, 256), "w",
     PS_TASK + "/device:CPU:1"),                                              # same task
])
def test_edges_the_codec_leaves_alone_travel_as_they_are(policy, dtype, shape, producer,
                                                         device):
    nodes, specs = _graph(dtype, shape, producer, device)
    parts = partition(nodes, specs, policy)
    assert not any(n.op in ("_WireEncode", "_WireDecode") for p in parts.values() for n in p)


def test_integers_min_bytes_and_gradient_edges_are_selected_when_asked():
    nodes, specs = _graph(dtypes.int32, (64, 64), "gradients/x")
    policy = WirePolicy(None, codec=WireCodec(min_bytes=1024, edges="gradients", integers=True))
    assert _ops(partition(nodes, specs, policy), PS_TASK, "_WireEncode")


def test_edges_between_tasks_of_one_host_are_left_alone_unless_asked():
    nodes, specs = _graph()
    same = {PS_TASK: "hostA:boot", WORKER_TASK: "hostA:boot"}
    other = {PS_TASK: "hostA:boot", WORKER_TASK: "hostB:boot"}
    policy = WirePolicy(None, codec=WireCodec())
    assert not _ops(partition(nodes, specs, policy.with_hosts(same)), PS_TASK, "_WireEncode")
    assert _ops(partition(nodes, specs, policy.with_hosts(other)), PS_TASK, "_WireEncode")
    assert _ops(partition(nodes, specs, policy.with_hosts({PS_TASK: "hostA:boot"})), PS_TASK,
                "_WireEncode")  # a host not known counts as another
    everywhere = WirePolicy(None, codec=WireCodec(cross_host_only=False)).with_hosts(same)
    assert _ops(partition(nodes, specs, everywhere), PS_TASK, "_WireEncode")


def test_a_codec_refuses_settings_it_does_not_know():
    for kw, message in (({"codec": "brotli"}, "lz4"), ({"level": 0}, "1..9"),
                        ({"edges": "pulls"}, "non_gradients"), ({"shuffle": "x"}, "bitshuffle"),
                        ({"min_bytes": -1}, "min_bytes")):
        with pytest.raises(ValueError, match=message):
            WireCodec(**kw)
    assert WireCodec("gzip").codec == "zlib" and WireCodec("deflate").codec == "zlib"


# ------------------------------------------------------------------------------------ config

def _session_options(config: tf.ConfigProto) -> SessionOptions:
    from tensorgrid.client.remote import options_of
    return SessionOptions(**options_of(config))


def test_tf1_rpc_options_reach_the_session_as_zlib():
    cfg = tf.ConfigProto()
    cfg.rpc_options.compression_algorithm = "gzip"
    cfg.rpc_options.compression_level = 2
    policy = _session_options(cfg).wire_policy()
    assert policy is not None and policy.dtype is None
    assert (policy.codec.codec, policy.codec.level) == ("zlib", 5)
    cfg.rpc_options.compression_level = 0  # TF: no compression
    assert _session_options(cfg).wire_policy() is None
    cfg.rpc_options.compression_algorithm = "snappy"
    with pytest.raises(ValueError, match="compression_algorithm"):
        cfg.wire_options()


def test_wire_compression_codec_and_bfloat16_reach_the_session_over_grpc():
    cfg = tf.ConfigProto(graph_options=tf.GraphOptions(wire_compression=tf.WireCompression(
        dtype="bfloat16", codec="zstd", codec_level=2, codec_min_bytes=4096,
        codec_edges="non_gradients", codec_cross_host_only=False)))
    from tensorgrid.client.remote import _options_proto
    from tensorgrid.transport.master_service import options_from_proto
    opts = options_from_proto(_options_proto({**_session_options_dict(cfg)}))
    policy = opts.wire_policy()
    assert policy is not None and policy.dtype is dtypes.bfloat16
    assert policy.codec == WireCodec("zstd", 2, 4096, "non_gradients", cross_host_only=False)
    plain = options_from_proto(_options_proto(_session_options_dict(tf.ConfigProto())))
    assert plain.wire_policy() is None


def _session_options_dict(config):
    from tensorgrid.client.remote import options_of
    return options_of(config)


# ------------------------------------------------------------------------- across real tasks

def _train(wire: tf.WireCompression | None, steps: int = 30):
    """The MLP of ``test_wire_delta._train`` trained across a ps and a worker Server with no
    failing step; returns the final weights, the losses and the plan's codec and cast rows."""
    weights, losses, rows, _ = train_across_tasks(wire, steps, None,
                                                  reasons=("wire_codec", "wire_cast"))
    return weights, losses, rows


def test_training_across_tasks_with_the_codec_is_bit_identical_to_without():
    plain_w, plain_losses, plain_rows = _train(None)
    # one host here: the codec must be told to work between tasks of one host
    wire = tf.WireCompression(dtype="", codec="lz4", codec_min_bytes=1024,
                              codec_cross_host_only=False)
    w, losses, rows = _train(wire)
    assert not plain_rows
    # w1 (96 KB) is pulled encoded and its gradient pushed encoded; w2 (10 KB) travels as is
    encoders = [r for r in rows if "encode" in r["reason"]]
    assert any("w1" in r["node"] for r in encoders) and encoders
    assert all("float32 with lz4-1 (bitshuffle)" in r["reason"] for r in encoders)
    assert any(r["node"].endswith("/_decode") for r in rows)
    assert losses == plain_losses
    for a, b in zip(w, plain_w, strict=True):
        assert a.tobytes() == b.tobytes()


def test_a_codec_on_one_host_is_skipped_by_default():
    _, _, rows = _train(tf.WireCompression(dtype="", codec="lz4", codec_min_bytes=1024), 2)
    assert not rows


def test_training_with_bfloat16_and_the_codec_converges():
    wire = tf.WireCompression(dtype="bfloat16", codec="zstd", codec_min_bytes=1024,
                              codec_cross_host_only=False)
    _, losses, rows = _train(wire, 60)
    assert any("encode bfloat16 with zstd-1" in r["reason"] for r in rows)
    assert any(r["reason"].startswith("wire_cast") for r in rows)
    assert losses[-1] < 0.5 * losses[0]
