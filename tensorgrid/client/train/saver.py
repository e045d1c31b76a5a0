"""``tf.train.Saver``: checkpoints are files in TensorFlow's format, tracked by Redis (the
helpers ``latest_checkpoint`` and the like are in ``checkpoint_management``, re-exported here).

Paths are TensorFlow's: ``saver.save(sess, "runs/exp1/model.ckpt", global_step=1200)`` writes the
checkpoint ``runs/exp1/model.ckpt-1200`` (``.index`` and ``.data-NNNNN-of-MMMMM`` files, relative
paths meaning the caller's working directory) and the directory's ``checkpoint`` state file, and
returns ``"runs/exp1/model.ckpt-1200"``, which ``latest_checkpoint("runs/exp1")`` then returns.
TensorFlow reads these files, and this Saver restores files that TensorFlow wrote.

Saving and restoring are graph steps. The Saver adds, per device holding variables, a save shard
(``CheckpointSaveShard``) and a restore shard (``CheckpointRestoreShard``) placed with those
variables, so their bytes go between that device's task (on a cluster, the ps) and the files only
(a filesystem every task mounts at the same path); one ``CheckpointMerge`` writes the index. The
client then commits the checkpoint to Redis (manifest with the files' checksums, ``latest``, the
history; keyed by the cluster and the absolute directory, in one transaction). Every ``Assign`` of a
restore waits for every restore shard, so a damaged checkpoint changes no variable. The Redis is
``redis_url`` when given, else ``REDIS_URL`` or the embedded server
(``checkpoint_management.configured_redis_url``), resolved at each call; the graph never holds it.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np

from tensorgrid.checkpoint import files as cf
from tensorgrid.checkpoint import manifest as mf
from tensorgrid.checkpoint import ops as ckpt_ops
from tensorgrid.checkpoint.bundle import new_token, shard_directory
from tensorgrid.checkpoint.bundle_reader import bundle_exists
from tensorgrid.checkpoint.files import all_damaged, skip_damaged
from tensorgrid.checkpoint.state_file import STATE_FILENAME
from tensorgrid.client.train import checkpoint_management as cm
from tensorgrid.client.train.checkpoint_management import (
    CheckpointState,
    checkpoint_exists,
    get_checkpoint_state,
    latest_checkpoint,
    remove_checkpoint,
)
from tensorgrid.core import dtypes, errors
from tensorgrid.core.shapes import TensorShape
from tensorgrid.framework.convert import make_op
from tensorgrid.framework.core_ops import group, placeholder
from tensorgrid.framework.graph import Graph, GraphKeys, Operation, Tensor, get_default_graph
from tensorgrid.framework.variables import global_variables

__all__ = ["Saver", "CheckpointState", "latest_checkpoint", "get_checkpoint_state",
           "checkpoint_exists", "remove_checkpoint", "saver_or_default"]

log = logging.getLogger("tensorgrid.checkpoint")


def saver_or_default(graph: Graph | None = None) -> Saver:
    """The Saver of the graph's SAVERS collection, or a new one that saves every global variable
    (built when the scaffold is finalized), added to that collection.

    Raises:
        RuntimeError: the collection holds more than one Saver.
    """
    g = graph if graph is not None else get_default_graph()
    savers = g.get_collection(GraphKeys.SAVERS)
    if len(savers) > 1:
        raise RuntimeError(f"More than one item in collection {GraphKeys.SAVERS}. Please pass "
                           "the saver to use as Scaffold(saver=...)")
    if savers:
        return savers[0]  # type: ignore[no-any-return]
    with g.as_default():
        saver = Saver(sharded=True, allow_empty=True, defer_build=True)
    g.add_to_collection(GraphKeys.SAVERS, saver)
    return saver


# ------------------------------------------------------------------------------ Saver


class _Saved(NamedTuple):
    """One variable as the checkpoint holds it: under ``name``, whole (``spec`` "") or as the
    slice ``spec`` of the full tensor ``name`` (a shard of a partitioned variable)."""

    name: str
    spec: str
    var: Any


def _shards(name: str | None, v: Any) -> list[_Saved]:
    """A variable, or the shards of a partitioned one (anything with ``_get_variable_list``),
    as saved: a shard with ``_save_slice_info`` is a slice of its full tensor."""
    parts = v._get_variable_list() if hasattr(v, "_get_variable_list") else [v]
    out = []
    for p in parts:
        info = getattr(p, "_save_slice_info", None)
        if info is not None:
            out.append(_Saved(name if name is not None else info.full_name, info.spec, p))
        else:
            out.append(_Saved(name if name is not None else p.op.name, "", p))
    return out


def _variables(var_list: Any) -> list[_Saved]:
    """What to save, from a dict ``{name: variable}`` or a list of variables (named by their
    op, or by their full tensor for the shards of a partitioned variable).

    Raises:
        ValueError: two variables share a name (and are not different slices of one tensor).
        TypeError: something that is not a variable.
    """
    items = (list(var_list.items()) if isinstance(var_list, Mapping)
             else [(None, v) for v in var_list])
    out: list[_Saved] = []
    seen: dict[tuple[str, str], Any] = {}
    for key, v in items:
        for saved in _shards(key, v):
            var = saved.var
            if not (hasattr(var, "_ref") or (isinstance(var, Tensor)
                                            and var.op.type == "VariableV2")):
                raise TypeError(f"Saver can only save variables; {saved.name!r} is {var!r}")
            ident = (saved.name, saved.spec)
            whole_and_slice = any(n == saved.name and bool(sp) != bool(saved.spec)
                                  for n, sp in seen)
            if (ident in seen and seen[ident] is not var) or whole_and_slice:
                raise ValueError(f"At least two variables have the same name: {saved.name}")
            if ident not in seen:
                seen[ident] = var
                out.append(saved)
    return out


def _ref(v: Any) -> Tensor:
    return v._ref() if hasattr(v, "_ref") else v  # type: ignore[no-any-return]


def _saved(v: Any) -> Tensor:
    """What a save shard reads: the reference, or for a resource variable a read of its handle."""
    if getattr(v, "handle", None) is not None:
        return v.value()  # type: ignore[no-any-return]
    return _ref(v)


def _restore_assign(v: Any, value: Tensor) -> Any:
    if getattr(v, "handle", None) is not None:  # a resource variable: AssignVariableOp
        return v.assign(value, name="restore_assign", read_value=False)
    return make_op(ckpt_ops.ASSIGN, [_ref(v), value], {"T": v.dtype}, name="restore_assign")


class Saver:
    """Saves and restores variables to and from checkpoint files, tracked by Redis (TensorFlow
    1.x's Saver).

    Args:
        var_list: the variables: a list (checkpoint names are their op names) or a dict
            ``{name: variable}``; None: every global variable (when built). The shards of a
            partitioned variable (or a ``PartitionedVariable`` given whole) are saved as slices
            of one tensor under the full name, as TensorFlow saves them.
        max_to_keep: how many checkpoints a directory keeps (None or 0: all); older ones are
            removed (files and tracking) when a save commits.
        name: the name scope of the Saver's ops (default ``save``).
        defer_build: build the ops at ``build()`` (the scaffold calls it) instead of now.
        allow_empty: with no variables, ``save`` and ``restore`` do nothing instead of raising.
        redis_url: the Redis; None: ``REDIS_URL`` or the embedded server.
        cluster: the namespace of this job's checkpoints in Redis (default ``"default"``).
        sync: make every file of a checkpoint durable (``fsync`` of the data files, the index
            and the directory) before Redis commits it, so a committed checkpoint survives a
            power loss or a crash of the machine. Default False, as TensorFlow's Saver: the
            files are complete when the save returns and the operating system writes them back
            in its time; a crash of the machine (not of the process) may lose the newest
            checkpoint, and restoring then falls back to an older one (docs/checkpoints.md).

    ``reshape``, ``sharded`` (always: one shard per device), ``keep_checkpoint_every_n_hours``,
    ``restore_sequentially``, ``saver_def``, ``builder``, ``write_version`` (always V2),
    ``pad_step_number``, ``save_relative_paths`` (the state file holds names relative to the
    directory) and ``filename`` are accepted for compatibility.

    Raises:
        ValueError: no variables to save and not ``allow_empty``; two variables share a name.
    """

    def __init__(self, var_list: Any = None, reshape: bool = False, sharded: bool = False,
                 max_to_keep: int | None = 5, keep_checkpoint_every_n_hours: float = 10000.0,
                 name: str | None = None, restore_sequentially: bool = False,
                 saver_def: Any = None, builder: Any = None, defer_build: bool = False,
                 allow_empty: bool = False, write_version: Any = None,
                 pad_step_number: bool = False, save_relative_paths: bool = False,
                 filename: str | None = None, *, redis_url: str | None = None,
                 cluster: str | None = None, sync: bool = False) -> None:
        self._var_list = var_list
        self._sync = bool(sync)
        self._max_to_keep = max_to_keep
        self._name = name
        self._allow_empty = allow_empty
        self._redis_url = redis_url
        self._cluster = cluster or mf.DEFAULT_CLUSTER
        self._graph = get_default_graph()
        self._built = False
        self._empty = False
        self._last_checkpoints: list[tuple[str, float]] = []
        self._prefix_ph: Tensor | None = None
        self._token_ph: Tensor | None = None
        self._merge: Tensor | None = None
        self._restore_op: Operation | None = None
        self._names: list[str] = []
        if not defer_build:
            self.build()

    # ------------------------------------------------------------------ building
    def build(self) -> None:
        """Add the save and restore ops to the graph (once).

        Raises:
            ValueError: nothing to save and not ``allow_empty``.
            RuntimeError: the graph is finalized.
        """
        if self._built:
            return
        g = self._graph
        with g.as_default():
            variables = _variables(global_variables() if self._var_list is None
                                   else self._var_list)
        if not variables:
            if self._allow_empty:
                self._empty = self._built = True
                return
            raise ValueError("No variables to save")
        with g.as_default(), g.control_dependencies(None), g.name_scope(self._name or "save"):
            self._build(g, variables)
        self._built = True

    def _build(self, g: Graph, variables: list[_Saved]) -> None:
        self._prefix_ph = placeholder(dtypes.string, [], name="prefix")
        self._token_ph = placeholder(dtypes.string, [], name="token")
        groups: dict[str, list[_Saved]] = {}
        for saved in variables:
            groups.setdefault(_ref(saved.var).device, []).append(saved)
        fragments: list[Tensor] = []
        shards: list[Operation] = []
        restored: list[tuple[Any, Tensor]] = []
        for i, items in enumerate(groups.values()):
            vs = [s.var for s in items]
            names = [s.name for s in items]
            specs = {"slice_specs": [s.spec for s in items]} \
                if any(s.spec for s in items) else {}
            with g.colocate_with(_ref(vs[0]).op):
                fragments.append(make_op(
                    ckpt_ops.SAVE_SHARD, [self._prefix_ph, self._token_ph, *map(_saved, vs)],
                    {"tensor_names": names, "shard": i, "num_shards": len(groups),
                     "sync": self._sync, **specs},
                    name="save_shard"))
                restore = g.create_op(
                    ckpt_ops.RESTORE_SHARD, [self._prefix_ph],
                    {"tensor_names": names, "dtypes": [v.dtype for v in vs],
                     "shapes": [TensorShape(v.shape) for v in vs], **specs},
                    name="restore_shard")
            shards.append(restore)
            restored.extend(zip(vs, restore.outputs))
        with g.colocate_with(_ref(next(iter(groups.values()))[0].var).op):
            self._merge = make_op(ckpt_ops.MERGE, [self._prefix_ph, *fragments],
                                  {"sync": self._sync}, name="merge")
        assigns = []
        with g.control_dependencies(shards):  # nothing is assigned before every shard verified
            for v, value in restored:
                with g.colocate_with(_ref(v).op):
                    assigns.append(_restore_assign(v, value))
        self._restore_op = group(*assigns, name="restore_all")
        self._names = list(dict.fromkeys(s.name for s in variables))

    def _check_built(self) -> None:
        if not self._built:
            raise RuntimeError("Saver was created with defer_build=True: call build() first "
                               "(Scaffold.finalize does)")

    # ------------------------------------------------------------------ using
    @property
    def saved_names(self) -> list[str]:
        """The checkpoint names of the variables this Saver saves."""
        return list(self._names)

    @property
    def save_op(self) -> Tensor | None:
        """The merge op's output (the JSON of the written files), run by ``save``."""
        return self._merge

    @property
    def restore_op(self) -> Operation | None:
        return self._restore_op

    @property
    def last_checkpoints(self) -> list[str]:
        """The paths this Saver saved that are still kept, oldest first."""
        return [p for p, _ in self._last_checkpoints]

    def redis_url(self) -> str:
        """The Redis this Saver uses (resolved now)."""
        return self._redis_url or cm.configured_redis_url()

    def _store(self) -> Any:
        return cm.open_store(self._redis_url, self._cluster)

    def save(self, sess: Any, save_path: str, global_step: Any = None,
             latest_filename: str | None = None, meta_graph_suffix: str = "meta",
             write_meta_graph: bool = True, write_state: bool = True,
             strip_default_attrs: bool = False, save_debug_info: bool = False) -> str | None:
        """Save the variables as checkpoint ``save_path`` (``-<global_step>`` appended when
        given: an int, or a tensor or variable read first): every device's tasks write their
        shard, one merge writes the index; then Redis tracks it as the latest, and the
        directory's ``checkpoint`` state file (``latest_filename``) names what Redis keeps.

        Returns:
            The checkpoint's path, spelled as ``save_path`` was (None when there is nothing to
            save and ``allow_empty``).

        Raises:
            UnavailableError: Redis (or a task) is unreachable; nothing was saved (the files
                written are removed again).
            InvalidArgumentError: a malformed path.
        """
        self._check_built()
        if self._empty:
            return None
        step: int | None = None
        path = save_path
        if global_step is not None:
            step = int(global_step) if isinstance(global_step, int | np.integer) \
                else int(sess.run(global_step))
            path = f"{save_path}-{step}"
        directory, name = mf.split_path(path)
        prefix = mf.join_path(directory, name)
        token = new_token()
        try:
            result = sess.run(self._merge, feed_dict={self._prefix_ph: prefix,
                                                      self._token_ph: token})
        except errors.OpError:
            # the shards that were written before the failure (the checkpoint's own files are
            # only ever replaced by a merge, which did not complete)
            shutil.rmtree(shard_directory(prefix, token), ignore_errors=True)
            raise
        raw = result.item() if isinstance(result, np.ndarray) else result
        written = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else str(raw))
        try:
            self._store().commit(directory, name, written["files"], written["tensors"], step,
                                 self._max_to_keep,
                                 (latest_filename or STATE_FILENAME) if write_state else None)
        except errors.OpError:
            # a save is a tracked checkpoint or nothing: files Redis never heard of would stay
            # forever (max_to_keep retires tracked checkpoints only)
            cf.remove_files(prefix)
            raise
        self._remember(path)
        return path

    def _remember(self, path: str) -> None:
        self._last_checkpoints = [(p, t) for p, t in self._last_checkpoints if p != path]
        self._last_checkpoints.append((path, time.time()))
        if self._max_to_keep:
            self._last_checkpoints = self._last_checkpoints[-self._max_to_keep:]

    def _verify_tracked(self, directory: str, name: str) -> None:
        """Check the files of a checkpoint Redis tracks against its manifest; nothing to check
        for one it does not track (TensorFlow wrote it) or when Redis is down (the files' own
        checksums are still checked as they are read)."""
        store = self._store()
        try:
            cm.tracked_or_unavailable(lambda: store.check_files(directory, name),
                                    f"checking {mf.join_path(directory, name)}")
        except errors.NotFoundError:
            if not bundle_exists(mf.join_path(directory, name)):
                raise errors.NotFoundError(
                    f"Checkpoint {mf.join_path(directory, name)} not found") from None

    def restore(self, sess: Any, save_path: str) -> None:
        """Restore exactly the checkpoint ``save_path`` (written by tensorgrid or TensorFlow);
        variables change only if every tensor verified.

        Raises:
            ValueError: ``save_path`` is None.
            NotFoundError: no such checkpoint, or it lacks one of the variables (naming it).
            InvalidArgumentError: a variable's dtype or shape differs (naming it).
            DataLossError: the checkpoint is damaged (naming it and what).
            UnavailableError: a task is unreachable.
        """
        self._check_built()
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        directory, name = mf.split_path(save_path)
        if self._empty:
            return
        self._verify_tracked(directory, name)
        self._run_restore(sess, mf.join_path(directory, name))
        log.info("Restored checkpoint %s", save_path)

    def _run_restore(self, sess: Any, prefix: str) -> None:
        sess.run(self._restore_op, feed_dict={self._prefix_ph: prefix})

    def restore_latest(self, sess: Any, checkpoint_dir: str) -> str | None:
        """Restore the newest intact checkpoint of ``checkpoint_dir``: what Redis names
        ``latest``, then older tracked ones (for a directory Redis does not track, or while it is
        down: those the ``checkpoint`` state file names), skipping (and logging) each damaged
        one and each whose files are gone.

        Returns:
            The restored path, or None when the directory has no checkpoint (or nothing is saved).

        Raises:
            DataLossError: every checkpoint of the directory is damaged (naming each).
            NotFoundError, InvalidArgumentError: a checkpoint does not match the graph.
            UnavailableError: a task is unreachable.
        """
        self._check_built()
        if self._empty:
            return None
        directory = mf.normalize_directory(checkpoint_dir)
        store = self._store()
        tracked = cm.tracked_or_unavailable(lambda: store.restore_candidates(directory),
                                          f"listing the checkpoints of {directory}")
        candidates = tracked or cm.state_file_candidates(checkpoint_dir, None)
        skipped: list[str] = []
        for name in candidates:
            prefix = mf.join_path(directory, name)
            try:
                if tracked:
                    store.check_files(directory, name)  # cheap: sizes and the index's checksum
                elif not bundle_exists(prefix):
                    continue
                self._run_restore(sess, prefix)
            except errors.NotFoundError as exc:
                if not bundle_exists(prefix) or "not found: directory" in exc.message:
                    continue  # removed (files gone or untracked since it was listed)
                raise  # the graph has a variable the checkpoint lacks
            except errors.DataLossError as exc:
                skip_damaged(prefix, exc, skipped)
                continue
            if skipped:
                log.warning("Restored %s after skipping %d damaged checkpoint(s)", prefix,
                            len(skipped))
            return cm.as_given(checkpoint_dir, name)
        if skipped:
            raise all_damaged(directory, skipped)
        return None

    def recover_last_checkpoints(self, checkpoint_paths: Iterable[str]) -> None:
        """Take over the bookkeeping of ``last_checkpoints`` (after a restart)."""
        self._last_checkpoints = [(p, time.time()) for p in checkpoint_paths]

    def set_last_checkpoints(self, last_checkpoints: Iterable[str]) -> None:
        self.recover_last_checkpoints(last_checkpoints)
