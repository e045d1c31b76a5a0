"""Session backends that talk to a master.

* ``grpc://host:port`` served by a ``train.Server`` of this process: direct calls on the server's
  event loop (no socket between the client and its master, as TensorFlow's local master lookup).
* ``grpc://host:port`` elsewhere: the MasterService over gRPC.
* ``http://host:port``: the HTTP master service, with binary protobuf bodies.

The graph goes to the master once (CreateSession) and grows by ExtendSession with the ops added
since; each run sends the feed values and the fetch names, and the master keeps the plans.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import grpc
import httpx

from tensorgrid.client.config import ConfigProto, RunMetadata, RunOptions
from tensorgrid.client.retry import backoff
from tensorgrid.client.step_stats import fill_run_metadata
from tensorgrid.core import errors, serde
from tensorgrid.core.ir import GraphDef, NodeDef
from tensorgrid.framework.graph import Graph
from tensorgrid.master.master_session import SessionOptions
from tensorgrid.master.quotas import CLIENT_HEADER, process_client_id
from tensorgrid.pb import master_pb2, master_pb2_grpc
from tensorgrid.runtime.step_stats import FULL_TRACE
from tensorgrid.settings import ClientSettings
from tensorgrid.transport import tensors
from tensorgrid.transport.channels import CHANNEL_OPTIONS
from tensorgrid.transport.status import from_rpc_error, metadata_token

_LOCAL_MASTERS: dict[str, Any] = {}
_LOCK = threading.Lock()


def register_local_master(target: str, host: Any) -> None:
    """Make a master of this process reachable by ``Session(target)`` without a socket."""
    with _LOCK:
        _LOCAL_MASTERS[target] = host


def unregister_local_master(target: str) -> None:
    with _LOCK:
        _LOCAL_MASTERS.pop(target, None)


def options_of(config: ConfigProto, client_task: str = "") -> dict[str, Any]:
    """The session options the master needs from a ConfigProto."""
    return {
        "allow_soft_placement": bool(config.allow_soft_placement),
        "log_device_placement": bool(config.log_device_placement),
        "device_filters": tuple(config.device_filters or ()),
        "do_cse": config.cse_enabled(),
        "do_constant_folding": config.constant_folding_enabled(),
        "timeout_s": (config.operation_timeout_in_ms or 0) / 1000.0,
        "client_task": client_task,
        **config.wire_options(),
    }


class _MasterBackend:
    """The graph-syncing and run protocol shared by every remote backend."""

    def __init__(self, graph: Graph, config: ConfigProto) -> None:
        self.graph = graph
        self.config = config
        self.handle: str | None = None
        self._sent_ops = 0
        self._synced_version = -1
        self._master_version = 0
        # runs may come from several threads (a training loop and its queue runners): one sync
        # at a time, or two would send the same new ops
        self._sync_lock = threading.Lock()

    # transport-specific
    def _create(self, nodes: Sequence[NodeDef]) -> tuple[str, int]:
        raise NotImplementedError

    def _extend(self, nodes: Sequence[NodeDef], version: int) -> int:
        raise NotImplementedError

    def _run_step(self, feeds: list[tuple[str, Any]], fetches: Sequence[str],
                  targets: Sequence[str], timeout: float | None,
                  stats: list[Any] | None = None) -> list[Any]:
        """Run one step on the master; a ``stats`` list asks for a trace, and gets the step's
        ``StepStats`` message appended."""
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError

    def list_devices(self) -> list[str]:
        raise NotImplementedError

    def log_scalars(self, scalars: dict[str, float | None], step: int | None) -> None:
        """Send scalars to the master's dashboard (the HTTP master only)."""
        raise errors.UnimplementedError(
            "Logging scalars to the dashboard needs a session on an HTTP master "
            "(Session('http://host:port')); this session's master serves no dashboard")

    # shared
    def client_task(self) -> str:
        return ""

    def _sync(self) -> None:
        g = self.graph
        if g.version == self._synced_version and self.handle is not None:
            return
        with self._sync_lock:
            if g.version != self._synced_version or self.handle is None:
                self._sync_locked()

    def _sync_locked(self) -> None:
        g = self.graph
        ops = g.get_operations()
        if self.handle is None:
            self.handle, self._master_version = self._create([op.node_def for op in ops])
        else:
            new = [op.node_def for op in ops[self._sent_ops:]]
            if new:
                self._master_version = self._extend(new, self._master_version)
        self._sent_ops = len(ops)
        self._synced_version = g.version

    def prepare(self, feeds: Sequence[str], fetches: Sequence[str],
                targets: Sequence[str]) -> tuple[tuple[str, ...], ...]:
        self._sync()
        return (tuple(feeds), tuple(fetches), tuple(targets))

    def run(self, prepared: tuple[tuple[str, ...], ...], values: Sequence[Any],
            options: RunOptions | None = None, run_metadata: RunMetadata | None = None) -> list[Any]:
        if self.graph.version != self._synced_version:
            self._sync()
        feeds, fetches, targets = prepared
        timeout = options.timeout_in_ms / 1000.0 if options is not None and \
            options.timeout_in_ms else None
        stats: list[Any] | None = [] if options is not None and options.trace_level and \
            run_metadata is not None else None
        out = self._run_step(list(zip(feeds, values)), fetches, targets, timeout, stats)
        if stats and run_metadata is not None:
            fill_run_metadata(run_metadata, stats[0])
        return out

    def close(self) -> None:
        if self.handle is not None:
            try:
                self._close()
            except errors.OpError:
                pass  # the master may be gone already; nothing is left to release
            self.handle = None


class InProcessMasterBackend(_MasterBackend):
    """A master hosted by a ``train.Server`` of this process: calls on the server's loop."""

    def __init__(self, host: Any, graph: Graph, config: ConfigProto) -> None:
        super().__init__(graph, config)
        self.host = host
        self._session: Any = None

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.host.loop).result()

    def client_task(self) -> str:
        return self.host.task_name

    def _create(self, nodes: Sequence[NodeDef]) -> tuple[str, int]:
        opts = SessionOptions(**options_of(self.config, self.client_task()))
        self._session = self._call(self.host.master.create_session(nodes, opts))
        return self._session.handle, self._session.version

    def _extend(self, nodes: Sequence[NodeDef], version: int) -> int:
        async def extend() -> int:
            return self._session.extend(nodes, version)  # type: ignore[no-any-return]

        return self._call(extend())  # type: ignore[no-any-return]

    def _run_step(self, feeds: list[tuple[str, Any]], fetches: Sequence[str],
                  targets: Sequence[str], timeout: float | None,
                  stats: list[Any] | None = None) -> list[Any]:
        if stats is None:
            return self._call(self._session.run(feeds, fetches, targets, timeout))  # type: ignore[no-any-return]
        trace = self._session.new_trace()
        out = self._call(self._session.run(feeds, fetches, targets, timeout, trace=trace))
        stats.append(trace.step_stats())
        return out  # type: ignore[no-any-return]

    def _close(self) -> None:
        if self.host.loop.is_running():
            self._call(self.host.master.close_session(self.handle))

    def list_devices(self) -> list[str]:
        return self.host.master.list_devices()  # type: ignore[no-any-return]

    def cluster_state(self) -> list[dict[str, Any]]:
        """Each task's state as the hosted master sees it (no round trip)."""
        return self.host.master.cluster.describe()  # type: ignore[no-any-return]


class GrpcMasterBackend(_MasterBackend):
    """The MasterService of a remote ``train.Server`` over gRPC."""

    def __init__(self, address: str, graph: Graph, config: ConfigProto,
                 token: str | None = None, credentials: Any = None,
                 client_id: str | None = None) -> None:
        super().__init__(graph, config)
        self.address = address
        # a master under mutual TLS takes the client's certificate (``credentials``)
        self._channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS) \
            if credentials is None else grpc.secure_channel(address, credentials,
                                                            options=CHANNEL_OPTIONS)
        self._stub = master_pb2_grpc.MasterServiceStub(self._channel)
        # the bearer token, and the name the master counts this process's sessions under
        self._meta = (*(metadata_token(token) or ()),
                      (CLIENT_HEADER.lower(), client_id or process_client_id()))
        self._rpc_timeout = 60.0

    def _call(self, method: str, request: Any, timeout: float | None = None) -> Any:
        try:
            return getattr(self._stub, method)(request, timeout=timeout or self._rpc_timeout,
                                               metadata=self._meta)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, "master", self.address, method) from None

    def _create(self, nodes: Sequence[NodeDef]) -> tuple[str, int]:
        req = master_pb2.CreateSessionRequest(
            graph_def=serde.graph_to_proto(GraphDef(tuple(nodes))),
            options=_options_proto(options_of(self.config)))
        r = self._call("CreateSession", req)
        return r.session_handle, r.graph_version

    def _extend(self, nodes: Sequence[NodeDef], version: int) -> int:
        r = self._call("ExtendSession", master_pb2.ExtendSessionRequest(
            session_handle=self.handle, graph_def=serde.graph_to_proto(GraphDef(tuple(nodes))),
            current_graph_version=version))
        return r.new_graph_version  # type: ignore[no-any-return]

    def _run_step(self, feeds: list[tuple[str, Any]], fetches: Sequence[str],
                  targets: Sequence[str], timeout: float | None,
                  stats: list[Any] | None = None) -> list[Any]:
        req = _run_request(self.handle, feeds, fetches, targets, timeout, stats)
        r = self._call("RunStep", req, (timeout + 10.0) if timeout else 3600.0)
        if stats is not None:
            stats.append(r.step_stats)
        return [tensors.from_proto(t.tensor) for t in r.tensor]

    def _close(self) -> None:
        self._call("CloseSession", master_pb2.CloseSessionRequest(session_handle=self.handle))
        self._channel.close()

    def list_devices(self) -> list[str]:
        return list(self._call("ListDevices", master_pb2.ListDevicesRequest()).devices)


class HttpMasterBackend(_MasterBackend):
    """The HTTP master service (``tensorgrid master`` / ``tensorgrid local``), protobuf bodies.

    ``verify`` is how an ``https`` master is verified: an ``ssl.SSLContext`` that trusts the
    cluster's CA (and presents the client's certificate), or True for the system's CAs.
    """

    CONTENT = "application/x-protobuf"

    def __init__(self, url: str, graph: Graph, config: ConfigProto,
                 token: str | None = None, reconnect_s: float = 15.0,
                 verify: Any = True, client_id: str | None = None) -> None:
        super().__init__(graph, config)
        self.url = url.rstrip("/")
        # the name the master counts this process's sessions and steps under (per-client caps)
        headers = {"Content-Type": self.CONTENT, "Accept": self.CONTENT,
                   CLIENT_HEADER: client_id or process_client_id()}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=None,
                                  verify=verify)
        # how long to keep trying to connect while the master restarts (its sessions survive)
        self.reconnect_s = reconnect_s

    def _post(self, path: str, message: Any, response_type: Any, timeout: float = 60.0) -> Any:
        body = message.SerializeToString()
        try:
            # a refused connection sent nothing: safe to try again while the master restarts
            for attempt in backoff(retry_on=httpx.ConnectError, deadline_s=self.reconnect_s):
                with attempt:
                    r = self._http.post(path, content=body, timeout=timeout)
        except httpx.TransportError as exc:
            raise errors.UnavailableError(f"Master {self.url} is unreachable: {exc}") from None
        return _decode_http(r, response_type)

    def _create(self, nodes: Sequence[NodeDef]) -> tuple[str, int]:
        req = master_pb2.CreateSessionRequest(
            graph_def=serde.graph_to_proto(GraphDef(tuple(nodes))),
            options=_options_proto(options_of(self.config)))
        r = self._post("/v1/sessions", req, master_pb2.CreateSessionResponse)
        return r.session_handle, r.graph_version

    def _extend(self, nodes: Sequence[NodeDef], version: int) -> int:
        r = self._post(f"/v1/sessions/{self.handle}/extend", master_pb2.ExtendSessionRequest(
            session_handle=self.handle, graph_def=serde.graph_to_proto(GraphDef(tuple(nodes))),
            current_graph_version=version), master_pb2.ExtendSessionResponse)
        return r.new_graph_version  # type: ignore[no-any-return]

    def _run_step(self, feeds: list[tuple[str, Any]], fetches: Sequence[str],
                  targets: Sequence[str], timeout: float | None,
                  stats: list[Any] | None = None) -> list[Any]:
        req = _run_request(self.handle, feeds, fetches, targets, timeout, stats)
        r = self._post(f"/v1/sessions/{self.handle}/run", req, master_pb2.RunStepResponse,
                       timeout=(timeout + 10.0) if timeout else 3600.0)
        if stats is not None:
            stats.append(r.step_stats)
        return [tensors.from_proto(t.tensor) for t in r.tensor]

    def _close(self) -> None:
        try:
            self._http.delete(f"/v1/sessions/{self.handle}", timeout=10.0)
        except httpx.TransportError:
            pass
        self._http.close()

    def log_scalars(self, scalars: dict[str, float | None], step: int | None) -> None:
        """``POST /v1/sessions/{handle}/scalars``: one point per tag on the dashboard's charts
        (at ``step``; the session's step count when None)."""
        self._sync()  # the session exists on the master from here on
        doc: dict[str, Any] = {"scalars": scalars}
        if step is not None:
            doc["step"] = step
        try:
            r = self._http.post(f"/v1/sessions/{self.handle}/scalars", json=doc, timeout=10.0,
                                headers={"Content-Type": "application/json",
                                         "Accept": "application/json"})
        except httpx.TransportError as exc:
            raise errors.UnavailableError(f"Master {self.url} is unreachable: {exc}") from None
        if r.status_code >= 400:
            raise http_error(r)

    def cluster_state(self) -> list[dict[str, Any]]:
        """Each task's state as the master sees it (``GET /v1/cluster``)."""
        try:
            r = self._http.get("/v1/cluster", headers={"Accept": "application/json"}, timeout=5.0)
        except httpx.TransportError as exc:
            raise errors.UnavailableError(f"Master {self.url} is unreachable: {exc}") from None
        return list(r.json()["tasks"])

    def list_devices(self) -> list[str]:
        try:
            r = self._http.get("/v1/cluster", headers={"Accept": "application/json"})
        except httpx.TransportError as exc:
            raise errors.UnavailableError(f"Master {self.url} is unreachable: {exc}") from None
        return [d for t in r.json()["tasks"] for d in t["devices"]]


def _run_request(handle: str | None, feeds: list[tuple[str, Any]], fetches: Sequence[str],
                 targets: Sequence[str], timeout: float | None,
                 stats: list[Any] | None) -> Any:
    """The RunStepRequest of one step (asking for a trace when ``stats`` is a list)."""
    return master_pb2.RunStepRequest(
        session_handle=handle,
        feed=[master_pb2.NamedTensor(name=n, tensor=tensors.to_proto(v)) for n, v in feeds],
        fetch=list(fetches), target=list(targets),
        timeout_ms=int(timeout * 1000) if timeout else 0,
        trace_level=FULL_TRACE if stats is not None else 0)


def _options_proto(opts: dict[str, Any]) -> Any:
    return master_pb2.SessionOptions(
        allow_soft_placement=opts["allow_soft_placement"],
        log_device_placement=opts["log_device_placement"],
        device_filters=list(opts["device_filters"]),
        disable_cse=not opts["do_cse"], disable_constant_folding=not opts["do_constant_folding"],
        operation_timeout_ms=int(opts["timeout_s"] * 1000), client_task=opts["client_task"],
        # (the stubs type the enum field as DataType; its number is what protobuf stores)
        wire_dtype=serde.dtype_to_enum(opts["wire_dtype"]) if opts["wire_dtype"] else 0,  # type: ignore[arg-type]
        wire_min_bytes=opts["wire_min_bytes"], wire_gradients_only=opts["wire_gradients_only"],
        wire_codec=master_pb2.WireCodec(
            codec=opts["wire_codec"], level=opts["wire_codec_level"],
            min_bytes=opts["wire_codec_min_bytes"], edges=opts["wire_codec_edges"],
            integers=opts["wire_codec_integers"], shuffle=opts["wire_codec_shuffle"],
            blocksize=opts["wire_codec_blocksize"],
            same_host_too=not opts["wire_codec_cross_host_only"]) if opts["wire_codec"] else None,
        wire_delta=master_pb2.WireDelta(
            codec=opts["wire_delta"], level=opts["wire_delta_level"],
            min_bytes=opts["wire_delta_min_bytes"],
            same_host_too=not opts["wire_delta_cross_host_only"]) if opts["wire_delta"] else None)


def _decode_http(r: Any, response_type: Any) -> Any:
    if r.status_code >= 400:
        raise http_error(r)
    msg = response_type()
    msg.ParseFromString(r.content)
    return msg


def http_error(r: Any) -> errors.OpError:
    """The OpError an HTTP error response describes (``{"error": {"code": ..., ...}}``)."""
    try:
        body = r.json()["error"]
        return errors.make_error(body.get("code", "UNKNOWN"), body.get("message", ""),
                                 node_name=body.get("node"), op_type=body.get("op"),
                                 device=body.get("device"), derived=bool(body.get("derived")))
    except (ValueError, KeyError, TypeError):
        code = {400: errors.INVALID_ARGUMENT, 404: errors.NOT_FOUND, 503: errors.UNAVAILABLE,
                504: errors.DEADLINE_EXCEEDED}.get(r.status_code, errors.UNKNOWN)
        return errors.make_error(code, f"HTTP {r.status_code}: {r.text[:200]}")


def connect(target: str, graph: Graph, config: ConfigProto,
            settings: ClientSettings | None = None) -> _MasterBackend:
    """The backend for a session target.

    Args:
        settings: the client's settings (its bearer token, how long to reconnect, the CA
            and certificate of a TLS master); ``ClientSettings()`` from the environment when
            None.

    Raises:
        InvalidArgumentError: the target is not 'grpc://host:port' or 'http(s)://host:port',
            or the TLS files cannot be read.
    """
    settings = settings if settings is not None else ClientSettings()
    token = settings.token_value
    with _LOCK:
        host = _LOCAL_MASTERS.get(target)
    if host is not None:
        return InProcessMasterBackend(host, graph, config)
    if target.startswith("grpc://"):
        return GrpcMasterBackend(target[len("grpc://"):], graph, config, token,
                                 _tls(settings.channel_credentials), settings.client_id)
    if target.startswith(("http://", "https://")):
        return HttpMasterBackend(target, graph, config, token, settings.reconnect_s,
                                 _tls(settings.http_verify), settings.client_id)
    raise errors.InvalidArgumentError(
        f"Unknown session target {target!r}: use '' (in-process), 'grpc://host:port' or "
        "'http://host:port'")


def _tls(build: Any) -> Any:
    """``build()``, a TLS file that cannot be read being an InvalidArgumentError."""
    try:
        return build()
    except ValueError as exc:
        raise errors.InvalidArgumentError(str(exc)) from None


def reset_target(target: str, containers: list[str] | None,
                 settings: ClientSettings | None = None) -> None:
    """Clear variables on every task behind a master (``Session.reset``)."""
    with _LOCK:
        host = _LOCAL_MASTERS.get(target)
    if host is not None:
        asyncio.run_coroutine_threadsafe(host.master.reset(containers or []), host.loop).result()
        return
    backend = connect(target, Graph(), ConfigProto(), settings)
    if isinstance(backend, GrpcMasterBackend):
        backend._call("Reset", master_pb2.ResetSessionStateRequest(containers=containers or []))
        return
    if isinstance(backend, HttpMasterBackend):
        r = backend._http.post("/v1/reset", json={"containers": containers or []},
                               headers={"Content-Type": "application/json",
                                        "Accept": "application/json"})
        if r.status_code >= 400:
            raise http_error(r)
