"""How large products run: on BLAS's threads, split over the block runner, or on one thread,
chosen by measured speed and kept while the machine stays as it was measured.

BLAS's threads busy-wait between calls and meet at the end of each one. Alone on its cores that is
the fastest way to multiply (a 784-256-10 MLP step: 0.8 ms on two threads, 1.3 ms on one); on a
machine whose cores other processes also want, every call waits for a thread that is not
scheduled, and the threads spinning between calls take the core from the work between the
products: the same step measured 5-30 ms. After a call they spin on for a while (OpenBLAS: ~2^28
cycles, ~70 ms of a core), so a process that also runs convolution blocks on its own threads (the
CNN of ``bench/local.py``) lost a core to them all the time: splitting its products over the block
runner instead leaves BLAS's threads asleep and halved its CPU per step.

No mode is right for every machine, so time is cut into periods, each run under one mode and
measured as wall seconds per flop of the large products made in it, everything between them
included (a product timed alone looks faster threaded while the spinning slows the rest of the
step). The mode that measures cheapest is *chosen* and runs in periods of ``period_s``; the others
are *probed* now and then, in periods of ``probe_period_s``. How the choice settles, and how it
follows a change of load without following every disturbance:

1. A mode's cost is the median of its last ``SAMPLES`` periods (the least of fewer: a disturbance
   only ever slows a period), so one period disturbed by a burst of another process's work moves
   nothing.
2. Another mode replaces the chosen one only when ``MARGIN`` cheaper (two modes that measure alike
   do not take turns). A probe that beats the chosen mode while its median does not yet is
   measured again at once: a switch takes two good periods, never one lucky one.
3. A mode not chosen is probed again after a back-off that starts at ``BACKOFF * period_s`` (so
   a mode is measured twice, 2 s apart, before the choice settles: one window or two of a
   benchmark after its warm-up, not every one) and grows ``BACKOFF`` times per probe that does
   not win, up to ``settled_probe_s`` while the chosen mode keeps every allowed thread busy
   (``ALL_CORES``: a change of the machine's load shows in its own cost, see 4; so a mode measured
   twice goes straight there), or up to ``probe_s`` while a single-core mode is chosen (it cannot
   see the other core free up; ``SLOW_PROBE_FACTOR`` times that for a mode measured
   ``SLOW_RATIO`` times slower). Where the machine's idle time can be read (``idle_seconds``), a
   single-core period tells whether another core sat idle meanwhile (``SPARE_CORES``); when one
   frees up, the modes that use every core are probed at once. (A busy machine is no reason to
   stop probing them: against processes that run in bursts, as tests and compilers do, two
   threads still get more of the machine than one, and a threaded step measured 1.35x faster
   than a single-core one; against ones that keep a core busy they wait for it, 10-30x slower,
   and 5 ends their probes early.) A mode that stops being chosen is probed again ``period_s``
   later (at the back-off's first step when it measured ``SLOW_RATIO`` times slower): if what
   displaced it was a passing burst of load, it comes back within a few seconds.
4. When the median of the chosen (``ALL_CORES``) mode's last ``SAMPLES`` periods moves by
   ``CHANGE`` or more either way from its median over its first ``SAMPLES`` periods as the chosen
   mode (or since the last change), the load has changed: the
   other modes' figures are dropped and each is measured again at once (once: the next probe
   follows on the back-off, ``BACKOFF * period_s`` later).
5. A period going far worse than expected ends early: a probe, ``ABORT_PROBE`` times the chosen
   mode's cost, from ``probe_period_s / 2`` on (a threaded probe against a process that keeps a
   core busy costs a few hundredths of a second; a probe that merely met a burst of load runs
   its course); a chosen period, ``ABORT`` times the figure its mode was chosen at, from
   ``2 * probe_period_s`` on (a change of load is seen in two such periods, not two long ones).

A period is measured from the end of its first product (which pays for waking threads), and one
that follows a threaded period from its first product ending ``settle_s`` after its start (BLAS's
threads are still spinning until then). A period with a pause longer than ``idle_s`` between
products is not counted (the process was doing something else), and after a pause longer than
``forget_s`` every mode is measured afresh (the products that follow may be another model's).

The chooser is plain logic on the times it is given (no clock of its own), so tests drive it with
made-up costs.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from statistics import median

THREADED, BLOCKS, SINGLE = "threaded", "blocks", "single"
MODES = (THREADED, BLOCKS, SINGLE)
# the modes that keep every allowed thread busy: a change of the machine's load shows in their cost
ALL_CORES = frozenset({THREADED, BLOCKS})

# A mode's cost is the median of its last SAMPLES periods (the least while it has fewer).
SAMPLES = 3
# Another mode replaces the chosen one when this fraction cheaper.
MARGIN = 0.1
# The chosen mode's cost moving by this factor (up or down) sends the others to be measured again.
CHANGE = 1.3
# A mode's next probe comes this many times later than its last one (up to the cap).
BACKOFF = 4.0
# A mode measured this many times slower than the chosen one is probed SLOW_PROBE_FACTOR times less
# often (while a single-core mode is chosen).
SLOW_RATIO = 1.5
SLOW_PROBE_FACTOR = 2
# A chosen period going this many times worse than its mode's figure ends early, and a probe
# going ABORT_PROBE times worse than the chosen mode's.
ABORT = 2.0
ABORT_PROBE = 4.0
# Idle cores of the machine (on average over a single-core period) from which the modes that use
# every core are worth probing: one core mostly idle beside ours.
SPARE_CORES = 0.5


class BlasChooser:
    """The mode (one of ``modes``) each large product runs in, chosen by measured speed.

    ``pick(now)`` before a product gives its mode; ``record(now, flops)`` after it counts it.
    Both may be called from several kernel threads.
    """

    def __init__(self, probe_s: float = 3.0, settled_probe_s: float = 30.0,
                 period_s: float = 0.5, probe_period_s: float = 0.1, idle_s: float = 0.5,
                 settle_s: float = 0.15, forget_s: float = 2.0,
                 modes: tuple[str, ...] = MODES,
                 idle_seconds: Callable[[], float | None] | None = None) -> None:
        """``idle_seconds``, when given, returns the seconds the machine's cores have been idle
        in all, summed over them (``/proc/stat``), or None when unknown."""
        self.probe_s, self.settled_probe_s = probe_s, settled_probe_s
        self.period_s, self.probe_period_s = period_s, probe_period_s
        self.idle_s, self.settle_s, self.forget_s, self.modes = idle_s, settle_s, forget_s, modes
        self._lock = threading.Lock()
        self.idle_seconds = idle_seconds
        self.idle_at: tuple[float, float] | None = None  # (when, idle seconds) at a period's start
        self.spare: bool | None = None  # whether the last single-core period saw a core idle
        self.history: dict[str, deque[float]] = {m: deque(maxlen=SAMPLES) for m in modes}
        self.cost = dict.fromkeys(modes, 0.0)  # seconds per flop (from history); 0 = unknown
        self.next_probe = dict.fromkeys(modes, 0.0)  # when each may be probed again
        # the wait before each one's next probe
        self.backoff = dict.fromkeys(modes, period_s * BACKOFF)
        self.chosen = modes[0]  # the mode that runs when none is being probed
        self.reference = 0.0  # the chosen mode's cost when it was chosen or last compared
        self.ref_full = False  # whether reference is the median of SAMPLES chosen periods
        self.confirm: str | None = None  # a mode whose probe beat the chosen one: measure again
        self.probes = 0  # probe periods begun
        # when a list: (start, mode, probe?) of every period begun, for benchmarks to read
        self.trace: list[tuple[float, str, bool]] | None = None
        self.reprobes = 0  # changes of load seen in the chosen mode's cost
        self.mode = modes[0]  # the mode of the current period
        self.start = -1.0  # when the current period began (< 0: none yet)
        self.length = probe_period_s
        self.flops = 0
        self.last = -1.0  # when the last product ended
        self.warming = False  # the period's first products are not counted (threads wake up)
        self.settle_until = -1.0  # products ending before this are not counted

    # ------------------------------------------------------------------ the kernels' calls
    def pick(self, now: float) -> str:
        """The mode for a product starting at ``now`` (the current period's, or the next
        period's when this one is over)."""
        with self._lock:
            if self.start < 0.0 or now - self.last > self.idle_s:
                if self.start >= 0.0 and now - self.last > self.forget_s:
                    self._forget()  # other products may follow (another model in this process)
                    self.length = self.probe_period_s  # its mode is measured like the others
                self._begin(now, self.mode, self.length)  # the first, or after a pause
            elif not self.warming and (now - self.start >= self.length or self._hopeless(now)):
                if self.flops > 0:
                    self._measured(now, self.mode, (now - self.start) / self.flops)
                self._next(now)
            return self.mode

    def record(self, now: float, flops: int) -> None:
        """A product of ``flops`` ended at ``now`` under the current period's mode."""
        with self._lock:
            if self.warming:  # the period is measured from the end of its first (settled) product
                if now >= self.settle_until:
                    self.warming, self.start = False, now
            else:
                self.flops += flops
            self.last = now

    # ------------------------------------------------------------------ the decisions
    def _hopeless(self, now: float) -> bool:
        """Whether the current period already costs far more than was expected of it."""
        probe = self.mode != self.chosen
        if probe:
            expected, judged = ABORT_PROBE * self.cost[self.chosen], self.probe_period_s / 2
        else:
            expected, judged = ABORT * self.reference, 2 * self.probe_period_s
        elapsed = now - self.start
        return self.flops > 0 and expected > 0.0 and elapsed >= judged \
            and elapsed > expected * self.flops

    def _measured(self, now: float, mode: str, cost: float) -> None:
        """A period of ``mode`` cost ``cost`` seconds per flop: update the figures and the
        choice, and schedule the mode's next probe."""
        hist = self.history[mode]
        hist.append(cost)
        self.cost[mode] = median(hist) if len(hist) == SAMPLES else min(hist)
        if mode != self.chosen:
            if cost < (1.0 - MARGIN) * self.cost[self.chosen] <= self.cost[mode]:
                self.confirm = mode  # one period beat the chosen mode; the median has not yet
        else:
            if mode not in ALL_CORES:
                self._spare_cores(now)
            if not self.ref_full:
                # the figure to hold it to is its median once it has SAMPLES periods (its first,
                # short probe may have been disturbed)
                self.reference, self.ref_full = self.cost[mode], len(hist) == SAMPLES
            elif mode in ALL_CORES and \
                    not self.reference / CHANGE < self.cost[mode] < self.reference * CHANGE:
                self._load_changed(mode, cost)
        self._choose(now)
        if mode != self.chosen:
            far = self.cost[mode] > SLOW_RATIO * self.cost[self.chosen]
            cap = self.settled_probe_s if self.chosen in ALL_CORES else \
                self.probe_s * (SLOW_PROBE_FACTOR if far else 1)
            if self.chosen in ALL_CORES and len(self.history[mode]) > 1:
                # a change shows in the chosen mode's own cost (4): once the others have been
                # measured twice, the choice settles at once
                self.backoff[mode] = cap
            self.next_probe[mode] = now + min(self.backoff[mode], cap)
            self.backoff[mode] = min(self.backoff[mode] * BACKOFF, cap)

    def _load_changed(self, mode: str, cost: float) -> None:
        """The chosen mode's median moved by ``CHANGE``: measure the others afresh."""
        hist = self.history[mode]
        # the load changed: what was measured before says nothing now (the mode's own
        # earlier periods included: the latest is the one figure of the new load)
        hist.clear()
        hist.append(cost)
        self.cost[mode] = self.reference = cost
        self.ref_full = False
        self.confirm = None
        self.reprobes += 1
        for other in self.modes:
            if other != mode:
                self.history[other].clear()
                self.cost[other] = 0.0
                self.backoff[other] = self.period_s * BACKOFF  # one round now, not two

    def _spare_cores(self, now: float) -> None:
        """After a period of the chosen single-core mode: whether another core sat idle in it;
        when one has just freed up, the modes that use every core are probed at once."""
        idle = self.idle_seconds() if self.idle_seconds is not None else None
        if idle is None or self.idle_at is None or now <= self.idle_at[0]:
            return
        spare = (idle - self.idle_at[1]) / (now - self.idle_at[0]) >= SPARE_CORES
        if spare and self.spare is False:
            for m in self.modes:
                if m in ALL_CORES and m != self.chosen:
                    self.next_probe[m], self.backoff[m] = now, self.period_s
        self.spare = spare

    def _choose(self, now: float) -> None:
        """Replace the chosen mode by a known one ``MARGIN`` cheaper, if there is one."""
        known = [m for m in self.modes if self.cost[m] > 0.0]
        if not known or self.cost[self.chosen] == 0.0:
            return
        best = min(known, key=lambda m: self.cost[m])
        if self.cost[best] < (1.0 - MARGIN) * self.cost[self.chosen]:
            old = self.chosen
            self.chosen, self.reference, self.ref_full = best, self.cost[best], False
            # what displaced it may pass soon (a burst of load that met its first period, say):
            # probe it again a period later, unless it measured far slower (a probe of it then
            # costs more: threaded beside the CNN's convolution blocks)
            far = self.cost[old] > SLOW_RATIO * self.cost[best]
            self.backoff[old] = self.period_s * BACKOFF
            self.next_probe[old] = now + (self.backoff[old] if far else self.period_s)
            if self.confirm == best:
                self.confirm = None

    def _next(self, now: float) -> None:
        """Begin the next period: a probe when one is due, else the chosen mode's."""
        probe = self._due_probe(now)
        if probe is None:
            self._begin(now, self.chosen, self.period_s)
        else:
            self.probes += 1
            self._begin(now, probe, self.probe_period_s)

    def _due_probe(self, now: float) -> str | None:
        others = [m for m in self.modes if m != self.chosen]
        for other in others:  # never measured, or dropped by a change of load
            if not self.history[other]:
                return other
        if self.confirm is not None:
            probe, self.confirm = self.confirm, None
            return probe
        due = [m for m in others if now >= self.next_probe[m]]
        return min(due, key=lambda m: self.next_probe[m]) if due else None

    def _forget(self) -> None:
        for m in self.modes:
            self.history[m].clear()
        self.cost = dict.fromkeys(self.modes, 0.0)
        self.next_probe = dict.fromkeys(self.modes, 0.0)
        self.backoff = dict.fromkeys(self.modes, self.period_s * BACKOFF)
        self.chosen, self.reference, self.confirm, self.spare = self.mode, 0.0, None, None
        self.ref_full = False

    def _begin(self, now: float, mode: str, length: float) -> None:
        spinning = self.mode == THREADED and mode != THREADED and self.start >= 0.0
        self.settle_until = now + (self.settle_s if spinning else 0.0)
        self.mode, self.start, self.length, self.flops = mode, now, length, 0
        self.last, self.warming = now, True
        if self.trace is not None:
            self.trace.append((now, mode, mode != self.chosen))
        self.idle_at = None
        if self.idle_seconds is not None and mode == self.chosen and mode not in ALL_CORES:
            idle = self.idle_seconds()
            self.idle_at = None if idle is None else (now, idle)
