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
        for status in {s for s in statuses if not s.startswith("2")}:
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


# Bodies that carry a graph or feeds are programs and data: a body valid by the schema may still
# be a graph the master refuses (a cycle, a dangling input, an attr of the wrong type, an unknown
# op) or a feed that does not fit its tensor. The schema cannot say that, so for these routes a
# schema-valid body may get the 4xx that names the node; everything else must be accepted.
_PROGRAM_ROUTES = ("POST /v1/graphs", "POST /v1/sessions", "POST /v1/run",
                   "POST /v1/sessions/{session_id}/extend", "POST /v1/sessions/{session_id}/run")
_PROGRAM_ACCEPTED = ["2xx", "400", "401", "404", "409", "412", "413"]
MAX_EXAMPLES = 10  # per operation and phase: about a thousand requests in all
SEED = 20261123


def _config(token: str) -> Any:
    from schemathesis.config import SchemathesisConfig

    config = SchemathesisConfig.from_dict({
        "seed": SEED,
        "headers": {"Authorization": f"Bearer {token}"},
        "request-timeout": 30,
        "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True},
        "operations": [
            {"include-name": name, "checks": {
                "positive_data_acceptance": {"expected-statuses": _PROGRAM_ACCEPTED}}}
            for name in _PROGRAM_ROUTES],
    })
    config.projects.override.checks.update(included_check_names=["all"])  # --checks all
    return config


def test_schemathesis_finds_no_failure(secured) -> None:
    schemathesis = pytest.importorskip("schemathesis")
    from schemathesis.engine import Status, StopReason, events, from_schema

    schema = schemathesis.openapi.from_url(f"{secured.url}/openapi.json",
                                           config=_config(TOKEN))
    failures: dict[tuple[str, str, int | None], str] = {}
    errors: list[str] = []
    checked: set[str] = set()
    operations: set[str] = set()
    requests = 0
    stop = None
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            recorder = event.recorder
            requests += len(recorder.interactions)
            if event.status is Status.ERROR:
                errors.append(f"{event.label}: {[str(e) for e in recorder.errors]}")
            for case_id, results in recorder.checks.items():
                case = recorder.cases[case_id].value
                operations.add(case.operation.label)
                for check in results:
                    checked.add(check.name)
                    if check.status is Status.SUCCESS:
                        continue
                    interaction = recorder.interactions.get(case_id)
                    status = interaction.response.status_code \
                        if interaction is not None and interaction.response is not None else None
                    what = check.failure_info.failure.title if check.failure_info else ""
                    failures.setdefault((check.name, case.operation.label, status),
                                        f"{case.method} {case.formatted_path}: {what}")
        elif isinstance(event, events.NonFatalError | events.FatalError):
            errors.append(str(event.info))
        elif isinstance(event, events.EngineFinished):
            stop = event.stop_reason
    report = "\n".join(f"{k}: {v}" for k, v in failures.items())
    assert not failures, f"{len(failures)} distinct failures:\n{report}"
    assert not errors, errors
    assert stop is StopReason.COMPLETED, stop
    doc = secured.http.get("/openapi.json").json()
    assert operations == {f"{m.upper()} {p}" for m, p, _ in _operations(doc)}
    assert {"not_a_server_error", "status_code_conformance", "response_schema_conformance",
            "negative_data_rejection", "positive_data_acceptance", "ignored_auth",
            "unsupported_method", "use_after_free"} <= checked
    assert requests >= 300


@pytest.mark.parametrize("path", ["/v1/checkpoints?dir=runs%00x", "/v1/checkpoints/runs%00/ckpt",
                                  "/v1/checkpoints/runs/ck%00pt"])
def test_a_checkpoint_path_with_a_nul_is_a_400(secured, path) -> None:
    r = secured.http.get(path)
    assert r.status_code == 400, r.text
    assert "NUL" in r.json()["error"]["message"]
