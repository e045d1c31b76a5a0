"""Training graphs written by tensorgrid compute the same updates when TensorFlow runs them.

TensorFlow reads reference variables without snapshots, so a graph whose gradients are not gated
(``gate_gradients``, TF's ``GATE_OP``) lets an update overwrite a weight that another gradient has
yet to read. Each case builds a small network and an optimizer here, runs a few steps in
tensorgrid, and compares the weights with TensorFlow's after the same steps on the same GraphDef:
live through ``tests/fixtures/tg_training/run_in_tensorflow.py`` when the TensorFlow peer venv
exists, otherwise against the committed GraphDef and TensorFlow's committed results for it.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.core import ir, serde

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tg_training"
TF_PYTHON = pathlib.Path("/work/main/.venv-tf/bin/python")
RUNNER = FIXTURES / "run_in_tensorflow.py"

RNG = np.random.default_rng(7)
FEEDS = {"x:0": RNG.normal(size=(8, 3)).round(3).tolist(),
         "y:0": RNG.normal(size=(8, 1)).round(3).tolist()}
OPTIMIZERS = {
    "sgd": lambda: tf.train.GradientDescentOptimizer(0.3),
    "momentum": lambda: tf.train.MomentumOptimizer(0.2, 0.9),
    "adam": lambda: tf.train.AdamOptimizer(0.05),
}


def build(case: str) -> tuple[ir.GraphDef, dict]:
    """A two-layer network trained by the case's optimizer: its GraphDef and run spec."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        y = tf.placeholder(tf.float32, [None, 1], name="y")
        w1 = tf.Variable(np.linspace(-0.5, 0.5, 12, dtype=np.float32).reshape(3, 4), name="w1")
        b1 = tf.Variable(np.full(4, 0.1, np.float32), name="b1")
        w2 = tf.Variable(np.linspace(0.3, -0.2, 4, dtype=np.float32).reshape(4, 1), name="w2")
        h = tf.tanh(tf.matmul(x, w1) + b1)
        loss = tf.reduce_mean(tf.square(tf.matmul(h, w2) * w2[0, 0] - y))
        train = OPTIMIZERS[case]().minimize(loss, name="train")
        init = tf.global_variables_initializer()
    spec = {"feeds": FEEDS, "init": init.name, "train": train.name, "steps": 3,
            "variables": ["w1:0", "b1:0", "w2:0"]}
    return g.as_graph_def(), spec


def run_in_tensorgrid(gd: ir.GraphDef, spec: dict) -> dict:
    g = tf.Graph()
    with g.as_default():
        tf.import_graph_def(gd, name="")
    with tf.Session(graph=g) as sess:
        sess.run(spec["init"])
        feeds = {g.get_tensor_by_name(k): np.float32(v) for k, v in spec["feeds"].items()}
        for _ in range(spec["steps"]):
            sess.run(spec["train"], feeds)
        return dict(zip(spec["variables"], sess.run(spec["variables"])))


@pytest.fixture(scope="module")
def tensorflow_results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """{case: (GraphDef, spec, TensorFlow's variables)}, TensorFlow run once for every case."""
    if not TF_PYTHON.exists():  # the committed graphs and TensorFlow's committed results
        return {case: (serde.graph_from_bytes((FIXTURES / f"{case}.pb").read_bytes()),
                       json.loads((FIXTURES / f"{case}.feeds.json").read_text()),
                       json.loads((FIXTURES / f"{case}.tf.json").read_text()))
                for case in OPTIMIZERS}
    folder = tmp_path_factory.mktemp("tg_training")  # live: the graphs built now
    built = {case: build(case) for case in OPTIMIZERS}
    for case, (gd, spec) in built.items():
        (folder / f"{case}.pb").write_bytes(serde.graph_to_bytes(gd))
        (folder / f"{case}.feeds.json").write_text(json.dumps(spec))
    subprocess.run([str(TF_PYTHON), str(RUNNER), str(folder)], check=True, capture_output=True,
                   timeout=300)
    return {case: (gd, spec, json.loads((folder / f"{case}.tf.json").read_text()))
            for case, (gd, spec) in built.items()}


@pytest.mark.parametrize("case", sorted(OPTIMIZERS))
def test_tensorflow_computes_the_updates_tensorgrid_computes(case: str,
                                                             tensorflow_results: dict) -> None:
    gd, spec, want = tensorflow_results[case]
    got = run_in_tensorgrid(gd, spec)
    for name in spec["variables"]:
        np.testing.assert_allclose(got[name], np.asarray(want[name]), rtol=2e-5, atol=1e-6,
                                   err_msg=f"{case}: {name} after {spec['steps']} steps")


def test_committed_graphs_are_the_ones_built_here() -> None:
    """The committed files (run by TensorFlow) are what ``build`` writes today, gating included."""
    for case in OPTIMIZERS:
        gd, spec = build(case)
        committed = serde.graph_from_bytes((FIXTURES / f"{case}.pb").read_bytes())
        assert [(n.name, n.op, n.inputs) for n in committed.nodes] == \
            [(n.name, n.op, n.inputs) for n in gd.nodes], case
        assert json.loads((FIXTURES / f"{case}.feeds.json").read_text()) == spec


def test_each_ops_gradients_are_gated() -> None:
    """The gradient of w2 waits for the gradient that reads w2 (MatMul_1's input gradient)."""
    gd, _ = build("sgd")
    nodes = gd.node_map()
    gate = "gradients/MatMul_1_grad/tuple"
    assert nodes[gate].op == "NoOp"
    gated = [n for n in gd.nodes if n.op == "Identity" and f"^{gate}" in n.inputs]
    assert len(gated) == 2
    readers = {n.inputs[0].split(":")[0] for n in gated}
    assert {f"^{r}" for r in readers} <= set(nodes[gate].inputs)
    apply_w2 = next(n for n in gd.nodes if n.op == "ApplyGradientDescent" and n.inputs[0] == "w2")
    assert apply_w2.inputs[2].split(":")[0] in {n.name for n in gated} or \
        apply_w2.inputs[2].startswith("gradients/AddN")


def test_ungated_gradients_have_no_gate() -> None:
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float32, [2, 2])
        b = tf.placeholder(tf.float32, [2, 2])
        tf.gradients(tf.matmul(a, b), [a, b])
        assert not any(op.type == "NoOp" for op in g.get_operations())
        tf.gradients(tf.matmul(a, b), [a, b], gate_gradients=True)
        assert any(op.type == "NoOp" for op in g.get_operations())


def _fanin_types(t: tf.Tensor) -> list[str]:
    """The op types ``t`` depends on, through data and control inputs."""
    seen: set[Any] = set()
    stack = [t.op]
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(i.op for i in op.inputs)
        stack.extend(op.control_inputs)
    return sorted(op.type for op in seen)


def test_gate_leaves_out_gradients_nothing_reads() -> None:
    # the data of a first layer is a constant: its gradient (a matmul as large as the weight's)
    # must not be built into the gate, where it would run every step for nothing
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(np.ones((4, 3), np.float32))
        w = tf.Variable(np.ones((3, 2), np.float32))
        v = tf.Variable(np.ones((2, 1), np.float32))
        loss = tf.reduce_sum(tf.matmul(tf.matmul(x, w), v))
        gw, gv = tf.gradients(loss, [w, v], gate_gradients=True)
        # x@w, and the gradients d(xw), dv (gated together: both are read) and dw; the
        # gradient of x (which would be gated with dw) is not built into any step
        assert _fanin_types(gw).count("MatMul") == 4
        assert _fanin_types(gv).count("MatMul") == 3  # x@w, d(xw), dv
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            np.testing.assert_allclose(sess.run(gw), np.full((3, 2), 4.0))
            np.testing.assert_allclose(sess.run(gv), np.full((2, 1), 12.0))


def write_fixtures() -> None:
    """Write the committed graphs and specs (then run the TensorFlow runner on the folder)."""
    for case in OPTIMIZERS:
        gd, spec = build(case)
        (FIXTURES / f"{case}.pb").write_bytes(serde.graph_to_bytes(gd))
        (FIXTURES / f"{case}.feeds.json").write_text(json.dumps(spec, indent=1) + "\n")


if __name__ == "__main__":
    write_fixtures()
