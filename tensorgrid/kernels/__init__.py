"""Kernels: plain builders keyed by (op, device type). Importing this registers them all."""

import tensorgrid.ops
from tensorgrid.kernels import array, array_index, comm, core, data_flow, math, nn, random
