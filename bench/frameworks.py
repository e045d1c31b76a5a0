"""The two frameworks behind one TF1-style surface: ``load("tensorgrid")`` / ``load("tensorflow")``.

Each benchmark is written once against TensorFlow 1.x names (``tf.train.replica_device_setter``,
``tf.nn.relu``, ...); ``Api`` holds those names resolved in one framework. For TensorFlow they are
``tensorflow.compat.v1`` with eager execution off. For tensorgrid they are the public ``tensorgrid``
names; a name that the public package does not export (yet) is looked up in the module that defines
it (recorded in ``fallbacks``), and a name that does not exist at all is recorded in ``missing``
with the reason, so that the benchmarks needing it are reported as not run instead of failing.

Only the children import this module (never the orchestrator): importing a framework is slow and
the two frameworks live in different virtual environments.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
from dataclasses import dataclass, field
from typing import Any

# The names the benchmarks use, as TF1 spells them, with tensorgrid's defining modules to try when
# the public package does not export a name yet ("module:attribute").
NAMES: dict[str, tuple[str, ...]] = {
    "train": ("tensorgrid.client.train:",),
    "nn": ("tensorgrid.nn:",),
    "get_variable": ("tensorgrid.framework.variable_scope:get_variable",),
    "glorot_uniform_initializer": ("tensorgrid.framework.init_ops:glorot_uniform_initializer",),
    "zeros_initializer": ("tensorgrid.framework.init_ops:zeros_initializer",),
    "train.GradientDescentOptimizer": ("tensorgrid.client.train.optimizers:GradientDescentOptimizer",),
    "train.AdamOptimizer": ("tensorgrid.client.train.optimizers:AdamOptimizer",),
    "train.get_or_create_global_step": (
        "tensorgrid.client.train.global_step:get_or_create_global_step",),
    "train.ClusterSpec": ("tensorgrid.client.train.server:ClusterSpec",),
    "train.Server": ("tensorgrid.client.train.server:Server",),
    "train.replica_device_setter": ("tensorgrid.client.train.device_setter:replica_device_setter",),
    "train.MonitoredTrainingSession": (
        "tensorgrid.client.train.monitored_session:MonitoredTrainingSession",),
    "train.StopAtStepHook": ("tensorgrid.client.train.hooks:StopAtStepHook",),
    "train.SyncReplicasOptimizer": (
        "tensorgrid.client.train.sync_replicas:SyncReplicasOptimizer",
        "tensorgrid.client.train.sync_replicas_optimizer:SyncReplicasOptimizer",
        "tensorgrid.client.train.optimizers:SyncReplicasOptimizer"),
    "nn.relu": ("tensorgrid.nn:relu",),
    "nn.conv2d": ("tensorgrid.nn:conv2d",),
    "nn.max_pool": ("tensorgrid.nn:max_pool",),
    "nn.sparse_softmax_cross_entropy_with_logits": (
        "tensorgrid.nn:sparse_softmax_cross_entropy_with_logits",),
}

# What each benchmark needs beyond the core ops every framework has (constant, add, matmul, ...).
NEEDS: dict[str, tuple[str, ...]] = {
    "local.chain": (),
    "local.seed": (),
    "local.mlp": ("get_variable", "glorot_uniform_initializer", "zeros_initializer",
                  "nn.relu", "nn.sparse_softmax_cross_entropy_with_logits",
                  "train.GradientDescentOptimizer", "train.get_or_create_global_step"),
    "local.cnn": ("get_variable", "glorot_uniform_initializer", "zeros_initializer",
                  "nn.relu", "nn.conv2d", "nn.max_pool",
                  "nn.sparse_softmax_cross_entropy_with_logits",
                  "train.GradientDescentOptimizer", "train.get_or_create_global_step"),
    "local.linreg": ("get_variable", "zeros_initializer", "train.GradientDescentOptimizer",
                     "train.get_or_create_global_step"),
    "dist.cluster": ("train.ClusterSpec", "train.Server"),
    "dist.seed.session": ("train.ClusterSpec", "train.Server", "train.replica_device_setter",
                          "train.get_or_create_global_step"),
    "dist.seed.mts": ("train.ClusterSpec", "train.Server", "train.replica_device_setter",
                      "train.get_or_create_global_step", "train.MonitoredTrainingSession",
                      "train.StopAtStepHook"),
    "dist.transfer": ("train.ClusterSpec", "train.Server"),
    "dist.train.async": ("train.ClusterSpec", "train.Server", "train.replica_device_setter",
                         "train.MonitoredTrainingSession", "get_variable",
                         "glorot_uniform_initializer", "zeros_initializer", "nn.relu",
                         "nn.sparse_softmax_cross_entropy_with_logits",
                         "train.GradientDescentOptimizer", "train.get_or_create_global_step"),
}
NEEDS["dist.train.sync"] = (*NEEDS["dist.train.async"], "train.SyncReplicasOptimizer")


@dataclass
class Api:
    """One framework's TF1 surface.

    Attributes:
        name: ``tensorgrid`` or ``tensorflow``.
        version: the framework's version.
        tf: the TF1 module (``tensorgrid`` or ``tensorflow.compat.v1``).
        names: every name of ``NAMES`` that resolved, e.g. ``names["train.Server"]``.
        missing: the names that did not resolve, with why.
        fallbacks: the names found in a defining module because the public package lacks them.
    """

    name: str
    version: str
    tf: Any
    names: dict[str, Any] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    fallbacks: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> Any:
        if name not in self.names:
            raise LookupError(f"{self.name} has no {name}: {self.missing.get(name, 'unknown name')}")
        return self.names[name]

    def lacks_reason(self, bench: str) -> str:
        """Why ``bench`` (a key of ``NEEDS``) cannot run here, or "" when it can."""
        return lacks_reason(self.missing, bench)

    def session_config(self, fold_constants: bool = True, device_filters: list[str] | None = None,
                       bf16_wire: bool = False, wire_codec: str = "") -> Any:
        """A ConfigProto with 2 intra- and inter-op threads (as the TF peer measured).

        With ``fold_constants`` False, constant folding is off. For TensorFlow that takes both
        grappler off (``disable_meta_optimizer``) and the classic graph optimizer's level L0
        (``opt_level`` L1, the default, turns its constant folding back on even with grappler
        off); for tensorgrid it is ``optimizer_options.do_constant_folding = False``. With
        ``bf16_wire``, cross-task float32 tensors travel as bfloat16 (TF1's
        ``graph_options.enable_bfloat16_sendrecv``, honoured by both). With ``wire_codec``
        (``lz4``, ``zstd_pulls``, ``lz4_L3``: codec, then ``_pulls`` for only what workers pull,
        then a level), tensorgrid encodes cross-host tensors of 64 KB or more losslessly
        (``graph_options.wire_compression``); TensorFlow has no such codec and refuses. A
        ``wire_codec`` of ``delta`` (``delta_zstd``, ``delta_lz4_L3``: the delta frame's codec
        and level) sends cross-host variable reads as deltas of what the reader holds instead.
        """
        tf = self.tf
        cfg = tf.ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=2)
        if device_filters:
            cfg.device_filters.extend(device_filters)
        if bf16_wire:
            cfg.graph_options.enable_bfloat16_sendrecv = True
        if wire_codec:
            if self.name != "tensorgrid":
                raise ValueError(f"{self.name} has no lossless wire codec ({wire_codec!r})")
            codec, *rest = wire_codec.split("_")
            level = next((int(r[1:]) for r in rest if r.startswith("L")), 1)
            if codec == "delta":
                cfg.graph_options.wire_compression = tf.WireCompression(
                    dtype="bfloat16" if bf16_wire else "",
                    delta=next((r for r in rest if r in ("lz4", "zstd")), "lz4"),
                    delta_level=level)
            else:
                cfg.graph_options.wire_compression = tf.WireCompression(
                    dtype="bfloat16" if bf16_wire else "", codec=codec, codec_level=level,
                    codec_edges="non_gradients" if "pulls" in rest else "all")
        if not fold_constants:
            if self.name == "tensorflow":
                cfg.graph_options.rewrite_options.disable_meta_optimizer = True
                cfg.graph_options.optimizer_options.opt_level = tf.OptimizerOptions.L0
            else:
                cfg.graph_options.optimizer_options.do_constant_folding = False
        return cfg

    def describe(self) -> dict[str, Any]:
        """What the probe reports: versions and the names missing or found by fallback."""
        import numpy as np

        out: dict[str, Any] = {
            "framework": self.name, "version": self.version,
            "python": platform.python_version(), "numpy": np.__version__,
            "executable": sys.executable, "missing": self.missing, "fallbacks": self.fallbacks,
        }
        try:
            import grpc

            out["grpcio"] = grpc.__version__
        except Exception:
            out["grpcio"] = None
        return out


def lacks_reason(missing: dict[str, str], bench: str) -> str:
    """Why ``bench`` (a key of ``NEEDS``) cannot run given the ``missing`` names, or ""."""
    return "; ".join(f"tf.{n} is missing ({missing[n]})" for n in NEEDS[bench] if n in missing)


def _lookup_path(root: Any, path: str) -> Any:
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _from_module(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr) if attr else module


def _resolve_tensorgrid(tg: Any, api: Api) -> None:
    for name, candidates in NAMES.items():
        try:
            api.names[name] = _lookup_path(tg, name)
            continue
        except AttributeError:
            tried = [f"not exported as tensorgrid.{name}"]
        parent, _, leaf = name.rpartition(".")
        if parent in api.names:
            # e.g. "train.Server": the module found for "train" may define it
            try:
                api.names[name] = getattr(api.names[parent], leaf)
                api.fallbacks.append(name)
                continue
            except AttributeError:
                pass
        for spec in candidates:
            try:
                api.names[name] = _from_module(spec)
                api.fallbacks.append(name)
                break
            except Exception as exc:
                tried.append(f"{spec}: {type(exc).__name__}")
        else:
            api.missing[name] = "; ".join(tried)


def load(framework: str) -> Api:
    """Import ``framework`` and resolve the TF1 names of ``NAMES`` in it.

    Raises:
        ValueError: an unknown framework.
        ImportError: the framework itself does not import.
    """
    if framework == "tensorflow":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow

        tf = tensorflow.compat.v1
        tf.disable_eager_execution()
        api = Api("tensorflow", tensorflow.__version__, tf)
        for name in NAMES:
            try:
                api.names[name] = _lookup_path(tf, name)
            except AttributeError as exc:
                api.missing[name] = str(exc)
        return api
    if framework == "tensorgrid":
        import tensorgrid

        api = Api("tensorgrid", getattr(tensorgrid, "__version__", "?"), tensorgrid)
        _resolve_tensorgrid(tensorgrid, api)
        return api
    raise ValueError(f"unknown framework {framework!r}; expected tensorgrid or tensorflow")


def main(argv: list[str]) -> int:
    """``frameworks.py --probe NAME``: print NAME's description as a RESULT row."""
    if len(argv) != 2 or argv[0] != "--probe":
        print("usage: frameworks.py --probe tensorgrid|tensorflow", file=sys.stderr)
        return 2
    from common import emit

    emit({"kind": "probe", **load(argv[1]).describe()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
