"""The command line of a task process (`python -m services.worker`, `python -m services.ps`)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from services.config import load_cluster
from services.worker.main import HEARTBEAT_INTERVAL_S, serve
from tensorgrid.core import errors
from tensorgrid.master.cluster import ClusterState


def build_parser(default_job: str) -> argparse.ArgumentParser:
    """The flags of a task process whose job defaults to ``default_job``."""
    parser = argparse.ArgumentParser(
        prog=f"python -m services.{'ps' if default_job == 'ps' else 'worker'}",
        description=f"Serve one task (default job '{default_job}') of a tensorgrid cluster.")
    parser.add_argument("--cluster", default=os.environ.get("TENSORGRID_CLUSTER"),
                        help="cluster spec: JSON or a file path (default: $TENSORGRID_CLUSTER)")
    parser.add_argument("--job", default=default_job, help=f"job name (default: {default_job})")
    parser.add_argument("--task", type=int, default=0, help="task index in the job (default: 0)")
    parser.add_argument("--bind", default=os.environ.get("TENSORGRID_BIND"),
                        help="listen address (default: $TENSORGRID_BIND, else the task's address "
                             "in the cluster spec)")
    parser.add_argument("--master", default=os.environ.get("TENSORGRID_MASTER"),
                        help="gRPC address of a master to send heartbeats to")
    # argparse converts a string default with ``type``, so a bad variable is a usage error
    parser.add_argument("--heartbeat-interval", type=float,
                        default=os.environ.get("TENSORGRID_HEARTBEAT_INTERVAL_S")
                        or HEARTBEAT_INTERVAL_S,
                        help="seconds between heartbeats to the master (default: "
                             f"$TENSORGRID_HEARTBEAT_INTERVAL_S or {HEARTBEAT_INTERVAL_S:g})")
    parser.add_argument("--token", default=os.environ.get("TENSORGRID_TOKEN"),
                        help="bearer token (default: $TENSORGRID_TOKEN)")
    parser.add_argument("--grace", type=float, default=2.0,
                        help="seconds in-flight calls get when stopping")
    parser.add_argument("--log-level", default="info")
    return parser


def main(argv: list[str] | None = None, default_job: str = "worker") -> int:
    """Run a task until SIGTERM/SIGINT; returns the exit status."""
    args = build_parser(default_job).parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.cluster:
        print("error: --cluster (or TENSORGRID_CLUSTER) is required", file=sys.stderr)
        return 2
    try:
        spec = load_cluster(args.cluster)
        task = f"/job:{args.job}/task:{args.task}"
        bind = args.bind or ClusterState(spec).task(task).address

        def ready(port: int) -> None:
            print(f"tensorgrid task {task} serving on {bind} port {port}", flush=True)

        asyncio.run(serve(task, bind, spec, args.master, args.token or None, ready=ready,
                          grace=args.grace, heartbeat_interval=args.heartbeat_interval))
    except (ValueError, errors.OpError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
