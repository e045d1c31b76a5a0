"""The processes of a benchmark cluster: a ps or a worker of one framework (started by dist.py).

Every task hosts its framework's ``tf.train.Server`` on 127.0.0.1. The ps serves until it is
stopped. Worker 0 also runs the client of the benchmark from its own process (as in TF1 between-graph
replication, through ``server.target``) and prints the RESULT rows; in ``train`` units worker 1 runs
its own client too, else it only serves. A client ends its process with ``os._exit`` once its rows
are printed: the orchestrator stops the remaining tasks by PID.

    python bench/dist_roles.py --framework F --role worker --task 0 --ports P0,P1,P2 --unit seed
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from typing import Any

from common import (
    Deadline,
    Settings,
    add_settings_args,
    calibrate_runs,
    emit,
    error_reason,
    info,
    repeat_timed,
    settings_from_args,
    status_row,
    summarize,
    wait_for_ports,
)
from frameworks import Api, load
from step_phases import median_phases, node_rows, step_phases
from workloads import MODELS, SEED_VALUE, build_seed

READY_MARKER = "BENCH-CLIENT-READY"   # printed by a train client once its session exists
MAX_SEED_STEPS = 2000                  # seed steps per repetition, at most
TRANSFER_SIZES_MB = (1, 16, 64, 256)
TRANSFER_RUNS = {1: 100, 16: 20, 64: 6, 256: 3}  # runs per repetition, at most
STEP_TIMEOUT_MS = 15000                # a training step that takes longer fails (sync mode's end)
BARRIER_S = 120.0                      # the chief's wait for worker 1
WORKER1_MAX_S = 400.0                  # worker 1 trains at most this long
MAX_STEPS = 1_000_000                  # steps of one training loop, at most (time ends it first)


def cluster_dict(ports: list[int], hosts: list[str] | None = None) -> dict[str, list[str]]:
    """ps task 0 and worker tasks 0 and 1 on 127.0.0.1, or on ``hosts`` (one address each)."""
    ps, w0, w1 = hosts or ["127.0.0.1"] * 3
    return {"ps": [f"{ps}:{ports[0]}"], "worker": [f"{w0}:{ports[1]}", f"{w1}:{ports[2]}"]}


def seed_figures() -> tuple[str, ...]:
    return ("dist.seed.session", "dist.seed.mts")


def transfer_figures(sizes: tuple[int, ...]) -> tuple[str, ...]:
    return tuple(f"dist.transfer.{tag}.{mb}MB" for mb in sizes
                 for tag in ("ps_to_worker", "worker_local"))


def train_figures(model: str, mode: str) -> tuple[str, ...]:
    return (f"dist.train.{model}.{mode}", f"dist.train.{model}.{mode}.worker0_own")


def transfer_sizes(s: Settings) -> tuple[int, ...]:
    return TRANSFER_SIZES_MB[:2] if s.quick else TRANSFER_SIZES_MB


# ----------------------------------------------------------------------------- start-up
def wait_for_cluster(api: Api, target: str, devices: list[str], timeout_s: float) -> int:
    """Run a tiny graph until it succeeds; returns the failed attempts.

    The graph passes a scalar through ``devices`` in order and back to the first, so every task
    has received from and sent to the first one (both directions of each channel are up).

    TensorFlow's master waits for the tasks of a new session itself. tensorgrid's answers
    ``UnavailableError`` while a task is not up yet, and also for about a second after it came up
    (the gRPC channel's reconnect back-off), so the benchmark retries here, outside any
    measurement, for a bounded time.

    Raises:
        UnavailableError: the cluster still did not answer after ``timeout_s``.
    """
    tf = api.tf
    g = tf.Graph()
    with g.as_default():
        with tf.device(devices[0]):
            total = tf.constant(0.0)
        for d in [*devices[1:], devices[0]]:
            with tf.device(d):
                total = total + 1.0
    deadline = Deadline(timeout_s)
    failures = 0
    while True:
        try:
            # folding off: a folded chain would run on one task and prove nothing
            cfg = api.session_config(fold_constants=False, device_filters=devices)
            with tf.Session(target, graph=g, config=cfg) as sess:
                sess.run(total)
            return failures
        except tf.errors.UnavailableError as exc:
            failures += 1
            if deadline.passed():
                raise
            info(f"cluster not ready yet ({type(exc).__name__}), retrying")
            time.sleep(0.5)


# ----------------------------------------------------------------------------- seed
def bench_seed(api: Api, server: Any, cluster: Any, s: Settings) -> None:
    """(a) seed matmul with x and w on the ps, from worker 0: plain Session, then MTS."""
    tf = api.tf
    setter = api["train.replica_device_setter"](cluster=cluster,
                                                 worker_device="/job:worker/task:0")
    with tf.device(setter):
        x, _, mat = build_seed(api)
        gs = api["train.get_or_create_global_step"]()
        inc = tf.assign_add(gs, 1)
    placement = {"x": x.device, "matmul": mat.device, "global_step": gs.device}
    info(f"placement {placement}")
    if "ps" not in x.device or "worker" not in mat.device:
        raise AssertionError(f"replica_device_setter placed the seed wrongly: {placement}")
    with tf.Session(server.target) as sess:
        sess.run(tf.global_variables_initializer())
        value = sess.run(mat).tolist()
        if value != [[SEED_VALUE]]:
            raise AssertionError(f"seed matmul gave {value}, expected [[{SEED_VALUE}]]")
        steps = calibrate_runs(lambda: sess.run(mat), s.rep_s, 20, MAX_SEED_STEPS,
                               warmup=30 if s.quick else 300)
        secs = repeat_timed(lambda: sess.run(mat), s.reps, steps)
        gs_before = int(sess.run(gs))
    emit(summarize("dist.seed.session", api.name, [v * 1e6 for v in secs], "us/step", "lower",
                   steps_per_rep=steps, placement=placement, checks={"value": value}))

    lacking = api.lacks_reason("dist.seed.mts")
    if lacking:
        emit(status_row("dist.seed.mts", api.name, "skipped", lacking))
        return
    try:
        bench_seed_mts(api, server, mat, inc, gs, gs_before, max(10, steps // 2), s)
    except Exception as exc:
        traceback.print_exc()
        emit(status_row("dist.seed.mts", api.name, "error", error_reason(exc)))


def bench_seed_mts(api: Api, server: Any, mat: Any, inc: Any, gs: Any, gs_before: int,
                   steps: int, s: Settings) -> None:
    """MonitoredTrainingSession + StopAtStepHook(steps); one step = matmul + global step + 1.

    The first repetition is a warm-up. Checks that each session ran ``steps`` steps and that the
    global step, read from a plain Session after each, advanced by one per step (counting from 0
    when the chief's session re-initialized the variables, as TensorFlow's does).
    """
    tf = api.tf
    lat, counts, step_ok = [], [], []
    with tf.Session(server.target) as sess:
        prev = gs_before
        for rep in range(s.reps + 1):
            hooks = [api["train.StopAtStepHook"](num_steps=steps)]
            with api["train.MonitoredTrainingSession"](
                    master=server.target, is_chief=True, hooks=hooks, checkpoint_dir=None,
                    save_checkpoint_secs=None, save_summaries_steps=None,
                    save_summaries_secs=None, log_step_count_steps=None) as ms:
                n = 0
                out: Any = None
                t0 = time.perf_counter()
                while not ms.should_stop() and n < 4 * steps:
                    out = ms.run([mat, inc])
                    n += 1
                dt = time.perf_counter() - t0
            if n == 0 or out[0].tolist() != [[SEED_VALUE]]:
                raise AssertionError(f"MTS ran {n} steps; the last matmul gave "
                                     f"{None if out is None else out[0].tolist()}")
            now = int(sess.run(gs))
            step_ok.append(now in (prev + n, n))
            prev = now
            counts.append(n)
            if rep > 0:
                lat.append(dt / n)
    checks = {"steps_run": counts, "stop_at_step_ok": all(abs(c - steps) <= 1 for c in counts),
              "global_step_ok": all(step_ok)}
    emit(summarize("dist.seed.mts", api.name, [v * 1e6 for v in lat], "us/step", "lower",
                   steps_per_rep=steps, checks=checks))


# ----------------------------------------------------------------------------- transfer
def bench_transfer(api: Api, server: Any, s: Settings) -> None:
    """(b) reduce_sum on worker 0 of a float32 variable held on the ps, and of a local one."""
    tf = api.tf
    sizes = transfer_sizes(s)
    ops = {}
    for mb in sizes:
        n = mb * (1 << 20) // 4
        with tf.device("/job:ps/task:0"):
            remote = tf.Variable(tf.ones([n], tf.float32), name=f"ps_big{mb}")
        with tf.device("/job:worker/task:0"):
            local = tf.Variable(tf.ones([n], tf.float32), name=f"w0_big{mb}")
            ops[mb] = {"ps_to_worker": tf.reduce_sum(remote), "worker_local": tf.reduce_sum(local)}
    with tf.Session(server.target) as sess:
        sess.run(tf.global_variables_initializer())
        for mb in sizes:
            nbytes = mb * (1 << 20)
            for tag, op in ops[mb].items():
                name = f"dist.transfer.{tag}.{mb}MB"
                try:
                    value = float(sess.run(op))
                    if abs(value - nbytes // 4) > 1e-6 * (nbytes // 4):
                        raise AssertionError(f"sum of {nbytes // 4} ones gave {value}")
                    runs = calibrate_runs(lambda op=op: sess.run(op), s.rep_s, 1,
                                          TRANSFER_RUNS[mb], warmup=3)
                    secs = repeat_timed(lambda op=op: sess.run(op), s.reps, runs)
                    emit(summarize(name, api.name, [nbytes / v / 1e9 for v in secs],
                                   "GB/s", "higher", runs_per_rep=runs, bytes=nbytes,
                                   checks={"value": value}))
                except Exception as exc:
                    traceback.print_exc()
                    emit(status_row(name, api.name, "error", error_reason(exc)))


# ----------------------------------------------------------------------------- train
def bench_train(api: Api, server: Any, cluster: Any, task: int, model: str, mode: str,
                s: Settings, bf16_wire: bool = False, wire_codec: str = "") -> None:
    """(c) between-graph data parallelism: this worker's replica, variables on the ps.

    The chief waits until worker 1 has marked itself ready, warms up, then measures ``s.reps``
    windows: overall examples/s from the global step, and its own examples/s. It then raises the
    stop flag that worker 1 polls.
    """
    tf = api.tf
    is_chief = task == 0
    wrap = None
    if mode == "sync":
        sync_cls = api["train.SyncReplicasOptimizer"]

        def wrap(opt: Any) -> Any:
            return sync_cls(opt, replicas_to_aggregate=2, total_num_replicas=2)

    setter = api["train.replica_device_setter"](cluster=cluster,
                                                 worker_device=f"/job:worker/task:{task}")
    with tf.device(setter):
        m = MODELS[model](api, wrap)
        zeros = api["zeros_initializer"]
        stop = api["get_variable"]("stop_flag", [], tf.int32, initializer=zeros(),
                                   trainable=False)
        set_stop = stop.assign(1)
        ready = api["get_variable"]("ready_count", [], tf.int32, initializer=zeros(),
                                    trainable=False)
        mark_ready = ready.assign_add(1)
    hooks = [m.optimizer.make_session_run_hook(is_chief)] if mode == "sync" else []
    cfg = api.session_config(device_filters=["/job:ps", f"/job:worker/task:{task}"],
                             bf16_wire=bf16_wire, wire_codec=wire_codec)
    opts = tf.RunOptions(timeout_in_ms=STEP_TIMEOUT_MS)
    per_update = m.batch * (2 if mode == "sync" else 1)
    measured: tuple[list[float], list[float], dict[str, Any], dict[str, Any]] | None = None
    with api["train.MonitoredTrainingSession"](
            master=server.target, is_chief=is_chief, hooks=hooks, checkpoint_dir=None,
            config=cfg, save_checkpoint_secs=None, save_summaries_steps=None,
            save_summaries_secs=None, log_step_count_steps=None, stop_grace_period_secs=5) as ms:
        print(READY_MARKER, flush=True)
        if is_chief:
            measured = chief_measure(ms, m, ready, set_stop, opts, per_update, s, api)
        else:
            worker1_loop(api, ms, m, mark_ready, stop, opts)
    if not is_chief:
        return
    if measured is None:
        # TF's MonitoredSession.__exit__ swallows OutOfRangeError (and so may tensorgrid's)
        raise RuntimeError("the chief's MonitoredTrainingSession ended before the measurement "
                           "did (an OutOfRangeError or a stop request inside the session)")
    applied, own, checks, phases = measured
    common = {"batch": m.batch, "window_s": s.window_s, "examples_per_update": per_update}
    if phases.get("steps"):
        common["phases_ms"] = phases
        info(f"{api.name} step phases (median ms of {phases['steps']} traced steps): {phases}")
    emit(summarize(f"dist.train.{model}.{mode}", api.name, applied,
                   "examples/s (applied, from global step)", "higher", checks=checks, **common))
    emit(summarize(f"dist.train.{model}.{mode}.worker0_own", api.name, own,
                   "examples/s (worker 0's own steps)", "higher", **common))


def chief_measure(ms: Any, m: Any, ready: Any, set_stop: Any, opts: Any, per_update: int,
                  s: Settings, api: Api | None = None
                  ) -> tuple[list[float], list[float], dict[str, Any], dict[str, Any]]:
    """The chief's part: barrier, warm-up, windows, traced steps (``s.trace_steps``, with
    ``api``), stop flag.

    Returns:
        (overall examples/s per window, own examples/s per window, checks, the median phases of
        the traced steps: empty when none).
    """
    barrier = Deadline(BARRIER_S)
    while int(ms.run(ready)) < 1:
        if barrier.passed():
            raise TimeoutError(f"worker 1 was not ready within {BARRIER_S:.0f} s")
        time.sleep(0.05)
    loss0 = float(ms.run(m.loss))
    warm = Deadline(s.warm_s)
    for _ in range(MAX_STEPS):
        if warm.passed():
            break
        ms.run(m.train_op, options=opts)
    applied, own = [], []
    for _ in range(s.reps):
        t0 = time.perf_counter()
        g0 = int(ms.run(m.global_step))
        window = Deadline(s.window_s)
        n = 0
        while not window.passed() and n < MAX_STEPS:
            ms.run(m.train_op, options=opts)
            n += 1
        g1 = int(ms.run(m.global_step))
        dt = time.perf_counter() - t0
        applied.append((g1 - g0) * per_update / dt)
        own.append(n * m.batch / dt)
    phases = trace_phases(api, ms, m, s.trace_steps) if api is not None and s.trace_steps else {}
    loss1 = float(ms.run(m.loss))
    final_step = int(ms.run(m.global_step))
    ms.run(set_stop)
    checks = {"loss_first": loss0, "loss_last": loss1, "loss_decreased": loss1 < loss0,
              "global_step": final_step, "global_step_ok": final_step > 0}
    return applied, own, checks, phases


def trace_phases(api: Api, ms: Any, m: Any, steps: int) -> dict[str, Any]:
    """Run ``steps`` training steps with FULL_TRACE; the median phases of a step
    (``step_phases``), after the windows so that tracing costs the figures nothing."""
    tf = api.tf
    opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE, timeout_in_ms=STEP_TIMEOUT_MS)
    got = []
    for _ in range(steps):
        meta = tf.RunMetadata()
        ms.run(m.train_op, options=opts, run_metadata=meta)
        got.append(step_phases(node_rows(meta.step_stats)))
    return median_phases(got)


def worker1_loop(api: Api, ms: Any, m: Any, mark_ready: Any, stop: Any, opts: Any) -> None:
    """Worker 1: mark ready, then train until the chief's stop flag (or a bounded time)."""
    ms.run(mark_ready)
    n = 0
    t0 = time.perf_counter()
    limit = Deadline(WORKER1_MAX_S)
    ended = "time limit"
    try:
        while not limit.passed() and n < MAX_STEPS:
            ms.run(m.train_op, options=opts)
            n += 1
            if n % 20 == 0 and int(ms.run(stop)):
                ended = "stop flag"
                break
    except api.tf.errors.OpError as exc:
        # expected in sync mode: the last step waits for a chief that has stopped
        ended = f"{type(exc).__name__} (expected in sync mode once the chief stops)"
    dt = time.perf_counter() - t0
    info(f"worker 1: {n} steps in {dt:.1f} s, {n * m.batch / max(dt, 1e-9):.0f} examples/s "
         f"(warm-up included); ended by {ended}")


# ----------------------------------------------------------------------------- main
def unit_figures(unit: str, s: Settings) -> tuple[str, ...]:
    """The rows one unit (``seed``, ``transfer``, ``train.<model>.<mode>``) produces."""
    if unit == "seed":
        return seed_figures()
    if unit == "transfer":
        return transfer_figures(transfer_sizes(s))
    _, model, mode = unit.split(".")
    return train_figures(model, mode)


def role_main(framework: str, role: str, task: int, ports: list[int], unit: str,
              s: Settings, hosts: list[str] | None = None, bf16_wire: bool = False,
              wire_codec: str = "") -> int:
    """Serve this task; worker 0 (and worker 1 in ``train`` units) also runs its client.

    Worker 0 turns any failure into error rows for the unit's figures, so the orchestrator always
    learns why a figure is missing.
    """
    try:
        api = load(framework)
        spec = cluster_dict(ports, hosts)
        cluster = api["train.ClusterSpec"](spec)
        server = api["train.Server"](cluster, job_name=role, task_index=task)
        info(f"{framework} {role}{task} serving on {spec[role][task]}")
        if role == "ps" or (task != 0 and not unit.startswith("train.")):
            server.join()
            return 0
        # a train client talks to the ps and itself only (device_filters); worker 1 of a train
        # unit starts after worker 0's session exists, so worker 0 must not wait for it
        peers = spec["ps"] + ([spec["worker"][task]] if unit.startswith("train.")
                              else spec["worker"])
        wait_for_ports(peers, timeout_s=180)
        devices = [f"/job:worker/task:{task}", "/job:ps/task:0"]
        retries = wait_for_cluster(api, server.target, devices, timeout_s=60)
        emit({"kind": "startup", "task": f"{role}{task}", "failed_attempts": retries})
        if unit == "seed":
            bench_seed(api, server, cluster, s)
        elif unit == "transfer":
            bench_transfer(api, server, s)
        else:
            _, model, mode = unit.split(".")
            bench_train(api, server, cluster, task, model, mode, s, bf16_wire, wire_codec)
    except Exception as exc:
        traceback.print_exc()
        if role == "worker" and task == 0:
            reason = error_reason(exc)
            for fig in unit_figures(unit, s):
                emit(status_row(fig, framework, "error", reason))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the server's shutdown is not measured: the orchestrator stops what is left


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--framework", required=True)
    p.add_argument("--role", required=True, choices=("ps", "worker"))
    p.add_argument("--task", type=int, required=True)
    p.add_argument("--ports", required=True)
    p.add_argument("--unit", required=True)
    p.add_argument("--hosts", default=None,
                   help="addresses of the ps, worker 0 and worker 1 (default: all 127.0.0.1)")
    p.add_argument("--bf16-wire", action="store_true",
                   help="train units: cross-task float32 tensors travel as bfloat16")
    p.add_argument("--wire-codec", default="",
                   help="train units: the lossless wire codec (lz4, zstd_pulls, lz4_L3...)")
    add_settings_args(p)
    a = p.parse_args()
    return role_main(a.framework, a.role, a.task, [int(x) for x in a.ports.split(",")], a.unit,
                     settings_from_args(a), a.hosts.split(",") if a.hosts else None,
                     a.bf16_wire, a.wire_codec)


if __name__ == "__main__":
    sys.exit(main())
