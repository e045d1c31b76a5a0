from tensorgrid.pb import graph_pb2 as _graph_pb2
from tensorgrid.pb import step_stats_pb2 as _step_stats_pb2
from tensorgrid.pb import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NamedTensor(_message.Message):
    __slots__ = ("name", "tensor")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    tensor: _types_pb2.TensorProto
    def __init__(self, name: _Optional[str] = ..., tensor: _Optional[_Union[_types_pb2.TensorProto, _Mapping]] = ...) -> None: ...

class SessionOptions(_message.Message):
    __slots__ = ("allow_soft_placement", "log_device_placement", "device_filters", "disable_cse", "disable_constant_folding", "operation_timeout_ms", "client_task", "wire_dtype", "wire_min_bytes", "wire_gradients_only", "wire_codec", "wire_delta")
    ALLOW_SOFT_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    LOG_DEVICE_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FILTERS_FIELD_NUMBER: _ClassVar[int]
    DISABLE_CSE_FIELD_NUMBER: _ClassVar[int]
    DISABLE_CONSTANT_FOLDING_FIELD_NUMBER: _ClassVar[int]
    OPERATION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TASK_FIELD_NUMBER: _ClassVar[int]
    WIRE_DTYPE_FIELD_NUMBER: _ClassVar[int]
    WIRE_MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    WIRE_GRADIENTS_ONLY_FIELD_NUMBER: _ClassVar[int]
    WIRE_CODEC_FIELD_NUMBER: _ClassVar[int]
    WIRE_DELTA_FIELD_NUMBER: _ClassVar[int]
    allow_soft_placement: bool
    log_device_placement: bool
    device_filters: _containers.RepeatedScalarFieldContainer[str]
    disable_cse: bool
    disable_constant_folding: bool
    operation_timeout_ms: int
    client_task: str
    wire_dtype: _types_pb2.DataType
    wire_min_bytes: int
    wire_gradients_only: bool
    wire_codec: WireCodec
    wire_delta: WireDelta
    def __init__(self, allow_soft_placement: _Optional[bool] = ..., log_device_placement: _Optional[bool] = ..., device_filters: _Optional[_Iterable[str]] = ..., disable_cse: _Optional[bool] = ..., disable_constant_folding: _Optional[bool] = ..., operation_timeout_ms: _Optional[int] = ..., client_task: _Optional[str] = ..., wire_dtype: _Optional[_Union[_types_pb2.DataType, str]] = ..., wire_min_bytes: _Optional[int] = ..., wire_gradients_only: _Optional[bool] = ..., wire_codec: _Optional[_Union[WireCodec, _Mapping]] = ..., wire_delta: _Optional[_Union[WireDelta, _Mapping]] = ...) -> None: ...

class WireDelta(_message.Message):
    __slots__ = ("codec", "level", "min_bytes", "same_host_too")
    CODEC_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    SAME_HOST_TOO_FIELD_NUMBER: _ClassVar[int]
    codec: str
    level: int
    min_bytes: int
    same_host_too: bool
    def __init__(self, codec: _Optional[str] = ..., level: _Optional[int] = ..., min_bytes: _Optional[int] = ..., same_host_too: _Optional[bool] = ...) -> None: ...

class WireCodec(_message.Message):
    __slots__ = ("codec", "level", "min_bytes", "edges", "integers", "shuffle", "blocksize", "same_host_too")
    CODEC_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    INTEGERS_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_FIELD_NUMBER: _ClassVar[int]
    BLOCKSIZE_FIELD_NUMBER: _ClassVar[int]
    SAME_HOST_TOO_FIELD_NUMBER: _ClassVar[int]
    codec: str
    level: int
    min_bytes: int
    edges: str
    integers: bool
    shuffle: str
    blocksize: int
    same_host_too: bool
    def __init__(self, codec: _Optional[str] = ..., level: _Optional[int] = ..., min_bytes: _Optional[int] = ..., edges: _Optional[str] = ..., integers: _Optional[bool] = ..., shuffle: _Optional[str] = ..., blocksize: _Optional[int] = ..., same_host_too: _Optional[bool] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ("graph_def", "options")
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    graph_def: _graph_pb2.GraphDef
    options: SessionOptions
    def __init__(self, graph_def: _Optional[_Union[_graph_pb2.GraphDef, _Mapping]] = ..., options: _Optional[_Union[SessionOptions, _Mapping]] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ("session_handle", "graph_version")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_version: int
    def __init__(self, session_handle: _Optional[str] = ..., graph_version: _Optional[int] = ...) -> None: ...

class ExtendSessionRequest(_message.Message):
    __slots__ = ("session_handle", "graph_def", "current_graph_version")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    CURRENT_GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_def: _graph_pb2.GraphDef
    current_graph_version: int
    def __init__(self, session_handle: _Optional[str] = ..., graph_def: _Optional[_Union[_graph_pb2.GraphDef, _Mapping]] = ..., current_graph_version: _Optional[int] = ...) -> None: ...

class ExtendSessionResponse(_message.Message):
    __slots__ = ("new_graph_version",)
    NEW_GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    new_graph_version: int
    def __init__(self, new_graph_version: _Optional[int] = ...) -> None: ...

class RunStepRequest(_message.Message):
    __slots__ = ("session_handle", "feed", "fetch", "target", "timeout_ms", "graph_version", "trace_level")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    FEED_FIELD_NUMBER: _ClassVar[int]
    FETCH_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    TRACE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    feed: _containers.RepeatedCompositeFieldContainer[NamedTensor]
    fetch: _containers.RepeatedScalarFieldContainer[str]
    target: _containers.RepeatedScalarFieldContainer[str]
    timeout_ms: int
    graph_version: int
    trace_level: int
    def __init__(self, session_handle: _Optional[str] = ..., feed: _Optional[_Iterable[_Union[NamedTensor, _Mapping]]] = ..., fetch: _Optional[_Iterable[str]] = ..., target: _Optional[_Iterable[str]] = ..., timeout_ms: _Optional[int] = ..., graph_version: _Optional[int] = ..., trace_level: _Optional[int] = ...) -> None: ...

class RunStepResponse(_message.Message):
    __slots__ = ("tensor", "step_id", "step_stats")
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_STATS_FIELD_NUMBER: _ClassVar[int]
    tensor: _containers.RepeatedCompositeFieldContainer[NamedTensor]
    step_id: int
    step_stats: _step_stats_pb2.StepStats
    def __init__(self, tensor: _Optional[_Iterable[_Union[NamedTensor, _Mapping]]] = ..., step_id: _Optional[int] = ..., step_stats: _Optional[_Union[_step_stats_pb2.StepStats, _Mapping]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_handle",)
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    def __init__(self, session_handle: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListDevicesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListDevicesResponse(_message.Message):
    __slots__ = ("devices",)
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    devices: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, devices: _Optional[_Iterable[str]] = ...) -> None: ...

class ResetSessionStateRequest(_message.Message):
    __slots__ = ("containers",)
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    containers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, containers: _Optional[_Iterable[str]] = ...) -> None: ...

class ResetSessionStateResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("task", "incarnation", "address", "host_id")
    TASK_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    task: str
    incarnation: int
    address: str
    host_id: str
    def __init__(self, task: _Optional[str] = ..., incarnation: _Optional[int] = ..., address: _Optional[str] = ..., host_id: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("master_incarnation",)
    MASTER_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    master_incarnation: int
    def __init__(self, master_incarnation: _Optional[int] = ...) -> None: ...
