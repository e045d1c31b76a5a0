"""Per-kernel times of the CNN of ``local.py`` (``workloads.build_cnn``): each convolution and its
gradients, the max pools and their gradients, one op per ``session.run``, both frameworks.

    python bench/cnn_kernels.py                           # both frameworks, a table with ratios
    python bench/cnn_kernels.py --framework tensorgrid    # one framework (what the table runs)

Inputs are Variables (nothing is constant-folded); a run fetches the op's output, so both
frameworks also pay for handing back one array. Figures are medians over ``--runs`` runs after
``--warmup``; the machine's load moves them, so compare frameworks measured in the same call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np
from common import child_env, python_for

BATCH = 64
# (name, input NHWC, filter HWIO): the CNN's two 5x5 SAME convolutions
CONVS = (("conv1", (BATCH, 28, 28, 1), (5, 5, 1, 32)), ("conv2", (BATCH, 14, 14, 32), (5, 5, 32, 64)))
POOL = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}


def load(framework: str) -> tuple[Any, Any]:
    """(the TF1-style module, its nn module) of one framework."""
    if framework == "tensorflow":
        import tensorflow.compat.v1 as tf  # lazy: only in the TensorFlow venv

        tf.disable_eager_execution()
        return tf, tf.nn
    import tensorgrid as tg  # lazy: only in tensorgrid's venv
    import tensorgrid.nn as tgnn

    return tg, tgnn


def build(tf: Any, nn: Any) -> dict[str, tuple[Any, float]]:
    """name -> (the op's output, its flops or 0) for every kernel measured."""
    rng = np.random.default_rng(0)
    ops: dict[str, tuple[Any, float]] = {}
    for name, xs, fs in CONVS:
        x = tf.Variable(rng.standard_normal(xs, dtype=np.float32))
        f = tf.Variable(rng.standard_normal(fs, dtype=np.float32))
        y = nn.conv2d(x, f, strides=[1, 1, 1, 1], padding="SAME")
        dy = tf.Variable(rng.standard_normal(xs[:3] + fs[3:], dtype=np.float32))
        flops = 2.0 * np.prod(xs[:3]) * np.prod(fs)
        ops[f"{name} forward"] = (y, flops)
        ops[f"{name} filter grad"] = (nn.conv2d_backprop_filter(
            x, tf.constant(list(fs)), dy, strides=[1, 1, 1, 1], padding="SAME"), flops)
        if xs[3] > 1:  # the first layer's input gradient is never needed
            ops[f"{name} input grad"] = (nn.conv2d_backprop_input(
                tf.constant(list(xs)), f, dy, strides=[1, 1, 1, 1], padding="SAME"), flops)
        act = tf.Variable(np.maximum(rng.standard_normal(xs[:3] + fs[3:], dtype=np.float32), 0))
        pooled = nn.max_pool(act, **POOL)
        ops[f"{name} max pool"] = (pooled, 0.0)
        grad = tf.gradients(pooled, act, grad_ys=tf.ones_like(pooled))[0]
        ops[f"{name} max pool grad"] = (grad, 0.0)
    return ops


def child(framework: str, runs: int, warmup: int) -> None:
    """Measure one framework; one JSON line per kernel on stdout."""
    tf, nn = load(framework)
    g = tf.Graph()
    with g.as_default():
        ops = build(tf, nn)
        init = tf.global_variables_initializer()
    config = tf.ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=2)
    with tf.Session(graph=g, config=config) as sess:
        sess.run(init)
        for name, (op, flops) in ops.items():
            for _ in range(warmup):
                sess.run(op)
            times = []
            for _ in range(runs):
                t = time.perf_counter()
                sess.run(op)
                times.append(time.perf_counter() - t)
            ms = statistics.median(times) * 1e3
            print(json.dumps({"kernel": name, "ms": ms,
                              "gflops": flops / ms / 1e6 if flops else None}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--framework", choices=("tensorgrid", "tensorflow"))
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    if args.framework:
        child(args.framework, args.runs, args.warmup)
        return
    rows: dict[str, dict[str, float]] = {}
    for fw in ("tensorgrid", "tensorflow"):
        python = python_for(fw)
        if python is None:
            print(f"# {fw}: no interpreter found, not measured", file=sys.stderr)
            continue
        cmd = [python, __file__, "--framework", fw, "--runs", str(args.runs),
               "--warmup", str(args.warmup)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=child_env(fw), check=False)
        if done.returncode != 0:
            print(f"# {fw} failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            continue
        for line in done.stdout.splitlines():
            row = json.loads(line)
            rows.setdefault(row["kernel"], {})[fw] = row["ms"]
    print(f"{'kernel':24s} {'tensorgrid ms':>14s} {'tensorflow ms':>14s} {'tf/tg':>7s}")
    for name, by in rows.items():
        tg, tfm = by.get("tensorgrid"), by.get("tensorflow")
        ratio = f"{tfm / tg:7.2f}" if tg and tfm else "      -"
        print(f"{name:24s} {tg or float('nan'):14.2f} {tfm or float('nan'):14.2f} {ratio}")


if __name__ == "__main__":
    main()
