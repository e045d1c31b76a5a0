"""The command line of a task process (``python -m services.worker``, ``python -m services.ps``).

Every flag overrides the matching ``TENSORGRID_*`` variable; the two build one ``TaskSettings``
at start-up, and ``run_task`` serves with it.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from services.flags import settings_from_flags
from services.worker.main import serve
from tensorgrid.core import errors
from tensorgrid.settings import HEARTBEAT_INTERVAL_S, TaskSettings


def run_task(settings: TaskSettings, log_level: str = "info") -> int:
    """Serve the task of ``settings`` until SIGTERM/SIGINT; returns the exit status (2: no
    cluster spec, 1: the task could not be served)."""
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not settings.cluster:
        print("error: --cluster (or TENSORGRID_CLUSTER) is required", file=sys.stderr)
        return 2
    try:
        bind = settings.bind_address()

        def ready(port: int) -> None:
            print(f"tensorgrid task {settings.task_name} serving on {bind} port {port}",
                  flush=True)

        asyncio.run(serve(settings, ready=ready))
    except (ValueError, errors.OpError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def task_settings(default_job: str = "worker", **flags: Any) -> TaskSettings:
    """``TaskSettings`` from the environment and the flags given (see ``settings_from_flags``);
    the job is ``default_job`` when neither a flag nor ``TENSORGRID_JOB`` names one."""
    settings = settings_from_flags(TaskSettings, **flags)
    if "job" not in settings.model_fields_set:
        settings = settings.model_copy(update={"job": default_job})
    return settings


def build_app(default_job: str) -> typer.Typer:
    """The command of a task process whose job defaults to ``default_job``."""
    app = typer.Typer(add_completion=False, rich_markup_mode=None)

    # the options' annotations are evaluated in the module's namespace (postponed annotations):
    # they must not refer to this function's locals
    @app.command(help=f"Serve one task (default job '{default_job}') of a tensorgrid cluster.")
    def task(
        cluster: Annotated[str | None, typer.Option(
            help="cluster spec: JSON or a file path (default: $TENSORGRID_CLUSTER)",
            show_default=False)] = None,
        job: Annotated[str | None, typer.Option(
            help="job name (default: $TENSORGRID_JOB, else this command's job: worker for "
                 "services.worker, ps for services.ps)",
            show_default=False)] = None,
        task: Annotated[int | None, typer.Option(
            min=0, help="task index in the job (default: $TENSORGRID_TASK or 0)",
            show_default=False)] = None,
        bind: Annotated[str | None, typer.Option(
            help="listen address (default: $TENSORGRID_BIND, else the task's address in the "
                 "cluster spec)", show_default=False)] = None,
        master: Annotated[str | None, typer.Option(
            help="gRPC address of a master to send heartbeats to (default: $TENSORGRID_MASTER)",
            show_default=False)] = None,
        heartbeat_interval: Annotated[float | None, typer.Option(
            help="seconds between heartbeats to the master (default: "
                 f"$TENSORGRID_HEARTBEAT_INTERVAL_S or {HEARTBEAT_INTERVAL_S:g})",
            show_default=False)] = None,
        token: Annotated[str | None, typer.Option(
            help="bearer token (default: $TENSORGRID_TOKEN)", show_default=False)] = None,
        grace: Annotated[float | None, typer.Option(
            help="seconds in-flight calls get when stopping (default: 2)",
            show_default=False)] = None,
        insecure: Annotated[bool | None, typer.Option(
            "--insecure", help="serve on a non-loopback address without a bearer token "
                               "(default: $TENSORGRID_INSECURE)", show_default=False)] = None,
        tls_cert: Annotated[Path | None, typer.Option(
            help="this task's TLS certificate (PEM; `tensorgrid certs` makes them; default: "
                 "$TENSORGRID_TLS_CERT)", show_default=False)] = None,
        tls_key: Annotated[Path | None, typer.Option(
            help="the certificate's key (default: $TENSORGRID_TLS_KEY)", show_default=False)
        ] = None,
        tls_ca: Annotated[Path | None, typer.Option(
            help="the cluster's CA: with the certificate and key, gRPC and the data plane speak "
                 "mutual TLS (default: $TENSORGRID_TLS_CA)", show_default=False)] = None,
        log_level: Annotated[str, typer.Option(help="debug, info, warning or error")] = "info",
    ) -> None:
        settings = task_settings(cluster=cluster, job=job, task=task, bind=bind, master=master,
                                 heartbeat_interval_s=heartbeat_interval, token=token,
                                 grace=grace, insecure=insecure, tls_cert=tls_cert,
                                 tls_key=tls_key, tls_ca=tls_ca, default_job=default_job)
        raise typer.Exit(run_task(settings, log_level))

    return app


def main(argv: list[str] | None = None, default_job: str = "worker") -> int:
    """Parse ``argv`` (default: the process's arguments) and serve; returns the exit status."""
    prog = f"python -m services.{'ps' if default_job == 'ps' else 'worker'}"
    try:
        build_app(default_job)(args=argv, prog_name=prog)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
