"""``python -m services.master``: serve the HTTP master with uvicorn.

Settings come from ``TENSORGRID_*`` variables (see ``settings.py``); the flags override them:
``python -m services.master --cluster cluster.json --host 127.0.0.1 --port 8080``.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

import uvicorn
from pydantic import ValidationError

from services.master.main import create_app
from services.master.settings import Settings


def main(argv: list[str] | None = None) -> None:
    """Parse the flags, build the app and serve it until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m services.master",
                                     description="The tensorgrid HTTP master.")
    parser.add_argument("--cluster", help="cluster spec: JSON or a file path "
                                          "(default: $TENSORGRID_CLUSTER)")
    parser.add_argument("--host", help="listen address (default: $TENSORGRID_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, help="listen port (default: $TENSORGRID_PORT or 8080)")
    parser.add_argument("--grpc-port", type=int,
                        help="port of the MasterService over gRPC, where tasks send heartbeats "
                             "(default: $TENSORGRID_GRPC_PORT, else none)")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {k: v for k, v in
                                 (("cluster", args.cluster), ("host", args.host),
                                  ("port", args.port), ("grpc_port", args.grpc_port))
                                 if v is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        parser.error(f"invalid settings (TENSORGRID_* variables or flags):\n{exc}")
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port,
                log_level=args.log_level)


if __name__ == "__main__":
    main()
