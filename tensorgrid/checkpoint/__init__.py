"""Checkpoints in Redis: tensor blobs with checksums, a manifest committed atomically, the latest
pointer, and the embedded ``redis-server`` (``redis_server``) used when ``REDIS_URL`` is unset.

Importing this package registers the checkpoint ops and kernels (``ops``, ``kernels``); redis
itself is imported only when a checkpoint is read or written (``store``)."""

from tensorgrid.checkpoint import kernels, ops  # registers the checkpoint ops
