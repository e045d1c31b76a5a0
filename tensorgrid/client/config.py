"""Session and run options with TensorFlow 1.x's names (``tf.ConfigProto``, ``tf.RunOptions``, ...)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tensorgrid.compiler.wire import WireCodec, WireDelta
from tensorgrid.pb import step_stats_pb2


@dataclass
class OptimizerOptions:
    """Graph optimizations applied when a plan is built."""

    L1 = 0
    L0 = -1
    do_common_subexpression_elimination: bool = True
    do_constant_folding: bool = True
    opt_level: int = 0


@dataclass
class RewriterConfig:
    """The subset of grappler's switches that map onto our passes."""

    DEFAULT = 0
    ON = 1
    OFF = 2
    constant_folding: int = 0
    common_subgraph_elimination: int = 0
    disable_meta_optimizer: bool = False


@dataclass
class WireCompression:
    """Compression of the tensors that cross tasks (see ``tensorgrid/compiler/wire.py``): lossy,
    a cast pair around each Send/Recv pair the partitioner inserts, and lossless, an encode and
    decode pair (blosc2) around it; with both, the cast comes first.

    Attributes:
        dtype: "bfloat16" or "float16" (float32 tensors travel narrowed), "" for no narrowing.
        min_bytes: only tensors of at least this many bytes (at float32) are narrowed.
        gradients_only: only tensors computed under the ``gradients`` name scope are narrowed.
        codec: "lz4", "lz4hc", "zstd" or "zlib" (lossless), "" for none.
        codec_level: its level, 1 (fast) .. 9 (small).
        codec_min_bytes: only tensors of at least this many bytes on the wire are encoded.
        codec_edges: "all", "gradients" (what workers push) or "non_gradients" (what they pull).
        codec_integers: integer and bool tensors too (floating ones always).
        codec_shuffle: "bitshuffle", "shuffle", "none" or "" (bitshuffle for LZ4, else shuffle).
        codec_blocksize: blosc2's block size in bytes (0: its choice).
        codec_cross_host_only: leave edges between two tasks of one host alone (they trade
            tensors through shared memory, where encoding is pure cost).
        delta: "lz4" or "zstd": a cross-host read of a variable travels as an XOR delta of the
            version the reader already holds, compressed with this codec ("" sends it whole);
            such a read gets no lossless codec (a narrowing cast still applies first).
        delta_level, delta_min_bytes, delta_cross_host_only: as for the codec.
    """

    dtype: str = "bfloat16"
    min_bytes: int = 0
    gradients_only: bool = False
    codec: str = ""
    # the defaults are the compiler's policy's own
    codec_level: int = WireCodec.level
    codec_min_bytes: int = WireCodec.min_bytes
    codec_edges: str = WireCodec.edges
    codec_integers: bool = WireCodec.integers
    codec_shuffle: str = WireCodec.shuffle
    codec_blocksize: int = WireCodec.blocksize
    codec_cross_host_only: bool = WireCodec.cross_host_only
    delta: str = ""
    delta_level: int = WireDelta.level
    delta_min_bytes: int = WireDelta.min_bytes
    delta_cross_host_only: bool = WireDelta.cross_host_only


@dataclass
class RPCOptions:
    """TF1's ``ConfigProto.rpc_options`` (the compression part).

    ``compression_algorithm`` "deflate" or "gzip" (TF compresses its gRPC messages with either) is
    honoured as the lossless wire codec "zlib" (the same deflate stream, applied to each tensor
    after a byte shuffle), and "lz4"/"zstd" name those codecs; ``compression_level`` 1, 2, 3 (TF:
    gRPC's low, medium, high) is zlib's level 1, 5, 9, and 0 (TF: none) turns it off. A
    ``GraphOptions.wire_compression`` with a codec wins over these.
    """

    compression_algorithm: str = ""
    compression_level: int = 0


_RPC_LEVELS = {1: 1, 2: 5, 3: 9}


@dataclass
class GraphOptions:
    optimizer_options: OptimizerOptions = field(default_factory=OptimizerOptions)
    rewrite_options: RewriterConfig = field(default_factory=RewriterConfig)
    place_pruned_graph: bool = False
    infer_shapes: bool = False
    build_cost_model: int = 0
    # TF1's switch: every cross-task float32 tensor travels as bfloat16
    enable_bfloat16_sendrecv: bool = False
    # finer control (wins over enable_bfloat16_sendrecv when set)
    wire_compression: WireCompression | None = None


@dataclass
class GPUOptions:
    allow_growth: bool = False
    per_process_gpu_memory_fraction: float = 0.0
    visible_device_list: str = ""


@dataclass
class ConfigProto:
    """Session configuration (TensorFlow 1.x field names)."""

    allow_soft_placement: bool = False
    log_device_placement: bool = False
    device_filters: list[str] = field(default_factory=list)
    graph_options: GraphOptions = field(default_factory=GraphOptions)
    gpu_options: GPUOptions = field(default_factory=GPUOptions)
    rpc_options: RPCOptions = field(default_factory=RPCOptions)
    inter_op_parallelism_threads: int = 0
    intra_op_parallelism_threads: int = 0
    operation_timeout_in_ms: int = 0
    device_count: dict[str, int] = field(default_factory=dict)
    isolate_session_state: bool = False

    def CopyFrom(self, other: ConfigProto) -> None:
        import copy

        self.__dict__.update(copy.deepcopy(other.__dict__))

    def constant_folding_enabled(self) -> bool:
        rw = self.graph_options.rewrite_options
        if rw.disable_meta_optimizer or rw.constant_folding == RewriterConfig.OFF:
            return False
        return self.graph_options.optimizer_options.do_constant_folding and \
            self.graph_options.optimizer_options.opt_level >= 0

    def wire_options(self) -> dict[str, Any]:
        """The session options of the wire compression asked for (none by default).

        Raises:
            ValueError: a wire type or rpc_options setting this runtime does not know.
        """
        go = self.graph_options
        wc = go.wire_compression
        if wc is None and go.enable_bfloat16_sendrecv:
            wc = WireCompression()
        if wc is None:
            wc = WireCompression(dtype="")
        if wc.dtype not in ("bfloat16", "float16", ""):
            raise ValueError(f"WireCompression.dtype is 'bfloat16' or 'float16', not {wc.dtype!r}")
        out = {"wire_dtype": wc.dtype, "wire_min_bytes": int(wc.min_bytes),
               "wire_gradients_only": bool(wc.gradients_only)}
        codec, level = wc.codec, wc.codec_level
        rpc = self.rpc_options
        if not codec and rpc.compression_algorithm:
            codec, level = self._rpc_codec(rpc)
        return {**out, "wire_codec": codec, "wire_codec_level": int(level),
                "wire_codec_min_bytes": int(wc.codec_min_bytes),
                "wire_codec_edges": wc.codec_edges, "wire_codec_integers": bool(wc.codec_integers),
                "wire_codec_shuffle": wc.codec_shuffle,
                "wire_codec_blocksize": int(wc.codec_blocksize),
                "wire_codec_cross_host_only": bool(wc.codec_cross_host_only),
                "wire_delta": wc.delta, "wire_delta_level": int(wc.delta_level),
                "wire_delta_min_bytes": int(wc.delta_min_bytes),
                "wire_delta_cross_host_only": bool(wc.delta_cross_host_only)}

    @staticmethod
    def _rpc_codec(rpc: RPCOptions) -> tuple[str, int]:
        """(codec, level) of TF1's rpc_options; ("", 1) when its level turns compression off."""
        algo = rpc.compression_algorithm.lower()
        if algo in ("deflate", "gzip"):
            if rpc.compression_level not in (0, *_RPC_LEVELS):
                raise ValueError("rpc_options.compression_level is 0..3, not "
                                 f"{rpc.compression_level}")
            if rpc.compression_level == 0:
                return "", 1
            return "zlib", _RPC_LEVELS[rpc.compression_level]
        if algo in ("lz4", "lz4hc", "zstd", "zlib"):
            return algo, rpc.compression_level or 1
        raise ValueError("rpc_options.compression_algorithm is 'deflate', 'gzip', 'lz4', 'lz4hc', "
                         f"'zstd' or 'zlib', not {rpc.compression_algorithm!r}")

    def cse_enabled(self) -> bool:
        rw = self.graph_options.rewrite_options
        if rw.disable_meta_optimizer or rw.common_subgraph_elimination == RewriterConfig.OFF:
            return False
        return self.graph_options.optimizer_options.do_common_subexpression_elimination and \
            self.graph_options.optimizer_options.opt_level >= 0


@dataclass
class RunOptions:
    NO_TRACE = 0
    SOFTWARE_TRACE = 1
    HARDWARE_TRACE = 2
    FULL_TRACE = 3
    trace_level: int = 0
    timeout_in_ms: int = 0
    output_partition_graphs: bool = False


@dataclass
class AllocationDescription:
    """The memory of one tensor (bytes)."""

    requested_bytes: int = 0
    allocated_bytes: int = 0
    allocator_name: str = ""


@dataclass
class TensorDescription:
    """A node output's dtype (``DataType`` number), shape (dims, -1 unknown) and memory."""

    dtype: int = 0
    shape: list[int] = field(default_factory=list)
    allocation_description: AllocationDescription = field(default_factory=AllocationDescription)


@dataclass
class NodeOutput:
    slot: int = 0
    tensor_description: TensorDescription = field(default_factory=TensorDescription)


@dataclass
class NodeExecStats:
    """One node's run in a traced step, for stats built by hand or converted from the message
    (``Session.run`` fills ``RunMetadata.step_stats`` with TensorFlow's ``StepStats`` message,
    whose fields have these names). Times in microseconds: the start since the epoch, the others
    relative to it. ``op`` is the node's op type."""

    node_name: str
    op: str = ""
    all_start_micros: int = 0
    all_end_rel_micros: int = 0
    op_start_rel_micros: int = 0
    op_end_rel_micros: int = 0
    scheduled_micros: int = 0
    thread_id: int = 0
    timeline_label: str = ""
    output: list[NodeOutput] = field(default_factory=list)
    # what the node used without producing it: the tensor a _Send put on the wire
    referenced_tensor: list[AllocationDescription] = field(default_factory=list)


@dataclass
class DeviceStepStats:
    device: str
    node_stats: list[NodeExecStats] = field(default_factory=list)
    thread_names: dict[int, str] = field(default_factory=dict)


@dataclass
class StepStats:
    dev_stats: list[DeviceStepStats] = field(default_factory=list)


@dataclass
class RunMetadata:
    """Filled by ``Session.run`` when asked: per-node timings and the graphs that ran.

    ``step_stats`` is TensorFlow's ``StepStats`` message, as TensorFlow's ``RunMetadata`` holds it
    (``tensorgrid.pb.step_stats_pb2``); a ``StepStats`` object of this module may replace it.
    """

    step_stats: Any = field(default_factory=step_stats_pb2.StepStats)
    partition_graphs: list[Any] = field(default_factory=list)
    cost_graph: Any = None

    def Clear(self) -> None:
        self.step_stats = step_stats_pb2.StepStats()
        self.partition_graphs = []
