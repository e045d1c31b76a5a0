"""Every registered op has a gradient entry: a rule, or a declaration that it is not
differentiable. A missing one would surface only when someone differentiates through the op."""

from __future__ import annotations

import os

import tensorgrid  # noqa: F401 - registers every op, kernel and gradient rule
from tensorgrid.core import registry

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_registered_op_has_a_gradient_entry() -> None:
    # ops that test modules register for themselves (they may run first) are not the package's
    ops = {name: d for name, d in registry.registered_ops().items()
           if not os.path.abspath(d.source.rsplit(":", 1)[0]).startswith(_TESTS)}
    assert "MatMul" in ops and "VariableV2" in ops
    missing = sorted(name for name in ops if registry.gradient_status(name) == "missing")
    assert missing == [], f"ops without a gradient rule or not_differentiable: {missing}"


def test_gradient_status_values() -> None:
    assert registry.gradient_status("Identity") == "rule"
    assert registry.get_gradient("Identity") is not None
    assert registry.gradient_status("VariableV2") == "none"
    assert registry.get_gradient("VariableV2") is None
    assert registry.gradient_status("NoSuchOp") == "missing"
