"""The configuration of each kind of tensorgrid process, read once from the environment.

One pydantic-settings model per process kind:

* ``MasterSettings``: the HTTP master (``python -m services.master``, ``tensorgrid master``).
* ``TaskSettings``: a worker or parameter-server task (``python -m services.worker|ps``,
  ``tensorgrid worker|ps``).
* ``ClientSettings``: the SDK (``tf.Session``, ``tf.train.Server``), the command line and the
  local cluster it launches.

Every field is read from ``TENSORGRID_<FIELD>`` (``TENSORGRID_TOKEN``, ``TENSORGRID_CLUSTER``, ...),
and the Redis URL from ``TENSORGRID_REDIS_URL`` or ``REDIS_URL``; keyword arguments (the command
lines' flags) win over the environment. A process builds its settings object once, at start-up,
and passes it (or the fields it needs) down: the layers below never read the environment. This
module is the only one that does (``tools/layering_report.py`` counts the others); docs/settings.md
lists every setting.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import secrets
import ssl
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from tensorgrid.core.serde import GraphLimits
from tensorgrid.kernels.heap import KEEP_BYTES
from tensorgrid.master.cluster import ClusterState, normalize_cluster
from tensorgrid.transport.delta import DEFAULT_CACHE_BYTES
from tensorgrid.transport.tls import TlsFiles, client_ssl_context

MiB = 1024 * 1024
ENV_PREFIX = "TENSORGRID_"
DEFAULT_MASTER_URL = "http://127.0.0.1:8000"
HEARTBEAT_INTERVAL_S = 0.5
HEARTBEAT_TIMEOUT_S = 3.0
SHM_POOL_BYTES = 1 << 30

TOKEN_FILE_NAME = "token"

log = logging.getLogger("tensorgrid.settings")

__all__ = ["MasterSettings", "TaskSettings", "ClientSettings", "load_cluster",
           "child_environment", "from_flags", "ensure_token", "is_loopback"]

S = TypeVar("S", bound=BaseSettings)


def load_cluster(value: str | Mapping[str, Any]) -> dict[str, Any]:
    """A cluster spec from a mapping, a JSON document, or the path of a JSON file.

    ``{"ps": ["host:port"], "worker": ["host:port", ...]}`` or ``{job: {index: address}}``.

    Raises:
        ValueError: the text is neither JSON nor a readable file, or the spec is malformed.
    """
    if isinstance(value, Mapping):
        spec: Any = dict(value)
    else:
        text = value.strip()
        if not text.startswith("{"):
            path = Path(text).expanduser()
            try:
                text = path.read_text()
            except OSError as exc:
                raise ValueError(f"Cluster spec {value!r} is neither JSON nor a readable file: "
                                 f"{exc}") from None
        try:
            spec = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"Cluster spec is not valid JSON: {exc}") from None
    if not isinstance(spec, dict) or not spec:
        raise ValueError("Cluster spec must be a non-empty object {job: [address, ...]}")
    try:
        normalize_cluster(spec)
    except Exception as exc:  # noqa: BLE001 - any malformed spec is a configuration error
        raise ValueError(f"Invalid cluster spec: {exc}") from None
    return spec


def child_environment(overrides: Mapping[str, str] | None = None,
                      drop: Iterable[str] = ()) -> dict[str, str]:
    """The environment for a child process: this process's, less ``drop``, plus ``overrides``.

    Launchers (the local cluster) hand their children settings through the environment, which
    the children read once at their start-up.
    """
    env = dict(os.environ)
    for name in drop:
        env.pop(name, None)
    env.update(overrides or {})
    return env


def from_flags(model: type[S], **flags: Any) -> S:
    """``model`` read from the environment, with the command-line flags that were given (not
    None) on top.

    Raises:
        ValueError: a flag or a variable is not valid; the message names each bad field.
    """
    try:
        return model(**{k: v for k, v in flags.items() if v is not None})
    except ValidationError as exc:
        raise ValueError(f"invalid settings (TENSORGRID_* variables or flags):\n{exc}") from None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name, without the port) only listens on this machine:
    ``localhost`` or an address in 127.0.0.0/8 or ``::1``. The wildcard addresses are not."""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def read_token_file(path: Path) -> str | None:
    """The bearer token kept in ``path`` (whitespace stripped), or None when there is no file.

    A missing file is no error: a process with no token serves only on loopback (see
    ``check_listen``), so a secret that was meant to be there and is not stops it anyway.

    Raises:
        ValueError: the file cannot be read, or it is readable by others than its owner (a
            secret anyone on the machine may read).
    """
    try:
        mode = path.stat().st_mode
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"cannot read the token file {path}: {exc}") from None
    if mode & 0o077 and not path.is_relative_to("/run/secrets"):
        raise ValueError(f"token file {path} may be read by others (mode {mode & 0o777:o}); "
                         f"make it owner-only: chmod 600 {path}")
    return text or None


def ensure_token(path: Path) -> str:
    """The bearer token kept in ``path``, created (random, owner-only 0600) when there is none.

    Raises:
        ValueError: the file exists but cannot be read or is open to others.
    """
    path = path.expanduser()
    existing = read_token_file(path)
    if existing:
        return existing
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    try:
        # O_EXCL: two processes creating it at once agree on the first one's token
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        text = read_token_file(path)
        if not text:
            raise ValueError(f"token file {path} is empty; remove it to make a new one") from None
        return text
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    return token


class _Settings(BaseSettings):
    """What every process kind shares: the bearer token, the home directory, the Redis, the
    data plane and the heartbeat timing."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore",
                                      populate_by_name=True)

    token: SecretStr | None = Field(
        default=None, description="bearer token: required by the services when set, and "
                                  "presented by clients and tasks")
    home: Path = Field(default=Path("~/.tensorgrid"),
                       description="state directory (the embedded Redis, the local cluster)")
    redis_url: str | None = Field(
        default=None, validation_alias=AliasChoices("TENSORGRID_REDIS_URL", "REDIS_URL"),
        description="the Redis of checkpoints and kept sessions (TENSORGRID_REDIS_URL or "
                    "REDIS_URL); none: the embedded server under home")
    data_plane: Literal["tcp", "grpc"] = Field(
        default="tcp", description="how tensors move between tasks: 'tcp' (framed sockets and "
                                   "shared memory on one host) or 'grpc' (gRPC streams only)")
    shm_pool_bytes: int = Field(default=SHM_POOL_BYTES, ge=0,
                                description="shared memory a task keeps mapped for same-host "
                                            "consumers")
    wire_delta_cache_bytes: int = Field(
        default=DEFAULT_CACHE_BYTES, ge=0,
        description="bytes of tensors a task keeps on each side to send and receive variables "
                    "as deltas of what the reader holds (least recently used go first; half "
                    "of it at most for one peer)")
    blas_threads: int | None = Field(
        default=None, ge=0, description="threads numpy's BLAS may use in this process "
                                        "(none: a fair share when tasks share the machine)")
    malloc_keep_bytes: int = Field(
        default=KEEP_BYTES, ge=0, description="free heap a task process keeps for its next steps "
                                              "instead of returning it to the OS (glibc; 0: "
                                              "the C library's defaults)")
    heartbeat_interval_s: float = Field(default=HEARTBEAT_INTERVAL_S, gt=0,
                                        description="seconds between a task's heartbeats")
    heartbeat_timeout_s: float = Field(default=HEARTBEAT_TIMEOUT_S, gt=0,
                                       description="silence after which a task counts as dead")
    token_file: Path | None = Field(
        default=None, description="file holding the bearer token, read when no token is given "
                                  "(none: HOME/token, which `tensorgrid local` and `tensorgrid "
                                  "token` create)")
    tls_cert: Path | None = Field(
        default=None, description="this process's TLS certificate (PEM); with tls_key and "
                                  "tls_ca, gRPC speaks mutual TLS (`tensorgrid certs` makes them)")
    tls_key: Path | None = Field(default=None, description="the certificate's private key (PEM)")
    tls_ca: Path | None = Field(default=None,
                                description="the cluster's CA certificate (PEM): peers must "
                                            "present a certificate it signed")
    insecure: bool = Field(
        default=False, description="allow listening on a non-loopback address without a "
                                   "bearer token (anyone who reaches the port may use it)")

    @field_validator("token", "token_file", "redis_url", "blas_threads", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        # an exported but empty variable (REDIS_URL=) means "not set", as it always has
        if isinstance(value, str) and not value.strip():
            return None
        return value.strip() if isinstance(value, str) else value

    @field_validator("data_plane", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    # the kinds with a cluster spec take it as a mapping, JSON, or the path of a JSON file
    @field_validator("cluster", mode="before", check_fields=False)
    @classmethod
    def _load_cluster(cls, value: Any) -> Any:
        return load_cluster(value) if isinstance(value, str | Mapping) else value

    @model_validator(mode="after")
    def _token_from_file(self) -> _Settings:
        # no token given: the home's token file (or the one named) holds the cluster's secret,
        # so the SDK, the command line and every task find the same one
        if self.token is None:
            text = read_token_file(self.token_path)
            if text:
                self.token = SecretStr(text)
        return self

    @property
    def token_path(self) -> Path:
        """Where the bearer token is kept: ``token_file``, else ``HOME/token``."""
        return (self.token_file or self.home / TOKEN_FILE_NAME).expanduser()

    def check_listen(self, host: str, what: str) -> None:
        """Refuse to serve ``what`` on ``host`` open to the network: a non-loopback address
        needs a bearer token, unless ``insecure`` says otherwise (which is logged loudly).

        Raises:
            ValueError: ``host`` is not a loopback address, there is no token, and ``insecure``
                is off.
        """
        if self.token is not None or is_loopback(host):
            return
        if not self.insecure:
            raise ValueError(
                f"{what} would listen on {host!r} without a bearer token: anyone who can reach "
                "the port could read and change the cluster's state. Set TENSORGRID_TOKEN (or "
                "run `tensorgrid token` to create HOME/token), or pass --insecure "
                "(TENSORGRID_INSECURE=1) to serve unauthenticated anyway")
        log.warning("INSECURE: %s listens on %r with no bearer token; anyone who can reach the "
                    "port can read and change the cluster's state", what, host)

    @property
    def token_value(self) -> str | None:
        """The bearer token in clear, or None when there is none."""
        return self.token.get_secret_value() if self.token is not None else None

    @property
    def home_dir(self) -> Path:
        """``home`` with ``~`` expanded."""
        return self.home.expanduser()

    @property
    def use_data_plane(self) -> bool:
        """Whether tasks move tensors over the framed data plane (else gRPC streams only); with
        TLS configured the data plane speaks TLS too."""
        return self.data_plane == "tcp"

    def tls_files(self) -> TlsFiles | None:
        """The TLS files, or None when TLS is not configured.

        Raises:
            ValueError: only some of tls_cert, tls_key and tls_ca are set.
        """
        given = (self.tls_cert, self.tls_key, self.tls_ca)
        if not any(given):
            return None
        if not all(given):
            raise ValueError("TLS needs all of TENSORGRID_TLS_CERT, TENSORGRID_TLS_KEY and "
                             "TENSORGRID_TLS_CA")
        return TlsFiles(*(p.expanduser() for p in given))  # type: ignore[union-attr]

    def channel_credentials(self) -> Any:
        """gRPC channel credentials for this process's calls (None: plaintext)."""
        tls = self.tls_files()
        return tls.channel_credentials() if tls is not None else None

    def data_plane_ssl(self) -> ssl.SSLContext | None:
        """The TLS client context of this task's data-plane connections (None: plain TCP)."""
        tls = self.tls_files()
        return tls.client_ssl_context() if tls is not None else None

    def http_ssl(self) -> ssl.SSLContext | None:
        """The TLS context of this process's HTTPS calls to a master: trusts ``tls_ca`` and
        presents ``tls_cert``/``tls_key`` when both are set (a master with
        ``tls_http_client_certs`` asks for them). None when no CA is set: the system's CAs.

        Raises:
            ValueError: a file cannot be read.
        """
        if self.tls_ca is None:
            return None
        cert, key = self.tls_cert, self.tls_key
        return client_ssl_context(self.tls_ca.expanduser(),
                                  cert.expanduser() if cert and key else None,
                                  key.expanduser() if cert and key else None)

    def http_verify(self) -> ssl.SSLContext | bool:
        """What ``httpx`` takes as ``verify=`` for calls to a master (see ``http_ssl``)."""
        return self.http_ssl() or True


class MasterSettings(_Settings):
    """Configuration of one HTTP master process."""

    cluster: Annotated[dict[str, Any], NoDecode] = Field(
        description="cluster spec {job: [host:port, ...]}: JSON, or the path of a JSON file")
    host: str = Field(default="127.0.0.1", description="address the HTTP server listens on")
    port: int = Field(default=8080, ge=0, le=65535)
    grpc_port: int | None = Field(
        default=None, ge=0, le=65535,
        description="port of the MasterService over gRPC on the same host (tasks push their "
                    "heartbeats there; Session('grpc://host:port') works too); none when unset")
    max_nodes: int = Field(default=200_000, gt=0,
                           description="most nodes a session's graph may have")
    max_request_bytes: int = Field(default=256 * MiB, gt=0,
                                   description="largest request body (checked on Content-Length)")
    max_tensor_bytes: int = Field(default=1024 * MiB, gt=0,
                                  description="most bytes the tensors of one request may decode to")
    max_sessions: int = Field(default=1000, gt=0)
    max_graphs: int = Field(default=1000, gt=0, description="most graphs kept by POST /v1/graphs")
    max_graph_store_bytes: int = Field(
        default=1024 * MiB, gt=0, description="most bytes the graphs kept by POST /v1/graphs may "
                                              "take together")
    graph_idle_s: float = Field(default=3600.0, gt=0,
                                description="a kept graph unused this long is dropped")
    max_declared_tensor_bytes: int = Field(
        default=4096 * MiB, gt=0, description="largest tensor a graph may declare with a known "
                                              "shape (a constant, Fill or zeros of constant dims)")
    session_idle_s: float = Field(default=86400.0, gt=0,
                                  description="a session unused this long is closed (in memory "
                                              "and in Redis)")
    max_live_steps: int = Field(default=1000, gt=0,
                                description="most steps in flight at once on this master")
    # one client's share of the caps above (a client: its X-Tensorgrid-Client header, else its
    # address), so that one client cannot lock out the others; see docs/security.md
    max_sessions_per_client: int = Field(default=250, gt=0,
                                         description="most sessions one client may hold open")
    max_graphs_per_client: int = Field(default=250, gt=0,
                                       description="most graphs one client may keep stored")
    max_graph_store_bytes_per_client: int = Field(
        default=256 * MiB, gt=0, description="most bytes one client's stored graphs may take")
    max_live_steps_per_client: int = Field(default=250, gt=0,
                                           description="most steps one client may have in flight")
    open_metrics: bool = Field(default=False,
                               description="serve /metrics without the bearer token (for a "
                                           "Prometheus on a trusted network)")
    step_timeout_s: float = Field(default=300.0, gt=0,
                                  description="a step's deadline when the client gives none")
    rpc_timeout_s: float = Field(default=30.0, gt=0,
                                 description="deadline of control RPCs to tasks")
    trace_every_n_steps: int = Field(default=0, ge=0,
                                     description="trace one step in N of every session, so the "
                                                 "dashboard's timeline stays fresh (0: only "
                                                 "steps a client or the dashboard asks for)")
    persist_sessions: bool = Field(default=True,
                                   description="keep sessions in Redis when one is configured")
    heartbeat_interval_s: float | None = Field(  # type: ignore[assignment]
        default=HEARTBEAT_INTERVAL_S, gt=0,
        description="the heartbeat period: tasks silent this long are polled")
    tls_http_client_certs: bool = Field(
        default=False, description="with TLS, the HTTP API also requires a client certificate "
                                   "signed by tls_ca (mutual TLS); off: clients need only the CA")
    checkpoint_root: str | None = Field(
        default=None, description="a directory under which GET /v1/checkpoints may list any "
                                  "checkpoint directory (none: only the directories Redis tracks "
                                  "for this cluster)")

    @property
    def poll_interval_s(self) -> float:
        """Seconds between two status polls of every task."""
        return self.heartbeat_interval_s or self.heartbeat_timeout_s / 3.0

    def graph_limits(self) -> GraphLimits:
        """What decoding one submitted graph may take."""
        return GraphLimits(max_nodes=self.max_nodes, max_tensor_bytes=self.max_tensor_bytes,
                           max_message_bytes=self.max_request_bytes)


class TaskSettings(_Settings):
    """Configuration of one worker or parameter-server task process."""

    cluster: Annotated[dict[str, Any] | None, NoDecode] = Field(
        default=None, description="cluster spec {job: [host:port, ...]}: JSON, or the path of a "
                                  "JSON file (required to serve)")
    job: str = Field(default="worker", description="the task's job name")
    task: int = Field(default=0, ge=0, description="the task's index in its job")
    bind: str | None = Field(default=None, description="listen address host:port (none: the "
                                                       "task's address in the cluster spec)")
    master: str | None = Field(default=None,
                               description="gRPC address of a master to send heartbeats to")
    grace: float = Field(default=2.0, ge=0,
                         description="seconds in-flight calls get when stopping")
    step_memory_bytes: int | None = Field(
        default=None, gt=0, description="most bytes of tensors one step may keep live on this "
                                        "task (none: 3/4 of the machine's memory)")

    def step_memory_budget(self) -> int:
        """``step_memory_bytes``, or 3/4 of the machine's physical memory when unset."""
        if self.step_memory_bytes is not None:
            return self.step_memory_bytes
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 3 // 4
        except (ValueError, OSError, AttributeError):  # no sysconf: 16 GiB
            return 16 * 1024 * MiB

    @property
    def task_name(self) -> str:
        """'/job:J/task:T'."""
        return f"/job:{self.job}/task:{self.task}"

    def cluster_spec(self) -> dict[str, Any]:
        """The cluster spec.

        Raises:
            ValueError: none was configured.
        """
        if not self.cluster:
            raise ValueError("no cluster spec: give --cluster or set TENSORGRID_CLUSTER")
        return self.cluster

    def bind_address(self) -> str:
        """Where to listen: ``bind``, else the task's address in the cluster spec.

        Raises:
            ValueError: no cluster spec. NotFoundError: the spec has no such task.
        """
        if self.bind:
            return self.bind
        return ClusterState(self.cluster_spec()).task(self.task_name).address


class ClientSettings(_Settings):
    """Configuration of a client process: the SDK, ``tf.train.Server`` and the command line."""

    master_url: str = Field(default=DEFAULT_MASTER_URL,
                            description="the HTTP master the command line talks to")
    reconnect_s: float = Field(default=15.0, ge=0,
                               description="how long a session keeps reconnecting to a master "
                                           "that restarts")
    bind: str | None = Field(default=None,
                             description="listen address of a tf.train.Server (none: its "
                                         "address in the cluster spec)")
    client_id: str | None = Field(
        default=None, description="the name this process gives the master for its per-client "
                                  "caps (none: <host>-<pid>-<random>, one per process)")
