"""tensorgrid: a distributed dataflow runtime with a TensorFlow 1.x-style API.

``import tensorgrid as tf`` and write TensorFlow 1.x graph code: ``tf.placeholder``, ``tf.Variable``,
``tf.Session``, ``tf.gradients``, ``tf.train.*``, ``tf.nn.*``.
"""

import tensorgrid.kernels
from tensorgrid import (
                                      data,
                                      gfile,
                                      io,
                                      keras,
                                      layers,
                                      math,
                                      metrics,
                                      nn,
                                      python_io,
                                      strings,
                                      summary,
)
from tensorgrid.autodiff import gradients, hessians
from tensorgrid.client import app, flags, train
from tensorgrid.client import tf_logging as logging
from tensorgrid.client.config import (
                                      ConfigProto,
                                      GPUOptions,
                                      GraphOptions,
                                      OptimizerOptions,
                                      RunMetadata,
                                      RunOptions,
                                      WireCompression,
)
from tensorgrid.client.session import InteractiveSession, Session
from tensorgrid.core import errors
from tensorgrid.core.device import DeviceSpec
from tensorgrid.core.dtypes import (
                                      DType,
                                      as_dtype,
                                      bfloat16,
                                      bool_,
                                      complex64,
                                      complex128,
                                      double,
                                      float16,
                                      float32,
                                      float64,
                                      half,
                                      int8,
                                      int16,
                                      int32,
                                      int64,
                                      resource,
                                      string,
                                      uint8,
                                      uint16,
                                      uint32,
                                      uint64,
                                      variant,
)
from tensorgrid.core.shapes import TensorShape
from tensorgrid.framework.array_create_ops import *
from tensorgrid.framework.array_extra_ops import *
from tensorgrid.framework.array_index_ops import *
from tensorgrid.framework.array_ops import *
from tensorgrid.framework.clip_ops import *
from tensorgrid.framework.control_flow_ops import case, cond
from tensorgrid.framework.convert import (
                                      constant,
                                      convert_to_tensor,
                                      register_tensor_conversion_function,
)
from tensorgrid.framework.core_ops import (
                                      group,
                                      identity,
                                      identity_n,
                                      no_op,
                                      placeholder,
                                      placeholder_with_default,
                                      stop_gradient,
                                      tuple_,
)
from tensorgrid.framework.data_flow_ops import ConditionalAccumulator, FIFOQueue, QueueBase
from tensorgrid.framework.debug_ops import Assert, Print, check_numerics, print  # noqa: A004 - tf.print
from tensorgrid.framework.einsum_ops import einsum
from tensorgrid.framework.functional_ops import foldl, foldr, map_fn, scan
from tensorgrid.framework.graph import (
                                      Graph,
                                      GraphKeys,
                                      Operation,
                                      Tensor,
                                      get_default_graph,
                                      reset_default_graph,
)
from tensorgrid.framework.importer import graph_from_graph_def, import_graph_def
from tensorgrid.framework.init_ops import *
from tensorgrid.framework.input_pipeline_ops import RandomShuffleQueue, count_up_to
from tensorgrid.framework.math_ops import *
from tensorgrid.framework.math_reduce_ops import *
from tensorgrid.framework.math_special_ops import (
                                      atan2,
                                      div_no_nan,
                                      ensure_shape,
)
from tensorgrid.framework.parsing_ops import (
                                      FixedLenFeature,
                                      FixedLenSequenceFeature,
                                      VarLenFeature,
                                      decode_csv,
                                      decode_raw,
                                      matching_files,
                                      parse_example,
                                      parse_single_example,
                                      parse_tensor,
                                      read_file,
                                      serialize_tensor,
                                      write_file,
)
from tensorgrid.framework.partitioned_variables import (
                                      PartitionedVariable,
                                      fixed_size_partitioner,
                                      min_max_variable_partitioner,
                                      variable_axis_size_partitioner,
)
from tensorgrid.framework.random_ops import *
from tensorgrid.framework.resource_variable_ops import ResourceVariable
from tensorgrid.framework.scopes import *
from tensorgrid.framework.segment_ops import *
from tensorgrid.framework.state_ops import assign, assign_add, assign_sub, is_variable_initialized
from tensorgrid.framework.state_scatter_ops import *
from tensorgrid.framework.string_ops import (
                                      SparseTensor,
                                      as_string,
                                      regex_replace,
                                      string_join,
                                      string_split,
                                      string_to_number,
                                      substr,
)
from tensorgrid.framework.tensor_array_ops import TensorArray
from tensorgrid.framework.variable_scope import *
from tensorgrid.framework.variables import (
                                      Variable,
                                      all_variables,
                                      assert_variables_initialized,
                                      disable_resource_variables,
                                      enable_resource_variables,
                                      global_variables,
                                      global_variables_initializer,
                                      initialize_all_variables,
                                      local_variables,
                                      local_variables_initializer,
                                      model_variables,
                                      report_uninitialized_variables,
                                      resource_variables_enabled,
                                      trainable_variables,
                                      variables_initializer,
)
from tensorgrid.framework.while_loop_ops import while_loop

# TensorFlow's graph protos (same names and field numbers): text_format and json_format parse them
from tensorgrid.pb.full_type_pb2 import FullTypeDef
from tensorgrid.pb.graph_pb2 import (
                                      AttrValue,
                                      FunctionDef,
                                      FunctionDefLibrary,
                                      GradientDef,
                                      GraphDebugInfo,
                                      GraphDef,
                                      NameAttrList,
                                      NodeDef,
                                      OpDef,
                                      VersionDef,
)
from tensorgrid.pb.types_pb2 import TensorProto, TensorShapeProto
from tensorgrid.summary import Event, HistogramProto, SessionLog, Summary, SummaryMetadata

bool = bool_
# TF1 names still used by TF1 programs (tf.arg_max(x, 1) is tf.argmax(x, 1))
arg_max, arg_min = math.argmax, math.argmin
initialize_local_variables = local_variables_initializer
tuple = tuple_
__version__ = "0.1.0"
