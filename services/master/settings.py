"""The HTTP master's settings: one pydantic-settings object read from ``TENSORGRID_*`` variables.

``TENSORGRID_CLUSTER`` holds the cluster spec as JSON or the path of a JSON file;
``TENSORGRID_TOKEN`` is the bearer token clients must present (the SDK reads the same variable).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from services.config import load_cluster
from tensorgrid.core.serde import GraphLimits

MiB = 1024 * 1024


class Settings(BaseSettings):
    """Configuration of one HTTP master process."""

    model_config = SettingsConfigDict(env_prefix="TENSORGRID_", extra="ignore")

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
    token: SecretStr | None = Field(default=None,
                                    description="bearer token for the API and for the tasks")
    step_timeout_s: float = Field(default=300.0, gt=0,
                                  description="a step's deadline when the client gives none")
    rpc_timeout_s: float = Field(default=30.0, gt=0,
                                 description="deadline of control RPCs to tasks")
    redis_url: str | None = Field(
        default=None, description="Redis that keeps the sessions across a master restart "
                                  "(default: $REDIS_URL; none: sessions live in memory only)")
    persist_sessions: bool = Field(default=True,
                                   description="keep sessions in Redis when one is configured")
    heartbeat_timeout_s: float = Field(default=3.0, gt=0,
                                       description="silence after which a task counts as dead")
    heartbeat_interval_s: float | None = Field(
        default=0.5, gt=0,
        description="the heartbeat period: tasks silent this long are polled")

    @field_validator("cluster", mode="before")
    @classmethod
    def _load_cluster(cls, value: Any) -> Any:
        if isinstance(value, str | dict):
            return load_cluster(value)
        return value

    @property
    def token_value(self) -> str | None:
        """The bearer token in clear, or None when the master runs without one."""
        return self.token.get_secret_value() if self.token is not None else None

    @property
    def poll_interval_s(self) -> float:
        """Seconds between two status polls of every task."""
        return self.heartbeat_interval_s or self.heartbeat_timeout_s / 3.0

    def graph_limits(self) -> GraphLimits:
        """What decoding one submitted graph may take."""
        return GraphLimits(max_nodes=self.max_nodes, max_tensor_bytes=self.max_tensor_bytes,
                           max_message_bytes=self.max_request_bytes)
