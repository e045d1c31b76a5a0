"""Configuration shared by the services: reading a cluster spec given as JSON or as a file path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tensorgrid.master.cluster import normalize_cluster


def load_cluster(value: str | dict[str, Any]) -> dict[str, Any]:
    """A cluster spec from a dict, a JSON document, or the path of a JSON file.

    ``{"ps": ["host:port"], "worker": ["host:port", ...]}`` or ``{job: {index: address}}``.

    Raises:
        ValueError: the text is neither JSON nor a readable file, or the spec is malformed.
    """
    if isinstance(value, dict):
        spec: Any = value
    else:
        text = value.strip()
        if not text.startswith("{"):
            path = Path(text).expanduser()
            try:
                text = path.read_text()
            except OSError as exc:
                raise ValueError(f"Cluster spec {value!r} is neither JSON nor a readable file: "
                                 f"{exc}") from None
        try:
            spec = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"Cluster spec is not valid JSON: {exc}") from None
    if not isinstance(spec, dict) or not spec:
        raise ValueError("Cluster spec must be a non-empty object {job: [address, ...]}")
    try:
        normalize_cluster(spec)
    except Exception as exc:  # noqa: BLE001 - any malformed spec is a configuration error
        raise ValueError(f"Invalid cluster spec: {exc}") from None
    return spec
