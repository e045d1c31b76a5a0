"""The attrs each op takes, with their attr types (``core.attr_types``), declared per module.

Most of TensorFlow's attr names have one type across every op that takes them (``T`` is a type,
``transpose_a`` a bool, ``strides`` a list of ints): ``COMMON`` holds those, and a module declares
its ops' attrs as a string of names, ``"T transpose_a transpose_b"``, giving a type only where an op
differs from the table (``"T:list(type)"``). A name missing from the table must carry its type, so
every op ends up with a complete declaration, checked (``registry.check_attrs``) on every graph the
master accepts or ``import_graph_def`` reads.
"""

from __future__ import annotations

from collections.abc import Mapping

from tensorgrid.core import registry

_BY_TYPE: dict[str, str] = {
    "type": (
        "DstT dtype elem_type element_dtype Index index_type out_idx out_type output_dtype "
        "output_type shape_type SrcT T Taxis Tcond Tdim tensor_type TI Tidx Tindex Tindices "
        "Tk Tlabels Tlen Tmultiples Tnumsegments Tpaddings Tparams Tperm Tsegmentids Tshape U"
    ),
    "list(type)": "component_types dtypes output_types Tcomponents Tin Tout Toutput_types",
    "bool": (
        "adj_x adj_y cancel_pending_enqueues clear_after_read client_terminated dynamic_size "
        "exclusive fail_on_timeout grad_a grad_b grad_x grad_y identical_element_shapes "
        "ignore_lookup_error incompatible_shape_error is_constant is_training keep_dims "
        "multiply_linear_by_lr replace_global require_init reshuffle_each_iteration reverse "
        "scientific shortest skip_empty sorted sparse_gradient swap_memory transpose_a "
        "transpose_b Truncate unique update_slots use_cudnn_on_gpu use_locking use_nesterov "
        "validate_indices validate_shape"
    ),
    "int": (
        "axis batch_dim batch_dims begin_mask buffer_size capacity ellipsis_mask end_mask "
        "first_n index k limit max_images maxsplit min_after_dequeue N new_axis_mask num "
        "num_reserved_ids num_sampled num_shards num_split num_true parallel_iterations "
        "precision range_max seed seed2 send_device_incarnation seq_dim shard "
        "shrink_axis_mask summarize timeout_ms width"
    ),
    "float": "alpha distortion epsilon exponential_avg_factor tolerance",
    "string": (
        "bad_indices_policy config config_proto container data_format debug_name description "
        "display_name encoding end equation executor_type fill frame_name message mode "
        "output_stream padding pattern placeholder recv_device reduction_type rewrite "
        "send_device separator shared_name source stack_name template tensor_array_name "
        "tensor_name unit vocab_file"
    ),
    "list(string)": "allowed_devices labels slice_specs tensor_names",
    "shape": "element_shape element_shape_except0 shape",
    "list(shape)": "output_shapes shapes",
    "list(int)": "dilations explicit_paddings ksize squeeze_dims strides",
    "list(float)": "unigrams",
    "tensor": "bad_color value",
    "func": "body cond else_branch f then_branch",
}

COMMON: Mapping[str, str] = {
    name: attr_type for attr_type, names in _BY_TYPE.items() for name in names.split()
}


def parse_attrs(op_name: str, spec: str) -> dict[str, str]:
    """The attr table of one op from its declaration string (``"T keep_dims Tidx:type"``).

    Raises:
        ValueError: a name with no type of its own that ``COMMON`` does not know either.
    """
    table: dict[str, str] = {}
    for word in spec.split():
        name, sep, attr_type = word.partition(":")
        if not sep:
            if name not in COMMON:
                raise ValueError(f"Op '{op_name}': attr '{name}' needs a type ('{name}:int')")
            attr_type = COMMON[name]
        table[name] = attr_type
    return table


def declare_attrs(specs: Mapping[str, str]) -> None:
    """Declare the attrs of several ops: op name -> declaration string ("" for none).

    Raises:
        ValueError, NotFoundError, AlreadyExistsError: as ``parse_attrs`` and
            ``registry.declare_attrs``.
    """
    for op_name, spec in specs.items():
        registry.declare_attrs(op_name, parse_attrs(op_name, spec))
