"""The command line of the HTTP master (``python -m services.master``), served with uvicorn.

Settings come from ``TENSORGRID_*`` variables (``tensorgrid.settings.MasterSettings``); the flags
override them: ``python -m services.master --cluster cluster.json --host 127.0.0.1 --port 8080``.
"""

from __future__ import annotations

import logging
import ssl
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import uvicorn

from services.flags import settings_from_flags
from services.master.main import create_app
from tensorgrid.settings import MasterSettings


def master_settings(**flags: Any) -> MasterSettings:
    """``MasterSettings`` from the environment and the flags given (see ``settings_from_flags``)."""
    return settings_from_flags(MasterSettings, **flags)


def tls_options(settings: MasterSettings) -> dict[str, Any]:
    """uvicorn's TLS options from the master's TLS files (none: plain HTTP): the master proves
    itself with its certificate; with ``tls_http_client_certs`` every client must present a
    certificate of the cluster's CA (mutual TLS), else clients need only the CA.

    Raises:
        ValueError: only some of the TLS files are set.
    """
    tls = settings.tls_files()
    if tls is None:
        return {}
    return {"ssl_certfile": str(tls.cert), "ssl_keyfile": str(tls.key),
            "ssl_ca_certs": str(tls.ca),
            "ssl_cert_reqs": ssl.CERT_REQUIRED if settings.tls_http_client_certs
            else ssl.CERT_NONE}


def run_master(settings: MasterSettings, log_level: str = "info") -> None:
    """Build the app over ``settings`` and serve it (HTTPS when TLS files are set) until
    SIGINT/SIGTERM."""
    logging.basicConfig(level=log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings.check_listen(settings.host, "the master")
        tls = tls_options(settings)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port,
                log_level=log_level, **tls)


TlsCertOpt = Annotated[Path | None, typer.Option(
    help="the master's TLS certificate (PEM); with --tls-key and --tls-ca the HTTP API and the "
         "gRPC port speak TLS (default: $TENSORGRID_TLS_CERT)", show_default=False)]
TlsKeyOpt = Annotated[Path | None, typer.Option(
    help="the certificate's key (default: $TENSORGRID_TLS_KEY)", show_default=False)]
TlsCaOpt = Annotated[Path | None, typer.Option(
    help="the cluster's CA (default: $TENSORGRID_TLS_CA)", show_default=False)]
TlsClientCertsOpt = Annotated[bool | None, typer.Option(
    "--tls-http-client-certs", show_default=False,
    help="HTTP clients must present a certificate of the CA too (mutual TLS; default: "
         "$TENSORGRID_TLS_HTTP_CLIENT_CERTS)")]


app = typer.Typer(add_completion=False, rich_markup_mode=None)


@app.command(help="The tensorgrid HTTP master.")
def master(
    cluster: Annotated[str | None, typer.Option(
        help="cluster spec: JSON or a file path (default: $TENSORGRID_CLUSTER)",
        show_default=False)] = None,
    host: Annotated[str | None, typer.Option(
        help="listen address (default: $TENSORGRID_HOST or 127.0.0.1)", show_default=False)] = None,
    port: Annotated[int | None, typer.Option(
        help="listen port (default: $TENSORGRID_PORT or 8080)", show_default=False)] = None,
    grpc_port: Annotated[int | None, typer.Option(
        help="port of the MasterService over gRPC, where tasks send heartbeats "
             "(default: $TENSORGRID_GRPC_PORT, else none)", show_default=False)] = None,
    insecure: Annotated[bool | None, typer.Option(
        "--insecure", help="serve on a non-loopback address without a bearer token "
                           "(default: $TENSORGRID_INSECURE)", show_default=False)] = None,
    tls_cert: TlsCertOpt = None,
    tls_key: TlsKeyOpt = None,
    tls_ca: TlsCaOpt = None,
    tls_http_client_certs: TlsClientCertsOpt = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error")] = "info",
) -> None:
    run_master(master_settings(cluster=cluster, host=host, port=port, grpc_port=grpc_port,
                               insecure=insecure, tls_cert=tls_cert, tls_key=tls_key,
                               tls_ca=tls_ca, tls_http_client_certs=tls_http_client_certs),
               log_level)


def main(argv: list[str] | None = None) -> None:
    """Parse ``argv`` (default: the process's arguments), build the app and serve it."""
    app(args=argv, prog_name="python -m services.master")
