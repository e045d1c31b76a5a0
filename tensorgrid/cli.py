"""The ``tensorgrid`` command line.

* ``tensorgrid local``: a self-healing cluster on this machine (Redis, master, ps, workers).
* ``tensorgrid master | worker | ps``: one process of a cluster (the services' entry points).
* ``tensorgrid submit GRAPH.json``: run a graph once on a master (``POST /v1/run``).
* ``tensorgrid status``: the master's view of its cluster (``GET /v1/cluster``).
* ``tensorgrid trace SESSION``: trace steps of a session and write a Chrome trace (Perfetto).
* ``tensorgrid health TARGET``: a healthcheck (a task's gRPC health, the master's ``/healthz``).
* ``tensorgrid checkpoints ls | show | rm``: checkpoint files and what Redis tracks of them.

Each command builds the settings of what it runs (``tensorgrid.settings``) from its flags and the
``TENSORGRID_*`` variables, once, and passes them down. A healthcheck runs ``tensorgrid health``
every few seconds in each container, so what only other commands need (the services, the local
cluster, pydantic-settings, httpx) loads in those commands.
"""

from __future__ import annotations

import importlib
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tensorgrid import cli_http
from tensorgrid.cli_http import fail as _fail
from tensorgrid.core import errors

if TYPE_CHECKING:
    from tensorgrid.settings import ClientSettings

app = typer.Typer(name="tensorgrid", no_args_is_help=True, add_completion=False,
                  rich_markup_mode=None,
                  help="tensorgrid: a distributed dataflow runtime with a TensorFlow 1.x-style "
                       "API. Run a local cluster, its services, graphs, and checkpoints.")
checkpoints_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                              help="List, show and remove the checkpoints kept in Redis.")
app.add_typer(checkpoints_app, name="checkpoints")

MasterOpt = Annotated[str | None, typer.Option(
    "--master", "-m", show_default=False,
    help="the master's HTTP URL (default: $TENSORGRID_MASTER_URL, else http://127.0.0.1:8000)")]
TokenOpt = Annotated[str | None, typer.Option("--token", show_default=False,
                                              help="bearer token of the master (default: "
                                                   "$TENSORGRID_TOKEN)")]
LogLevelOpt = Annotated[str, typer.Option("--log-level", help="debug, info, warning or error")]


def client_settings(**flags: Any) -> ClientSettings:
    """``ClientSettings`` from the environment and the flags given (see ``settings_from_flags``)."""
    from services.flags import settings_from_flags  # lazy: pydantic-settings, not for healthchecks
    from tensorgrid.settings import ClientSettings  # lazy: as above

    return settings_from_flags(ClientSettings, **flags)


def _verify(settings: ClientSettings) -> Any:
    """How the command verifies an ``https`` master: the cluster's CA (``TENSORGRID_TLS_CA``)
    and the client certificate when one is set, else the system's CAs."""
    try:
        return settings.http_verify()
    except ValueError as exc:
        raise _fail(str(exc), 2) from None


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


# ------------------------------------------------------------------------ local
@app.command()
def local(
    workers: Annotated[int, typer.Option("--workers", "-w", min=1, help="worker tasks")] = 2,
    ps: Annotated[int, typer.Option("--ps", min=0, help="parameter-server tasks")] = 1,
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535,
                                      help="the master's HTTP port (0: any free port)")] = 8000,
    host: Annotated[str, typer.Option(help="the master's listen address")] = "127.0.0.1",
    state_dir: Annotated[Path | None, typer.Option(
        help="Redis data, logs and lock (default: $TENSORGRID_HOME/local)",
        show_default=False)] = None,
    redis_url: Annotated[str | None, typer.Option(
        show_default=False, help="a Redis to use instead of starting one of the cluster's own "
                                 "(default: $REDIS_URL, else one of its own)")] = None,
    heartbeat_interval: Annotated[float, typer.Option(min=0.01, help="seconds")] = 0.5,
    heartbeat_timeout: Annotated[float, typer.Option(min=0.05, help="seconds")] = 3.0,
    restart: Annotated[bool, typer.Option("--restart/--no-restart",
                                          help="restart processes that die")] = True,
    start_timeout: Annotated[float, typer.Option(help="seconds to wait for health")] = 60.0,
    tls: Annotated[bool, typer.Option(
        "--tls", help="TLS on every port: HTTPS for the master, mutual TLS for gRPC and the data "
                      "plane, with certificates made in STATE_DIR/tls")] = False,
    log_level: LogLevelOpt = "info",
) -> None:
    """Run a local cluster until Ctrl-C or SIGTERM: Redis, the master, ps and worker tasks as
    separate processes on 127.0.0.1, restarted when they die. Prints the master's URL."""
    from tensorgrid.cluster.local import LocalCluster  # lazy: not for healthchecks

    _setup_logging(log_level)
    settings = client_settings(redis_url=redis_url)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    cluster = LocalCluster(workers=workers, ps=ps, port=port, host=host,
                           redis_url=settings.redis_url, heartbeat_interval=heartbeat_interval,
                           heartbeat_timeout=heartbeat_timeout, restart=restart,
                           state_dir=state_dir, start_timeout=start_timeout, log_level=log_level,
                           settings=settings, tls=tls)
    try:
        try:
            cluster.start()
        except errors.OpError as exc:
            raise _fail(str(exc)) from None
        _print_local(cluster)
        while not stop.wait(0.5):
            pass
        typer.echo("stopping the local cluster ...", err=True)
    finally:
        cluster.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    typer.echo("local cluster stopped", err=True)


def _print_local(cluster: Any) -> None:
    typer.echo(f"tensorgrid local cluster: master {cluster.url}")
    typer.echo(f"  master gRPC  {cluster.grpc_target}")
    typer.echo(f"  redis        {cluster.redis_url}")
    for p in cluster.processes():
        if p.role in ("ps", "worker"):
            typer.echo(f"  {p.name:<12} {p.address:<22} pid {p.pid}")
    typer.echo(f"  logs         {cluster.log_dir}")
    typer.echo(f"  token        {cluster.settings.token_path} (`tensorgrid token` prints it)")
    if cluster.tls:
        d = cluster.tls_dir
        typer.echo(f"  tls          {d}: clients set TENSORGRID_TLS_CA={d / 'ca.pem'} (and "
                   f"TENSORGRID_TLS_CERT={d / 'client.pem'} TENSORGRID_TLS_KEY={d / 'client.key'} "
                   "for gRPC)")
    typer.echo(f"Use tf.Session({cluster.url!r}); Ctrl-C stops the cluster.", err=True)
    sys.stdout.flush()


@app.command()
def token(
    env_file: Annotated[Path | None, typer.Option(
        "--env-file", show_default=False,
        help="also write TENSORGRID_TOKEN=<token> to this file (mode 0600), for docker compose's "
             "env_file")] = None,
) -> None:
    """Print the cluster's bearer token: $TENSORGRID_TOKEN, else the token file
    ($TENSORGRID_TOKEN_FILE, else $TENSORGRID_HOME/token), made (random, mode 0600) when there
    is none. `tensorgrid local` uses the same one."""
    import os  # lazy: only this command writes files

    from tensorgrid.settings import ensure_token  # lazy: pydantic-settings

    settings = client_settings()
    try:
        value = settings.token_value or ensure_token(settings.token_path)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    if env_file is not None:
        fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"TENSORGRID_TOKEN={value}\n")
    typer.echo(value)


@app.command()
def certs(
    out: Annotated[Path, typer.Option("--out", help="directory for the CA, certificates and "
                                                    "keys (made 0700; keys 0600)")],
    cluster: Annotated[str | None, typer.Option(
        help="cluster spec: JSON or a file path (default: $TENSORGRID_CLUSTER)",
        show_default=False)] = None,
    master_host: Annotated[list[str] | None, typer.Option(
        "--master-host", help="a host name or address of the master (repeatable)")] = None,
) -> None:
    """Make a CA and a certificate for the master, each task and the clients (mutual TLS):
    point TENSORGRID_TLS_CERT, TENSORGRID_TLS_KEY and TENSORGRID_TLS_CA at a process's files."""
    from services.flags import settings_from_flags  # lazy: pydantic-settings
    from tensorgrid.settings import TaskSettings  # lazy: as above
    from tensorgrid.transport.certs import make_certs  # lazy: cryptography

    try:
        spec = settings_from_flags(TaskSettings, cluster=cluster).cluster_spec()
    except ValueError as exc:
        raise _fail(str(exc), 2) from None
    made = make_certs(spec, out, master_host or ())
    for name, files in made.items():
        typer.echo(f"{name:<12} {files.cert}  {files.key}")
    typer.echo(f"{'ca':<12} {out / 'ca.pem'}")


# ------------------------------------------------------------------------ services
ClusterOpt = Annotated[str | None, typer.Option(
    help="cluster spec: JSON or a file path (default: $TENSORGRID_CLUSTER)", show_default=False)]
InsecureOpt = Annotated[bool | None, typer.Option(
    "--insecure", show_default=False,
    help="serve on a non-loopback address without a bearer token; anyone who reaches the port "
         "may use it (default: $TENSORGRID_INSECURE)")]


@app.command()
def master(
    cluster: ClusterOpt = None,
    host: Annotated[str | None, typer.Option(
        help="listen address (default: $TENSORGRID_HOST or 127.0.0.1)", show_default=False)] = None,
    port: Annotated[int | None, typer.Option(
        help="HTTP port (default: $TENSORGRID_PORT or 8080)", show_default=False)] = None,
    grpc_port: Annotated[int | None, typer.Option(
        help="port of the gRPC MasterService for heartbeats (default: $TENSORGRID_GRPC_PORT)",
        show_default=False)] = None,
    insecure: InsecureOpt = None,
    tls_cert: cli_http.TlsCertOpt = None,
    tls_key: cli_http.TlsKeyOpt = None,
    tls_ca: cli_http.TlsCaOpt = None,
    tls_http_client_certs: cli_http.TlsClientCertsOpt = None,
    log_level: LogLevelOpt = "info",
) -> None:
    """Serve the HTTP master (python -m services.master); settings from TENSORGRID_*."""
    from services.master.cli import master_settings, run_master  # lazy: FastAPI, uvicorn

    settings = master_settings(cluster=cluster, host=host, port=port, grpc_port=grpc_port,
                               insecure=insecure, tls_cert=tls_cert, tls_key=tls_key,
                               tls_ca=tls_ca, tls_http_client_certs=tls_http_client_certs)
    run_master(settings, log_level)


def _task(default_job: str, log_level: str, **flags: Any) -> None:
    from services.worker.cli import run_task, task_settings  # lazy: a task's servers

    raise typer.Exit(run_task(task_settings(default_job, **flags), log_level))


TaskOpt = Annotated[int | None, typer.Option(
    "--task", "-t", min=0, help="task index in the job (default: $TENSORGRID_TASK or 0)",
    show_default=False)]
BindOpt = Annotated[str | None, typer.Option(
    help="listen address host:port (default: $TENSORGRID_BIND, else the spec's address)",
    show_default=False)]
MasterGrpcOpt = Annotated[str | None, typer.Option(
    "--master", help="gRPC address of the master for heartbeats (default: $TENSORGRID_MASTER)",
    show_default=False)]
IntervalOpt = Annotated[float | None, typer.Option(
    help="seconds between heartbeats (default: $TENSORGRID_HEARTBEAT_INTERVAL_S or 0.5)",
    show_default=False)]
GraceOpt = Annotated[float | None, typer.Option(help="seconds in-flight calls get when stopping",
                                                show_default=False)]


@app.command()
def worker(cluster: ClusterOpt = None, task: TaskOpt = None,
           job: Annotated[str | None, typer.Option(
               help="job name (default: $TENSORGRID_JOB or worker)", show_default=False)] = None,
           bind: BindOpt = None, master_address: MasterGrpcOpt = None,
           heartbeat_interval: IntervalOpt = None, grace: GraceOpt = None,
           insecure: InsecureOpt = None, tls_cert: cli_http.TlsCertOpt = None,
           tls_key: cli_http.TlsKeyOpt = None, tls_ca: cli_http.TlsCaOpt = None,
           log_level: LogLevelOpt = "info") -> None:
    """Serve one worker task (python -m services.worker) until SIGTERM or Ctrl-C."""
    _task("worker", log_level, cluster=cluster, job=job, task=task, bind=bind,
          master=master_address, heartbeat_interval_s=heartbeat_interval, grace=grace,
          insecure=insecure, tls_cert=tls_cert, tls_key=tls_key, tls_ca=tls_ca)


@app.command()
def ps(cluster: ClusterOpt = None, task: TaskOpt = None, bind: BindOpt = None,
       master_address: MasterGrpcOpt = None, heartbeat_interval: IntervalOpt = None,
       grace: GraceOpt = None, insecure: InsecureOpt = None,
       tls_cert: cli_http.TlsCertOpt = None, tls_key: cli_http.TlsKeyOpt = None,
       tls_ca: cli_http.TlsCaOpt = None, log_level: LogLevelOpt = "info") -> None:
    """Serve one parameter-server task (python -m services.ps) until SIGTERM or Ctrl-C."""
    _task("ps", log_level, cluster=cluster, job="ps", task=task, bind=bind,
          master=master_address, heartbeat_interval_s=heartbeat_interval, grace=grace,
          insecure=insecure, tls_cert=tls_cert, tls_key=tls_key, tls_ca=tls_ca)


@app.command()
def health(
    target: Annotated[str, typer.Argument(
        help="a task's HOST:PORT (gRPC health), or the master's http://HOST:PORT[/healthz]")],
    service: Annotated[str, typer.Option(help="gRPC service to ask about ('' = the server)")] = "",
    timeout: Annotated[float, typer.Option(help="seconds")] = 3.0,
    tls_ca: cli_http.TlsCaOpt = None,
    tls_cert: cli_http.TlsCertOpt = None,
    tls_key: cli_http.TlsKeyOpt = None,
) -> None:
    """Exit 0 when TARGET is healthy (SERVING, or HTTP 200), else 1: for healthchecks."""
    status = cli_http.health_status(target, service, timeout, tls_ca, tls_cert, tls_key)
    typer.echo(status)
    raise typer.Exit(0 if status == "SERVING" else 1)


@app.command()
def submit(
    graph: Annotated[Path, typer.Argument(help="a GraphDef in JSON form ('-': stdin)")],
    fetch: Annotated[list[str] | None, typer.Option(
        "--fetch", "-f", help="tensor to fetch, e.g. y:0 (repeatable)")] = None,
    feed: Annotated[list[str] | None, typer.Option(
        "--feed", help="NAME=@file.npy | NAME=@file.json | NAME=JSON (repeatable)")] = None,
    target: Annotated[list[str] | None, typer.Option(
        "--target", "-t", help="op to run without fetching (repeatable)")] = None,
    master_url: MasterOpt = None,
    token: TokenOpt = None,
    timeout: Annotated[float, typer.Option(help="seconds the step may take")] = 300.0,
) -> None:
    """Run a graph once on the master (POST /v1/run) and print the fetched tensors as JSON."""
    settings = client_settings(master_url=master_url, token=token)
    try:
        text = sys.stdin.read() if str(graph) == "-" else graph.read_text()
        graph_doc = json.loads(text)
    except (OSError, ValueError) as exc:
        raise _fail(f"cannot read the graph {graph}: {exc}") from None
    placeholders = cli_http.placeholder_dtypes(graph_doc)
    feeds: dict[str, Any] = {}
    for item in feed or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise _fail(f"--feed {item!r}: expected NAME=VALUE")
        feeds[name] = cli_http.feed_tensor(name, value, placeholders)
    if not fetch and not target:
        raise _fail("nothing to run: give --fetch or --target", 2)
    body = {"graph": graph_doc, "feeds": feeds, "fetches": list(fetch or []),
            "targets": list(target or []), "timeout_ms": int(timeout * 1000)}
    doc = cli_http.request("POST", f"{settings.master_url.rstrip('/')}/v1/run",
                           settings.token_value, timeout + 30.0, body, _verify(settings),
                           settings.client_id)
    typer.echo(json.dumps(doc.get("results", {}), indent=2))


@app.command()
def status(master_url: MasterOpt = None, token: TokenOpt = None,
           as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False,
           timeout: Annotated[float, typer.Option(help="seconds")] = 10.0) -> None:
    """Show the master and its tasks (GET /v1/cluster) as a table, then what each task counted
    (GET /metrics/tasks: steps, mean step time, kernels run, bytes received, tensors sent)."""
    from tensorgrid.cluster import observe  # lazy: httpx, protobuf, not for healthchecks

    settings = client_settings(master_url=master_url, token=token)
    master_url = settings.master_url
    verify = _verify(settings)
    doc = cli_http.request("GET", f"{master_url.rstrip('/')}/v1/cluster", settings.token_value,
                           timeout, verify=verify)
    metrics, why = observe.task_metrics(master_url, settings.token_value, timeout, verify)
    if as_json:
        typer.echo(json.dumps({**doc, "task_metrics": metrics}, indent=2))
        return
    m = doc.get("master", {})
    typer.echo(f"master {master_url}  incarnation {m.get('incarnation')}  uptime "
               f"{m.get('uptime_s')}s  sessions {m.get('sessions')}  steps {m.get('steps')} "
               f"(failed {m.get('failed_steps')})")
    rows: list[tuple[str, ...]] = [
        ("TASK", "ADDRESS", "STATE", "INCARNATION", "HEARTBEAT", "RESTARTS")]
    for t in doc.get("tasks", []):
        age = t.get("heartbeat_age_s")
        rows.append((str(t.get("task")), str(t.get("address")), str(t.get("state")),
                     str(t.get("incarnation") or "-"), "-" if age is None else f"{age:.1f}s ago",
                     str(t.get("restarts", 0))))
    cli_http.table(rows)
    if metrics is None:
        typer.echo(f"task metrics: unavailable ({why})")
        return
    typer.echo("")
    cli_http.table(observe.metrics_rows(metrics))


@app.command()
def trace(
    session: Annotated[str, typer.Argument(help="the session's handle (the dashboard lists them)")],
    fetch: Annotated[list[str] | None, typer.Option(
        "--fetch", "-f", help="tensor to fetch, e.g. loss:0 (repeatable)")] = None,
    target: Annotated[list[str] | None, typer.Option(
        "--target", "-t", help="op to run without fetching, e.g. train (repeatable)")] = None,
    feed: Annotated[list[str] | None, typer.Option(
        "--feed", help="NAME=@file.npy | NAME=@file.json | NAME=JSON (repeatable)")] = None,
    steps: Annotated[int, typer.Option("--steps", "-n", min=1, help="steps to record")] = 1,
    out: Annotated[Path, typer.Option("--out", "-o", help="the Chrome trace to write")] = Path(
        "trace.json"),
    show_memory: Annotated[bool, typer.Option(
        "--memory/--no-memory", help="a counter of the bytes each device holds")] = False,
    master_url: MasterOpt = None,
    token: TokenOpt = None,
    timeout: Annotated[float, typer.Option(help="seconds each step may take")] = 300.0,
) -> None:
    """Run N traced steps of a session (POST /v1/sessions/ID/run, trace_level FULL_TRACE) and
    write their timeline as a Chrome trace: open it in chrome://tracing or ui.perfetto.dev."""
    from tensorgrid.client.timeline import Timeline  # lazy: protobuf, not for healthchecks
    from tensorgrid.cluster import observe  # lazy: as above

    settings = client_settings(master_url=master_url, token=token)
    if not fetch and not target:
        raise _fail("nothing to run: give --fetch or --target", 2)
    feeds: dict[str, Any] = {}
    for item in feed or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise _fail(f"--feed {item!r}: expected NAME=VALUE")
        feeds[name] = cli_http.feed_tensor(name, value, {})
    body = {"feeds": feeds, "fetches": list(fetch or []), "targets": list(target or []),
            "timeout_ms": int(timeout * 1000)}

    def said(i: int, step_id: Any, stats: Any) -> None:
        nodes = sum(len(d.node_stats) for d in stats.dev_stats)
        typer.echo(f"step {i + 1}/{steps} (id {step_id}): {nodes} nodes on "
                   f"{len(stats.dev_stats)} devices")

    try:
        merged = observe.trace_steps(settings.master_url, settings.token_value, session, body,
                                     steps, timeout + 30.0, said, _verify(settings))
        out.write_text(Timeline(merged).generate_chrome_trace_format(show_memory=show_memory))
    except (RuntimeError, OSError) as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"wrote {out}: open it in chrome://tracing or https://ui.perfetto.dev")


# ------------------------------------------------------------------------ checkpoints
def _checkpoint_commands() -> Any:
    """``tensorgrid.checkpoint.cli``, imported when a checkpoint command runs (it imports the
    checkpoint store; ``--help`` should not)."""
    try:
        return importlib.import_module("tensorgrid.checkpoint.cli")
    except ModuleNotFoundError as exc:
        if exc.name != "tensorgrid.checkpoint.cli":
            raise
        raise _fail("this tensorgrid has no checkpoint store (tensorgrid.checkpoint.cli)") from None


def _run_checkpoint(fn_name: str, formatter: str | None, as_json: bool, *args: Any,
                    **kwargs: Any) -> None:
    """Call a function of ``tensorgrid.checkpoint.cli``; print its answer as text (through its
    ``formatter``) or JSON. Store errors (Redis down, no such checkpoint) exit 1."""
    module = _checkpoint_commands()
    try:
        if "url" in kwargs and not kwargs["url"]:  # the settings' Redis, else the embedded one
            from tensorgrid.checkpoint.redis_server import redis_url  # lazy: as the module above

            settings = client_settings()
            kwargs["url"] = redis_url(settings.redis_url, settings.home_dir)
        result = getattr(module, fn_name)(*args, **kwargs)
    except errors.OpError as exc:
        raise _fail(str(exc)) from None
    format_fn = getattr(module, formatter, None) if formatter and not as_json else None
    if format_fn is not None:
        typer.echo(format_fn(result))
    else:
        typer.echo(json.dumps(result, indent=2, default=str))


DirArg = Annotated[str, typer.Argument(help="checkpoint directory, e.g. runs/mnist")]
NameArg = Annotated[str, typer.Argument(help="checkpoint name, e.g. model.ckpt-1200")]
RedisOpt = Annotated[str | None, typer.Option(
    "--redis-url", show_default=False,
    help="the Redis of the checkpoints (default: $REDIS_URL, else the embedded server)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]


@checkpoints_app.command("ls")
def checkpoints_ls(directory: Annotated[str | None, typer.Argument(
        help="checkpoint directory (default: list the directories)", show_default=False)] = None,
                   redis_url: RedisOpt = None, as_json: JsonOpt = False) -> None:
    """List the checkpoint directories, or the checkpoints of one (* marks the latest)."""
    _run_checkpoint("list_checkpoints", "format_checkpoints", as_json, directory, url=redis_url)


@checkpoints_app.command("show")
def checkpoints_show(directory: DirArg, name: NameArg,
                     verify: Annotated[bool, typer.Option(
                         "--verify", help="read every tensor and check its CRC-32C")] = False,
                     redis_url: RedisOpt = None, as_json: JsonOpt = False) -> None:
    """Show a checkpoint: step, time, status, and each tensor's dtype, shape and checksum."""
    _run_checkpoint("show_checkpoint", "format_checkpoint", as_json, directory, name,
                    verify=verify, url=redis_url)


@checkpoints_app.command("rm")
def checkpoints_rm(directory: DirArg, name: NameArg, redis_url: RedisOpt = None) -> None:
    """Remove a checkpoint (its files and what Redis tracks); latest moves to the newest left."""
    _run_checkpoint("remove_checkpoint", None, True, directory, name, url=redis_url)


def main() -> None:
    """The ``tensorgrid`` console script."""
    app(prog_name="tensorgrid")


if __name__ == "__main__":
    main()
