"""Event-time tumbling and hopping windows per stream key, built from panes.

Time is cut into *panes* of ``gcd(size, slide)``; window ``k`` covers
``[k * slide, k * slide + size)`` (aligned to the epoch) and is the merge of its panes, so a
hopping window never holds a second copy of an event: each event updates exactly one pane.

One watermark per manager (one input partition, or the whole stream of a replay; docs/watermarks.md):
stream time is the largest event time seen over *all* keys and the watermark is stream time minus
``grace``. When an event moves it past windows' ends they close at once, for every key, in order of
``(end + grace, key)`` (one sort per distinct closing time), so the output is a function of the
events alone, not of when :meth:`WindowManager.poll` is called.
:meth:`WindowManager.advance_watermark` moves it without an event (``--idle-close``); what it passes
closes at the next poll. An event whose pane belongs only to closed windows is **late**: not
applied, counted for the key (``late``), and :meth:`WindowManager.add` returns False.

Bounded in time: closing and flush closes jump over empty ranges of windows, so their cost
is O(open panes x windows per pane) whatever the gap between two events (a first event at
``ts=0``, one dated 9999). An event more than ``max_future`` seconds (default 1 h; None or 0:
no bound) ahead of ``wall_clock()`` is refused with :class:`EventRejected` (code ``future``),
counted in :attr:`WindowManager.rejected` and never advances stream time: one bad producer
clock cannot turn the rest of the stream late. The bound is cached and re-read from the wall
clock when an event passes it, at every :meth:`WindowManager.poll`, and at least every
:data:`FUTURE_REFRESH_EVENTS` events, so it follows the wall clock down after a step back
(a host clock stepped forward, then corrected) as well as up.

Bounded in keys: a key whose windows have all closed and that queues nothing is *evicted*; a
compact ``(next_window, late)`` of each evicted key is kept (at most ``max_keys`` of them,
oldest dropped first), so a later event of the key is late for a closed window exactly as if the
key had stayed, and its ``late`` total carries on. Keys that fall out of that memory are
*forgotten*: the largest ``next_window`` among them becomes a frontier for every key not held or
remembered, so an event below it is late rather than able to re-open (and re-emit with other
content) a window already emitted under a forgotten key; a genuinely new key's events older than
that frontier are then late too (conservative: a window is never emitted twice under one key
with different content). That frontier only reaches windows still in use when more than
``max_keys`` keys are evicted while the stream stays in one window; raise ``max_keys`` for such
churn. At most ``max_keys`` keys hold open windows (default 100,000); an event of a new key
beyond that is refused (:class:`EventRejected` code ``key_limit``, counted). With
``cumulative=True`` keys are not evicted (their all-time monitor is the point) and ``max_keys``
alone bounds them.

**Delayed labels** (contract section 5; the join is :mod:`streammetrics.stream.labels`):
:meth:`WindowManager.add_prediction` applies a prediction awaiting its label (the monitor's
``update_prediction``: label-free metrics) and counts it as awaiting in its pane;
:meth:`WindowManager.add_outcome` later applies its label (``update_outcome``) to every window
of its ``ts`` that held it, :meth:`WindowManager.expire` marks it expired instead. A window
closes as usual with revision 0; if predictions in it still await labels it is kept, as its
merged monitor (compact state, never events) with awaiting/expired counters. A kept window
that labels or expiries changed emits one new revision (coalesced) at the next **revision
tick** (docs/revisions.md): :meth:`revision_tick` is given the event time of each item of the label
stream before it is applied, and a tick is when that time minus ``grace`` enters a later pane, plus
the end of input (:meth:`flush`), so the numbering is a function of the events' timestamps
(:func:`streammetrics.spark.window_snapshots` computes it). ``poll(revisions=True)`` (the live
service) also emits what changed since the last tick; replay polls with ``revisions=False``. The
last revision is ``"final": true`` when nothing in the window awaits a label. Bound: about
``(label_ttl + grace) / pane + 2`` revisions per window (plus one per poll with ``revisions=True``).
Kept windows are bounded by the label join's TTL and pending bound (each holds at least one
pending prediction). Snapshots carry ``revision``, ``labeled``, ``expired`` and ``pending``;
without delayed labels every window emits once: revision 0, final, ``labeled == count``.

Snapshots follow the contract's schema ``streammetrics.snapshot/1``. With ``cumulative=True``
an all-time snapshot per key (``"final": false``, ``"cumulative": true``) follows each close:
the key's events from its first window's start up to the end of the window just closed (the
``window`` it carries), never an event past that end. Its ``late`` (like every snapshot's) is
the key's running total of late events dropped, as the contract says.

With ``batch=True`` events are queued per pane and handed to the monitor's vectorised
``update_events(events)`` just before the pane is needed (a window closes, a checkpoint is
taken, or the queue reaches ``max_pending``): per-event work is then an append, and the result
is the same as updating per event, because a pane is only read after its queue is drained.
A monitor whose ``update_event`` is itself an append to a small form
(:attr:`~streammetrics.monitors.base.Monitor.small_form`: ``BinaryMonitor`` keeps its common
event as one float, the signed score, until it outgrows that form) is given its events one by
one instead: the pane's monitor is its queue (checkpoints write it as the monitor's state).

A column batch (:meth:`WindowManager.add_columns`) whose keys need no per-event decision (nothing
late, no earlier first window; keys not held created together, and keys back after a quiet
window caught up together, first) is *staged* as columns and joins its
keys' queues when something first reads them (a close, an evicting poll, a checkpoint, another
path for one of its keys): at many keys of few events, per (key, pane) once per window rather
than once per batch; at most :data:`STAGE_MAX_EVENTS` events are staged
(:attr:`WindowManager.staged_count`).

Closed windows of such monitors wait in the ready queue, in order, until the next
:meth:`WindowManager.poll` builds their snapshots together through the monitor type's
``snapshot_many`` (``snapshot_texts`` for :meth:`WindowManager.poll_lines`): many small windows
in one vectorised pass. A small tumbling window whose only content is its queued items closes as
those items, without a monitor: the poll writes its texts from them (the type's ``item_texts``)
and makes its monitor only where it is read (a hook, ``snapshot_many``). A window of more than
:data:`DEFER_MAX_EVENTS` events, and one retained for label revisions, is built when it closes.

Everything is deterministic given the same events in the same order (and the same calls of
:meth:`WindowManager.advance_watermark`), and the whole state round-trips through
:meth:`WindowManager.to_dict`, which is what lets the Kafka service checkpoint and re-emit
byte-identical snapshots after a crash.
"""
from __future__ import annotations

import heapq
import itertools
import math
import operator
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from streammetrics.core.exceptions import InvalidEvent
from streammetrics.events.records import Event
from streammetrics.monitors.base import Monitor
from streammetrics.stream.snapshots import build_snapshot, snapshot_line, window_lines

__all__ = [
    "DEFAULT_MAX_FUTURE",
    "FUTURE_REFRESH_EVENTS",
    "DEFAULT_MAX_KEYS",
    "EventRejected",
    "WindowManager",
    "WindowSpec",
    "parse_duration",
]

#: default bound on how far ahead of the wall clock an event time may be (seconds)
DEFAULT_MAX_FUTURE = 3600.0
#: the cached ``max_future`` bound is re-read from the wall clock at least every this many events
FUTURE_REFRESH_EVENTS = 1024
#: default bound on the keys held at once (open windows), and on the evicted keys remembered
DEFAULT_MAX_KEYS = 100_000
#: closed windows of at most this many events wait for the next poll to be built together
#: (``snapshot_many``); larger ones are built when they close (their monitors are not held)
DEFER_MAX_EVENTS = 256

#: events :meth:`WindowManager.add_columns` holds staged (applied to their keys' queues together,
#: see ``_stage``) before it applies them; the bound on that buffer (~32 bytes an event)
STAGE_MAX_EVENTS = 1 << 18
#: delayed labels: a monitor's queued predictions (or labelled ones) are applied by one vectorised
#: ``update_predictions`` (``update_outcomes``) from this many, else one by one (below it the
#: vectorised update's fixed cost is the larger)
LABEL_BATCH_MIN = 64
_SLOTS = itertools.count()
_SLOT = operator.attrgetter("slot")
_ARMED, _CLOSE_AT = operator.attrgetter("armed"), operator.attrgetter("close_at")
_OPEN_FROM, _FIRST_BOUND = operator.attrgetter("open_from"), operator.attrgetter("first_pane_bound")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d)?\s*$")
_floor = math.floor
_INT64_MAX = int(np.iinfo(np.int64).max)
_INF, _NEG_INF = math.inf, -math.inf
_FIRST = _MODEL = operator.itemgetter(0)
_SEGMENT = operator.itemgetter(1)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1000}


#: delayed labels: the ordinary range of an event's numbers (see _ordinary)
_HUGE, _TINY = 2.0 ** 200, 2.0 ** -200


def _ordinary(event: Any) -> bool:
    """Whether every number of ``event`` is ordinary: its weight in ``[2**-200, 2**200]`` (not 0),
    its score, scores, and numeric ``y_pred`` / ``y_true`` of magnitude at most ``2**200``. Products
    and sums of such numbers cannot overflow, so updates of them raise no floating-point warning."""
    if not _TINY <= event.weight <= _HUGE:
        return False
    v = event.score
    if v.__class__ is float and not -_HUGE <= v <= _HUGE:
        return False
    v = event.y_pred
    if v.__class__ is float and not -_HUGE <= v <= _HUGE:
        return False
    v = event.y_true
    if v.__class__ is float and not -_HUGE <= v <= _HUGE:
        return False
    scores = event.scores
    return scores is None or all(-_HUGE <= v <= _HUGE for v in scores)


def parse_duration(text: str | float, name: str = "duration") -> float:
    """Seconds in ``"500ms"``, ``"10s"``, ``"1.5m"``, ``"2h"``, ``"1d"`` or a plain number of seconds."""
    if isinstance(text, bool):
        raise TypeError(f"{name} must be a duration such as '60s', got {text!r}")
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        m = _DURATION.match(str(text))
        if not m:
            raise ValueError(f"{name} must be a duration such as '500ms', '60s', '5m', '1h', got {text!r}")
        seconds = float(m.group(1)) * _UNIT_MS[m.group(2)] / 1000.0
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{name} must be a finite, non-negative duration, got {text!r}")
    return seconds


def _to_ms(seconds: float, name: str) -> int:
    ms = round(seconds * 1000)
    if abs(ms - seconds * 1000) > 1e-6:
        raise ValueError(f"{name} must be a whole number of milliseconds, got {seconds!r} s")
    return ms


class WindowSpec:
    """Window geometry in integer milliseconds: ``size``, ``slide`` and their pane ``gcd``."""

    __slots__ = ("grace_ms", "pane_ms", "size_ms", "slide_ms")

    def __init__(self, size: float, slide: float | None = None, grace: float = 0.0) -> None:
        self.size_ms = _to_ms(size, "window")
        self.slide_ms = self.size_ms if slide is None else _to_ms(slide, "slide")
        self.grace_ms = _to_ms(grace, "grace")
        if self.size_ms <= 0:
            raise ValueError(f"window must be positive, got {size!r} s")
        if self.slide_ms <= 0 or self.slide_ms > self.size_ms:
            raise ValueError(f"slide must be positive and at most the window ({size!r} s), got {slide!r} s")
        self.pane_ms = math.gcd(self.size_ms, self.slide_ms)

    @property
    def panes_per_window(self) -> int:
        return self.size_ms // self.pane_ms

    @property
    def panes_per_slide(self) -> int:
        return self.slide_ms // self.pane_ms

    def first_window_of_pane(self, pane: int) -> int:
        """Smallest window index ``k`` whose span contains pane ``pane``."""
        # window k holds panes [k*s, k*s + w) with s = panes_per_slide, w = panes_per_window
        s, w = self.panes_per_slide, self.panes_per_window
        return -((w - 1 - pane) // s)  # ceil((pane - w + 1) / s)

    def last_window_of_pane(self, pane: int) -> int:
        return pane // self.panes_per_slide

    def to_dict(self) -> dict[str, int]:
        return {"size_ms": self.size_ms, "slide_ms": self.slide_ms, "grace_ms": self.grace_ms}


class EventRejected(ValueError):
    """:meth:`WindowManager.add` refused an event, changing nothing: ``code`` (machine-readable:
    ``future``, ``key_limit``, ``kind_mismatch``), ``reason`` (one line) and ``field``."""

    def __init__(self, code: str, reason: str, field: str | None = None) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.field = field


class _KeyState:
    """Open panes and bookkeeping for one stream key."""

    __slots__ = (
        "armed",
        "awaiting",
        "close_at",
        "closing",
        "cumulative",
        "first_pane_bound",
        "first_window",
        "late",
        "max_us",
        "model",
        "next_window",
        "open_from",
        "panes",
        "pending",
        "revising",
        "slot",
        "tag",
    )

    def __init__(self, model: str) -> None:
        self.model = model  # the key's model string (events queued for the key share it)
        self.slot = next(_SLOTS)  # a number of its own (staged events are grouped by it)
        self.panes: dict[int, Any] = {}  # pane index -> monitor
        self.pending: dict[int, list[Any]] = {}  # pane index -> queued events (batch mode)
        self.max_us: float = _NEG_INF  # largest event time seen (us)
        self.next_window: int | None = None  # lowest window index not yet closed
        self.late = 0
        self.armed: float = math.nan  # the close_at of the key's live entry in the manager's heap (nan: none)
        self.cumulative: Any = None
        self.first_window: int | None = None
        self.tag: Any = None  # the key's event tag (see WindowManager), fixed by its first event
        self.closing: list[Any] | None = None  # (its window's items while _close_due closes it: see _unstage)
        # derived from next_window, for the per-event path: panes below open_from are late, and
        # stream time (us) reaching close_at closes the next window
        self.open_from: float = _NEG_INF
        self.close_at: float = _NEG_INF
        self.first_pane_bound: float = _INF  # panes below it start an earlier first window
        # delayed labels: pane -> [predictions awaiting their label, predictions expired]
        self.awaiting: dict[int, list[int]] = {}
        self.revising: dict[int, _Revising] = {}  # window index -> closed window awaiting labels


#: the stand-in of a key not held in _stage's columns (its events are late for it: the per-key path)
_ABSENT = _KeyState("")
_ABSENT.open_from = math.inf


class _Revising:
    """A closed window still awaiting labels: its merged monitor (compact state, not events),
    the predictions in it still awaiting a label or expired, its last revision number and
    whether labels changed it since."""

    __slots__ = ("monitor", "awaiting", "expired", "revision", "dirty")

    def __init__(self, monitor: Any, awaiting: int, expired: int, revision: int = 0, dirty: bool = False) -> None:
        self.monitor = monitor
        self.awaiting = awaiting
        self.expired = expired
        self.revision = revision
        self.dirty = dirty


#: a closed window whose snapshot :meth:`WindowManager.poll` builds with the other windows closed
#: since the last poll (``snapshot_many``): the tuple ``(key, monitor, items, start_ms, end_ms,
#: final, late, expired, cumulative)``, its monitor no longer changed by the engine, or None and
#: only its events in the small form's input (``items``: the monitor is made when the poll needs
#: it, and not at all when the type writes the window's texts from its items,
#: ``Monitor.item_texts``), and the snapshot's fields as they were when it closed (a tuple: one per
#: key and window, ~6x cheaper to make than an object)
_Closed = tuple


def _extremes(panes: np.ndarray, pos: np.ndarray, n: int, where: np.ndarray | None = None
              ) -> tuple[list[int], list[int]]:
    """Per distinct key of a segment (``pos``: each event's key among ``n``, ``where``: the
    events' positions in the segment, None: ``0, 1, ...``): its lowest pane, and the position of
    its first event."""
    low = np.full(n, _INT64_MAX, dtype=np.int64)
    np.minimum.at(low, pos, panes)
    first = np.full(n, _INT64_MAX, dtype=np.int64)
    np.minimum.at(first, pos, np.arange(len(pos), dtype=np.int64) if where is None else where)
    return low.tolist(), first.tolist()


def _dense(kx: np.ndarray, n: int) -> tuple[list[int], np.ndarray]:
    """The distinct values of ``kx`` (integers in ``[0, n)``), ascending, and each element's
    index among them (``np.unique``'s values and inverse, without its sort)."""
    present = np.zeros(n, dtype=bool)
    present[kx] = True
    rank = np.cumsum(present, dtype=np.intp)
    return np.flatnonzero(present).tolist(), rank[kx] - 1


def _order(key: tuple[Any, Any]) -> tuple[str, str]:
    """The order keys close in on one watermark: the key itself when both parts are strings (as
    the event parser makes them), else a string form of it after those (comparable whatever the
    parts' types, the same from the same key)."""
    if key[0].__class__ is str and key[1].__class__ is str:
        return key
    return (f"\uffff{key[0]!r}", repr(key[1]))


def _sorted_keys(keys: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """``keys`` in their order (``sorted(keys)``, else by :func:`_order` when their parts do not
    compare): by segment, then stably by model, each sort comparing strings directly (about twice
    as fast as comparing the tuples, ~3,000 keys closing at once)."""
    try:
        ordered = sorted(keys, key=_SEGMENT)
        ordered.sort(key=_MODEL)
        return ordered
    except TypeError:
        pass
    try:
        keys.sort()
    except TypeError:  # keys whose parts are not strings
        keys.sort(key=_order)
    return keys


def _appended(metrics: str, members: str) -> str:
    """The JSON object text ``metrics`` with the JSON ``members`` (``,"name":value...``) appended."""
    if not members:
        return metrics
    return metrics[:-1] + (members[1:] if metrics == "{}" else members) + "}"


def _lines_of(ready: list[Any]) -> list[str]:
    """Ready snapshots as lines: those written already (str), and the dicts' ``snapshot_line``."""
    return [r if r.__class__ is str else snapshot_line(r) for r in ready]


class WindowManager:
    """Per-key event-time windows over monitors; see the module docstring for the semantics.

    ``monitor_factory()`` returns an empty monitor: an accumulator with ``update_event(event)``
    (and ``update_events(events)`` for ``batch=True``), ``merge``, ``copy``, ``snapshot()``,
    ``to_dict()`` and ``count``; a :class:`~streammetrics.monitors.base.Monitor` is also
    read through its protocol (``small_form``, ``snapshot_many``, ``snapshot_texts``,
    ``task``); ``monitor_loader(d)`` rebuilds one from ``to_dict()`` (default :func:`streammetrics.from_dict`).
    A monitor may define ``event_tag(event)``: every event of a key must then have the tag of
    the key's first event (e.g. the label kind of a ``LabelMonitor``: str and int labels
    cannot share a confusion matrix), checked in :meth:`add` before anything changes, so a
    mismatch can never surface later when queued events are applied or panes merged.
    ``event_codec = (encode, decode)`` lets batch-mode checkpoints store queued events as
    JSON instead of draining them, so that a run restored from a checkpoint drains exactly
    where an uninterrupted run would and reproduces its snapshots bit for bit.
    Events need ``ts`` (epoch seconds), ``model`` and ``segment`` attributes.
    """

    def __init__(
        self,
        monitor_factory: Callable[[], Any],
        window: float,
        slide: float | None = None,
        grace: float = 0.0,
        *,
        cumulative: bool = False,
        include_state: bool = True,
        batch: bool = False,
        max_pending: int = 4096,
        event_codec: tuple[Callable[[Any], Any], Callable[[Any], Any]] | None = None,
        monitor_loader: Callable[[Mapping[str, Any]], Any] | None = None,
        max_future: float | None = DEFAULT_MAX_FUTURE,
        wall_clock: Callable[[], float] = time.time,
        max_keys: int | None = DEFAULT_MAX_KEYS,
        extra_metrics: Callable[[tuple[str, str], Any, dict[str, Any]], None] | None = None,
    ) -> None:
        self.spec = WindowSpec(window, slide, grace)
        #: ``extra_metrics(key, monitor, metrics)`` adds to each snapshot's ``metrics`` (e.g. the
        #: label-free metrics against a reference: :func:`streammetrics.monitors.reference.snapshot_metrics`)
        self.extra_metrics = extra_metrics
        if max_future is not None and not (max_future >= 0 and math.isfinite(max_future)):
            raise ValueError(f"max_future must be a non-negative number of seconds or None, got {max_future!r}")
        #: events more than this many seconds ahead of ``wall_clock()`` are refused (None or 0: no bound)
        self.max_future = max_future or None
        self._wall_clock = wall_clock
        # cached bound in us: wall_clock() is re-read when an event exceeds it, at each poll and
        # every FUTURE_REFRESH_EVENTS events (a clock stepped back lowers it again)
        self._future_us: float = -math.inf if self.max_future else math.inf
        self._future_left = FUTURE_REFRESH_EVENTS  # events until the next re-read
        #: events refused by reason code (``future``, ``key_limit``, ``kind_mismatch``)
        self.rejected: dict[str, int] = {}
        self.cumulative = cumulative
        self.include_state = include_state
        self.batch = batch
        self.max_pending = max_pending
        self._codec = event_codec
        self._factory = monitor_factory
        self._loader = monitor_loader
        self._keys: dict[tuple[str, str], _KeyState] = {}
        if max_keys is not None and (isinstance(max_keys, bool) or not isinstance(max_keys, int) or max_keys < 1):
            raise ValueError(f"max_keys must be a positive integer or None, got {max_keys!r}")
        #: most keys held at once; a new key beyond it is refused (code ``key_limit``). None: no bound
        self.max_keys = max_keys
        # evicted keys -> (next_window, late), oldest first, at most max_keys entries; the largest
        # next_window of those that fell out of it bounds every key not held or remembered
        self._closed: dict[tuple[str, str], tuple[int, int]] = {}
        self._forgotten_next: int | None = None
        self._emptied: list[tuple[str, str]] = []  # keys emptied since the last generation (see _evict_aged)
        self._emptied_old: list[tuple[str, str]] = []  # ... and in the generation before
        self._evict_pane: float = -math.inf  # the watermark's pane at the last generation
        #: keys evicted (all windows closed, nothing queued) since construction
        self.evicted = 0
        self._ready: list[Any] = []  # snapshot dicts, and _Closed ones until poll/flush builds them
        template = monitor_factory()
        self._event_tag = getattr(template, "event_tag", None)
        # a Monitor with a small form (its protocol: Monitor.small_form) is given its events one by
        # one, and its type builds the small closed windows together (snapshot_many)
        small = isinstance(template, Monitor) and template.small_form
        together = isinstance(template, Monitor) and (small or template.snapshots_together)
        self._kind: type[Monitor] | None = type(template) if together else None
        self._packs = small
        self._task = template.task if isinstance(template, Monitor) else None
        self._queue_events = batch and not small
        self._deferred: list[tuple[Any, ...]] = []  # the _Closed windows of _ready, in order
        # add_columns' staged segments (see _stage): (per event: its key's state, slot, pane, time,
        # item), applied to the keys' queues by _unstage before anything reads them
        self._staged: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._staged_events = 0
        # the keys staged since the last _unstage -> their row in the arrays below (see _stage)
        self._epoch: dict[tuple[str, str], int] = {}
        # ... and by the identity of the key objects entered (each kept in _epoch_keys while there):
        # the lookup of _stage, without hashing the key (the same key objects come batch after batch)
        self._epoch_ids: dict[int, int] = {}
        self._epoch_keys: list[tuple[str, str]] = []
        self._epoch_low = np.empty(0, dtype=np.float64)
        self._epoch_held = np.empty(0, dtype=object)
        self._epoch_slots = np.empty(0, dtype=np.int64)
        self._pane_us = self.spec.pane_ms * 1000
        self._max_us: float = -math.inf
        # the keys holding open or queued panes by the close_at they were entered at (stale entries,
        # whose close_at is no longer the key's ``armed``, are skipped); _next_due: the smallest
        self._due: dict[float, list[tuple[str, str]]] = {}
        self._due_at: list[float] = []  # a heap of _due's close_at values
        self._next_due: float = math.inf
        self._revised = False  # some closed window awaits a new revision (delayed labels)
        # delayed labels: per monitor (by identity) the predictions and labelled predictions not yet
        # applied to it (see _apply_label_updates)
        self._label_updates: dict[int, tuple[Any, list[Any], list[Any]]] = {}
        # until the first event that is not ordinary (see _ordinary); never for a monitor whose updates
        # depend on their order (its protocol: Monitor.updates_commute), nor one that does not say
        self._queue_labels = isinstance(template, Monitor) and template.updates_commute
        self._rev_pane: int | None = None  # pane of the last revision tick (see revision_tick)
        self._rev_next: float = -math.inf  # the event time (us) from which a tick is due
        # keys whose checkpointed state changed since take_changed_keys() (None: not tracked), and
        # those among them (re)created since (see delta_dict)
        self._changed: set[tuple[str, str]] | None = None
        self._created: set[tuple[str, str]] = set()

    # ----------------------------------------------------------------- events
    def add(self, event: Any) -> bool:
        """Apply ``event`` to its key's pane; False (and counted as late) if every window it
        belongs to has already closed. Returns True when the event was applied. Raises
        :class:`EventRejected` (a ValueError), changing nothing, when the event is more than
        ``max_future`` ahead of the wall clock, the monitor's ``event_tag`` refuses it, or its
        ``update_event`` does (``InvalidEvent``: ``bad_value``, naming the field; an event built
        without the parser)."""
        # event time in whole microseconds (nearest): ts * 1000 of a decimal timestamp such as 16.15
        # is not exact in binary (16149.999...); rounding to the microsecond puts the event on the
        # side of a window boundary its decimal value says, epoch-scale timestamps included (float
        # spacing there is ~0.25 us), and the window arithmetic below is exact integer arithmetic
        if self._staged:
            self._unstage()
        ts_us = _floor(event.ts * 1e6 + 0.5)
        self._future_left -= 1
        if ts_us > self._future_us or self._future_left <= 0:
            self._check_future(event, ts_us)
        state = self._keys.get((event.model, event.segment))
        if state is None or self._event_tag is not None:
            state = self._key_state(event, state)
        if self._changed is not None:
            self._changed.add((event.model, event.segment))
        if self._max_us >= state.close_at and self._max_us != -math.inf:  # a key not in the heap catches up
            self._close_by_watermark((event.model, event.segment), state, self._max_us)
        pane = ts_us // self._pane_us
        if pane < state.open_from:
            state.late += 1
            if not state.panes and not state.pending:  # an evicted key's late event: evict again
                self._emptied.append((event.model, event.segment))
            return False
        if self._queue_events:
            if event.__class__ is Event:
                # the key's own (equal) model string: the event's copy is freed now instead of
                # queueing with it for a window (at 10,000 keys, ~20% less memory held by queued
                # events, and ~6% less time: bench_keys)
                event.model = state.model
            queue = state.pending.get(pane)
            if queue is None:
                queue = state.pending[pane] = []
            queue.append(event)
            if len(queue) >= self.max_pending:
                self._drain_pane(state, pane)
        else:
            if state.pending and pane in state.pending:  # (queued events of a loaded checkpoint)
                self._drain_pane(state, pane)
            monitor: Any = state.panes.get(pane)
            fresh = monitor is None
            if fresh:
                monitor = state.panes[pane] = self._factory()
            try:
                monitor.update_event(event)
            except InvalidEvent as exc:  # refused before it changed the monitor
                if fresh:
                    del state.panes[pane]
                    if not state.panes and not state.pending and not state.revising:
                        self._emptied.append((event.model, event.segment))
                self._reject("bad_value", str(exc), exc.field)
        if pane < state.first_pane_bound:  # +inf until the key's first event
            self._set_first_window(state, self.spec.first_window_of_pane(pane))
        if ts_us > state.max_us:
            state.max_us = ts_us
        if state.armed != state.close_at:  # open panes the heap does not know of (yet)
            self._arm((event.model, event.segment), state)
        if ts_us > self._max_us:
            self._max_us = ts_us
            if ts_us >= self._next_due:
                self._close_due()
        return True

    @property
    def packs_events(self) -> bool:
        """Whether :meth:`add_columns` is to be given ``items`` in the monitor's small form (a
        monitor with ``Monitor.small_form``: each pane's monitor takes them through
        ``update_items``; ``BinaryMonitor``: the common event as its signed score), else events."""
        return self._packs

    def add_columns(self, ts: np.ndarray, key_index: np.ndarray, keys: Sequence[tuple[str, str]],
                    items: np.ndarray, tag_event: Any = None) -> np.ndarray | None:
        """Apply a batch of events given as columns, exactly as :meth:`add` of each in turn:
        ``ts`` (float64 epoch seconds), ``key_index`` (each event's index in ``keys``, the
        distinct ``(model, segment)``) and ``items`` (each event in the monitor's small form when
        :attr:`packs_events`, else the event). Returns the late
        events (a bool array: not applied, counted), or None, changing nothing, when the batch
        needs the per-event path: no batch mode, a monitor ``event_tag`` without ``tag_event``
        (an event whose tag every event of the batch has) or with a key of another tag, an event beyond
        ``max_future``, more new keys than ``max_keys`` leaves room for, no stream time yet or a
        close pending (after :meth:`advance_watermark`).

        Stream time advances event by event: the batch is cut where an event moves the
        watermark into a later window (``last_closable`` below), and windows close at those
        cuts, as :meth:`add` closes them after that event. Between two cuts every per-event
        decision depends on the watermark's window only, so it is taken once per key (catching
        up a key not in the heap; lateness of a pane) and the events of each (key, pane) are
        queued in their order, drained at ``max_pending`` as one by one (into the pane's monitor,
        ``update_items``). (A late event lies
        below the watermark, so it never moves stream time: the running maximum over the batch
        is the stream time of each event.)"""
        n = len(ts)
        if n == 0 or not self.batch or self._max_us == -math.inf or self._next_due <= self._max_us:
            return None
        tag = None
        if self._event_tag is not None:
            if tag_event is None:
                return None
            try:
                tag = self._event_tag(tag_event)
            except ValueError:
                return None
        ts_us = np.floor(ts * 1e6 + 0.5).astype(np.int64)
        if self.max_future is not None:
            self._refresh_future()
            if int(ts_us.max()) > self._future_us:
                return None
        held = self._keys
        if (self.max_keys is not None and len(held) + len(keys) > self.max_keys) or tag is not None:
            used = np.flatnonzero(np.bincount(key_index, minlength=len(keys))).tolist()  # (the keys present)
            if self.max_keys is not None and len(held) + len(used) > self.max_keys and \
                    len(held) + sum(1 for k in used if keys[k] not in held) > self.max_keys:
                return None
            if tag is not None and any(held[keys[k]].tag not in (None, tag) for k in used if keys[k] in held):
                return None
        self._future_left = FUTURE_REFRESH_EVENTS
        spec = self.spec
        pane_us, grace_us = self._pane_us, spec.grace_ms * 1000
        size_us, slide_us = spec.size_ms * 1000, spec.slide_ms * 1000
        m0 = int(self._max_us)
        runmax = np.maximum.accumulate(np.maximum(ts_us, m0))
        closable = (runmax - grace_us - size_us) // slide_us  # the last closable window after each event
        before = np.empty(n, dtype=np.int64)
        before[0] = (m0 - grace_us - size_us) // slide_us
        before[1:] = closable[:-1]
        cuts = (np.flatnonzero(closable != before) + 1).tolist()
        if not cuts or cuts[-1] != n:
            cuts.append(n)
        panes = ts_us // pane_us
        late = np.zeros(n, dtype=bool)
        changed = self._changed
        lo = 0
        for hi in cuts:
            stream_us = m0 if lo == 0 else int(runmax[lo - 1])
            self._add_segment(lo, hi, stream_us, ts_us, panes, key_index, keys, items, late, changed, tag)
            top = int(runmax[hi - 1])
            if top > self._max_us:
                self._max_us = top
                if top >= self._next_due:
                    self._close_due()
            lo = hi
        return late

    def _add_segment(self, lo: int, hi: int, stream_us: int, ts_us: np.ndarray, panes: np.ndarray,
                     key_index: np.ndarray, keys: Sequence[tuple[str, str]], items: np.ndarray, late: np.ndarray,
                     changed: set[tuple[str, str]] | None, tag: Any) -> None:
        """Events ``lo:hi`` of :meth:`add_columns`, all seeing stream time ``stream_us``'s
        watermark window: grouped by (key, pane), each group queued whole; keys taken in the
        order of their first event (keys are created, caught up and emptied in that order, as
        by :meth:`add`). The keys whose events need no per-event decision are staged (see
        :meth:`_stage`); the others' events (``where``, ascending positions) take this path."""
        # keys created by _stage whose catch-up close emptied them: (2 * position of their first event, key)
        made: list[tuple[int, tuple[str, str]]] = []
        where = np.arange(lo, hi) if tag is not None else self._stage(lo, hi, stream_us, ts_us, panes, key_index,
                                                                      keys, items, changed, made)
        if where is None:
            made.sort(key=_FIRST)
            self._emptied.extend(key for _, key in made)  # (in the order of their first events)
            return
        kx = key_index[where]
        if self._staged:  # keys of this path with staged events: those first (the order of a key's events)
            epoch = self._epoch
            if any(keys[k] in epoch for k in np.flatnonzero(np.bincount(kx, minlength=len(keys))).tolist()):
                self._unstage()
        px = panes[where]
        order = np.lexsort((px, kx))  # by key, then pane; positions ascending within each
        ks = kx[order]
        ps = px[order]
        key_change = ks[1:] != ks[:-1]
        new_key = np.flatnonzero(key_change) + 1
        heads = np.concatenate(([0], np.flatnonzero(key_change | (ps[1:] != ps[:-1])) + 1))  # groups' first
        bounds = [*heads.tolist(), len(order)]
        group_max = np.maximum.reduceat(ts_us[where][order], heads).tolist()
        group_first = order[heads]  # each group's first event (a position in where)
        run_heads = np.searchsorted(heads, np.concatenate(([0], new_key)))  # each key's first group
        run_first = np.minimum.reduceat(group_first, run_heads)
        by_first = np.argsort(run_first, kind="stable")
        runs = run_heads[by_first].tolist()
        run_ends = np.append(run_heads[1:], len(heads))[by_first].tolist()
        first_pos = group_first.tolist()
        group_key = ks[heads].tolist()
        group_pane = ps[heads].tolist()
        values = items[where[order]].tolist()  # the items in group order: each group a slice
        spec = self.spec
        max_pending = self.max_pending
        held = self._keys
        late_groups: list[int] = []
        # keys emptied (by a catch-up close, or a late event of a key without panes), by the
        # position of the event that did it: appended to _emptied in that order, as add does
        emptied_at: list[np.ndarray] = [np.array([at]) for at, _ in made]
        emptied_keys: list[tuple[str, str]] = [key for _, key in made]
        for g, g_end in zip(runs, run_ends):
            key = keys[group_key[g]]
            state = held.get(key)
            if state is None:
                state = self._new_key(key)
            if tag is not None and state.tag is None:
                state.tag = tag
            if changed is not None:
                changed.add(key)
            if g_end - g == 1 and stream_us < state.close_at:
                # the common case (many keys, few events each): one pane of the key, no catch-up
                pane = group_pane[g]
                if pane >= state.open_from:
                    self._enqueue(state, pane, values[bounds[g]:bounds[g + 1]], max_pending)
                    if pane < state.first_pane_bound:
                        self._set_first_window(state, spec.first_window_of_pane(pane))
                    top = group_max[g]
                    if top > state.max_us:
                        state.max_us = top
                    if state.armed != state.close_at:
                        self._arm(key, state)
                    continue
            if stream_us >= state.close_at:  # a key not in the heap catches up, as in add
                mark = len(self._emptied)
                self._close_by_watermark(key, state, stream_us)
                if len(self._emptied) > mark:
                    first_at = 2 * int(where[min(first_pos[g:g_end])])
                    for emptied in self._emptied[mark:]:
                        emptied_at.append(np.array([first_at]))
                        emptied_keys.append(emptied)
                    del self._emptied[mark:]
            open_from = state.open_from
            top = None
            for j in range(g, g_end):
                pane = group_pane[j]
                if pane < open_from:
                    late_groups.append(j)
                    state.late += bounds[j + 1] - bounds[j]
                    if not state.panes and not state.pending:  # as add: an evicted key's late events
                        idx = order[bounds[j]:bounds[j + 1]]
                        accepted = [first_pos[i] for i in range(g, g_end) if group_pane[i] >= open_from]
                        if accepted:  # (those before the key's first accepted event)
                            idx = idx[idx < min(accepted)]
                        emptied_at.append(2 * where[idx] + 1)
                        emptied_keys.append(key)
                    continue
                chunk = values[bounds[j]:bounds[j + 1]]
                queue = state.pending.get(pane)
                if queue is None:
                    if len(chunk) < max_pending:
                        state.pending[pane] = chunk
                    else:
                        self._queue_draining(state, pane, chunk, max_pending)
                elif len(queue) + len(chunk) < max_pending:
                    queue.extend(chunk)
                else:
                    self._queue_draining(state, pane, chunk, max_pending)
                if top is None:
                    if pane < state.first_pane_bound:
                        self._set_first_window(state, spec.first_window_of_pane(pane))
                    top = group_max[j]
                elif group_max[j] > top:
                    top = group_max[j]
            if top is not None:
                if top > state.max_us:
                    state.max_us = top
                if state.armed != state.close_at:
                    self._arm(key, state)
        if late_groups:
            sizes = np.diff(bounds)
            late[where[order[np.repeat(np.isin(np.arange(len(sizes)), late_groups), sizes)]]] = True
        if emptied_at:  # in the order of the events (a catch-up before its event's late count)
            at = np.concatenate(emptied_at)
            which = np.repeat(np.arange(len(emptied_at)), [len(e) for e in emptied_at])
            self._emptied.extend(emptied_keys[i] for i in which[np.argsort(at, kind="stable")].tolist())

    def _stage(self, lo: int, hi: int, stream_us: int, ts_us: np.ndarray, panes: np.ndarray, key_index: np.ndarray,
               keys: Sequence[tuple[str, str]], items: np.ndarray, changed: set[tuple[str, str]] | None,
               made: list[tuple[int, tuple[str, str]]]) -> np.ndarray | None:
        """The events of ``lo:hi`` of :meth:`add_columns` whose keys need no per-event decision held
        staged, as columns: a key held that needs no catch-up close (its ``close_at`` is past
        stream time; one not in the close heap is entered now), none of whose events is late or
        starts an earlier first window. Their only effect is then to join their (key, pane)
        queues, which :meth:`_unstage` does for all the staged events at once (before a close, a
        poll that evicts, a checkpoint, or any other path that reads a key's queues): per (key,
        pane) once per window instead of once per batch, the same queues in the same order
        (drained at ``max_pending`` at the same counts), and each key's ``max_us`` the largest of
        its events. Keys not held are created first (:meth:`_new_keys`) when every one of them can
        be. Returns the positions of the other keys' events, ascending (None: none).
        Bounded by :data:`STAGE_MAX_EVENTS` (reached: applied first)."""
        used, pos = _dense(key_index[lo:hi], len(keys))
        ukeys = [keys[k] for k in used]
        n = len(ukeys)
        px = panes[lo:hi]
        # keys staged since the last _unstage: their state is as it was then (only _unstage and the
        # paths that unstage first change it), so their bound and state are read from _epoch
        ids = self._epoch_ids
        rows = np.fromiter(map(ids.get, map(id, ukeys), itertools.repeat(-1)), dtype=np.intp, count=n) if ids \
            else np.full(n, -1, dtype=np.intp)
        fresh = np.flatnonzero(rows < 0)
        if len(fresh) == n:
            ok, low, held, slots, unarmed = self._key_bounds(lo, stream_us, px, pos, ukeys, made)
        else:
            hit = rows >= 0
            at = rows[hit]
            low = np.empty(n, dtype=np.float64)
            held = np.empty(n, dtype=object)
            slots = np.empty(n, dtype=np.int64)
            low[hit], held[hit], slots[hit] = self._epoch_low[at], self._epoch_held[at], self._epoch_slots[at]
            ok = np.ones(n, dtype=bool)
            unarmed = np.zeros(n, dtype=bool)
            if len(fresh):
                which = fresh.tolist()
                sub = np.full(n, -1, dtype=np.intp)
                sub[fresh] = np.arange(len(fresh))
                in_fresh = sub[pos] >= 0  # (the events of the fresh keys, for their extremes)
                got = self._key_bounds(lo, stream_us, px[in_fresh], sub[pos[in_fresh]], [ukeys[i] for i in which],
                                       made, np.flatnonzero(in_fresh))
                ok[fresh], low[fresh], held[fresh], slots[fresh], unarmed[fresh] = got
        # an event below its key's open_from (late) or first_pane_bound (an earlier first window): the per-key path
        odd = px < low[pos]
        if odd.any():
            ok[pos[odd]] = False
        if not ok.any():
            return np.arange(lo, hi)
        take = ok[pos] if not ok.all() else None
        count = hi - lo if take is None else int(take.sum())
        if self._staged_events + count > STAGE_MAX_EVENTS:
            self._unstage()
            if count > STAGE_MAX_EVENTS:  # more than the bound alone: the per-key path queues them now
                return np.arange(lo, hi)
            fresh = np.arange(n)  # (every key enters the new epoch)
        if take is None:
            self._staged.append((held[pos], slots[pos], px, ts_us[lo:hi], items[lo:hi]))
        else:
            chosen = pos[take]
            self._staged.append((held[chosen], slots[chosen], px[take], ts_us[lo:hi][take], items[lo:hi][take]))
        self._staged_events += count
        if changed is not None:
            changed.update(itertools.compress(ukeys, ok.tolist()))
        if len(fresh):
            entering = fresh[ok[fresh]]
            self._enter_epoch([ukeys[i] for i in entering.tolist()], low[entering], held[entering], slots[entering])
            arm = entering[unarmed[entering]].tolist()
            if arm:  # (armed as _add_segment arms them: the heap's order does not depend on when)
                self._arm_many([ukeys[i] for i in arm], [held[i] for i in arm])
        return None if take is None else np.flatnonzero(~take) + lo

    def _key_bounds(self, lo: int, stream_us: int, px: np.ndarray, pos: np.ndarray, ukeys: list[tuple[str, str]],
                    made: list[tuple[int, tuple[str, str]]], where: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`_stage`'s keys ``ukeys`` not staged since the last :meth:`_unstage` (``px``, ``pos``:
        their events' panes and indices in ``ukeys``, at positions ``where`` of the segment, None: all):
        keys not held created (:meth:`_new_keys`), held ones behind stream time caught up
        (:meth:`_catch_up`); per key whether it may be staged, the pane below which an event is
        not (its ``open_from`` or ``first_pane_bound``), its state, slot, and whether it is to be armed."""
        found = list(map(self._keys.get, ukeys))
        n = len(found)
        ok = np.ones(n, dtype=bool)
        extremes = None  # (each key's lowest pane, its first event's position), when needed
        if None in found:
            extremes = _extremes(px, pos, n, where)
        if extremes is not None and not self._new_keys(lo, stream_us, *extremes, ukeys, found, made):
            for i, state in enumerate(found):  # (not created: the per-key path)
                if state is None:
                    ok[i] = False
                    found[i] = _ABSENT
        states: list[_KeyState] = found  # type: ignore[assignment]  # (None replaced)
        # keys holding no entry in the close heap yet (after their last close); those whose close_at
        # stream time reached need a catch-up close (_catch_up, else the per-key path)
        close_at = np.fromiter(map(_CLOSE_AT, states), dtype=np.float64, count=n)
        unarmed = np.fromiter(map(_ARMED, states), dtype=np.float64, count=n) != close_at  # (nan: not armed)
        if unarmed.any():
            which = np.flatnonzero(unarmed)
            behind = np.zeros(n, dtype=bool)
            behind[which[close_at[which] <= stream_us]] = True
            if behind.any():
                self._catch_up(lo, stream_us, *(extremes or _extremes(px, pos, n, where)), ukeys, states, behind,
                               made)
                ok &= ~behind
        low = np.maximum(np.fromiter(map(_OPEN_FROM, states), dtype=np.float64, count=n),
                         np.fromiter(map(_FIRST_BOUND, states), dtype=np.float64, count=n))
        held = np.fromiter(states, dtype=object, count=n)
        slots = np.fromiter(map(_SLOT, states), dtype=np.int64, count=n)
        return ok, low, held, slots, unarmed

    def _enter_epoch(self, keys: list[tuple[str, str]], low: np.ndarray, held: np.ndarray, slots: np.ndarray) -> None:
        """Note ``keys`` as staged since the last :meth:`_unstage` (see :meth:`_stage`), with their
        bounds, states and slots (at most one entry per key staged: bounded by STAGE_MAX_EVENTS)."""
        m = len(self._epoch_keys)
        need = m + len(keys)
        if need > len(self._epoch_low):
            size = max(need, 2 * len(self._epoch_low), 1024)
            grown_low = np.empty(size, dtype=np.float64)
            grown_held = np.empty(size, dtype=object)
            grown_slots = np.empty(size, dtype=np.int64)
            grown_low[:m], grown_held[:m], grown_slots[:m] = self._epoch_low[:m], self._epoch_held[:m], \
                self._epoch_slots[:m]
            self._epoch_low, self._epoch_held, self._epoch_slots = grown_low, grown_held, grown_slots
        self._epoch_low[m:need], self._epoch_held[m:need], self._epoch_slots[m:need] = low, held, slots
        self._epoch.update(zip(keys, range(m, need)))
        self._epoch_ids.update(zip(map(id, keys), range(m, need)))
        self._epoch_keys += keys

    def _catch_up(self, lo: int, stream_us: int, lows: list[int], firsts: list[int], ukeys: list[tuple[str, str]],
                  states: list[_KeyState], behind: np.ndarray, made: list[tuple[int, tuple[str, str]]]) -> None:
        """:meth:`_stage`'s held keys whose ``close_at`` stream time ``stream_us`` passed while they
        held nothing (``behind``): each caught up as :meth:`_close_by_watermark` does (no window
        to close: the next window is the watermark's, and the key is emptied, noted in ``made``
        with twice its first event's position) unless one of its events is late for it then;
        those done are cleared in ``behind`` (the others take the per-key path)."""
        spec = self.spec
        s = spec.panes_per_slide
        k = (stream_us - spec.grace_ms * 1000 - spec.size_ms * 1000) // (spec.slide_ms * 1000) + 1
        open_from, close_at = k * s, (k * spec.slide_ms + spec.size_ms + spec.grace_ms) * 1000
        changed = self._changed
        for i in np.flatnonzero(behind).tolist():
            state = states[i]
            if state is _ABSENT or state.panes or state.pending or state.awaiting or state.revising \
                    or lows[i] < open_from:
                continue
            state.next_window, state.open_from, state.close_at = k, open_from, close_at
            if changed is not None:
                changed.add(ukeys[i])
            made.append((2 * (lo + firsts[i]), ukeys[i]))
            behind[i] = False

    def _new_keys(self, lo: int, stream_us: int, lows: list[int], firsts: list[int], ukeys: list[tuple[str, str]],
                  found: list[Any], made: list[tuple[int, tuple[str, str]]]) -> bool:
        """:meth:`_stage`'s keys not held (``None`` in ``found``), created together as
        :meth:`_add_segment` creates them one by one (:meth:`_new_key`, in the order of their first
        events, then caught up to stream time ``stream_us``, see :meth:`_close_by_watermark`): the
        states put in ``found``; each key that catch-up emptied (an evicted key, or one past the
        forgotten frontier) in ``made``, with twice its first event's position. False, creating
        nothing, when one of them needs the per-key path: an event late for it, or more keys than
        ``max_keys`` leaves room for."""
        held = self._keys
        new = [i for i, state in enumerate(found) if state is None]
        if self.max_keys is not None and len(held) + len(new) > self.max_keys:
            return False
        spec = self.spec
        s, w = spec.panes_per_slide, spec.panes_per_window
        slide_us, reach_us = spec.slide_ms * 1000, (spec.size_ms + spec.grace_ms) * 1000
        opens = (stream_us - spec.grace_ms * 1000 - spec.size_ms * 1000) // slide_us + 1  # after the last closable
        closed, forgotten = self._closed, self._forgotten_next
        plan = []
        for i in new:
            remembered = closed.get(ukeys[i])
            k = remembered[0] if remembered is not None else forgotten
            # as _close_by_watermark: a key without a frontier opens at the watermark's window, one
            # whose frontier the watermark passed closes through it (emptying the key)
            caught = k is not None and stream_us >= k * slide_us + reach_us
            if k is None or caught:
                k = opens
            if lows[i] < k * s:  # a late event: the per-key path
                return False
            plan.append((firsts[i], i, k, remembered, caught))
        plan.sort(key=_FIRST)
        changed = self._changed
        for _, i, k, remembered, emptied in plan:
            key = ukeys[i]
            state = held[key] = found[i] = _KeyState(key[0])
            if changed is not None:
                changed.add(key)
                self._created.add(key)
            if remembered is not None:
                del closed[key]
                state.late = remembered[1]
            # _set_next_window(state, k) and _set_first_window(state, first_window_of_pane(lows[i])), written out
            state.next_window, state.open_from, state.close_at = k, k * s, k * slide_us + reach_us
            first = -((w - 1 - lows[i]) // s)
            state.first_window, state.first_pane_bound = first, first * s + w - s
            if emptied:
                made.append((2 * (lo + firsts[i]), key))
        return True

    def _unstage(self, last: int | None = None) -> list[_KeyState]:
        """Apply the staged segments (see :meth:`_stage`): their events grouped by (key, pane),
        in arrival order within each group, each group joining its queue as in
        :meth:`_add_segment`. With ``last`` (:meth:`_close_due` about to close tumbling windows
        through ``last``): a key whose only content is one group of at most
        :data:`DEFER_MAX_EVENTS` events in pane ``last``, and which that close visits, gets the
        group as ``closing`` instead (the window it closes as, without a queue); returns those keys."""
        staged, self._staged = self._staged, []
        self._staged_events = 0
        if self._epoch:
            self._epoch, self._epoch_ids, self._epoch_keys = {}, {}, []
            self._epoch_held[:] = None  # (no state held beyond its key)
        if not staged:
            return []
        if len(staged) == 1:
            states, slots, px, tx, vx = staged[0]
        else:
            states, slots, px, tx, vx = (np.concatenate(parts) for parts in zip(*staged))
        low_pane = int(px.min())
        span = int(px.max()) - low_pane + 1
        if span < (1 << 62) // max(1, int(slots.max()) + 1):  # by key, then pane; arrival order within each
            order = np.argsort(slots * span + (px - low_pane), kind="stable")
        else:
            order = np.lexsort((px, slots))
        slot_sorted, pane_sorted = slots[order], px[order]
        key_change = slot_sorted[1:] != slot_sorted[:-1]
        heads = np.flatnonzero(np.concatenate(([True], key_change | (pane_sorted[1:] != pane_sorted[:-1]))))
        bounds = heads.tolist()
        values = vx[order].tolist()
        tops = np.maximum.reduceat(tx[order], heads).tolist()  # each group's latest event: the key's max_us
        max_pending = self.max_pending
        ends = [*bounds[1:], len(order)]
        closing: list[_KeyState] = []
        if last is not None:  # the groups that are their key's only one, in pane last, small
            n = len(heads)
            alone = np.ones(n, dtype=bool)
            same = slot_sorted[heads[1:]] == slot_sorted[heads[:-1]]
            alone[1:] &= ~same
            alone[:-1] &= ~same
            alone &= (pane_sorted[heads] == last) & (np.diff(heads, append=len(order)) <= DEFER_MAX_EVENTS)
            max_us = self._max_us
            chosen = np.flatnonzero(alone)
            for g, state in zip(chosen.tolist(), states[order[heads[chosen]]].tolist()):
                nw = state.next_window
                # (the close visits it: armed at a due time; nothing else held; its window not closed)
                if state.armed <= max_us and not state.pending and not state.panes and not state.awaiting \
                        and nw is not None and nw <= last:
                    state.closing = values[bounds[g]:ends[g]]
                    if tops[g] > state.max_us:
                        state.max_us = tops[g]
                    closing.append(state)
                    ends[g] = -1  # (not queued below)
        for state, pane, start, stop, top in zip(states[order[heads]].tolist(), pane_sorted[heads].tolist(), bounds,
                                                 ends, tops):
            if stop < 0:
                continue
            if top > state.max_us:
                state.max_us = top
            pending = state.pending  # (as _enqueue, written out: once per key and pane)
            queue = pending.get(pane)
            if queue is None:
                if stop - start < max_pending:
                    pending[pane] = values[start:stop]
                    continue
            elif len(queue) + stop - start < max_pending:
                queue.extend(values[start:stop])
                continue
            self._queue_draining(state, pane, values[start:stop], max_pending)
        return closing

    def _enqueue(self, state: _KeyState, pane: int, chunk: list, max_pending: int) -> None:
        """Queue ``chunk`` (a fresh list, kept as the queue when there was none) in ``pane``;
        a queue that would reach ``max_pending`` is applied as it fills (:meth:`_queue_draining`)."""
        queue = state.pending.get(pane)
        if queue is None and len(chunk) < max_pending:
            state.pending[pane] = chunk
        elif queue is not None and len(queue) + len(chunk) < max_pending:
            queue.extend(chunk)
        else:
            self._queue_draining(state, pane, chunk, max_pending)

    def _queue_draining(self, state: _KeyState, pane: int, values: list, max_pending: int) -> None:
        """Queue ``values`` in ``pane``, applying the queue whenever it reaches ``max_pending``
        (as :meth:`add` does one event at a time)."""
        pos = 0
        while pos < len(values):
            queue = state.pending.get(pane)
            if queue is None:
                queue = state.pending[pane] = []
            take = max_pending - len(queue)
            queue.extend(values[pos:pos + take])
            pos += take
            if len(queue) >= max_pending:
                self._drain_pane(state, pane)

    # ----------------------------------------------------------------- delayed labels
    def add_prediction(self, event: Any) -> int | None:
        """Apply a prediction whose label comes later (``event.y_true`` is None): its label-free
        part (``monitor.update_prediction``) goes into its pane now, and it is counted as
        awaiting its label in every window of its ``ts``. Returns the index of the first window
        it counts in (give it back to :meth:`add_outcome` / :meth:`expire`), or None if late
        (counted, as in :meth:`add`). Raises :class:`EventRejected` like :meth:`add`."""
        if self._staged:
            self._unstage()
        ts_us = _floor(event.ts * 1e6 + 0.5)
        self._future_left -= 1
        if ts_us > self._future_us or self._future_left <= 0:
            self._check_future(event, ts_us)
        key = (event.model, event.segment)
        state = self._keys.get(key)
        if state is None or self._event_tag is not None:
            state = self._key_state(event, state)  # event_tag reads y_pred's kind when y_true is None
        if self._changed is not None:
            self._changed.add(key)
        max_us = self._max_us
        if max_us >= state.close_at and max_us != _NEG_INF:  # as in add
            self._close_by_watermark(key, state, max_us)
        pane = ts_us // self._pane_us
        if pane < state.open_from:
            state.late += 1
            if not state.panes and not state.pending and not state.revising:  # as in add
                self._emptied.append(key)
            return None
        if self.batch and pane in state.pending:
            self._drain_pane(state, pane)  # keep the pane's updates in arrival order
        monitor = state.panes.get(pane)
        if monitor is None:
            monitor = state.panes[pane] = self._factory()
        self._queue_label_update(monitor, event, False)
        counts = state.awaiting.get(pane)
        if counts is None:
            state.awaiting[pane] = [1, 0]
        else:
            counts[0] += 1
        first = self.spec.first_window_of_pane(pane)
        if pane < state.first_pane_bound:
            self._set_first_window(state, first)
        if state.next_window is not None and state.next_window > first:
            first = state.next_window  # earlier windows of the pane closed before it came
        if ts_us > state.max_us:
            state.max_us = ts_us
        if state.armed != state.close_at:  # open panes the heap does not know of (yet)
            self._arm(key, state)
        if ts_us > max_us:
            self._max_us = ts_us
            if ts_us >= self._next_due:
                self._close_due()
        return first

    def quiet_until_us(self) -> float:
        """Delayed labels: the event time (whole microseconds) from which an item may change more
        than its own pane and windows: a revision tick (:meth:`revision_tick`), a window to close,
        or the ``max_future`` bound to read again. Items before it may be taken as a run
        (:meth:`predictions_taken`, :meth:`add_predictions`, :meth:`add_outcomes`)."""
        return min(self._rev_next, self._next_due, self._future_us + 1)

    def predictions_taken(self, events: Sequence[Any], times: Sequence[int]) -> tuple[int, list[int]]:
        """Delayed labels: how many of ``events`` (predictions awaiting their label, times in whole
        microseconds before :meth:`quiet_until_us`), from the first, :meth:`add_predictions` takes
        as a run, and the first window of each (what :meth:`add_prediction` returns). It stops
        before one that :meth:`add_prediction` must take: of a new key or a key whose windows the
        stream time passed, late, not ordinary (:func:`_ordinary`), in a pane with queued events,
        once ``max_future`` is to be read again, or when updates are not queued. Changes nothing."""
        tags: list[int] = []
        if not self._queue_labels or self._event_tag is not None:
            return 0, tags
        keys, pane_us, batch = self._keys, self._pane_us, self.batch
        first_of = self.spec.first_window_of_pane
        firsts: dict[int, int] = {}
        top = self._max_us
        left = self._future_left - 1
        for event, t in zip(events, times):
            state = keys.get((event.model, event.segment))
            if t > top:
                top = t
            if state is None or top >= state.close_at or left <= 0 or not _ordinary(event):
                break
            pane = t // pane_us
            if pane < state.open_from or (batch and pane in state.pending):
                break
            first = firsts.get(pane)
            if first is None:
                first = firsts[pane] = first_of(pane)
            nw = state.next_window
            tags.append(nw if nw is not None and nw > first else first)
            left -= 1
        return len(tags), tags

    def add_predictions(self, events: Sequence[Any], times: Sequence[int]) -> None:
        """:meth:`add_prediction` of each of ``events``, all of which :meth:`predictions_taken`
        takes (nothing closes, none is late): their label-free part queued for their panes
        (:meth:`_queue_label_update`) and each counted as awaiting its label."""
        if self._staged:
            self._unstage()
        keys, pane_us, changed, factory = self._keys, self._pane_us, self._changed, self._factory
        first_of = self.spec.first_window_of_pane
        enqueue = self._enqueue_update
        top = self._max_us
        for event, t in zip(events, times):
            key = (event.model, event.segment)
            state = keys[key]
            if changed is not None:
                changed.add(key)
            pane = t // pane_us
            monitor = state.panes.get(pane)
            if monitor is None:
                monitor = state.panes[pane] = factory()
            enqueue(monitor, event, 1)  # (all ordinary, updates queued: predictions_taken)
            counts = state.awaiting.get(pane)
            if counts is None:
                state.awaiting[pane] = [1, 0]
            else:
                counts[0] += 1
            if pane < state.first_pane_bound:
                self._set_first_window(state, first_of(pane))
            if t > state.max_us:
                state.max_us = t
            if state.armed != state.close_at:
                self._arm(key, state)
            if t > top:
                top = t
        self._max_us = top
        self._future_left -= len(events)

    def add_outcomes(self, events: Sequence[Any], first_windows: Sequence[int | None]) -> None:
        """:meth:`add_outcome` of each of ``events`` (with its first window) in a manager without an
        ``event_tag`` (nothing to refuse: see :meth:`predictions_taken`)."""
        self._settle_many(events, first_windows, True)

    def add_outcome(self, event: Any, first_window: int | None = None) -> None:
        """The label of a prediction given to :meth:`add_prediction` arrived: ``event`` is the
        prediction with its ``y_true`` (same ``ts``, key, scores, weight) and ``first_window`` what
        :meth:`add_prediction` returned. The label-based part (``monitor.update_outcome``) goes
        into every window of the prediction: its open pane, and each closed window awaiting
        labels (which then emits a new revision at the next revision tick, see :meth:`revision_tick`,
        or :meth:`poll` with ``revisions=True``). Raises
        :class:`EventRejected` (``kind_mismatch``), changing nothing, if the monitor's
        ``event_tag`` refuses the labelled event; the caller should then :meth:`expire` it."""
        self._settle(event, first_window, True)

    def expire(self, event: Any, first_window: int | None = None) -> None:
        """A prediction given to :meth:`add_prediction` will never get its label: it stops
        awaiting in its windows (counted as ``expired``; label-based metrics never see it)."""
        self._settle(event, first_window, False)

    def _settle(self, event: Any, first_window: int | None, labelled: bool) -> None:
        self._settle_many((event,), (first_window,), labelled)

    def _settle_many(self, events: Sequence[Any], first_windows: Sequence[int | None], labelled: bool) -> None:
        """Each of ``events`` labelled (or expired) in its windows, in order (see :meth:`add_outcome`)."""
        if self._staged:
            self._unstage()
        keys, changed, pane_us, spec = self._keys, self._changed, self._pane_us, self.spec
        queue = self._queue_label_update
        spans: dict[int, tuple[int, int]] = {}  # pane -> its windows (first, last + 1)
        check_tag = labelled and self._event_tag is not None
        for event, first_window in zip(events, first_windows):
            key = (event.model, event.segment)
            state = keys.get(key)
            if state is None:
                raise ValueError(f"no prediction of key {key!r} is awaiting a label")
            if changed is not None:
                changed.add(key)
            if check_tag and state.tag is not None:
                try:
                    tag = self._event_tag(event)  # type: ignore[misc]
                except ValueError as exc:  # the label's kind is not its prediction's
                    self._reject("kind_mismatch", str(exc))
                if tag != state.tag:
                    self._reject("kind_mismatch",
                                 f"labelled event of kind {tag!r} in a stream of kind {state.tag!r}")
            pane = _floor(event.ts * 1e6 + 0.5) // pane_us
            counts = state.awaiting.get(pane)
            if counts is not None and pane in state.panes:  # the pane is open: later windows merge it
                counts[0] -= 1
                if labelled:
                    queue(state.panes[pane], event, True)
                else:
                    counts[1] += 1
            elif labelled and state.cumulative is not None:  # released: the all-time monitor holds the pane
                state.cumulative.update_outcome(event)
            revising = state.revising
            if revising:
                span = spans.get(pane)
                if span is None:
                    span = spans[pane] = (spec.first_window_of_pane(pane), spec.last_window_of_pane(pane) + 1)
                first = span[0]
                if first_window is not None and first_window > first:
                    first = first_window
                for k in range(first, span[1]):
                    win = revising.get(k)
                    if win is not None:
                        win.awaiting -= 1
                        if labelled:
                            queue(win.monitor, event, True)
                        else:
                            win.expired += 1
                        win.dirty = True
                        self._revised = True

    def _queue_label_update(self, monitor: Any, event: Any, outcome: bool) -> None:
        """Queue ``event`` for ``monitor``'s ``update_prediction`` (``update_outcome`` if
        ``outcome``); a monitor's queues are applied once one of them holds ``max_pending`` events.
        A manager of monitors whose updates do not commute (``Monitor.updates_commute``) queues none.
        From the first event that is not ordinary (:func:`_ordinary`) on, nothing is queued: what is
        queued is applied and every update is made at once, event by event, as it comes (numpy's
        warnings about hostile values, and Python's once-per-location record of them, which every
        vectorised update resets, then reach stderr exactly as without the queues)."""
        if not self._queue_labels or not _ordinary(event):
            if self._queue_labels:  # (the first event not ordinary)
                self._stop_label_queues()
            if outcome:
                monitor.update_outcome(event)
            else:
                monitor.update_prediction(event)
            return
        self._enqueue_update(monitor, event, 2 if outcome else 1)

    def _enqueue_update(self, monitor: Any, event: Any, part: int) -> None:
        """Queue ``event`` for ``monitor``: its predictions (``part`` 1) or labelled predictions (2);
        the monitor's queues are applied once this one holds ``max_pending`` events."""
        entry = self._label_updates.get(id(monitor))
        if entry is None:
            entry = self._label_updates[id(monitor)] = (monitor, [], [])
        queue = entry[part]
        queue.append(event)
        if len(queue) >= self.max_pending:
            del self._label_updates[id(monitor)]
            self._apply_updates(*entry)

    def add_labelled(self, event: Any) -> bool:
        """:meth:`add` of a prediction with its label in a stream with delayed labels: the same,
        and an event that is not ordinary (:func:`_ordinary`) stops the queues of label updates
        first (:meth:`_queue_label_update`: its warnings reach stderr as without them)."""
        if self._queue_labels and not _ordinary(event):
            self._stop_label_queues()
        return self.add(event)

    def _stop_label_queues(self) -> None:
        """Apply what is queued and queue nothing from now on."""
        self._queue_labels = False
        if self._label_updates:
            self._apply_label_updates()

    def _apply_label_updates(self) -> None:
        """Delayed labels: apply every monitor's queued predictions and labelled predictions, each
        monitor's together (``update_predictions``, then ``update_outcomes``: the label-free and the
        label-based parts are apart, and each part's state is a function of the multiset of its
        events). Called before anything reads a monitor: a close (:meth:`_close_through`), a
        revision (:meth:`_emit_revisions`), a checkpoint (:meth:`_key_entry`). Bound: at most
        ``max_pending`` events per monitor and part wait (:meth:`_queue_label_update`)."""
        updates, self._label_updates = self._label_updates, {}
        for entry in updates.values():
            self._apply_updates(*entry)

    @staticmethod
    def _apply_updates(monitor: Any, predictions: list[Any], outcomes: list[Any]) -> None:
        """One monitor's queues: vectorised from :data:`LABEL_BATCH_MIN` events, else one by one
        (only ordinary events are queued: no floating-point warning can arise)."""
        if len(predictions) >= LABEL_BATCH_MIN:
            monitor.update_predictions(predictions)
        else:
            for event in predictions:
                monitor.update_prediction(event)
        if len(outcomes) >= LABEL_BATCH_MIN:
            monitor.update_outcomes(outcomes)
        else:
            for event in outcomes:
                monitor.update_outcome(event)

    def revision_tick(self, time_us: int) -> None:
        """Delayed labels: the event time (whole microseconds) of the next item of the label
        stream, given *before* the item is applied. When ``time_us - grace`` lies in a later pane
        than at the last call, every closed window that labels or expiries changed since emits
        its new revision (ready at the next :meth:`poll`). O(1) unless a revision is due."""
        if time_us < self._rev_next:  # (the common item: still in the pane of the last tick)
            return
        grace_us = self.spec.grace_ms * 1000
        pane = (time_us - grace_us) // self._pane_us
        last = self._rev_pane
        if last is None or pane > last:
            self._rev_pane = last = pane
            if self._revised:
                self._emit_revisions()
        self._rev_next = (last + 1) * self._pane_us + grace_us  # the first time of a later pane

    def check_time(self, event: Any) -> None:
        """Raise :class:`EventRejected` (code ``future``, counted) if :meth:`add` would refuse
        ``event`` for its time; change nothing otherwise (so a caller may advance other clocks,
        such as the label join's, before :meth:`add` only for an event time it accepts)."""
        ts_us = _floor(event.ts * 1e6 + 0.5)
        if ts_us > self._future_us:
            self._check_future(event, ts_us)

    def _emit_revisions(self) -> None:
        """One new revision per closed window that labels changed since the last emission (final,
        and forgotten, once nothing in it awaits a label)."""
        if self._staged:
            self._unstage()
        if self._label_updates:
            self._apply_label_updates()
        spec = self.spec
        for key, state in self._keys.items():
            if not state.revising:
                continue
            for k in sorted(state.revising):
                win = state.revising[k]
                if not win.dirty:
                    continue
                if self._changed is not None:
                    self._changed.add(key)
                win.revision += 1
                win.dirty = False
                start = k * spec.slide_ms
                self._ready.append(self._snapshot(key, state, win.monitor, start, start + spec.size_ms,
                                                  win.awaiting == 0, revision=win.revision, pending=win.awaiting,
                                                  expired=win.expired))
                if win.awaiting == 0:
                    del state.revising[k]
                    if not state.revising and not state.panes:
                        self._emptied.append(key)
        self._revised = False

    def stream_time(self) -> float | None:
        """The largest event time (epoch seconds) applied over all keys, evicted ones included
        (None before the first event). O(1)."""
        return None if self._max_us == -math.inf else self._max_us / 1e6

    @property
    def queued_label_updates(self) -> int:
        """Delayed labels: predictions and labelled predictions queued for their monitors, not yet
        applied (at most ``max_pending`` per monitor and part; applied before any monitor is read)."""
        return sum(len(p) + len(o) for _, p, o in self._label_updates.values())

    def awaiting_windows(self) -> int:
        """Closed windows retained because predictions in them await labels."""
        return sum(len(s.revising) for s in self._keys.values())

    def _check_future(self, event: Any, ts_us: int) -> None:
        """Refresh the cached future bound from the wall clock; refuse ``event`` beyond it."""
        self._future_left = FUTURE_REFRESH_EVENTS
        if self.max_future is None:
            return
        self._refresh_future()
        if ts_us > self._future_us:
            self._reject("future", f"event time {event.ts!r} is more than {self.max_future:g} s ahead of the "
                                   f"wall clock (max_future)", "ts")

    def _refresh_future(self) -> None:
        """The ``max_future`` bound from the wall clock now (up or down: a step back lowers it)."""
        self._future_us = _floor((self._wall_clock() + self.max_future) * 1e6) if self.max_future else math.inf

    def _reject(self, code: str, reason: str, field: str | None = None) -> None:
        self.rejected[code] = self.rejected.get(code, 0) + 1
        raise EventRejected(code, reason, field)

    def _key_state(self, event: Any, state: _KeyState | None) -> _KeyState:
        """The state of ``event``'s key, created on its first event; with an ``event_tag``, the
        event's tag checked against the key's (ValueError before anything changes)."""
        tag = None
        if self._event_tag is not None:
            tag = self._event_tag(event)
            if state is not None and state.tag is not None and tag != state.tag:
                self._reject("kind_mismatch", f"event of kind {tag!r} in a stream of kind {state.tag!r}")
        if state is None:
            state = self._new_key((event.model, event.segment))
        if state.tag is None:
            state.tag = tag
        return state

    def _new_key(self, key: tuple[str, str]) -> _KeyState:
        """State for a key not held: refused past ``max_keys``; an evicted key resumes from its
        remembered frontier (and late count), a forgotten one from the forgotten keys' frontier."""
        if self.max_keys is not None and len(self._keys) >= self.max_keys and (self._emptied or self._emptied_old):
            self._evict_emptied()  # make room: keys whose windows all closed go
        if self.max_keys is not None and len(self._keys) >= self.max_keys:
            self._reject("key_limit", f"more than max_keys={self.max_keys} keys have open windows; "
                                      f"key model={key[0]!r:.80} segment={key[1]!r:.80} refused (raise "
                                      f"--max-keys)", "model")
        state = self._keys[key] = _KeyState(key[0])
        if self._changed is not None:
            self._changed.add(key)
            self._created.add(key)
        remembered = self._closed.pop(key, None)
        if remembered is not None:
            self._set_next_window(state, remembered[0])
            state.late = remembered[1]
        elif self._forgotten_next is not None:
            self._set_next_window(state, self._forgotten_next)
        return state

    def _evict_aged(self) -> None:
        """Evict the keys emptied before the watermark's previous pane: an emptied key is kept
        until the watermark has entered a later pane twice, so that a key with events in every
        window (whose windows all close at once, by one watermark) is not evicted and re-created
        window after window (at 10,000 keys of ~2 events a window that churn cost a third of the
        replay's time)."""
        if not self._emptied and not self._emptied_old:
            return
        if self._max_us == -math.inf:
            return
        pane = (self._max_us - self.spec.grace_ms * 1000) // self._pane_us
        if pane > self._evict_pane:
            aged, self._emptied_old, self._emptied = self._emptied_old, self._emptied, []
            self._evict_pane = pane
            if aged:  # (those with an event in the last pane or two stay: they are emptied again later)
                self._evict_keys(aged, (pane - 1) * self._pane_us)

    def _evict_emptied(self) -> None:
        """Evict every emptied key now (end of input, or room needed for a new key)."""
        emptied = self._emptied_old + self._emptied
        self._emptied_old, self._emptied = [], []
        self._evict_keys(emptied)

    def _evict_keys(self, emptied: list[tuple[str, str]], before_us: float = math.inf) -> None:
        """Drop keys whose windows have all closed, that queue nothing (and whose last event is
        before ``before_us``), keeping a compact ``(next_window, late)`` per evicted key (bounded
        by ``max_keys``) so that a later event of the key is late for a closed window exactly as
        if the key had stayed."""
        if self.cumulative:  # the all-time monitor is the key's point: keys stay (bounded by max_keys)
            return
        closed = self._closed
        bound = self.max_keys
        staged = self._epoch  # (the keys with staged events, which they hold: not evicted, nothing unstaged)
        for key in emptied:
            state = self._keys.get(key)
            if state is None or key in staged or state.panes or state.pending or state.next_window is None \
                    or state.revising or state.max_us >= before_us:
                continue  # (closed windows awaiting labels keep their key)
            del self._keys[key]
            self.evicted += 1
            closed[key] = (state.next_window, state.late)
            if self._changed is not None:
                self._changed.add(key)
            if bound is not None and len(closed) > bound:
                old = next(iter(closed))
                nw = closed.pop(old)[0]
                if self._changed is not None:
                    self._changed.add(old)
                if self._forgotten_next is None or nw > self._forgotten_next:
                    self._forgotten_next = nw

    def _set_first_window(self, state: _KeyState, k: int) -> None:
        spec = self.spec
        state.first_window = k
        # first_window_of_pane(p) < k  <=>  p < k * slide + (size - slide)   (in panes)
        state.first_pane_bound = k * spec.panes_per_slide + spec.panes_per_window - spec.panes_per_slide

    def _set_next_window(self, state: _KeyState, k: int) -> None:
        spec = self.spec
        state.next_window = k
        state.open_from = k * spec.panes_per_slide
        state.close_at = (k * spec.slide_ms + spec.size_ms + spec.grace_ms) * 1000

    # ----------------------------------------------------------------- batch mode
    def _drain_pane(self, state: _KeyState, pane: int) -> None:
        """The pane's queued events (batch mode), or items in its monitor's small form
        (:meth:`add_columns`), into the pane's monitor (made if missing): a Monitor's
        ``update_items`` (its ``update_events`` unless it has a small form)."""
        items = state.pending.pop(pane)
        monitor = state.panes.get(pane)
        if monitor is None:
            monitor = state.panes[pane] = self._factory()
        if self._task is not None:
            monitor.update_items(items)
        else:
            monitor.update_events(items)

    def _drain_key(self, state: _KeyState) -> None:
        if self._staged:
            self._unstage()
        for pane in sorted(state.pending):
            self._drain_pane(state, pane)

    # ----------------------------------------------------------------- closing
    def _close_by_watermark(self, key: tuple[str, str], state: _KeyState, max_us: float) -> None:
        """Close the key's windows ending at or before the watermark of stream time ``max_us``
        (the first event of the key: its first open window is the watermark's)."""
        spec = self.spec
        watermark = max_us - spec.grace_ms * 1000
        # window k ends at k*slide + size: closed once watermark >= end (exact integer arithmetic)
        last_closable = (watermark - spec.size_ms * 1000) // (spec.slide_ms * 1000)
        if state.next_window is None:  # first event of the key: nothing was open before
            self._set_next_window(state, int(last_closable) + 1)
        elif last_closable >= state.next_window:
            self._close_through(key, state, int(last_closable))

    def _close_through(self, key: tuple[str, str], state: _KeyState, last: int) -> None:
        """Close windows ``next_window .. last`` (those holding events emit a snapshot).

        Cost O(open panes x windows per pane), never O(elapsed time / slide): after each window
        the scan jumps straight to the first window of the lowest remaining pane, so the empty
        range between two events (a first event at ts=0, one dated 9999) is skipped
        arithmetically instead of stepped through.
        """
        if self._changed is not None:
            self._changed.add(key)
        if self._label_updates:  # (delayed labels: the monitors as read now)
            self._apply_label_updates()
        spec = self.spec
        s, w = spec.panes_per_slide, spec.panes_per_window
        k = state.next_window
        assert k is not None
        panes = state.panes
        if s == w and not self.cumulative and not state.awaiting:
            self._close_tumbling(key, state, last)
            return
        if state.pending:  # the queued panes these windows read (later ones keep queueing)
            end_pane = last * s + w
            for j in sorted(state.pending):
                if j < end_pane:
                    self._drain_pane(state, j)
        closed_any = False
        while panes:
            low = min(panes)
            k = max(k, spec.first_window_of_pane(low))  # skip windows that hold no open pane
            if k > last:
                break
            lo, hi = k * s, k * s + w
            held = sorted(p for p in panes if lo <= p < hi)
            merged = None
            if len(held) == 1 and held[0] < (k + 1) * s and not self.cumulative:
                # a window of one pane that is released below: its monitor, without a copy
                # (tumbling windows; the all-time monitor of cumulative=True still reads it)
                merged = panes[held[0]]
            else:
                for j in held:
                    merged = panes[j].copy() if merged is None else merged.merge(panes[j])
            if merged is not None:
                awaiting = expired = 0
                if state.awaiting:  # delayed labels: retain the window while predictions await labels
                    for j, (a, e) in state.awaiting.items():
                        if lo <= j < hi:
                            awaiting += a
                            expired += e
                    if awaiting:
                        state.revising[k] = _Revising(merged, awaiting, expired)
                self._close_window(key, state, merged, lo * spec.pane_ms, hi * spec.pane_ms, not awaiting,
                                   pending=awaiting, expired=expired)
                closed_any = True
            # panes below the next window's start are no longer needed
            next_lo = (k + 1) * s
            if low < next_lo:
                for j in sorted(p for p in panes if p < next_lo):
                    if self.cumulative:  # released panes: every window holding them has closed
                        if state.cumulative is None:
                            state.cumulative = self._factory()
                        state.cumulative.merge(panes[j])
                    del panes[j]
                    if state.awaiting:
                        state.awaiting.pop(j, None)
            k += 1
        self._set_next_window(state, last + 1)
        if not panes and not state.pending:
            self._emptied.append(key)
        if closed_any and self.cumulative:
            # all-time up to the end of window `last`: the released panes plus the open panes
            # that window holds (hopping windows), never an event past its end
            total = self._factory() if state.cumulative is None else state.cumulative.copy()
            end_pane = last * s + w
            for j in sorted(p for p in panes if p < end_pane):
                total.merge(panes[j])
            start = (state.first_window or 0) * spec.slide_ms
            end = last * spec.slide_ms + spec.size_ms
            self._close_window(key, state, total, start, end, False, cumulative=True)

    def _close_tumbling(self, key: tuple[str, str], state: _KeyState, last: int) -> None:
        """:meth:`_close_through` of tumbling windows (window j is pane j) when nothing awaits a
        label and nothing is cumulative: the queued panes up to ``last`` applied, then each open
        pane up to ``last`` closed in order (a pane below ``next_window`` holds no window left to
        close). The common case, a key holding one queued pane and no other, without a sort."""
        pane_ms = self.spec.pane_ms
        k = state.next_window
        assert k is not None
        pending, panes = state.pending, state.panes
        if not panes and len(pending) == 1:
            (j, items), = pending.items()
            if j <= last:
                del pending[j]
                if j >= k:
                    self._close_queued(key, state, items, j * pane_ms, (j + 1) * pane_ms)
        else:
            if pending:  # the queued panes these windows read (later ones keep queueing)
                for j in sorted(pending):
                    if j <= last:
                        self._drain_pane(state, j)
            for j in sorted(panes) if len(panes) > 1 else list(panes):
                if j > last:
                    break
                monitor = panes.pop(j)
                if j >= k:
                    self._close_window(key, state, monitor, j * pane_ms, (j + 1) * pane_ms, True)
        self._set_next_window(state, last + 1)
        if not panes and not pending:
            self._emptied.append(key)

    def _close_queued(self, key: tuple[str, str], state: _KeyState, items: list[Any], start_ms: int,
                      end_ms: int) -> None:
        """A final window of tumbling panes whose only content is its queued ``items``: a small one
        of a type built together waits as its items (:data:`_Closed`, no monitor yet); any other
        is applied to a new monitor (``update_items``, ``update_events``) and closed with it."""
        if self._task is not None and self._kind is not None and len(items) <= DEFER_MAX_EVENTS:
            window = (key, None, items, start_ms, end_ms, True, state.late, 0, False)
            self._ready.append(window)
            self._deferred.append(window)
            return
        monitor = self._factory()
        if self._task is not None:
            monitor.update_items(items)
        else:
            monitor.update_events(items)
        self._close_window(key, state, monitor, start_ms, end_ms, True)

    def _close_window(self, key: tuple[str, str], state: _KeyState, monitor: Any, start_ms: int, end_ms: int,
                      final: bool, pending: int = 0, expired: int = 0, cumulative: bool = False) -> None:
        """A closed window's place in the ready queue: a small window of a monitor with a small
        form (no longer changed by the engine: nothing in it awaits a label) waits as a
        :data:`_Closed` for the next poll to build it with the others (``snapshot_many``); any
        other window's snapshot is built now."""
        if self._kind is not None and not pending and monitor.count <= DEFER_MAX_EVENTS:
            window = (key, monitor, None, start_ms, end_ms, final, state.late, expired, cumulative)
            self._ready.append(window)
            self._deferred.append(window)
        else:
            self._ready.append(self._snapshot(key, state, monitor, start_ms, end_ms, final, cumulative=cumulative,
                                              pending=pending, expired=expired))

    def poll(self, revisions: bool = True, collect: bool = True) -> list[dict[str, Any]]:
        """Close what :meth:`advance_watermark` passed and return the snapshots ready since the last
        call. ``revisions=True`` also emits the revisions of windows that labels changed since the
        last revision tick (prompt revisions for a live service); with ``revisions=False`` they
        wait for the next tick (:meth:`revision_tick`) or :meth:`flush`, so that the output does
        not depend on when the caller polls (replay). ``collect=False`` does the closing work
        and returns nothing: the ready snapshots stay queued (in order, :attr:`ready_count`) for
        a later call, so that more small windows are built together (replay)."""
        return self._collect(revisions, collect, False)

    def poll_lines(self, revisions: bool = True, collect: bool = True) -> list[str]:
        """:meth:`poll`'s snapshots as their canonical lines
        (:func:`~streammetrics.stream.snapshots.snapshot_line`), for a caller that only writes
        them (replay): the small windows closed together are written straight from their JSON
        texts (the template's ``snapshot_texts``; no dict or encoder per window), the same lines."""
        return _lines_of(self._collect(revisions, collect, True))

    def poll_written(self, revisions: bool = True, collect: bool = True) -> list[str | dict[str, Any]]:
        """:meth:`poll_lines`, each snapshot not written from its texts left a dict (for a caller
        that annotates those before writing them: ``--reference``'s ``changes``), in order."""
        return self._collect(revisions, collect, True)

    def _collect(self, revisions: bool, collect: bool, lines: bool) -> list[Any]:
        if self.max_future is not None:
            self._refresh_future()
        if self._next_due <= self._max_us:
            self._close_due()
        if self._revised and revisions:
            self._emit_revisions()
        self._evict_aged()
        if not collect:
            return []
        if self._deferred:
            self._build_deferred(lines)
        ready, self._ready = self._ready, []
        return ready

    @property
    def ready_count(self) -> int:
        """Snapshots ready and not yet returned by :meth:`poll`."""
        return len(self._ready)

    @property
    def staged_count(self) -> int:
        """Events :meth:`add_columns` holds staged, not yet in their keys' queues (at most
        :data:`STAGE_MAX_EVENTS`; applied before anything reads the queues)."""
        return self._staged_events

    @property
    def deferred_count(self) -> int:
        """Of :attr:`ready_count`, the small windows whose snapshots :meth:`poll` builds together
        (each holds at most :data:`DEFER_MAX_EVENTS` events)."""
        return len(self._deferred)

    def _build_deferred(self, lines: bool = False) -> None:
        """Replace the :data:`_Closed` windows in the ready queue by their snapshots, built
        together by the monitor type's ``snapshot_many`` (``lines``: texts first, ``item_texts``
        from the items of windows closed without a monitor and ``snapshot_texts`` of the others,
        and each such window written as its line by :func:`~streammetrics.stream.snapshots.window_line`).
        A window closed as its items gets its monitor (``update_items``) only where it is read."""
        deferred, self._deferred = self._deferred, []
        kind = self._kind
        assert kind is not None
        if not deferred:
            return
        extra, include_state = self.extra_metrics, self.include_state
        n = len(deferred)
        built: list[Any] = [None] * n
        # the windows as columns (one transposition in C): key, monitor, items, start, end, final,
        # late, expired, cumulative
        keys, monitors_of, item_lists, starts, ends, finals, lates, expireds, cumulatives = zip(*deferred)
        monitors: list[Any] = list(monitors_of)
        counts: list[int] = [0] * n
        texts: list[tuple[str, str, str] | None] = [None] * n
        plain: list[int] = []
        # a hook's metrics_text(key): the members it appends to any window of the key (None: it reads the window)
        appended = None if extra is None else getattr(extra, "metrics_text", None)
        if lines and include_state and (extra is None or appended is not None):  # final windows of one revision
            plain = [i for i, final, expired, cumulative in zip(range(n), finals, expireds, cumulatives)
                     if final and not expired and not cumulative]
            if appended is not None:
                members = {i: appended(keys[i]) for i in plain}
                plain = [i for i in plain if members[i] is not None]
            queued = [i for i in plain if item_lists[i] is not None]
            if queued:
                for i, text in zip(queued, kind.item_texts(self._factory(), list(map(item_lists.__getitem__, queued)))):
                    if text is not None:
                        texts[i] = text
                        counts[i] = len(item_lists[i])  # (one event an item)
        for i in [i for i, text in enumerate(texts) if text is None]:  # the windows not written from their items
            items = item_lists[i]
            if items is not None:
                monitors[i] = self._factory().update_items(items)
            counts[i] = monitors[i].count
        if plain:
            others = [i for i in plain if texts[i] is None]
            if others:
                for i, text in zip(others, kind.snapshot_texts([monitors[i] for i in others])):
                    if text is not None:
                        texts[i] = text
            given = [i for i in plain if texts[i] is not None]
            if appended is not None:
                for i in given:
                    text = texts[i]
                    assert text is not None
                    texts[i] = (_appended(text[0], members[i]), text[1], text[2])
            lines_of = window_lines(*(list(map(column.__getitem__, given))
                                      for column in (keys, starts, ends, counts, lates, texts)))
            for i, line in zip(given, lines_of):
                built[i] = line
        rest = [i for i, b in enumerate(built) if b is None]
        if rest:
            prepare = getattr(extra, "prepare", None)  # (a hook computing the windows' metrics together)
            if prepare is not None:
                prepare([(keys[i], monitors[i]) for i in rest])
            records = kind.snapshot_many([monitors[i] for i in rest], include_state)
            for i, record in zip(rest, records):
                built[i] = build_snapshot(keys[i], monitors[i], starts[i], ends[i], final=finals[i], late=lates[i],
                                          expired=expireds[i], cumulative=cumulatives[i],
                                          include_state=include_state, extra_metrics=extra, count=counts[i],
                                          record=record)
        in_order = iter(built)  # (_deferred holds them in their order in the ready queue)
        self._ready = [next(in_order) if r.__class__ is _Closed else r for r in self._ready]

    def _arm(self, key: tuple[str, str], state: _KeyState) -> None:
        """Enter the key among those to close at its ``close_at`` (it holds open panes)."""
        state.armed = at = state.close_at
        keys = self._due.get(at)
        if keys is None:
            self._due[at] = [key]
            heapq.heappush(self._due_at, at)
            if at < self._next_due:
                self._next_due = at
        else:
            keys.append(key)

    def _arm_many(self, keys: list[tuple[str, str]], states: list[_KeyState]) -> None:
        """:meth:`_arm` of each key (with its state), in order: those of one ``close_at`` (most
        often all of them) entered together."""
        at = states[0].close_at
        if any(state.close_at != at for state in states):
            for key, state in zip(keys, states):
                self._arm(key, state)
            return
        for state in states:
            state.armed = at
        due = self._due.get(at)
        if due is None:
            self._due[at] = keys
            heapq.heappush(self._due_at, at)
            if at < self._next_due:
                self._next_due = at
        else:
            due += keys

    def _close_due(self) -> None:
        """Close every key's windows that the watermark passed, in ``(close_at, key)`` order: the
        keys of each due ``close_at`` sorted once (windows close at few distinct times), nothing
        for the keys not due."""
        times, keys, max_us = self._due_at, self._keys, self._max_us
        spec = self.spec
        # the last window the watermark closes (as _close_by_watermark computes it for each key);
        # tumbling windows without labels or cumulative monitors close through _close_tumbling
        last = int((max_us - spec.grace_ms * 1000 - spec.size_ms * 1000) // (spec.slide_ms * 1000))
        tumbling = spec.panes_per_slide == spec.panes_per_window and not self.cumulative
        changed = self._changed
        # the common close, written out: a key of tumbling windows holding one queued pane and no
        # other (many keys, few events each), its window built at the next poll (_Closed); a key
        # whose only content is staged closes as those events (``closing``, see _unstage)
        simple = self._task is not None and self._kind is not None
        closing = len(self._unstage(last if tumbling and simple else None)) if self._staged else 0
        defer_max = DEFER_MAX_EVENTS
        pane_ms = spec.pane_ms
        open_from, close_at = (last + 1) * spec.panes_per_slide, ((last + 1) * spec.slide_ms + spec.size_ms
                                                                  + spec.grace_ms) * 1000
        ready, deferred, emptied = self._ready.append, self._deferred.append, self._emptied.append
        nan, start_ms, end_ms = math.nan, last * pane_ms, (last + 1) * pane_ms  # (the common window: pane last)
        while times and times[0] <= max_us:
            at = heapq.heappop(times)
            due = _sorted_keys(self._due.pop(at))
            for key in due:
                state = keys.get(key)
                if state is None or state.armed != at:
                    continue  # stale: the key closed or went since (or a duplicate)
                state.armed = nan
                items = state.closing
                if items is not None:  # (_unstage checked what the path below checks)
                    state.closing = None
                    closing -= 1
                    window = (key, None, items, start_ms, end_ms, True, state.late, 0, False)
                    ready(window)
                    deferred(window)
                    state.next_window, state.open_from, state.close_at = last + 1, open_from, close_at
                    if changed is not None:
                        changed.add(key)
                    emptied(key)
                    continue
                nw = state.next_window
                if tumbling and nw is not None and last >= nw and not state.awaiting:
                    if changed is not None:
                        changed.add(key)
                    pending = state.pending
                    if simple and not state.panes and len(pending) == 1:
                        j, items = pending.popitem()
                        if j <= last:
                            if j >= nw:
                                if len(items) <= defer_max:  # (_close_queued, written out)
                                    window = (key, None, items, start_ms, end_ms, True, state.late, 0, False) \
                                        if j == last else (key, None, items, j * pane_ms, (j + 1) * pane_ms, True,
                                                           state.late, 0, False)
                                    ready(window)
                                    deferred(window)
                                else:
                                    self._close_queued(key, state, items, j * pane_ms, (j + 1) * pane_ms)
                            state.next_window, state.open_from, state.close_at = last + 1, open_from, close_at
                            emptied(key)
                            continue
                        pending[j] = items  # (a later pane: back in its place, the only one)
                    self._close_tumbling(key, state, last)
                else:
                    self._close_by_watermark(key, state, max_us)
                if state.panes or state.pending:
                    self._arm(key, state)
        if closing:  # (cannot happen: _unstage chose keys armed at a due time)
            raise RuntimeError(f"{closing} keys closing as their staged events were not closed")
        self._next_due = times[0] if times else math.inf

    def _rearm_all(self) -> None:
        """The due keys rebuilt from the keys held (after a checkpoint is loaded)."""
        self._due = {}
        self._due_at = []
        self._next_due = math.inf
        for key, state in self._keys.items():
            state.armed = math.nan
            if state.panes or state.pending:
                self._arm(key, state)

    def advance_watermark(self, watermark_us: int) -> None:
        """Raise the watermark to at least ``watermark_us`` without an event (an input partition
        with no traffic keeping up with the others: the service's ``--idle-close``); the next
        :meth:`poll` closes what it passes. Kept by :meth:`to_dict` (so a checkpoint taken before
        that poll closes the same windows when restored)."""
        target = watermark_us + self.spec.grace_ms * 1000
        if target > self._max_us:
            self._max_us = target

    def watermark_us(self) -> float:
        """The watermark in microseconds (largest event time over all keys minus ``grace``; -inf
        before the first event). After :meth:`poll` every window ending at or before it has closed
        (its snapshot returned) for every key, held, evicted or new, and any later event for such
        a window is late: a consumer merging the snapshots of several window managers (the Kafka
        service's ``--partitioning any``) may treat every window ending at or before it as complete
        here."""
        return self._max_us - self.spec.grace_ms * 1000

    def _close_open(self, key: tuple[str, str], state: _KeyState) -> None:
        """Close every window of the key that holds an open or queued pane (:meth:`_close_through`
        applies the queued ones, or defers small ones to be built together)."""
        if state.panes or state.pending:
            last = max(max(state.panes, default=-1), max(state.pending, default=-1))
            self._close_through(key, state, self.spec.last_window_of_pane(last))

    def flush(self) -> list[dict[str, Any]]:
        """Close every open window of every key (end of input) and return all ready snapshots."""
        return self._flush(False)

    def flush_lines(self) -> list[str]:
        """:meth:`flush`'s snapshots as their canonical lines (see :meth:`poll_lines`)."""
        return _lines_of(self._flush(True))

    def flush_written(self) -> list[str | dict[str, Any]]:
        """:meth:`flush_lines`, the snapshots not written from texts left dicts (:meth:`poll_written`)."""
        return self._flush(True)

    def _flush(self, lines: bool) -> list[Any]:
        if self._staged:
            self._unstage()
        keys = self._keys
        for key in sorted(keys, key=_order):  # (the dict's order depends on when keys were evicted: on polls)
            self._close_open(key, keys[key])
        if self._revised:
            self._emit_revisions()
        if self._emptied or self._emptied_old:
            self._evict_emptied()
        if self._deferred:
            self._build_deferred(lines)
        ready, self._ready = self._ready, []
        return ready

    # ----------------------------------------------------------------- snapshots
    def _snapshot(
        self, key: tuple[str, str], state: _KeyState, monitor: Any, start_ms: int, end_ms: int,
        final: bool, cumulative: bool = False, revision: int = 0, pending: int = 0, expired: int = 0,
    ) -> dict[str, Any]:
        return build_snapshot(key, monitor, start_ms, end_ms, final=final, late=state.late, revision=revision,
                              pending=pending, expired=expired, cumulative=cumulative,
                              include_state=self.include_state, extra_metrics=self.extra_metrics)

    # ----------------------------------------------------------------- introspection
    @property
    def keys(self) -> list[tuple[str, str]]:
        """The stream keys seen, in order of their first event."""
        return list(self._keys)

    def newest_keys(self, n: int) -> list[tuple[str, str]]:
        """The ``n`` keys held that were created last, oldest first: ``keys[-n:]`` in O(n)."""
        if n <= 0:
            return []
        return list(itertools.islice(reversed(self._keys), n))[::-1]

    @property
    def key_count(self) -> int:
        return len(self._keys)

    def late_count(self, model: str, segment: str = "") -> int:
        """Late events dropped for the key (remembered across eviction while the key is
        among the last ``max_keys`` evicted ones)."""
        state = self._keys.get((model, segment))
        if state is None:
            remembered = self._closed.get((model, segment))
            return 0 if remembered is None else remembered[1]
        return state.late

    def open_panes(self) -> int:
        """Number of panes held in memory across all keys."""
        if self._staged:
            self._unstage()
        return sum(len(s.panes.keys() | s.pending.keys()) for s in self._keys.values())

    # ----------------------------------------------------------------- checkpoint
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe checkpoint of every key's open panes and bookkeeping (not the ready queue),
        version 1. (Version 2, written before monitors kept their own small form, also queued
        binary events as JSON numbers, their signed scores: :meth:`load_dict` reads it.)"""
        if self._staged:
            self._unstage()
        keys = [self._key_entry(model, segment, st) for (model, segment), st in self._keys.items()]
        return {"type": "WindowManager", "version": 1, "spec": self.spec.to_dict(), "keys": keys,
                "closed": [[m, g, nw, late] for (m, g), (nw, late) in self._closed.items()],
                **self._globals()}

    def _globals(self) -> dict[str, Any]:
        return {"forgotten_next": self._forgotten_next, "evicted": self.evicted,
                "max_us": None if self._max_us == -math.inf else self._max_us,
                "revision_pane": self._rev_pane}

    def _key_entry(self, model: str, segment: str, st: _KeyState) -> dict[str, Any]:
        """One key's checkpoint entry."""
        if self._label_updates:
            self._apply_label_updates()
        encode = self._codec[0] if self._codec else None
        if encode is None or (st.pending and not self._queue_events):  # (a small form's items: in its monitor)
            self._drain_key(st)
        return {
            "model": model,
            "segment": segment,
            "max_us": None if st.max_us == -math.inf else st.max_us,
            "next_window": st.next_window,
            "first_window": st.first_window,
            "late": st.late,
            "tag": st.tag,
            "panes": [[j, m.to_dict()] for j, m in sorted(st.panes.items())],
            "pending": [[j, [encode(e) for e in q]] for j, q in sorted(st.pending.items())] if encode else [],
            "cumulative": None if st.cumulative is None else st.cumulative.to_dict(),
            "cumulative_released": True,  # the all-time monitor holds released panes only
            "awaiting": [[j, a, e] for j, (a, e) in sorted(st.awaiting.items())],
            "revising": [[k, r.monitor.to_dict(), r.awaiting, r.expired, r.revision, r.dirty]
                         for k, r in sorted(st.revising.items())],
        }

    # ----------------------------------------------------------------- incremental checkpoints
    def track_changes(self) -> None:
        """Start recording the keys whose checkpointed state changes (:meth:`take_changed_keys`)."""
        if self._changed is None:
            self._changed = set()
            self._created = set()

    def take_changed_keys(self) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
        """The keys whose :meth:`to_dict` entry (or evicted-key record) changed since the last call
        (or :meth:`track_changes`), and those among them (re)created since; both reset."""
        if self._changed is None:
            raise ValueError("track_changes() was not called")
        changed, created = self._changed, self._created
        self._changed, self._created = set(), set()
        return changed, created

    def delta_dict(self, changed: set[tuple[str, str]], created: set[tuple[str, str]]) -> dict[str, Any]:
        """What :meth:`take_changed_keys` says changed, as a checkpoint delta: :meth:`apply_delta`
        of the previous :meth:`to_dict` and this equals :meth:`to_dict` now. Cost O(changed keys)
        (no monitor of an unchanged key is written)."""
        if self._staged:
            self._unstage()
        held = self._keys
        # keys created since the last delta are the last ones held, in creation order (apply_delta
        # appends them in this order); the other changed keys keep their place
        # (set operations against the held dict: each reads the hash its set stores, no tuple hashed)
        gone = changed.difference(held)
        n_new = len(created) - len(created.intersection(gone))
        fresh: list[tuple[str, str]] = []
        if n_new:
            for key in reversed(held):
                fresh.append(key)
                if len(fresh) == n_new:
                    break
            fresh.reverse()
        # the other changed keys held, in their order among the held keys (apply_delta keeps each
        # key's place, so any order gives the same checkpoint): found by a walk of the held keys
        # when they are many (sorting ~100,000 keys' strings costs more than writing half of them),
        # else sorted
        kept = changed.difference(created, gone)
        kept_in_order = [key for key in held if key in kept] if len(kept) * 8 >= len(held) else sorted(kept)
        entries = [self._key_entry(key[0], key[1], held[key]) for key in kept_in_order + fresh]
        closed = self._closed
        n_closed = len(gone) - len(gone.difference(closed))  # (a key held is never among the evicted ones)
        tail: list[list[Any]] = []
        if n_closed:  # keys evicted since the last delta are the last ones of _closed, in order
            for key in reversed(closed):
                if key in changed:
                    nw, late = closed[key]
                    tail.append([key[0], key[1], nw, late])
                    if len(tail) == n_closed:
                        break
            tail.reverse()
        return {"type": "WindowManagerDelta", "version": 1, "spec": self.spec.to_dict(),
                "keys": entries, "created": [[k[0], k[1]] for k in fresh],
                "gone": [[k[0], k[1]] for k in sorted(gone)], "closed": tail,
                **self._globals()}

    @staticmethod
    def apply_delta(full: Mapping[str, Any], *deltas: Mapping[str, Any]) -> dict[str, Any]:
        """The :meth:`to_dict` checkpoint ``full`` with ``deltas`` (:meth:`delta_dict`, in order)
        applied, as data (:meth:`load_dict` validates the result); ValueError (one line) for a
        malformed one. O(state + deltas)."""
        if not isinstance(full, Mapping) or full.get("type") != "WindowManager":
            raise ValueError("not a WindowManager checkpoint (type)")
        try:
            keys = {(e["model"], e["segment"]): e for e in full["keys"]}
            closed = {(c[0], c[1]): c for c in full.get("closed", [])}
        except (KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"malformed WindowManager checkpoint: {exc!r:.200}") from None
        last: Mapping[str, Any] = full
        for delta in deltas:
            if not isinstance(delta, Mapping) or delta.get("type") != "WindowManagerDelta" \
                    or delta.get("version") not in (1, 2):
                raise ValueError("not a WindowManager checkpoint delta (type/version)")
            if delta.get("spec") != full.get("spec"):
                raise ValueError("checkpoint delta of another window geometry")
            try:
                for group in ("gone", "created"):
                    for m, g in delta[group]:
                        keys.pop((m, g), None)
                for m, g in delta["gone"]:
                    closed.pop((m, g), None)
                for e in delta["keys"]:
                    key = (e["model"], e["segment"])
                    keys[key] = e
                    closed.pop(key, None)
                for c in delta["closed"]:
                    if not isinstance(c, list) or len(c) != 4:
                        raise ValueError("closed keys must be [model, segment, next_window, late]")
                    closed[(c[0], c[1])] = c
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"malformed WindowManager checkpoint delta: {exc!r:.200}") from None
            last = delta
        entries = list(keys.values())
        # version 2 iff some queued event is packed (a number: a version-2 checkpoint or delta)
        packed = any(e.__class__ is float for entry in entries if isinstance(entry, dict)
                     for pane in entry.get("pending") or () if isinstance(pane, list) and len(pane) == 2
                     and isinstance(pane[1], list) for e in pane[1])
        return {"type": "WindowManager", "version": 2 if packed else 1, "spec": full["spec"], "keys": entries,
                "closed": list(closed.values()),
                **{name: last.get(name) for name in ("forgotten_next", "evicted", "max_us", "revision_pane")}}

    def _load_queued(self, item: Any, decode: Callable[[Any], Any], model: str, segment: str, pane: int) -> Any:
        """A queued item of a checkpoint: an encoded event, or (version 2) a packed binary event,
        a JSON number ``v`` with ``0 < |v| < 1``, read as the event it stands for (``y_true``
        ``v > 0``, ``score`` ``|v|``, at the start of its pane)."""
        if item.__class__ is float or item.__class__ is int:
            if self._task != "binary":
                raise ValueError(f"checkpoint holds a packed event ({item!r:.40}) this monitor does not read")
            if item.__class__ is not float or not 0.0 < abs(item) < 1.0:
                raise ValueError(f"a packed binary event must be a float v with 0 < |v| < 1, got {item!r:.80}")
            return Event(pane * self._pane_us / 1e6, model, segment, y_true=1 if item > 0.0 else 0, score=abs(item))
        return decode(item)

    def load_dict(self, data: Mapping[str, Any]) -> WindowManager:
        """Replace the state with a checkpoint from :meth:`to_dict` (same window geometry)."""
        from streammetrics.core.accumulator import from_dict as _from_dict

        load = self._loader or _from_dict
        if not isinstance(data, Mapping) or data.get("type") != "WindowManager" or data.get("version") not in (1, 2):
            raise ValueError("not a WindowManager checkpoint (type/version)")
        if data.get("spec") != self.spec.to_dict():
            raise ValueError(f"checkpoint window geometry {data.get('spec')} != {self.spec.to_dict()}")
        keys: dict[tuple[str, str], _KeyState] = {}
        try:
            for item in data["keys"]:
                model, segment = item["model"], item["segment"]
                if not isinstance(model, str) or not isinstance(segment, str):
                    raise ValueError("model and segment must be strings")  # noqa: TRY004 - one error type for a bad checkpoint
                st = _KeyState(model)
                if item["max_us"] is not None and type(item["max_us"]) is not int:
                    raise ValueError("max_us must be an integer")
                st.max_us = -math.inf if item["max_us"] is None else item["max_us"]
                if item["next_window"] is not None:
                    self._set_next_window(st, int(item["next_window"]))
                if item["first_window"] is not None:
                    self._set_first_window(st, int(item["first_window"]))
                st.late = int(item["late"])
                st.tag = item.get("tag")
                st.panes = {int(j): load(m) for j, m in item["panes"]}
                pending = item.get("pending", [])
                if pending and not self._codec:
                    raise ValueError("checkpoint holds queued events but no event_codec was given")
                decode = self._codec[1] if self._codec else None
                st.pending = {int(j): [self._load_queued(e, decode, model, segment, int(j)) for e in q]
                              for j, q in pending} if decode and pending else {}
                if item["cumulative"] is not None and not item.get("cumulative_released"):
                    raise ValueError("its all-time (--cumulative) state is from a version that also counted "
                                     "open windows; start without this checkpoint")
                st.cumulative = None if item["cumulative"] is None else load(item["cumulative"])
                st.awaiting = {int(j): [int(a), int(e)] for j, a, e in item.get("awaiting", [])}
                st.revising = {int(k): _Revising(load(m), int(a), int(e), int(r), bool(d))
                               for k, m, a, e, r, d in item.get("revising", [])}
                keys[(model, segment)] = st
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed WindowManager checkpoint: {exc}") from None
        closed: dict[tuple[str, str], tuple[int, int]] = {}
        try:
            for m, g, nw, late in data.get("closed", []):
                if not isinstance(m, str) or not isinstance(g, str) or type(nw) is not int or type(late) is not int:
                    raise ValueError("closed keys must be [model, segment, next_window, late]")
                closed[(m, g)] = (nw, late)
            forgotten = data.get("forgotten_next")
            if forgotten is not None and type(forgotten) is not int:
                raise ValueError("forgotten_next must be an integer")
            evicted = data.get("evicted", 0)
            if type(evicted) is not int:
                raise ValueError("evicted must be an integer")
        except (TypeError, ValueError) as exc:
            raise ValueError(f"malformed WindowManager checkpoint: {exc}") from None
        rev_pane = data.get("revision_pane")  # absent in older checkpoints: the next item ticks
        if rev_pane is not None and type(rev_pane) is not int:
            raise ValueError("malformed WindowManager checkpoint: revision_pane must be an integer")
        if self.max_keys is not None and len(keys) > self.max_keys:
            raise ValueError(f"checkpoint holds {len(keys)} keys with open windows, more than max_keys="
                             f"{self.max_keys}: raise max_keys (--max-keys) to load it")
        while self.max_keys is not None and len(closed) > self.max_keys:
            nw = closed.pop(next(iter(closed)))[0]
            forgotten = nw if forgotten is None else max(forgotten, nw)
        self._keys = keys
        self._label_updates = {}  # (queued for the monitors just replaced)
        saved_max = data.get("max_us")  # stream time of evicted keys too (older checkpoints: held keys')
        if saved_max is not None and type(saved_max) is not int:
            raise ValueError("malformed WindowManager checkpoint: max_us must be an integer")
        self._max_us = max([st.max_us for st in keys.values()] + ([saved_max] if saved_max is not None else []),
                           default=-math.inf)
        self._closed = closed
        self._forgotten_next = forgotten
        self.evicted = evicted
        self._emptied, self._emptied_old, self._evict_pane = [], [], -math.inf
        self._ready = []
        self._deferred = []
        self._staged, self._staged_events = [], 0
        self._epoch, self._epoch_ids, self._epoch_keys = {}, {}, []
        self._epoch_held[:] = None
        self._revised = any(r.dirty for st in keys.values() for r in st.revising.values())
        self._rev_pane = rev_pane
        self._rev_next = -math.inf
        if self._changed is not None:  # the loaded state is the base of the next delta
            self._changed, self._created = set(), set()
        self._rearm_all()
        return self
