"""The core (core, ops, kernels, autodiff, compiler, runtime) never imports a network library: the
services are thin shells around it, and it runs where none of them is installed."""

from __future__ import annotations

import json
import subprocess
import sys

CORE = ("core", "ops", "kernels", "autodiff", "compiler", "runtime")
NETWORK = ("grpc", "fastapi", "redis", "httpx", "uvicorn", "starlette", "aiohttp", "requests")

_PROBE = """
import importlib, json, pkgutil, sys
loaded = []
for pkg in %r:
    mod = importlib.import_module("tensorgrid." + pkg)
    loaded.append(mod.__name__)
    for info in pkgutil.walk_packages(mod.__path__, mod.__name__ + "."):
        if info.name.rsplit(".", 1)[-1] == "gpu":
            continue  # the cupy kernels load only where cupy imports
        importlib.import_module(info.name)
        loaded.append(info.name)
bad = sorted({m.split(".")[0] for m in sys.modules} & set(%r))
print(json.dumps({"loaded": loaded, "network": bad}))
"""


def test_core_imports_no_network_library() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE % (CORE, NETWORK)], capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["network"] == [], f"the core imported {result['network']}"
    for pkg in CORE:
        assert f"tensorgrid.{pkg}" in result["loaded"]
    assert "tensorgrid.runtime.executor" in result["loaded"]
    assert "tensorgrid.compiler.plan" in result["loaded"]
