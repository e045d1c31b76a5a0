"""The lossless wire codec alone (``tensorgrid/kernels/wire_codec.py``): its ratio and speed on
the tensors the cross-host trainer moves, a 784x1024 layer of glorot-uniform weights, in float32
and in bfloat16 (after the wire cast), for each codec with its usual shuffle filter.

Rows (tensorgrid only; no peer: TensorFlow has no lossless tensor codec):
  wire_codec.<dtype>.<codec>.ratio    frame bytes / tensor bytes (lower is better)
  wire_codec.<dtype>.<codec>.encode   GB/s of tensor bytes encoded, one thread
  wire_codec.<dtype>.<codec>.decode   GB/s of tensor bytes decoded, one thread

    python bench/wire_codec.py [--reps 5] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time

import ml_dtypes
import numpy as np
from common import emit, summarize

from tensorgrid.kernels.wire_codec import decode, encode

CODECS = (("lz4", "bitshuffle"), ("lz4", "shuffle"), ("zstd", "shuffle"), ("zlib", "shuffle"))
SHAPE = (784, 1024)


def measure(x: np.ndarray, codec: str, shuffle: str, reps: int, runs: int) -> list[dict]:
    """The ratio, encode and decode rows of one tensor and codec."""
    name = f"wire_codec.{'bfloat16' if x.dtype == ml_dtypes.bfloat16 else x.dtype}.{codec}"
    if shuffle != "bitshuffle" and codec == "lz4":
        name += "_byteshuffle"
    frame = encode(x, codec, 1, shuffle)
    assert decode(frame).tobytes() == x.tobytes()
    enc, dec = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(runs):
            encode(x, codec, 1, shuffle)
        t1 = time.perf_counter()
        for _ in range(runs):
            decode(frame)
        t2 = time.perf_counter()
        enc.append(x.nbytes * runs / (t1 - t0) / 1e9)
        dec.append(x.nbytes * runs / (t2 - t1) / 1e9)
    extra = {"shape": list(SHAPE), "shuffle": shuffle, "level": 1}
    return [summarize(f"{name}.ratio", "tensorgrid", [frame.size / x.nbytes], "frame/tensor",
                      "lower", **extra),
            summarize(f"{name}.encode", "tensorgrid", enc, "GB/s", "higher", **extra),
            summarize(f"{name}.decode", "tensorgrid", dec, "GB/s", "higher", **extra)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="a smoke run: 2 reps of 3 runs")
    a = p.parse_args(argv)
    reps, runs = (2, 3) if a.quick else (max(1, a.reps), 20)
    w = np.random.default_rng(0).uniform(-np.sqrt(6 / sum(SHAPE)), np.sqrt(6 / sum(SHAPE)),
                                         SHAPE).astype(np.float32)
    for x in (w, w.astype(ml_dtypes.bfloat16)):
        for codec, shuffle in CODECS:
            for row in measure(x, codec, shuffle, reps, runs):
                emit(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
