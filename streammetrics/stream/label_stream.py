"""Windows with delayed labels: a :class:`~streammetrics.stream.windows.WindowManager` fed
through a :class:`~streammetrics.stream.labels.LabelJoin` (contract section 5). I/O-free.

:meth:`LabelStream.add` takes what :class:`~streammetrics.stream.label_events.DelayedEventParser`
gives, in stream order:

* a labelled prediction goes to the windows (``add``) and advances the join's watermark;
* a prediction awaiting its label goes to the windows (``add_prediction``: label-free metrics
  now) and, unless late, to the join with the first window it counts in;
* a label goes to the join. Every prediction the join settles is applied to its windows:
  joined -> ``add_outcome`` (label-based metrics of every window of the prediction's ``ts``;
  closed ones emit a new revision at the next revision tick), expired -> ``expire``.

Every item's time (predictions, labels) is first given to
:meth:`~streammetrics.stream.windows.WindowManager.revision_tick`: closed windows changed by
labels or expiries emit their new revision when event time enters a later pane, so revision
numbers are a function of the events' timestamps (see :mod:`streammetrics.stream.windows`).

It returns :class:`Notice` records for what the caller should report (late events, rejected
events and labels, expiries). Snapshots come from :meth:`poll` and :meth:`flush`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import islice
from typing import Any

import numpy as np

from streammetrics.events.parser import Event
from streammetrics.stream.labels import EXPIRED, JOINED, LABEL_EXPIRED, PENDING, REJECTED, Label, LabelJoin
from streammetrics.stream.pending import ts_us
from streammetrics.stream.windows import EventRejected, WindowManager

__all__ = ["LabelStream", "Notice"]

_NONE: tuple[()] = ()
#: the shortest run :meth:`LabelStream.add_many` applies together (shorter: item by item)
RUN_MIN = 8
#: the longest run looked for at once (a longer one is taken in several)
RUN_MAX = 4096
#: the first span a run is looked for in (doubled after each run taken whole, up to
#: :data:`RUN_MAX`; back to this after a run cut short): looking costs per item of the span, so
#: a stream whose runs keep breaking (labels without their prediction, labels before it) looks
#: at ~64 items per try, not 4096
RUN_SPAN = 64
#: the most items taken one by one before a run is looked for again, after refused runs (the
#: wait doubles from :data:`RUN_MIN` while runs are refused: a stream whose runs never form
#: pays for one look per this many items)
RUN_WAIT_MAX = 1024


_I64 = np.iinfo(np.int64)


def _int64(bound: float) -> int:
    """A bound of event time (us) as an int64 (infinities as its extremes)."""
    return _I64.max if bound == math.inf else _I64.min if bound == -math.inf else int(bound)


class Notice:
    """Something to report: ``kind`` (``late``, ``rejected``, ``expired``, ``label_expired``),
    a machine-readable ``code`` and a one-line ``message``."""

    __slots__ = ("code", "kind", "message")

    def __init__(self, kind: str, code: str, message: str) -> None:
        self.kind = kind
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"Notice({self.kind!r}, {self.code!r}, {self.message!r})"


class LabelStream:
    """A window manager and a label join driven together; see the module docstring.

    >>> from streammetrics.stream.labels import LabelJoin
    >>> from streammetrics.stream.windows import WindowManager
    >>> from streammetrics.monitors import BinaryMonitor
    >>> s = LabelStream(WindowManager(BinaryMonitor, 60, include_state=False), LabelJoin(3600))
    >>> s.add(Event(10.0, "m", score=0.9, id="a"))
    ()
    >>> s.add(Event(70.0, "m", y_true=0, score=0.2))   # closes [0, 60): revision 0, pending
    ()
    >>> [(x["revision"], x["final"], x["pending"]) for x in s.poll()]
    [(0, False, 1)]
    >>> s.add(Label("a", 1, 100.0))
    ()
    >>> [(x["revision"], x["final"], x["labeled"], x["metrics"]["accuracy"]) for x in s.poll()]
    [(1, True, 1, 1.0)]
    """

    def __init__(self, windows: WindowManager, join: LabelJoin) -> None:
        self.windows = windows
        self.join = join
        #: labelled predictions applied, predictions awaiting a label accepted, labels received,
        #: late events, events refused by the windows
        self.counts = dict.fromkeys(("events", "predictions", "labels", "late", "refused"), 0)

    def add(self, item: Event | Label) -> list[Notice] | tuple[()]:
        """Apply one parsed event or label; returns what to report (usually nothing).

        Order, so that the outcome depends on event times only and not on the order of items
        with equal ``ts``: an event the windows refuse for its time (``future``) changes
        nothing; otherwise the item's time first ticks the windows' revisions
        (:meth:`WindowManager.revision_tick`: changes of earlier panes are emitted), then
        advances the join (predictions expiring by it are settled, before any window this item
        closes), then the item is applied."""
        windows, join, counts = self.windows, self.join, self.counts
        t = ts_us(item.ts)
        if item.__class__ is Label:
            counts["labels"] += 1
            windows.revision_tick(t)
            out = join.advance_us(t)
            notes = self._settle(out) if out else _NONE
            more = self._settle(join.add_label(item, t))
            return [*notes, *more] if notes and more else notes or more
        event: Any = item
        try:
            windows.check_time(event)
        except EventRejected as exc:
            counts["refused"] += 1
            return [Notice("rejected", exc.code, exc.reason)]
        windows.revision_tick(t)
        out = join.advance_us(t)
        notes = self._settle(out) if out else _NONE
        try:
            if event.y_true is not None:
                applied = windows.add_labelled(event)
                first = None
            else:
                first = windows.add_prediction(event)
                applied = first is not None
        except EventRejected as exc:  # key_limit, kind_mismatch: its time still advanced the join
            counts["refused"] += 1
            return [Notice("rejected", exc.code, exc.reason), *notes]
        if not applied:
            counts["late"] += 1
            late = Notice("late", "late", f"late event for model={event.model!r} segment={event.segment!r} "
                                          f"ts={event.ts!r}: its windows have closed")
            return [late, *notes]
        if event.y_true is not None:
            counts["events"] += 1
            return notes
        counts["predictions"] += 1
        more = self._settle(join.add_prediction(event, first, t))
        return [*notes, *more] if notes and more else notes or more

    def add_many(self, items: Sequence[Event | Label]) -> list[tuple[int, list[Notice] | tuple[()]]]:
        """:meth:`add` of each of ``items`` in order; returns ``(position, notices)`` of the items
        with something to report. Runs of predictions awaiting their label and labels that change
        nothing but their own panes, windows and pending entries (no revision tick, no window to
        close, nothing to expire, no refusal: :meth:`WindowManager.quiet_until_us`,
        :meth:`WindowManager.predictions_taken`, :meth:`LabelJoin.quiet_from_us`,
        :meth:`LabelJoin.joinable`) are applied together; any other item by :meth:`add`."""
        out: list[tuple[int, list[Notice] | tuple[()]]] = []
        windows, join = self.windows, self.join
        ttl = join.ttl_us
        n = len(items)
        # which items may be in a run, and every item's time in whole microseconds (as ts_us)
        kinds = [item.__class__ is Label or (item.__class__ is Event and item.y_true is None) for item in items]
        ts = np.fromiter([item.ts for item in items], dtype=np.float64, count=n)
        times = np.floor(ts * 1e6 + 0.5).astype(np.int64)
        after = [n] * (n + 1)  # the first item from each position that no run takes
        for i in range(n - 1, -1, -1):
            after[i] = after[i + 1] if kinds[i] else i
        pos = 0
        alone = 0  # items before it go one by one (after a run was refused)
        span = RUN_SPAN
        wait = RUN_MIN  # items to go one by one after a refused run: doubled while runs are refused
        while pos < n:
            end = pos
            if pos >= alone and kinds[pos]:
                # the run: from pos, items of both kinds before the windows' horizon that expire nothing
                stop = min(after[pos], pos + span)
                t = times[pos:stop]
                wm = join.watermark_us
                low = np.minimum.accumulate(np.minimum(t, _int64(join.quiet_from_us())))
                high = np.maximum.accumulate(np.maximum(t, _int64(-math.inf if wm is None else wm)))
                bad = (t >= _int64(windows.quiet_until_us())) | (high - ttl > low)
                end = pos + (int(bad.argmax()) if bad.any() else len(t))
            if end - pos >= RUN_MIN:
                taken = self._take_run(list(islice(items, pos, end)), times[pos:end].tolist())
                span = min(2 * span, RUN_MAX) if taken == end - pos else RUN_SPAN
                if taken:
                    pos += taken
                    wait = RUN_MIN
                    continue
                alone = pos + wait
                wait = min(2 * wait, RUN_WAIT_MAX)
            notes = self.add(items[pos])
            if notes:
                out.append((pos, notes))
            pos += 1
        return out

    def _take_run(self, run: list[Any], times: list[int]) -> int:
        """Apply the longest prefix of ``run`` that the windows and the join take together; its length."""
        windows, join = self.windows, self.join
        m = join.joinable(run, times)  # first: the cheaper look, and the one a stream's labels break
        if m < RUN_MIN:
            return 0
        del run[m:], times[m:]
        preds = [i for i, item in enumerate(run) if item.__class__ is not Label]
        k, tags = windows.predictions_taken([run[i] for i in preds], [times[i] for i in preds])
        if k < len(preds):
            del run[preds[k]:], times[preds[k]:]
            if len(run) < RUN_MIN:
                return 0
        m = len(run)
        events = [item for item in run if item.__class__ is not Label]
        tags = tags[:len(events)]
        windows.add_predictions(events, [t for item, t in zip(run, times) if item.__class__ is not Label])
        joined, joined_tags = join.add_run(run, times, tags)
        if joined:
            windows.add_outcomes(joined, joined_tags)
        self.counts["predictions"] += len(events)
        self.counts["labels"] += m - len(events)
        return m

    def _settle(self, outputs: Any) -> list[Notice] | tuple[()]:
        notes: list[Notice] = []
        windows = self.windows
        for o in outputs:
            kind = o.kind
            if kind is PENDING:
                continue
            if kind is JOINED:
                try:
                    windows.add_outcome(o.event, o.tag)
                except EventRejected as exc:  # e.g. a label of another kind than the predictions
                    windows.expire(o.event, o.tag)
                    notes.append(Notice("rejected", exc.code, f"label for id {o.event.id!r}: {exc.reason}"))
            elif kind is EXPIRED:
                windows.expire(o.event, o.tag)
                notes.append(Notice("expired", o.code, o.reason))
            elif kind is REJECTED or kind is LABEL_EXPIRED:
                notes.append(Notice(kind, o.code, o.reason))
        return notes or _NONE

    def poll(self, revisions: bool = True) -> list[dict[str, Any]]:
        """Snapshots ready since the last call (closed windows, new revisions; with
        ``revisions=False`` only those of revision ticks, see :meth:`WindowManager.poll`)."""
        return self.windows.poll(revisions)

    def flush(self) -> list[dict[str, Any]]:
        """End of input: close every open window; windows awaiting labels stay non-final."""
        return self.windows.flush()

    def summary(self) -> dict[str, int]:
        """Counts of the stream and of the join (``LabelJoin.stats``)."""
        return {**self.counts, **self.join.stats()}

    def to_dict(self, store_path: str | None = None) -> dict[str, Any]:
        """Checkpoint of both parts (the pending store in ``store_path`` if given). Like
        :meth:`WindowManager.to_dict` it holds state, not snapshots: :meth:`poll` first."""
        return {"type": "LabelStream", "version": 1, "counts": dict(self.counts),
                "windows": self.windows.to_dict(), "join": self.join.to_dict(store_path)}

    def load_dict(self, data: Mapping[str, Any]) -> LabelStream:
        if not isinstance(data, Mapping) or data.get("type") != "LabelStream" or data.get("version") != 1:
            raise ValueError("not a LabelStream checkpoint (type/version)")
        try:
            counts = {k: int(data["counts"][k]) for k in self.counts}
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed LabelStream checkpoint: {exc}") from None
        self.windows.load_dict(data["windows"])
        self.join.load_dict(data["join"])
        self.counts = counts
        return self
