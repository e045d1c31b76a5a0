"""Variables on the wire as deltas of what the reader already holds (receiver-driven, lossless).

A consumer pulls the same variable every step, and between two pulls it changed by an update or
two: XOR of the new bits with the bits the consumer already has zeroes the sign, the exponent and
the top of the mantissa of almost every element, and a byte shuffle plus LZ4 or ZSTD then packs
the result well below the raw size (measured on Adam updates of a 784x1024 float32 weight: 0.65
to 0.8 of it; in bfloat16 most elements do not change at all).

The protocol, for a key the partitioner marked (``_wire_delta`` on its Send/Recv):

* The consumer names, with the key, the version of that edge's tensor it holds (0: none).
* The producer keeps the last ``KEEP_VERSIONS`` values it sent to that consumer on that key (as
  copies: a variable's buffer is updated in place), each with a version id. If it holds the named
  version and the delta frame is smaller than the raw bytes, it answers with the frame, else with
  the tensor itself; either answer carries the new version id, and both sides cache the new value.
* A delta answer travels as block frames (``delta_frames.py``), each put on the wire while the
  next is encoded (``DeltaStream``); a key whose deltas pack poorly travels whole for a while.
* A mismatch (either side restarted, a step aborted, an entry evicted) costs one full send:
  the consumer decodes only against the exact version the frame names, and a frame checks its
  base version, its checksum and its size, so no state can go wrong silently.

The caches are bounded (bytes per peer and in all, least recently used entries go first) and a
peer's entries go when the graph that made them is deregistered. Everything here is sans-IO:
the servicer and the RemoteRecv call it, on a worker thread for the encoding and decoding of
big tensors (blosc2 and numpy release the GIL).
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorgrid.compiler.wire import DELTA_CODEC_ATTR, DELTA_CODECS, DELTA_LEVEL_ATTR
from tensorgrid.core import dtypes, errors
from tensorgrid.core.device import task_of
from tensorgrid.core.ir import NodeDef
from tensorgrid.core.rendezvous_key import make_key, parse_key
from tensorgrid.transport.delta_frames import (
    BLOCK_BYTES,
    decode_delta,
    delta_blocks,
    encode_delta,
)

# versions of a key the producer keeps: one step aborted between send and receive must not
# force a full send
KEEP_VERSIONS = 2
# a tensor bigger than this always travels whole (one blosc2 call takes < 2 GiB)
MAX_DELTA_BYTES = 1 << 30
# what a task keeps on each side by default (the setting ``wire_delta_cache_bytes``): a trainer's
# pulled weights, two versions of each on the sender, need far less for a model of a few layers
DEFAULT_CACHE_BYTES = 512 * 1024 * 1024
# per-key adaptivity: when the last POOR_WINDOW deltas of a key averaged more than POOR_RATIO of
# its raw size, the key is sent whole (no encoding, no decoding) for PROBE_EVERY answers, then a
# delta is tried again: a delta that saves little costs more CPU and latency than it saves
POOR_RATIO = 0.92
POOR_WINDOW = 4
PROBE_EVERY = 16
# a streamed answer's consecutive block frames share a message until they hold this many bytes
# (a delta that packs well goes in one message; one that does not, a block a message)
FLUSH_BYTES = 256 * 1024
ATTR_CODEC = DELTA_CODEC_ATTR
ATTR_LEVEL = DELTA_LEVEL_ATTR


def deltable(value: Any) -> bool:
    """Whether ``value`` can travel as a delta: a floating array (bfloat16 included) of 2, 4 or
    8 byte elements."""
    if not isinstance(value, np.ndarray) or value.dtype.itemsize not in (2, 4, 8) \
            or not 0 < value.nbytes <= MAX_DELTA_BYTES:
        return False
    try:
        return dtypes.as_dtype(value.dtype).is_floating
    except TypeError:
        return False


class _Lru:
    """Values by (peer, key), least recently used first, bounded in bytes per peer and in all.

    Each entry is a list of (version, array), newest last. Safe to use from any thread.
    """

    def __init__(self, max_bytes: int, max_peer_bytes: int, keep: int) -> None:
        self.max_bytes = max_bytes
        self.max_peer_bytes = max_peer_bytes
        self.keep = keep
        self.nbytes = 0
        self.evicted = 0
        self._peer_bytes: dict[str, int] = {}
        self._entries: OrderedDict[tuple[str, str], list[tuple[int, np.ndarray]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, peer: str, key: str, version: int = 0) -> tuple[int, np.ndarray] | None:
        """The entry's ``version`` (0: its newest), or None."""
        with self._lock:
            entry = self._entries.get((peer, key))
            if not entry:
                return None
            self._entries.move_to_end((peer, key))
            if not version:
                return entry[-1]
            return next((e for e in entry if e[0] == version), None)

    def put(self, peer: str, key: str, version: int, value: np.ndarray) -> None:
        """Add a version (the oldest past ``keep`` goes), then evict down to the bounds; a value
        bigger than a bound is not kept at all."""
        if value.nbytes > min(self.max_bytes, self.max_peer_bytes):
            self.drop(lambda p, k: (p, k) == (peer, key))
            return
        with self._lock:
            entry = self._entries.setdefault((peer, key), [])
            self._entries.move_to_end((peer, key))
            entry.append((version, value))
            self._account(peer, value.nbytes)
            while len(entry) > self.keep:
                self._account(peer, -entry.pop(0)[1].nbytes)
            for (p, k) in list(self._entries):
                if self.nbytes <= self.max_bytes and \
                        self._peer_bytes.get(peer, 0) <= self.max_peer_bytes:
                    break
                if self.nbytes > self.max_bytes or p == peer:
                    self._pop((p, k))

    def drop(self, match: Any) -> int:
        """Drop the entries whose (peer, key) ``match`` accepts; returns how many."""
        with self._lock:
            gone = [pk for pk in self._entries if match(*pk)]
            for pk in gone:
                self._pop(pk, evicted=False)
            return len(gone)

    def _pop(self, pk: tuple[str, str], evicted: bool = True) -> None:
        for _, v in self._entries.pop(pk, []):
            self._account(pk[0], -v.nbytes)
        self.evicted += evicted

    def _account(self, peer: str, n: int) -> None:
        self.nbytes += n
        left = self._peer_bytes.get(peer, 0) + n
        if left:
            self._peer_bytes[peer] = left
        else:
            self._peer_bytes.pop(peer, None)

    def __len__(self) -> int:
        return len(self._entries)


def delta_keys(nodes: Iterable[NodeDef], op: str) -> dict[str, tuple[str, int]]:
    """The rendezvous keys (root frame) of the ``op`` nodes (``_Send`` or ``_Recv``) the
    partitioner marked to travel as deltas, with their codec and level."""
    return {make_key(n.attrs["send_device"], int(n.attrs.get("send_device_incarnation", 0)),
                     n.attrs["recv_device"], n.attrs["tensor_name"]):
            (str(n.attrs[ATTR_CODEC]), int(n.attrs.get(ATTR_LEVEL, 1)))
            for n in nodes if n.op == op and n.attrs.get(ATTR_CODEC)}


class _Marks:
    """The delta keys of a task's registered graphs, kept in step with its graph table (a
    graph registered or deregistered by any path: over gRPC, or by a master in the process)."""

    def __init__(self, op: str) -> None:
        self.op = op
        self.keys: dict[str, tuple[str, int]] = {}
        self._by_graph: dict[str, dict[str, tuple[str, int]]] = {}

    def sync(self, graphs: Mapping[str, Any]) -> set[str]:
        """Follow ``graphs`` (handle -> a registered graph with ``nodes``); returns the keys
        that no graph uses any more."""
        if graphs.keys() == self._by_graph.keys():
            return set()
        gone: set[str] = set()
        for h in [h for h in self._by_graph if h not in graphs]:
            gone |= set(self._by_graph.pop(h))
        for h, g in graphs.items():
            if h not in self._by_graph:
                self._by_graph[h] = delta_keys(g.nodes, self.op)
        self.keys = {k: v for ks in self._by_graph.values() for k, v in ks.items()}
        return gone - set(self.keys)


@dataclass(frozen=True)
class Answer:
    """What a producer sends for a delta key: ``payload`` (a delta frame when ``delta``, else
    the tensor) and the version the consumer caches it under."""

    version: int
    payload: np.ndarray
    delta: bool


def receiver_of(key: str) -> str:
    """The task a rendezvous key's value goes to."""
    return task_of(parse_key(key).recv_device)


class DeltaStream:
    """A delta answer made block by block (``DeltaSender.begin``): ``next_block`` encodes the
    next of its ``count`` block frames (call off the event loop), so the sender puts each on the
    wire while the next one is encoded; after the last, the producer keeps the value sent under
    ``version``.
    The blocks of one answer must be asked for one at a time (from any thread)."""

    def __init__(self, sender: DeltaSender, peer: str, key: str, version: int,
                 value: np.ndarray, base: np.ndarray, base_version: int, codec: str, level: int,
                 kept: np.ndarray) -> None:
        self.peer = peer
        self.key = key
        self.version = version
        self.base = base
        self.kept = kept
        self.sent = 0
        # how many blocks the answer takes (known before any is encoded)
        self.count = -(-kept.nbytes // BLOCK_BYTES)
        self._made = 0
        self._sender = sender
        self._blocks = delta_blocks(value, base, base_version, codec, level, keep=kept)

    def next_block(self) -> np.ndarray:
        """The next block frame; after the last of ``count``, the answer is complete.

        Raises:
            IndexError: all ``count`` blocks were made already.
        """
        if self._made == self.count:
            raise IndexError(f"The delta answer for key {self.key} has only {self.count} blocks")
        block = next(self._blocks)
        self._made += 1
        self.sent += block.nbytes
        if self._made == self.count:
            self._sender._finish(self, self.sent)
        return block


class DeltaSender:
    """The producer's side: the last values sent on each delta key, and the answers.

    Args:
        max_bytes: the cache's bound in all; ``max_bytes // 2`` bounds one consumer's entries.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.cache = _Lru(max_bytes, max_bytes // 2, KEEP_VERSIONS)
        # random start: a version id of another life of this task is never taken for one of now
        self._ids = itertools.count(secrets.randbits(48) + 1)
        self._marks = _Marks("_Send")
        # (peer, key) -> [recent delta ratios, answers left to send whole before the next probe]
        self._fit: dict[tuple[str, str], tuple[list[float], int]] = {}
        self._fit_lock = threading.Lock()
        self.full_sends = 0
        self.delta_sends = 0
        self.skipped = 0  # whole answers where a delta could have been tried (poor ratios)
        self.bytes_raw = 0
        self.bytes_sent = 0

    def answer(self, key: str, value: np.ndarray, have_version: int, codec: str,
               level: int) -> Answer:
        """The answer to a consumer that holds ``have_version`` of ``key``, whole: a delta frame
        when it is smaller than the tensor (call off the event loop: it copies and encodes the
        whole tensor).

        Raises:
            InvalidArgumentError: an unknown codec or a level out of 1..9.
        """
        started = self.begin(key, value, have_version, codec, level)
        if isinstance(started, Answer):
            return started
        frame = encode_delta(value, started.base, have_version, codec, level, keep=started.kept)
        whole = frame.nbytes >= started.kept.nbytes
        self._finish(started, frame.nbytes, whole)
        return Answer(started.version, started.kept if whole else frame, not whole)

    def begin(self, key: str, value: np.ndarray, have_version: int, codec: str,
              level: int) -> Answer | DeltaStream:
        """The answer to a consumer that holds ``have_version`` of ``key``: the whole tensor
        (an ``Answer``: no base, or the key's recent deltas were poor), else a ``DeltaStream``
        whose blocks are encoded one by one as the sender asks for them (call off the event
        loop: a whole answer copies the tensor).

        Raises:
            InvalidArgumentError: an unknown codec or a level out of 1..9.
        """
        if codec not in DELTA_CODECS or not 1 <= level <= 9:
            raise errors.InvalidArgumentError(
                f"Delta key {key}: codec {codec!r} level {level} (a codec is one of "
                f"{', '.join(DELTA_CODECS)}, a level 1..9)")
        # the copy kept of what is sent (the variable may change under us), made block by block
        # inside the encoding when there is a delta to make
        new = np.empty(value.shape, value.dtype)
        peer = receiver_of(key)
        version = next(self._ids)
        base = self.cache.get(peer, key, have_version) if have_version else None
        if base is not None and base[1].dtype == new.dtype and base[1].shape == new.shape \
                and self._try(peer, key):
            return DeltaStream(self, peer, key, version, value, base[1], have_version, codec,
                               level, new)
        np.copyto(new, value)
        self.skipped += base is not None
        self.cache.put(peer, key, version, new)
        self.full_sends += 1
        self.bytes_raw += new.nbytes
        self.bytes_sent += new.nbytes
        return Answer(version, new, False)

    def _finish(self, stream: DeltaStream, sent: int, whole: bool = False) -> None:
        """A delta answer is made: keep what it sent, and note how well it packed."""
        self.cache.put(stream.peer, stream.key, stream.version, stream.kept)
        self._note(stream.peer, stream.key, sent / stream.kept.nbytes)
        self.full_sends += whole
        self.delta_sends += not whole
        self.bytes_raw += stream.kept.nbytes
        self.bytes_sent += stream.kept.nbytes if whole else sent

    def _try(self, peer: str, key: str) -> bool:
        """Whether to try a delta on this key now: not while its recent deltas were poor, except
        as a probe every ``PROBE_EVERY`` answers."""
        with self._fit_lock:
            ratios, wait = self._fit.get((peer, key), ([], 0))
            if wait:
                self._fit[(peer, key)] = (ratios, wait - 1)
            return not wait

    def _note(self, peer: str, key: str, ratio: float) -> None:
        """Record a delta's size over the raw size; a poor window starts a whole-send spell."""
        with self._fit_lock:
            ratios, _ = self._fit.get((peer, key), ([], 0))
            ratios = [*ratios[-(POOR_WINDOW - 1):], ratio]
            poor = len(ratios) == POOR_WINDOW and sum(ratios) / POOR_WINDOW > POOR_RATIO
            # after a poor window, one good probe is enough to resume: keep only it
            self._fit[(peer, key)] = ([], PROBE_EVERY) if poor else (ratios, 0)

    def sync(self, graphs: Mapping[str, Any]) -> None:
        """Follow the task's graph table: the values sent on keys of gone graphs are dropped."""
        gone = self._marks.sync(graphs)
        if gone:
            self.forget(gone)

    def forget(self, keys: Iterable[str]) -> int:
        """Drop the cached values of ``keys`` (their graph is gone); returns how many."""
        gone = set(keys)
        with self._fit_lock:
            for pk in [pk for pk in self._fit if pk[1] in gone]:
                del self._fit[pk]
        return self.cache.drop(lambda _p, k: k in gone)


class DeltaReceiver:
    """The consumer's side: which keys are delta keys (from the registered graphs), the value
    last received on each, and the decoding.

    Args:
        max_bytes: the cache's bound in all; ``max_bytes // 2`` bounds one producer's entries.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.cache = _Lru(max_bytes, max_bytes // 2, 1)
        self._marks = _Marks("_Recv")
        self.decoded = 0

    def sync(self, graphs: Mapping[str, Any]) -> None:
        """Follow the task's graph table (handle -> registered graph): the keys of new graphs
        are delta keys, and those of gone graphs go with their cached values."""
        gone = self._marks.sync(graphs)
        if gone:
            self.cache.drop(lambda _p, k: k in gone)

    def wants(self, key: str) -> tuple[str, int] | None:
        """(codec, level) of a delta key, or None."""
        return self._marks.keys.get(key)

    def held(self, peer: str, key: str) -> tuple[int, np.ndarray] | None:
        """(version, value) this consumer holds of ``key`` from ``peer``, or None."""
        return self.cache.get(peer, key)

    def accept(self, peer: str, key: str, version: int,
               payload: np.ndarray | Sequence[np.ndarray], delta: bool,
               base: tuple[int, np.ndarray] | None) -> np.ndarray:
        """The tensor an answer carries (decoded against ``base``, the version named in the
        request, when it is a delta: one frame, or the block frames of a streamed answer),
        cached as ``version`` (call off the event loop).

        Raises:
            DataLossError: a delta answer to a request that named no version, or a bad frame.
        """
        if delta:
            if base is None:
                raise errors.DataLossError(f"Task {peer} sent a delta for key {key} to a "
                                           "consumer that holds no version of it")
            # the cached copy (the consumer's kernels own the value they are given) is made
            # block by block inside the decoding
            keep = np.empty_like(base[1], order="C")
            value = decode_delta(payload, base[1], base[0], keep=keep)
            self.decoded += 1
            if version:
                self.cache.put(peer, key, version, keep)
            return value
        if not isinstance(payload, np.ndarray):
            raise errors.DataLossError(f"Task {peer} sent block frames for key {key} without "
                                       "marking them a delta")
        if version and deltable(payload):
            self.cache.put(peer, key, version, np.array(payload, order="C", copy=True))
        return payload
