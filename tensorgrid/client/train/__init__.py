"""``tf.train``: optimizers, the global step and learning-rate schedules (and, added by the
distributed runtime, cluster and session helpers).

``Server`` loads when first used: it brings gRPC, the HTTP client and the settings, which a
program that only builds and runs graphs in-process does not need.
"""

from typing import Any

import tensorgrid.checkpoint  # registers the checkpoint ops and kernels (tasks run them)
from tensorgrid.client.train.checkpoint_hooks import CheckpointSaverHook, CheckpointSaverListener
from tensorgrid.client.train.cluster_spec import ClusterSpec
from tensorgrid.client.train.coordinator import (
    Coordinator,
    QueueRunner,
    add_queue_runner,
    start_queue_runners,
)
from tensorgrid.client.train.dashboard_hook import DashboardScalarsHook
from tensorgrid.client.train.device_setter import (
    GreedyLoadBalancingStrategy,
    byte_size_load_fn,
    replica_device_setter,
)
from tensorgrid.client.train.global_step import (
    assert_global_step,
    create_global_step,
    get_global_step,
    get_or_create_global_step,
    global_step,
)
from tensorgrid.client.train.hooks import (
    FeedFnHook,
    FinalOpsHook,
    GlobalStepWaiterHook,
    LoggingTensorHook,
    NanLossDuringTrainingError,
    NanTensorHook,
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    StepCounterHook,
    StopAtStepHook,
)
from tensorgrid.client.train.input import (
    batch,
    input_producer,
    limit_epochs,
    range_input_producer,
    shuffle_batch,
    slice_input_producer,
    string_input_producer,
)
from tensorgrid.client.train.learning_rate_decay import (
    cosine_decay,
    exponential_decay,
    inverse_time_decay,
    natural_exp_decay,
    piecewise_constant,
    polynomial_decay,
)
from tensorgrid.client.train.monitored_session import (
    ChiefSessionCreator,
    MonitoredSession,
    MonitoredTrainingSession,
    Scaffold,
    SessionCreator,
    SingularMonitoredSession,
    WorkerSessionCreator,
)
from tensorgrid.client.train.optimizer import Optimizer
from tensorgrid.client.train.optimizers import (
    AdagradOptimizer,
    AdamOptimizer,
    GradientDescentOptimizer,
    MomentumOptimizer,
    RMSPropOptimizer,
)
from tensorgrid.client.train.saver import (
    Saver,
    checkpoint_exists,
    get_checkpoint_state,
    latest_checkpoint,
    remove_checkpoint,
)
from tensorgrid.client.train.summary_hook import SummarySaverHook
from tensorgrid.client.train.supervisor import Supervisor
from tensorgrid.client.train.sync_replicas import SyncReplicasOptimizer
from tensorgrid.framework.importer import write_graph
from tensorgrid.pb.example_pb2 import Example, SequenceExample
from tensorgrid.pb.feature_pb2 import (
    BytesList,
    Feature,
    FeatureList,
    FeatureLists,
    Features,
    FloatList,
    Int64List,
)
from tensorgrid.summary import summary_iterator

__all__ = [
    # optimizers
    "Optimizer", "GradientDescentOptimizer", "MomentumOptimizer", "AdamOptimizer",
    "AdagradOptimizer", "RMSPropOptimizer",
    # global step
    "get_global_step", "create_global_step", "get_or_create_global_step", "assert_global_step",
    "global_step",
    # learning-rate schedules
    "exponential_decay", "piecewise_constant", "polynomial_decay", "inverse_time_decay",
    "natural_exp_decay", "cosine_decay",
    # cluster
    "ClusterSpec", "Server", "write_graph", "replica_device_setter", "GreedyLoadBalancingStrategy",
    "byte_size_load_fn",
    # training loop
    "SessionRunHook", "SessionRunArgs", "SessionRunContext", "SessionRunValues",
    "SecondOrStepTimer", "LoggingTensorHook", "StopAtStepHook", "StepCounterHook", "NanTensorHook",
    "NanLossDuringTrainingError", "FinalOpsHook", "FeedFnHook", "GlobalStepWaiterHook", "Scaffold",
    "SessionCreator", "ChiefSessionCreator", "WorkerSessionCreator", "MonitoredSession",
    "SingularMonitoredSession", "MonitoredTrainingSession",
    # checkpoints
    "Saver", "latest_checkpoint", "get_checkpoint_state", "checkpoint_exists", "remove_checkpoint",
    "CheckpointSaverHook", "CheckpointSaverListener",
    # summaries
    "SummarySaverHook", "summary_iterator", "DashboardScalarsHook",
    # synchronous training and queue runners
    "SyncReplicasOptimizer", "Coordinator", "QueueRunner", "add_queue_runner",
    "start_queue_runners", "Supervisor",
    # queue-based input pipelines
    "batch", "shuffle_batch", "input_producer", "string_input_producer", "range_input_producer",
    "slice_input_producer", "limit_epochs",
    # the records of input files (TensorFlow's protos: files move between the two)
    "Example", "SequenceExample", "Features", "Feature", "FeatureList", "FeatureLists",
    "BytesList", "FloatList", "Int64List",
]


def __getattr__(name: str) -> Any:
    if name == "Server":
        from tensorgrid.client.train.server import Server  # lazy: gRPC, httpx, pydantic-settings

        return Server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
