"""The command line's HTTP side: JSON requests to the master, ``--feed`` values as JSON tensors,
tables and error exits (``tensorgrid submit``, ``status``, ``trace``), the TLS options and the
health probe (``tensorgrid health``)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from tensorgrid.cluster.probes import grpc_health, http_healthy
from tensorgrid.core import dtypes
from tensorgrid.master.quotas import CLIENT_HEADER, process_client_id
from tensorgrid.transport.tls import TlsFiles, client_ssl_context

TlsCertOpt = Annotated[Path | None, typer.Option(
    help="a TLS certificate of the cluster's CA (PEM; `tensorgrid certs` makes them) "
         "(default: $TENSORGRID_TLS_CERT)", show_default=False)]
TlsKeyOpt = Annotated[Path | None, typer.Option(
    help="the certificate's key (default: $TENSORGRID_TLS_KEY)", show_default=False)]
TlsCaOpt = Annotated[Path | None, typer.Option(
    help="the cluster's CA: TLS with peers whose certificates it signed "
         "(default: $TENSORGRID_TLS_CA)", show_default=False)]
TlsClientCertsOpt = Annotated[bool | None, typer.Option(
    "--tls-http-client-certs", show_default=False,
    help="HTTP clients must present a certificate of the CA too (mutual TLS; default: "
         "$TENSORGRID_TLS_HTTP_CLIENT_CERTS)")]


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``message`` as an error; the Exit to raise with ``code``."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def request(method: str, url: str, token: str | None, timeout: float, body: Any = None,
            verify: Any = True, client: str | None = None) -> Any:
    """One JSON request to the master, as ``client`` (None: this process's name, for the
    master's per-client caps); exits with the master's error message on failure.
    ``verify``: how an ``https`` master is verified (``ClientSettings.http_verify()``)."""
    import httpx  # lazy: with rich and pygments, 0.2 s a healthcheck does not need

    headers = {CLIENT_HEADER: client or process_client_id()}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        r = httpx.request(method, url, json=body, headers=headers, timeout=timeout,
                          verify=verify)
    except httpx.HTTPError as exc:
        raise fail(f"the master at {url} is unreachable: {exc}") from None
    try:
        doc = r.json()
    except ValueError:
        doc = None
    if r.status_code >= 400:
        err = doc.get("error", {}) if isinstance(doc, dict) else {}
        message = err.get("message") or r.text[:500]
        raise fail(f"{err.get('code', r.status_code)}: {message}")
    return doc


def health_status(target: str, service: str, timeout: float, tls_ca: Path | None = None,
                  tls_cert: Path | None = None, tls_key: Path | None = None) -> str:
    """'SERVING' when ``target`` is healthy: the master's ``http(s)://`` URL answering 200, or a
    task's ``host:port`` gRPC health; else what it answered ('NOT_SERVING', 'UNREACHABLE', ...).
    With ``tls_ca`` an https master is verified with it, and with a certificate and key a
    mutual-TLS gRPC target is probed over TLS. Bad TLS files exit with status 2."""
    try:
        if target.startswith(("http://", "https://")):
            verify: Any = client_ssl_context(tls_ca, tls_cert, tls_key) if tls_ca else True
            return "SERVING" if http_healthy(target, timeout, verify) else "NOT_SERVING"
        credentials = TlsFiles(tls_cert, tls_key, tls_ca).channel_credentials() \
            if tls_ca and tls_cert and tls_key else None
    except ValueError as exc:
        raise fail(str(exc), 2) from None
    return grpc_health(target, service, timeout, credentials)


def placeholder_dtypes(graph: dict[str, Any]) -> dict[str, str]:
    """The dtype of each placeholder of a GraphDef in JSON form, by node name."""
    out: dict[str, str] = {}
    for node in graph.get("node", []) if isinstance(graph, dict) else []:
        if isinstance(node, dict) and str(node.get("op", "")).startswith("Placeholder"):
            dtype = (node.get("attr", {}).get("dtype") or {}).get("type")
            if dtype is not None:
                out[str(node.get("name"))] = str(dtype)
    return out


def feed_tensor(name: str, text: str, dtypes_by_node: dict[str, str]) -> dict[str, Any]:
    """A ``--feed`` value as a JSON tensor: ``@file.npy``, ``@file.json``, or inline JSON (a
    number, a nested list, or a full ``{"dtype", "shape", "values"}`` tensor)."""
    if text.startswith("@"):
        path = Path(text[1:]).expanduser()
        try:
            if path.suffix == ".json":
                value: Any = json.loads(path.read_text())
            else:
                value = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise fail(f"--feed {name}: cannot read {path}: {exc}") from None
    else:
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise fail(f"--feed {name}: not JSON ({exc}); use @file.npy for arrays") from None
    if isinstance(value, dict):
        return value  # already a JSON tensor
    arr = np.asarray(value)
    wanted = dtypes_by_node.get(name.split(":")[0])
    if wanted is not None:
        dt = dtypes.as_dtype(wanted)
    elif not isinstance(value, np.ndarray) and arr.dtype in (np.float64, np.int64):
        # Python numbers become float32 / int32, as tf.constant does
        dt = dtypes.as_dtype(np.float32 if arr.dtype == np.float64 else np.int32)
    else:
        dt = dtypes.as_dtype(arr.dtype)
    doc: dict[str, Any] = {"dtype": dt.name, "shape": list(arr.shape)}
    if dt is dtypes.string:
        doc["values"] = arr.astype(str).tolist()
    else:
        native = np.ascontiguousarray(arr.astype(dt.np)).astype(dt.np.newbyteorder("<"))
        doc["b64"] = base64.b64encode(native.tobytes()).decode("ascii")
    return doc


def table(rows: list[tuple[str, ...]]) -> None:
    """Print ``rows`` (the first is the header) as aligned columns."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
