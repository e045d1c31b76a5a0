"""Each example runs as a subprocess in its quick mode, exits 0 and converges (its output is
parsed). The launcher modes start their own task processes on free loopback ports and stop them by
PID; ``linear_regression.py --target`` runs against a cluster of processes started here."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from .procs import NUMBER, LocalCluster, cluster, numbers, run_example, run_examples

EXAMPLES = ["linear_regression.py", "seed_cluster.py", "data_parallel.py",
            "in_graph_replication.py", "model_parallel.py"]


@pytest.fixture(scope="module")
def small_cluster() -> Iterator[LocalCluster]:
    """ps:0 and worker:0 as processes, and the HTTP master."""
    with cluster(ps=1, workers=1) as c:
        yield c


def _step_losses(output: str) -> list[float]:
    return [loss for _, loss in numbers(output, rf"^step (\d+) loss {NUMBER}$")]


def _final(output: str) -> tuple[float, float]:
    """(loss, accuracy) of the 'final loss L accuracy A' line."""
    (found,) = numbers(output, rf"^final loss {NUMBER} accuracy {NUMBER}")
    return found


def test_every_example_has_help() -> None:
    runs = run_examples([(script, ["--help"]) for script in EXAMPLES])
    for script, run in zip(EXAMPLES, runs):
        run.check()
        assert "usage:" in run.output, script
        assert "Synthetic data only (there is no network" in run.output, script


def test_linear_regression_in_process() -> None:
    run = run_example("linear_regression.py", "--steps", "200")
    losses = _step_losses(run.output)
    assert len(losses) >= 10
    assert losses[-1] < 0.01 * losses[0], losses
    ((_, w, b),) = numbers(run.output, rf"^final loss {NUMBER} W {NUMBER} b {NUMBER}")
    assert abs(w - 0.3) < 0.05 and abs(b - 0.7) < 0.2, (w, b)


def test_linear_regression_on_a_cluster_matches_the_local_run(
        small_cluster: LocalCluster) -> None:
    local, remote = run_examples([
        ("linear_regression.py", ["--steps", "100"]),
        ("linear_regression.py", ["--steps", "100", "--target", small_cluster.master_url]),
    ])
    local.check()
    remote.check()
    # the same graph, the same float32 kernels: the cluster prints the local run's losses
    np.testing.assert_allclose(_step_losses(remote.output), _step_losses(local.output),
                               rtol=1e-4)
    losses = _step_losses(remote.output)
    assert losses[-1] < 0.05 * losses[0], losses


def test_seed_cluster_reaches_step_200_printing_20() -> None:
    run = run_example("seed_cluster.py")
    steps = numbers(run.output, r"^step (\d+) y \[\[20\.\]\]$")
    assert [int(s) for s, in steps] == list(range(1, 201)), run.output[-2000:]
    assert "done at step 200" in run.output
    # the worker's first session works: no recovery from a peer that seemed unavailable
    assert "Error" not in run.output, run.output[:2000]


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_data_parallel_launches_its_processes_and_converges(mode: str) -> None:
    run = run_example("data_parallel.py", "--mode", mode, "--last-step", "40")
    done = numbers(run.output, rf"^worker (\d) done: (\d+) steps, global step (\d+), "
                               rf"loss {NUMBER} -> {NUMBER}, accuracy {NUMBER}$")
    assert sorted(int(d[0]) for d in done) == [0, 1], run.output[-3000:]
    # a worker that starts late starts from a model the other one already trained: the loss of
    # the initial model is the highest first loss
    initial = max(d[3] for d in done)
    for _, steps, global_step, _, last, accuracy in done:
        assert steps >= 1 and global_step >= 40
        assert last < 0.5 * initial and accuracy > 0.85, (initial, last, accuracy)
    if mode == "async":
        # both replicas updated the same variables, one global step per local step; the last
        # one to finish reads the final global step
        assert max(d[2] for d in done) == sum(d[1] for d in done), done


def test_in_graph_replication_launches_its_processes_and_converges() -> None:
    run = run_example("in_graph_replication.py", "--steps", "40")
    losses = _step_losses(run.output)
    loss, accuracy = _final(run.output)
    assert loss < 0.5 * losses[0] and accuracy > 0.85, (losses, loss, accuracy)
    assert "global step 40" in run.output


def test_model_parallel_launches_its_processes_and_converges() -> None:
    run = run_example("model_parallel.py", "--steps", "40")
    losses = _step_losses(run.output)
    loss, accuracy = _final(run.output)
    assert loss < 0.5 * losses[0] and accuracy > 0.85, (losses, loss, accuracy)
    assert "global step 40" in run.output
