"""Compression on the wire: which cross-task edges travel narrowed, encoded, or both.

A policy is applied by the partitioner (``partition(..., wire=policy)``) around the Send/Recv of
each edge it selects, and the nodes it adds are ordinary nodes of the partitions, so they show in
the placement report (``Plan.explain``) and in step traces like any other node:

* Lossy: a cast pair, as TensorFlow's partitioner does for ``GraphOptions.enable_bfloat16_sendrecv``:
  the producer's task casts float32 to the wire type before sending, the consumer's task casts back
  after receiving, so the bytes on the link are halved and every other node sees float32 as before.
  Only float32 edges are narrowed (as TensorFlow does).
* Lossless (``WireCodec``): the producer's task runs ``_WireEncode`` (a blosc2 frame: shuffle filter
  plus LZ4, ZSTD or zlib) and sends the uint8 frame; the consumer's task runs ``_WireDecode`` back
  to the exact tensor. With both, the cast comes first (cast, encode, send; receive, decode, cast).

A codec only pays where the link is slower than the codec: between hosts. Tasks on one host trade
tensors through shared memory, where encoding is pure cost, so by default (``cross_host_only``) an
edge between two tasks that report the same host id is left alone; the master fills in the host
ids the tasks report (``WirePolicy.with_hosts``). A task whose host is not known counts as remote.

* Delta (``WireDelta``): a cross-host edge whose producer reads a variable is marked
  (``_wire_delta`` on its Send and Recv) and the transport sends it as an XOR delta of the version
  the consumer already holds (``transport/delta.py``): a worker pulls the same weights every step,
  changed by an update or two. Such an edge gets no ``_WireEncode``/``_WireDecode`` (the delta
  frame is compressed already); the cast pair, if any, stays (a delta of the bfloat16 tensor).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from tensorgrid.core import dtypes
from tensorgrid.core.dtypes import DType
from tensorgrid.core.ir import NodeDef, parse_input
from tensorgrid.core.registry import TensorSpec
from tensorgrid.ops.wire_codec import CODECS, SHUFFLES, encodable

WIRE_DTYPES = (dtypes.bfloat16, dtypes.float16)
# Tensors known to be smaller than this always travel as they are: they gain nothing on the wire,
# and they are often hyperparameters (an Adam beta2 of 0.999 is 1.0 in bfloat16, and training
# then divides by zero).
SMALL_TENSOR_BYTES = 1024
# the name scope ``gradients()`` puts every gradient op under (TF's convention)
GRADIENT_SCOPE = "gradients"
# which edges a codec encodes: every one, the gradients (pushes), or all but the gradients (the
# weights workers pull: the parameter server's egress carries those to every worker)
EDGES = ("all", "gradients", "non_gradients")
# TF1's rpc_options.compression_algorithm names -> ours (gRPC's deflate and gzip are zlib's stream)
CODEC_ALIASES = {"deflate": "zlib", "gzip": "zlib"}
# the codecs of a delta frame (transport/delta.py: shuffle + LZ4 or ZSTD were the pair that pays
# on XOR deltas)
DELTA_CODECS = ("lz4", "zstd")
# the attrs that mark a Send/Recv pair whose tensor travels as deltas (``_``: internal attrs)
DELTA_CODEC_ATTR = "_wire_delta"
DELTA_LEVEL_ATTR = "_wire_delta_level"
# ops whose output is a variable's value, and the ops a read may pass through on its way out
VARIABLE_OPS = frozenset({"VariableV2", "Variable", "ReadVariableOp"})
PASS_THROUGH_OPS = frozenset({"Identity", "Snapshot"})


@dataclass(frozen=True)
class WireCodec:
    """Lossless compression of the cross-task edges it selects (``_WireEncode``/``_WireDecode``).

    Attributes:
        codec: "lz4" (fast: ~2.5 GB/s per core, ~0.88 of float32 weights' size), "lz4hc",
            "zstd" (~0.6 GB/s, ~0.85), "zlib" (slow; TF1's "deflate"/"gzip" map here).
        level: the codec's level, 1 (fast) .. 9 (small).
        min_bytes: only tensors of at least this many bytes on the wire (a tensor whose size is
            not known when planning counts as big): small ones gain nothing.
        edges: "all", "gradients" (tensors computed under the ``gradients`` name scope) or
            "non_gradients" (everything else: the weights a worker pulls).
        integers: integer and bool tensors too (floating ones always).
        shuffle: "bitshuffle", "shuffle" or "none"; "" picks bitshuffle for LZ4 and byte shuffle
            for ZSTD and zlib (the better pair for float weights of each).
        blocksize: blosc2's block size in bytes (0: its own choice).
        cross_host_only: leave edges between two tasks of one known host alone.
    """

    codec: str = "lz4"
    level: int = 1
    min_bytes: int = 64 * 1024
    edges: str = "all"
    integers: bool = False
    shuffle: str = ""
    blocksize: int = 0
    cross_host_only: bool = True

    def __post_init__(self) -> None:
        codec = CODEC_ALIASES.get(self.codec, self.codec)
        if codec not in CODECS:
            raise ValueError(f"A wire codec is one of {', '.join(CODECS)} (or "
                             f"{', '.join(CODEC_ALIASES)}), not {self.codec!r}")
        object.__setattr__(self, "codec", codec)
        if not 1 <= self.level <= 9:
            raise ValueError(f"A wire codec's level is 1..9, got {self.level}")
        if self.min_bytes < 0:
            raise ValueError(f"min_bytes must be >= 0, got {self.min_bytes}")
        if self.edges not in EDGES:
            raise ValueError(f"edges is one of {', '.join(EDGES)}, not {self.edges!r}")
        if self.shuffle and self.shuffle not in SHUFFLES:
            raise ValueError(f"shuffle is one of {', '.join(SHUFFLES)}, not {self.shuffle!r}")
        if self.blocksize < 0:
            raise ValueError(f"blocksize must be >= 0, got {self.blocksize}")

    @property
    def shuffle_filter(self) -> str:
        """The shuffle filter the encoder runs."""
        if self.shuffle:
            return self.shuffle
        return "bitshuffle" if self.codec.startswith("lz4") else "shuffle"

    def selects(self, producer: str, spec: TensorSpec) -> bool:
        """Whether an edge from node ``producer`` whose wire tensor is ``spec`` is encoded."""
        dt = spec.dtype
        if not encodable(dt) or not (dt.is_floating or self.integers):
            return False
        grad = _under_gradients(producer)
        if (self.edges == "gradients" and not grad) or (self.edges == "non_gradients" and grad):
            return False
        n = spec.shape.num_elements()
        return n is None or n * dt.size >= self.min_bytes


@dataclass(frozen=True)
class WireDelta:
    """Cross-host reads of variables sent as deltas of the version the reader holds.

    Attributes:
        codec: the delta frame's codec, "lz4" (fast) or "zstd" (level 1: smaller, ~2x the time).
        level: its level, 1..9.
        min_bytes: only tensors of at least this many bytes on the wire.
        cross_host_only: leave edges between two tasks of one known host alone (shared memory
            is faster than any delta).
    """

    codec: str = "lz4"
    level: int = 1
    min_bytes: int = 64 * 1024
    cross_host_only: bool = True

    def __post_init__(self) -> None:
        if self.codec not in DELTA_CODECS:
            raise ValueError(f"A wire delta codec is one of {', '.join(DELTA_CODECS)}, not "
                             f"{self.codec!r}")
        if not 1 <= self.level <= 9:
            raise ValueError(f"A wire delta codec's level is 1..9, got {self.level}")
        if self.min_bytes < 0:
            raise ValueError(f"min_bytes must be >= 0, got {self.min_bytes}")

    def selects(self, producer: NodeDef, by_name: Mapping[str, NodeDef],
                spec: TensorSpec) -> bool:
        """Whether an edge from ``producer`` whose wire tensor is ``spec`` travels as deltas:
        a floating tensor of at least ``min_bytes`` (of known size) that reads a variable."""
        dt = spec.dtype
        n = spec.shape.num_elements()
        if not dt.is_floating or dt.size not in (2, 4, 8) or n is None:
            return False
        return n * dt.size >= self.min_bytes and reads_variable(producer, by_name)


def reads_variable(node: NodeDef, by_name: Mapping[str, NodeDef]) -> bool:
    """Whether ``node``'s output is a variable's value (the variable, its read, or an
    Identity of either)."""
    seen = 0
    while node.op in PASS_THROUGH_OPS and seen < 8:
        data: Sequence[str] = [i for i in node.inputs if not i.startswith("^")]
        if not data:
            return False
        src = by_name.get(parse_input(data[0])[0])
        if src is None:
            return False
        node, seen = src, seen + 1
    return node.op in VARIABLE_OPS


@dataclass(frozen=True)
class WirePolicy:
    """Which cross-task edges are sent as ``dtype`` and which are encoded by ``codec``.

    Attributes:
        dtype: the wire type of float32 edges, bfloat16 (TF's ``enable_bfloat16_sendrecv``: same
            range as float32, 8 bits of mantissa) or float16 (more mantissa, a range of +-65504);
            None: no narrowing.
        min_bytes: only tensors of at least this many bytes at float32 are narrowed (a tensor
            whose size is not known when planning counts as big); below ``SMALL_TENSOR_BYTES``
            never.
        gradients_only: only tensors produced under the ``gradients`` name scope are narrowed,
            so that weights read by workers stay exact and only the updates they push are.
        codec: lossless compression (after the narrowing, if any), or None.
        delta: variables read across hosts travel as deltas (instead of through ``codec``).
        hosts: (task, host id) of the tasks whose host is known (``with_hosts``), for the codec's
            ``cross_host_only``.
    """

    dtype: DType | None = dtypes.bfloat16
    min_bytes: int = 0
    gradients_only: bool = False
    codec: WireCodec | None = None
    hosts: tuple[tuple[str, str], ...] = ()
    delta: WireDelta | None = None

    def __post_init__(self) -> None:
        if self.dtype is not None and self.dtype not in WIRE_DTYPES:
            raise ValueError(f"A wire type is bfloat16 or float16, not {self.dtype.name}")
        if self.min_bytes < 0:
            raise ValueError(f"min_bytes must be >= 0, got {self.min_bytes}")

    def with_hosts(self, hosts: Mapping[str, str]) -> WirePolicy:
        """This policy knowing the host id of each task (tasks with an empty id are left out)."""
        return replace(self, hosts=tuple(sorted((t, h) for t, h in hosts.items() if h)))

    def wire_dtype(self, producer: str, spec: TensorSpec) -> DType | None:
        """The type an edge from node ``producer`` with output ``spec`` travels in, or None to
        send it as it is."""
        if self.dtype is None or spec.dtype is not dtypes.float32:
            return None
        if self.gradients_only and not _under_gradients(producer):
            return None
        n = spec.shape.num_elements()
        if n is not None and n * 4 < max(self.min_bytes, SMALL_TENSOR_BYTES):
            return None
        return self.dtype

    def wire_codec(self, producer: str, spec: TensorSpec, src_task: str,
                   dst_task: str) -> WireCodec | None:
        """The codec that encodes an edge from ``producer`` (on ``src_task``) to ``dst_task``
        whose wire tensor (after any narrowing) is ``spec``, or None."""
        c = self.codec
        if c is None or not c.selects(producer, spec):
            return None
        if c.cross_host_only and self._same_host(src_task, dst_task):
            return None
        return c

    def wire_delta(self, producer: NodeDef, by_name: Mapping[str, NodeDef], spec: TensorSpec,
                   src_task: str, dst_task: str) -> WireDelta | None:
        """The delta setting of an edge from ``producer`` (on ``src_task``) to ``dst_task``
        whose wire tensor (after any narrowing) is ``spec``, or None."""
        d = self.delta
        if d is None or not d.selects(producer, by_name, spec):
            return None
        if d.cross_host_only and self._same_host(src_task, dst_task):
            return None
        return d

    def _same_host(self, src_task: str, dst_task: str) -> bool:
        """Both tasks' hosts are known and equal."""
        hosts = dict(self.hosts)
        src, dst = hosts.get(src_task), hosts.get(dst_task)
        return src is not None and src == dst


def _under_gradients(name: str) -> bool:
    scopes = name.split("/")[:-1]
    return any(s == GRADIENT_SCOPE or s.startswith(GRADIENT_SCOPE + "_") for s in scopes)
