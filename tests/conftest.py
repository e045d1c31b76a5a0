"""Shared fixtures: every test starts with a fresh default graph."""

from __future__ import annotations

import pytest

import tensorgrid as tf


@pytest.fixture(autouse=True)
def _fresh_default_graph():
    tf.reset_default_graph()
    yield
