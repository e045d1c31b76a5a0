"""docker-compose.tls.yml, the optional TLS layer over docker-compose.yml, checked without a
Docker engine: it and the merged file are valid against the Compose Specification; every
tensorgrid service names its own certificate, key and the CA (Compose secrets) with
TENSORGRID_TLS_*; the certificates `make certs` makes exist under those names and name the
services' hosts; the healthchecks probe over TLS; the keys stay out of git and the image."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from test_compose import TENSORGRID_SERVICES, _argv, _parses
from typer.testing import CliRunner

from tensorgrid.cli import app

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "docker-compose.yml"
TLS = ROOT / "docker-compose.tls.yml"
TLS_DIR = ".tensorgrid-tls"
# the task each service serves: its certificate's name (``tensorgrid certs``)
CERT_OF = {"master": "master", "ps": "ps-0", "worker0": "worker-0", "worker1": "worker-1"}


def _load(path: Path) -> dict[str, Any]:
    yaml = pytest.importorskip("ruamel.yaml")
    return yaml.YAML(typ="safe", pure=True).load(path.read_text())  # type: ignore[no-any-return]


def _merge(base: Any, over: Any, path: tuple[str, ...] = ()) -> Any:
    """Compose's merge of an override file: mappings merge key by key, a healthcheck's test and
    a command are replaced, secrets are merged by name, other sequences appended."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base[k], v, (*path, k)) if k in base else v
        return out
    if isinstance(base, list) and isinstance(over, list):
        if path[-1:] in (("test",), ("command",)):
            return over
        return base + [v for v in over if v not in base]
    return over


@pytest.fixture(scope="module")
def merged() -> dict[str, Any]:
    return _merge(_load(BASE), _load(TLS))  # type: ignore[no-any-return]


def _check_schema(path: Path) -> None:
    checker = Path(sys.executable).with_name("check-jsonschema")
    if not checker.exists():
        pytest.skip("check-jsonschema is not installed in this environment")
    env = {**os.environ, "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
           "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}
    result = subprocess.run([str(checker), "--builtin-schema", "vendor.compose-spec", str(path)],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_tls_file_and_the_merged_file_match_the_compose_spec(
        merged: dict[str, Any], tmp_path: Path) -> None:
    _check_schema(TLS)
    out = tmp_path / "merged.json"  # JSON is YAML: the checker reads it as a compose file
    out.write_text(json.dumps(merged))
    _check_schema(out)
    assert set(merged["services"]) == set(_load(BASE)["services"])  # no service added


def test_each_service_names_its_own_certificate_key_and_the_ca(merged: dict[str, Any]) -> None:
    secrets = merged["secrets"]
    for name in TENSORGRID_SERVICES:
        svc = merged["services"][name]
        env = svc["environment"]
        want = {"TENSORGRID_TLS_CA": ("tls-ca", "ca.pem"),
                "TENSORGRID_TLS_CERT": (f"{CERT_OF[name]}-cert", f"{CERT_OF[name]}.pem"),
                "TENSORGRID_TLS_KEY": (f"{CERT_OF[name]}-key", f"{CERT_OF[name]}.key")}
        for var, (secret, file) in want.items():
            assert env[var] == f"/run/secrets/{secret}", (name, var)
            assert secret in svc["secrets"], (name, secret)
            assert secrets[secret] == {"file": f"./{TLS_DIR}/{file}"}, secret
        assert len(svc["secrets"]) == 3, name  # no other service's key
        # the base file's settings are kept: the token file, the cluster, the binds
        env_file = svc["env_file"]
        assert ".tensorgrid.env" in ([env_file] if isinstance(env_file, str) else env_file)
        assert "TENSORGRID_CLUSTER" in env and "TENSORGRID_INSECURE" not in env
        # bind-mounted secrets keep the host's owner and mode: run as the keys' owner
        assert svc["user"] == "${TENSORGRID_UID:-1000}:${TENSORGRID_GID:-1000}", name


def test_make_certs_makes_every_file_with_the_services_hosts(
        merged: dict[str, Any], tmp_path: Path) -> None:
    makefile = (ROOT / "Makefile").read_text()
    spec_text = re.search(r"^COMPOSE_CLUSTER := (.*)$", makefile, re.M).group(1)  # type: ignore[union-attr]
    spec = json.loads(merged["services"]["master"]["environment"]["TENSORGRID_CLUSTER"])
    assert json.loads(spec_text) == spec  # the same cluster as the compose file
    assert f"TLS_DIR := {TLS_DIR}" in makefile
    recipe = "tensorgrid certs --out $(TLS_DIR) --cluster '$(COMPOSE_CLUSTER)' --master-host master"
    assert recipe in makefile
    assert "-f docker-compose.yml -f docker-compose.tls.yml up" in makefile
    out = tmp_path / TLS_DIR
    result = CliRunner().invoke(app, ["certs", "--out", str(out), "--cluster", spec_text,
                                      "--master-host", "master"])
    assert result.exit_code == 0, result.output
    for secret in merged["secrets"].values():
        assert (tmp_path / secret["file"]).is_file(), secret
    for name in TENSORGRID_SERVICES:
        cert = x509.load_pem_x509_certificate((out / f"{CERT_OF[name]}.pem").read_bytes())
        names = cert.extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
        assert name in names, (name, names)  # peers reach it by its service name
        assert "localhost" in names  # its healthcheck probes it on loopback


def test_healthchecks_probe_over_tls(merged: dict[str, Any]) -> None:
    master = _argv(merged["services"]["master"]["healthcheck"]["test"])
    assert master[2].startswith("https://127.0.0.1:8000/") and "--tls-ca" in master
    _parses(master)
    for name in TENSORGRID_SERVICES[1:]:
        check = _argv(merged["services"][name]["healthcheck"]["test"])
        _parses(check)
        assert check[2] == "127.0.0.1:2222", name
        flags = dict(zip(check[3::2], check[4::2]))
        env = merged["services"][name]["environment"]
        assert flags == {"--tls-ca": env["TENSORGRID_TLS_CA"],
                         "--tls-cert": env["TENSORGRID_TLS_CERT"],
                         "--tls-key": env["TENSORGRID_TLS_KEY"]}, name
        assert merged["services"][name]["healthcheck"]["interval"] == "5s"  # the base's


def test_the_keys_stay_out_of_git_and_the_image() -> None:
    assert f"{TLS_DIR}/" in (ROOT / ".gitignore").read_text().split()
    assert TLS_DIR in (ROOT / ".dockerignore").read_text().split()
