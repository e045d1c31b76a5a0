"""Kernels: plain builders keyed by (op, device type). Importing this registers them all.

Every kernel here is registered for the CPU. Most are written against ``ctx.xp`` (numpy on the CPU),
so a GPU module could register the same builders with cupy as the array module; none exists yet
(the earlier GPU registrations named a ``kernels.gpu`` module that was never written, so no GPU
device ever ran them).
"""

import tensorgrid.ops
from tensorgrid.kernels import (
    array,
    array_extra,
    array_index,
    candidate_sampling,
    control_flow,
    conv,
    core,
    count_up_to,
    data_flow,
    dataset,
    dataset_files,
    debug,
    einsum,
    math,
    math_reduce,
    math_special,
    nn,
    nn_norm,
    optional_list,
    parsing,
    pool,
    pool_grad,
    random,
    resource_variable,
    segment,
    send_recv,
    shuffle_queue,
    sorting,
    state_apply,
    state_scatter,
    string_ops,
    summary,
    tensor_array,
    wire_codec,
)
