from tensorgrid.pb import graph_pb2 as _graph_pb2
from tensorgrid.pb import step_stats_pb2 as _step_stats_pb2
from tensorgrid.pb import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RegisterGraphRequest(_message.Message):
    __slots__ = ("session_handle", "graph_def", "cluster", "expected_incarnation", "master_address")
    class ClusterEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_def: _graph_pb2.GraphDef
    cluster: _containers.ScalarMap[str, str]
    expected_incarnation: int
    master_address: str
    def __init__(self, session_handle: _Optional[str] = ..., graph_def: _Optional[_Union[_graph_pb2.GraphDef, _Mapping]] = ..., cluster: _Optional[_Mapping[str, str]] = ..., expected_incarnation: _Optional[int] = ..., master_address: _Optional[str] = ...) -> None: ...

class RegisterGraphResponse(_message.Message):
    __slots__ = ("graph_handle", "incarnation")
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    incarnation: int
    def __init__(self, graph_handle: _Optional[str] = ..., incarnation: _Optional[int] = ...) -> None: ...

class DeregisterGraphRequest(_message.Message):
    __slots__ = ("graph_handle", "session_handle")
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    session_handle: str
    def __init__(self, graph_handle: _Optional[str] = ..., session_handle: _Optional[str] = ...) -> None: ...

class DeregisterGraphResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RunGraphRequest(_message.Message):
    __slots__ = ("graph_handle", "step_id", "args", "timeout_ms", "trace_level")
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TRACE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    step_id: int
    args: _containers.RepeatedCompositeFieldContainer[_types_pb2.TensorProto]
    timeout_ms: int
    trace_level: int
    def __init__(self, graph_handle: _Optional[str] = ..., step_id: _Optional[int] = ..., args: _Optional[_Iterable[_Union[_types_pb2.TensorProto, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., trace_level: _Optional[int] = ...) -> None: ...

class RunGraphResponse(_message.Message):
    __slots__ = ("rets", "ret_keys", "step_stats")
    RETS_FIELD_NUMBER: _ClassVar[int]
    RET_KEYS_FIELD_NUMBER: _ClassVar[int]
    STEP_STATS_FIELD_NUMBER: _ClassVar[int]
    rets: _containers.RepeatedCompositeFieldContainer[_types_pb2.TensorProto]
    ret_keys: _containers.RepeatedScalarFieldContainer[str]
    step_stats: _step_stats_pb2.StepStats
    def __init__(self, rets: _Optional[_Iterable[_Union[_types_pb2.TensorProto, _Mapping]]] = ..., ret_keys: _Optional[_Iterable[str]] = ..., step_stats: _Optional[_Union[_step_stats_pb2.StepStats, _Mapping]] = ...) -> None: ...

class RecvTensorRequest(_message.Message):
    __slots__ = ("step_id", "keys", "host_id", "deltas")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    DELTAS_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    keys: _containers.RepeatedScalarFieldContainer[str]
    host_id: str
    deltas: _containers.RepeatedCompositeFieldContainer[DeltaWant]
    def __init__(self, step_id: _Optional[int] = ..., keys: _Optional[_Iterable[str]] = ..., host_id: _Optional[str] = ..., deltas: _Optional[_Iterable[_Union[DeltaWant, _Mapping]]] = ...) -> None: ...

class DeltaWant(_message.Message):
    __slots__ = ("index", "have_version", "codec", "level")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    HAVE_VERSION_FIELD_NUMBER: _ClassVar[int]
    CODEC_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    index: int
    have_version: int
    codec: str
    level: int
    def __init__(self, index: _Optional[int] = ..., have_version: _Optional[int] = ..., codec: _Optional[str] = ..., level: _Optional[int] = ...) -> None: ...

class RecvTensorChunk(_message.Message):
    __slots__ = ("index", "inline", "dtype", "shape", "data", "offset", "shm_name", "shm_lease", "is_dead", "version", "delta", "delta_block", "delta_last")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    INLINE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SHM_NAME_FIELD_NUMBER: _ClassVar[int]
    SHM_LEASE_FIELD_NUMBER: _ClassVar[int]
    IS_DEAD_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    DELTA_BLOCK_FIELD_NUMBER: _ClassVar[int]
    DELTA_LAST_FIELD_NUMBER: _ClassVar[int]
    index: int
    inline: _types_pb2.TensorProto
    dtype: _types_pb2.DataType
    shape: _types_pb2.TensorShapeProto
    data: bytes
    offset: int
    shm_name: str
    shm_lease: int
    is_dead: bool
    version: int
    delta: bool
    delta_block: bool
    delta_last: bool
    def __init__(self, index: _Optional[int] = ..., inline: _Optional[_Union[_types_pb2.TensorProto, _Mapping]] = ..., dtype: _Optional[_Union[_types_pb2.DataType, str]] = ..., shape: _Optional[_Union[_types_pb2.TensorShapeProto, _Mapping]] = ..., data: _Optional[bytes] = ..., offset: _Optional[int] = ..., shm_name: _Optional[str] = ..., shm_lease: _Optional[int] = ..., is_dead: _Optional[bool] = ..., version: _Optional[int] = ..., delta: _Optional[bool] = ..., delta_block: _Optional[bool] = ..., delta_last: _Optional[bool] = ...) -> None: ...

class ShmRelease(_message.Message):
    __slots__ = ("name", "lease")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    name: str
    lease: int
    def __init__(self, name: _Optional[str] = ..., lease: _Optional[int] = ...) -> None: ...

class StreamStatus(_message.Message):
    __slots__ = ("code", "message", "node", "op", "device", "derived")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    DERIVED_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    node: str
    op: str
    device: str
    derived: bool
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., node: _Optional[str] = ..., op: _Optional[str] = ..., device: _Optional[str] = ..., derived: _Optional[bool] = ...) -> None: ...

class RunGraphStreamRequest(_message.Message):
    __slots__ = ("request_id", "request")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    request: RunGraphRequest
    def __init__(self, request_id: _Optional[int] = ..., request: _Optional[_Union[RunGraphRequest, _Mapping]] = ...) -> None: ...

class RunGraphStreamResponse(_message.Message):
    __slots__ = ("request_id", "response", "status")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    response: RunGraphResponse
    status: StreamStatus
    def __init__(self, request_id: _Optional[int] = ..., response: _Optional[_Union[RunGraphResponse, _Mapping]] = ..., status: _Optional[_Union[StreamStatus, _Mapping]] = ...) -> None: ...

class RecvTensorStreamRequest(_message.Message):
    __slots__ = ("request_id", "request", "cancel", "releases")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    RELEASES_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    request: RecvTensorRequest
    cancel: bool
    releases: _containers.RepeatedCompositeFieldContainer[ShmRelease]
    def __init__(self, request_id: _Optional[int] = ..., request: _Optional[_Union[RecvTensorRequest, _Mapping]] = ..., cancel: _Optional[bool] = ..., releases: _Optional[_Iterable[_Union[ShmRelease, _Mapping]]] = ...) -> None: ...

class RecvTensorStreamResponse(_message.Message):
    __slots__ = ("request_id", "chunk", "chunks", "status")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    chunk: RecvTensorChunk
    chunks: _containers.RepeatedCompositeFieldContainer[RecvTensorChunk]
    status: StreamStatus
    def __init__(self, request_id: _Optional[int] = ..., chunk: _Optional[_Union[RecvTensorChunk, _Mapping]] = ..., chunks: _Optional[_Iterable[_Union[RecvTensorChunk, _Mapping]]] = ..., status: _Optional[_Union[StreamStatus, _Mapping]] = ...) -> None: ...

class CleanupGraphRequest(_message.Message):
    __slots__ = ("step_id",)
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    def __init__(self, step_id: _Optional[int] = ...) -> None: ...

class CleanupGraphResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AbortRequest(_message.Message):
    __slots__ = ("step_id", "code", "message")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    code: int
    message: str
    def __init__(self, step_id: _Optional[int] = ..., code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class AbortResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ("include_metrics",)
    INCLUDE_METRICS_FIELD_NUMBER: _ClassVar[int]
    include_metrics: bool
    def __init__(self, include_metrics: _Optional[bool] = ...) -> None: ...

class DeviceAttributes(_message.Message):
    __slots__ = ("name", "device_type")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_TYPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    device_type: str
    def __init__(self, name: _Optional[str] = ..., device_type: _Optional[str] = ...) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("task", "incarnation", "host_id", "devices", "graphs", "live_steps", "steps_run", "uptime_s", "data_address", "metrics")
    TASK_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    GRAPHS_FIELD_NUMBER: _ClassVar[int]
    LIVE_STEPS_FIELD_NUMBER: _ClassVar[int]
    STEPS_RUN_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    DATA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    task: str
    incarnation: int
    host_id: str
    devices: _containers.RepeatedCompositeFieldContainer[DeviceAttributes]
    graphs: int
    live_steps: int
    steps_run: int
    uptime_s: float
    data_address: str
    metrics: str
    def __init__(self, task: _Optional[str] = ..., incarnation: _Optional[int] = ..., host_id: _Optional[str] = ..., devices: _Optional[_Iterable[_Union[DeviceAttributes, _Mapping]]] = ..., graphs: _Optional[int] = ..., live_steps: _Optional[int] = ..., steps_run: _Optional[int] = ..., uptime_s: _Optional[float] = ..., data_address: _Optional[str] = ..., metrics: _Optional[str] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ("containers",)
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    containers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, containers: _Optional[_Iterable[str]] = ...) -> None: ...

class ResetResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
