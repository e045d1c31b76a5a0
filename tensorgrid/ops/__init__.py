"""Op definitions (inference, attrs) and their python API, grouped by meaning."""

from tensorgrid.ops import array, comm, core_ops, math, state  # noqa: F401 - registers the ops
