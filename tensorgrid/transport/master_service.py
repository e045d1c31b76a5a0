"""The MasterService servicer: the session protocol over gRPC (``Session("grpc://host:port")``) and
the heartbeats tasks send."""

from __future__ import annotations

from typing import Any

from tensorgrid.core import errors, serde
from tensorgrid.master.core import MasterCore
from tensorgrid.master.master_session import SessionOptions
from tensorgrid.master.quotas import CLIENT_HEADER, valid_client_id
from tensorgrid.pb import master_pb2, master_pb2_grpc
from tensorgrid.transport import tensors
from tensorgrid.transport.status import abort_with


def options_from_proto(pb: Any) -> SessionOptions:
    return SessionOptions(
        allow_soft_placement=pb.allow_soft_placement,
        log_device_placement=pb.log_device_placement,
        device_filters=tuple(pb.device_filters),
        do_cse=not pb.disable_cse,
        do_constant_folding=not pb.disable_constant_folding,
        timeout_s=pb.operation_timeout_ms / 1000.0,
        client_task=pb.client_task,
        wire_dtype=serde.dtype_from_enum(pb.wire_dtype).name if pb.wire_dtype else "",
        wire_min_bytes=pb.wire_min_bytes,
        wire_gradients_only=pb.wire_gradients_only,
        **_codec_from_proto(pb.wire_codec) if pb.HasField("wire_codec") else {},
        **_delta_from_proto(pb.wire_delta) if pb.HasField("wire_delta") else {},
    )


def _delta_from_proto(pb: Any) -> dict[str, Any]:
    return {"wire_delta": pb.codec, "wire_delta_level": pb.level,
            "wire_delta_min_bytes": pb.min_bytes,
            "wire_delta_cross_host_only": not pb.same_host_too}


def _codec_from_proto(pb: Any) -> dict[str, Any]:
    return {"wire_codec": pb.codec, "wire_codec_level": pb.level,
            "wire_codec_min_bytes": pb.min_bytes, "wire_codec_edges": pb.edges,
            "wire_codec_integers": pb.integers, "wire_codec_shuffle": pb.shuffle,
            "wire_codec_blocksize": pb.blocksize, "wire_codec_cross_host_only": not pb.same_host_too}


def client_of(context: Any) -> str:
    """The client a call counts against for the per-client caps: the name in its
    ``x-tensorgrid-client`` metadata (the SDK sends one per process), else ``peer:<address>``
    (gRPC's peer string without the port)."""
    key = CLIENT_HEADER.lower()
    for k, v in context.invocation_metadata() or ():
        if k == key and isinstance(v, str) and valid_client_id(v):
            return v
    peer = context.peer() or "unknown"
    return f"peer:{peer.rsplit(':', 1)[0] if peer.count(':') > 1 else peer}"


class MasterServicer(master_pb2_grpc.MasterServiceServicer):
    """Serves a MasterCore."""

    def __init__(self, core: MasterCore) -> None:
        self.core = core

    async def CreateSession(self, request: Any, context: Any) -> Any:
        try:
            graph = serde.graph_from_proto(request.graph_def)
            s = await self.core.create_session(graph.nodes, options_from_proto(request.options),
                                               client_of(context))
        except Exception as exc:
            await abort_with(context, exc)
            raise
        return master_pb2.CreateSessionResponse(session_handle=s.handle, graph_version=s.version)

    async def ExtendSession(self, request: Any, context: Any) -> Any:
        try:
            graph = serde.graph_from_proto(request.graph_def)
            version = await self.core.extend_session(request.session_handle, graph.nodes,
                                                     request.current_graph_version)
        except Exception as exc:
            await abort_with(context, exc)
            raise
        return master_pb2.ExtendSessionResponse(new_graph_version=version)

    async def RunStep(self, request: Any, context: Any) -> Any:
        try:
            s = (await self.core.find_session(request.session_handle))
            feeds = [(f.name, tensors.from_proto(f.tensor)) for f in request.feed]
            timeout = request.timeout_ms / 1000.0 if request.timeout_ms else None
            trace = s.new_trace() if request.trace_level else None
            values = await s.run(feeds, list(request.fetch), list(request.target), timeout,
                                 trace=trace)
        except Exception as exc:
            await abort_with(context, exc)
            raise
        return master_pb2.RunStepResponse(tensor=[
            master_pb2.NamedTensor(name=n, tensor=tensors.to_proto(v))
            for n, v in zip(request.fetch, values)],
            step_stats=trace.step_stats() if trace is not None else None)

    async def CloseSession(self, request: Any, context: Any) -> Any:
        try:
            await self.core.close_session(request.session_handle)
        except Exception as exc:  # noqa: BLE001
            await abort_with(context, exc)
        return master_pb2.CloseSessionResponse()

    def _check_caller_is(self, task: str, context: Any) -> None:
        """Under mutual TLS a heartbeat for a task is accepted only from that task: the
        caller's certificate must name it (``tensorgrid certs`` puts the task in its CN).

        Raises:
            PermissionDeniedError: the certificate names another task, or none.
        """
        auth = context.auth_context() or {}
        names = auth.get("x509_common_name")
        if not names:
            return  # plaintext: the bearer token is all there is to check
        caller = names[0].decode(errors="replace")
        try:
            same = self.core.cluster.task(caller).name == self.core.cluster.task(task).name
        except errors.OpError:
            same = False
        if not same:
            raise errors.PermissionDeniedError(
                f"A heartbeat for {task} came from {caller!r}: only the task itself may send it")

    async def ListDevices(self, request: Any, context: Any) -> Any:
        return master_pb2.ListDevicesResponse(devices=self.core.list_devices())

    async def Reset(self, request: Any, context: Any) -> Any:
        try:
            await self.core.reset(list(request.containers))
        except Exception as exc:  # noqa: BLE001
            await abort_with(context, exc)
        return master_pb2.ResetSessionStateResponse()

    async def Heartbeat(self, request: Any, context: Any) -> Any:
        try:
            self._check_caller_is(request.task, context)
            self.core.heartbeat(request.task, request.incarnation, request.address,
                                request.host_id)
        except Exception as exc:  # noqa: BLE001
            await abort_with(context, exc)
        return master_pb2.HeartbeatResponse(master_incarnation=self.core.incarnation)
