"""One I/O-free pipeline: message bytes in; applied events, problems and snapshots out.

``decode -> parse -> window -> emit``, the machinery that ``replay``, the Kafka service and later
sources (delayed labels, Spark) drive. It owns no file, socket or thread: the caller feeds
messages (:meth:`Pipeline.process`) or parsed events (:meth:`Pipeline.process_event`), asks for
the snapshots that are ready (:meth:`Pipeline.poll`, :meth:`Pipeline.flush`) and checkpoints
with :meth:`Pipeline.to_dict` / :meth:`Pipeline.load_dict`.

Nothing a message holds makes it raise: every event that is not applied comes back as a
:class:`Problem` with a machine-readable ``code`` (see
:data:`~streammetrics.events.records.REJECTION_CODES`: ``invalid_json``, ``missing_field``,
``bad_type``, ``bad_value``, ``out_of_range``, ``unknown_label``, ``late``, ``future``,
``key_limit``, ...), the ``index`` of the element in an array message (None for a single
object), the one-line ``reason`` and the ``field``. A message is validated element by element;
each element is applied or refused whole, never partly.

Bounds (all configurable in :class:`PipelineConfig`, all counted in :attr:`Pipeline.counters`):

* ``max_future`` (default 3600 s; None or 0: off): an event more than that ahead of
  ``wall_clock()`` is refused (code ``future``) and never advances stream time.
* ``max_keys`` (default 100,000): keys holding open windows at once; a new key beyond it is
  refused (code ``key_limit``). Keys whose windows have all closed are evicted (see
  :mod:`streammetrics.stream.windows` for what an evicted key's later events do).
* ``max_snapshot_bytes`` (default None: no bound): a snapshot whose canonical line
  (:func:`~streammetrics.stream.snapshots.snapshot_line`) would exceed it degrades instead of
  failing downstream: first a coarser state when the monitor offers one (a ``coarsened()``
  method returning a coarser copy), else the state is dropped (``"state_dropped": true``), and
  if the line is still too long the nested metrics (e.g. ``per_class``) go too, with the
  ``intervals``, ``insufficient`` and ``changes`` (``"metrics_truncated": true``). Counted in
  ``snapshots_degraded``; never an exception.
* delayed labels (contract section 5; :mod:`streammetrics.stream.labels`): ``label_ttl``
  (default 7 days of event time) bounds how long a prediction awaits its label and a label its
  prediction; ``max_pending_labels`` (default 50,000,000) bounds the predictions awaiting labels
  (the oldest expire early beyond it, counted), held in memory up to 100,000 then in SQLite.
  Label events and predictions without ``y_true`` need no flag: the first one starts the join.

>>> import json
>>> pipe = Pipeline(PipelineConfig(window=60.0, include_state=False))
>>> res = pipe.process(b'{"ts": 1767225601, "model": "m", "y_true": 1, "score": 0.9}')
>>> res.applied, res.problems
(1, [])
>>> res = pipe.process(b'[{"ts": 1767225602, "model": "m", "y_true": 1}, {"ts": "x"}]')
>>> [(p.index, p.code, p.field) for p in res.problems]
[(0, 'missing_field', 'score'), (1, 'bad_value', 'ts')]
>>> [s["count"] for s in pipe.flush()]
[1]
>>> pipe.counters["events"], pipe.counters["rejected"]
(1, {'missing_field': 1, 'bad_value': 1})
"""
from __future__ import annotations

import json
import time
from bisect import bisect_left
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from streammetrics.events.columns import column_decoder, object_column
from streammetrics.events.decoding import MAX_NESTING, decode_value
from streammetrics.events.parser import EventParser
from streammetrics.events.records import EVENT_CODEC, Event, Rejection
from streammetrics.monitors.labels import DEFAULT_MAX_LABELS
from streammetrics.stream.label_events import DelayedEventParser
from streammetrics.stream.label_stream import LabelStream
from streammetrics.stream.labels import Label, LabelJoin
from streammetrics.stream.pending import DEFAULT_MAX_PENDING, PendingStore
from streammetrics.stream.snapshots import snapshot_line
from streammetrics.stream.windows import (
    DEFAULT_MAX_FUTURE,
    DEFAULT_MAX_KEYS,
    EventRejected,
    WindowManager,
)

__all__ = ["MessageResult", "Pipeline", "PipelineConfig", "Problem"]

LATE_REASON = "late event: every window holding its time has closed"
DEFAULT_LABEL_TTL = 7 * 86400.0
TOMBSTONE_REASON = "message has no value (tombstone)"
_BLANK_START = frozenset([b"", b" ", b"\t", b"\r", b"\n"])


@dataclass
class PipelineConfig:
    """What a :class:`Pipeline` computes; mirrors the ``replay``/``consume`` flags."""

    task: str = "binary"
    window: float = 60.0
    slide: float | None = None
    grace: float = 0.0
    threshold: float = 0.5
    classes: list[Hashable] | None = None
    labels: list[Hashable] | None = None
    #: labels task, discovered labels: most labels a window keeps, the rest folded into
    #: ``"__other__"`` (``--max-labels``; LabelMonitor ``max_labels``; None: no bound)
    max_labels: int | None = DEFAULT_MAX_LABELS
    fields: dict[str, str] = field(default_factory=dict)
    cumulative: bool = False
    include_state: bool = True
    max_future: float | None = DEFAULT_MAX_FUTURE
    max_keys: int | None = DEFAULT_MAX_KEYS
    max_snapshot_bytes: int | None = None
    #: queue events per pane and apply them in vectorised batches (same results, faster)
    batch: bool = True
    #: most events queued per pane before they are applied (batch mode)
    max_pending: int = 4096
    #: delayed labels (contract section 5): how long, in event time, a prediction awaits its
    #: label and a label its prediction; and the bound on predictions awaiting labels
    label_ttl: float = DEFAULT_LABEL_TTL
    max_pending_labels: int = DEFAULT_MAX_PENDING
    #: label-free metrics per ``(model, segment)`` against a reference (``--reference``; see
    #: :func:`streammetrics.monitors.reference.load_references`); keys without one get nulls
    references: Mapping[tuple[str, str], Any] | None = None
    #: most references held (``--max-references``); more is a ValueError naming the limit
    max_references: int = 10_000
    #: decode with msgspec when it is installed (same results; False: the standard library only)
    fast_json: bool = True
    #: binary operating points in snapshots (``--target-recall`` ... ``--cost-fn``; contract
    #: section 11: :class:`streammetrics.monitors.operating_points.OperatingPoints`)
    operating_points: Any = None
    #: confidence of the snapshots' intervals (``--confidence``; contract section 9)
    confidence: float = 0.95
    #: ``changes`` against ``"reference"`` (the default with ``references``) or the key's
    #: ``"previous"`` window (``--compare``; :mod:`streammetrics.stream.changes`), None: none
    compare: str | None = None
    #: false discovery rate of the changes marked significant in one poll (``--fdr``)
    fdr: float = 0.05
    #: slices, roll-ups, worst slices, fairness (``--slice-by`` ...; contract section 11:
    #: :class:`streammetrics.stream.slicing.SliceSpec`); slices close on one shared watermark
    slicing: Any = None
    #: with ``slicing``: False keys events by slice only, and the snapshots keep the internal key
    #: (``segment``: the JSON array of the slice's values), so that a merge stage applies the
    #: budget and rolls up (the service's source partitions; ``consumers.partials``)
    slice_output: bool = True
    #: alert rules evaluated on every snapshot the pipeline emits (``--alert`` ...; contract
    #: section 10: :class:`streammetrics.stream.alerting.AlertSpec`); their state is checkpointed
    alerts: Any = None

    def extra_metrics(self) -> Callable[[tuple[str, str], Any, dict[str, Any]], None] | None:
        """The snapshot hook adding the label-free metrics and the operating points (None
        without references or operating points)."""
        hook = None
        if self.references is not None:
            from streammetrics.monitors.reference import snapshot_metrics

            hook = snapshot_metrics(self.references, self.task, max_references=self.max_references)
        points = self.operating_points
        if points is not None and points.enabled:
            if self.task != "binary":
                raise ValueError(f"--target-recall, --target-precision, --target-fpr, --cost-fp and --cost-fn "
                                 f"apply to --task binary, not --task {self.task}")
            hook = points.hook(self.references, hook)
        return hook

    def changes(self) -> Any:
        """The ``changes`` annotator (:class:`streammetrics.stream.changes.Changes`): against the
        references when there are (binary and multiclass tasks), or the previous window with ``compare="previous"``;
        None without either."""
        mode = self.compare or ("reference" if self.references is not None and self.task in ("binary", "multiclass")
                                else None)
        if mode is None:
            return None
        from streammetrics.stream.changes import Changes

        return Changes(mode, self.fdr, self.references, self.max_keys)

    def monitor_factory(self) -> Callable[[], Any]:
        """A factory of empty monitors for the task; configuration errors raise ValueError now."""
        from streammetrics.monitors import make_monitor

        task, threshold, classes, labels = self.task, self.threshold, self.classes, self.labels
        confidence = self.confidence
        refs = self.references if task == "multiclass" else None  # per-event CBPE sums (--reference)
        max_labels = self.max_labels

        def factory() -> Any:
            monitor: Any = make_monitor(task, threshold=threshold, classes=classes, labels=labels,
                                        max_labels=max_labels, confidence=confidence)
            return monitor if refs is None else monitor.use_references(refs)  # a MulticlassMonitor

        template = factory()
        # a monitor type that offers it copies an empty template instead of constructing
        # (BinaryMonitor.empty: one monitor per key and window at fleet scale)
        empty: Callable[[], Any] | None = getattr(template, "empty", None)
        return factory if empty is None else empty

    def monitor_loader(self) -> Callable[[Mapping[str, Any]], Any]:
        """Rebuilds checkpointed monitors: ``from_dict`` under state limits that cover this
        configuration (:func:`~streammetrics.monitors.state_limits_for`: a pipeline reads back
        every state it writes), bound to their key's reference (multiclass ``--reference``), with
        the intervals' ``confidence`` (``--confidence``: not state)."""
        from streammetrics.core.accumulator import from_dict
        from streammetrics.core.state import limits_covering
        from streammetrics.monitors import state_limits_for

        needs = state_limits_for(self.task, classes=self.classes, labels=self.labels, max_labels=self.max_labels)
        refs = self.references if self.task == "multiclass" else None
        confidence = self.confidence

        def load(data: Mapping[str, Any]) -> Any:
            with limits_covering(**needs):
                monitor: Any = from_dict(data)
            if refs is not None:
                monitor = monitor.use_references(refs)  # a MulticlassMonitor
            if confidence != 0.95:  # (not state: the intervals' confidence, --confidence)
                monitor.confidence = confidence
            return monitor

        return load

    def parser(self) -> EventParser:
        return EventParser(self.task, classes=self.labels if self.task == "labels" else self.classes,
                           fields=self.fields, fast_json=self.fast_json)


class Problem:
    """An event (or message) not applied: ``index`` in an array message (None: the whole
    value or a single object), ``code`` (machine-readable), ``reason`` (one line), ``field``."""

    __slots__ = ("code", "field", "index", "reason")

    def __init__(self, index: int | None, code: str, reason: str, field: str | None = None) -> None:
        self.index = index
        self.code = code
        self.reason = reason
        self.field = field

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Problem):
            return NotImplemented
        return (self.index, self.code, self.reason, self.field) == (other.index, other.code, other.reason,
                                                                     other.field)

    __hash__ = None  # type: ignore[assignment]  # mutable record

    def __repr__(self) -> str:
        return f"Problem(index={self.index!r}, code={self.code!r}, reason={self.reason!r}, field={self.field!r})"


class MessageResult:
    """What one message did: ``applied`` events, and a :class:`Problem` per element not applied.
    Read-only by convention: the result of the common case (one event applied) is shared."""

    __slots__ = ("applied", "problems")

    def __init__(self, applied: int, problems: list[Problem]) -> None:
        self.applied = applied
        self.problems = problems

    @property
    def late(self) -> int:
        """Elements refused as late."""
        return sum(1 for p in self.problems if p.code == "late")

    def __repr__(self) -> str:
        return f"MessageResult(applied={self.applied}, problems={self.problems!r})"


class _NoProblems(list):
    """The empty, unchangeable problem list of the shared common-case result."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("this result is shared: copy its problems before changing them")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse


#: the result of the common message (one event applied), shared: results are read, not changed
_APPLIED_ONE = MessageResult(1, _NoProblems())
#: problem codes of the label join's notices that are not refusals of the message at hand
_NOTICE_CODES = {"expired": "prediction_expired", "label_expired": "label_expired"}
_NOTICE_FIELDS = {"missing_id": "id", "duplicate": "id", "expired": "id", "future": "ts", "late": "ts"}


class Pipeline:
    """decode -> parse -> window -> emit, without I/O; see the module docstring.

    Windows close by the stream's watermark, one for all keys (see
    :mod:`streammetrics.stream.windows`). ``wall_clock`` is the epoch clock that ``max_future``
    is measured against (injectable for tests).
    """

    def __init__(
        self,
        config: PipelineConfig | None = None,
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = c = config if config is not None else PipelineConfig()
        if c.max_snapshot_bytes is not None and (isinstance(c.max_snapshot_bytes, bool)
                                                 or not isinstance(c.max_snapshot_bytes, int)
                                                 or c.max_snapshot_bytes < 1):
            raise ValueError(f"max_snapshot_bytes must be a positive integer or None, got {c.max_snapshot_bytes!r}")
        PendingStore(max_pending=c.max_pending_labels)  # bounds checked now
        LabelJoin(c.label_ttl)
        # predictions with their label as before; predictions awaiting one and label events too
        self.parser = DelayedEventParser.extending(c.parser())
        self._labels: LabelStream | None = None  # built at the first delayed item
        self._labels_tracked: LabelStream | None = None  # the label stream whose changes delta_dict writes
        extra = c.extra_metrics()
        #: ``changes`` of the snapshots (contract section 9), None without a baseline
        self._changes: Any = c.changes()
        self._slicer: Any = None
        if c.slicing is not None:  # (streammetrics.stream.slicing: keys by slice, roll-ups at output)
            from streammetrics.stream.slicing import Slicer

            self._slicer = Slicer(c.slicing, include_state=c.include_state, extra_metrics=extra)
            if c.slice_output:
                extra = self._slicer.hook
        self.windows = WindowManager(
            c.monitor_factory(), c.window, c.slide, c.grace,
            cumulative=c.cumulative, include_state=c.include_state, batch=c.batch, max_pending=c.max_pending,
            event_codec=EVENT_CODEC, max_future=c.max_future, wall_clock=wall_clock,
            max_keys=c.max_keys, extra_metrics=extra, monitor_loader=c.monitor_loader(),
        )
        self._parse: Callable[[Any], Any] = self.parser.parse  # Event, Label or Rejection
        if self._slicer is not None:
            self._parse = self._slicer.wrap_parse(self._parse)
        self._fast = self.parser.fast_decode  # msgspec's decoder, or None (PipelineConfig.fast_json)
        #: the column decoder of process_lines (None: msgspec not installed, fast_json off, labels task)
        self._columns = None
        if c.batch:  # (with slices: each distinct key's slice from the decoded slice fields)
            slices = None if self._slicer is None else (c.slicing.fields, self._slicer.column_keys)
            self._columns = column_decoder(self.parser.base, slices)
        #: what :meth:`process_lines` did: events applied as ``columns``, lines through the
        #: ``per_event`` path (refused, unusual or no column decoder) and runs of valid events the
        #: windows ``declined`` to take as columns (then event by event)
        self.column_counts = {"columns": 0, "per_event": 0, "declined": 0}
        self._add = self.windows.add
        self._messages = 0
        self._events = 0
        self._late = 0
        self._snapshots = 0
        self._degraded = 0
        self._rejected: dict[str, int] = {}
        self.lines: list[str | None] = []  # see _emit
        #: the alert engine of ``config.alerts`` (None without rules); events in :meth:`take_alerts`
        self.alerts = c.alerts.engine() if c.alerts is not None else None
        self._alert_events: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ input
    def process(self, value: bytes | bytearray | memoryview | str | None) -> MessageResult:
        """One message value (a JSON object or an array of them; None: a tombstone)."""
        self._messages += 1
        if value is None:
            return self._refused(None, "tombstone", TOMBSTONE_REASON, None)
        fast = self._fast
        if fast is not None and len(value) <= MAX_NESTING:  # too short to nest too deep: msgspec directly
            try:
                decoded = fast(value)
            except Exception:  # noqa: BLE001 - refused: json decides, with its exact reason
                decoded = decode_value(value, None)
        else:
            decoded = decode_value(value, fast)
        cls = decoded.__class__
        if cls is dict:
            item = self._parse(decoded)
            if item.__class__ is Label or (item.__class__ is Event and (
                    item.y_true is None or self._labels is not None)):
                return self._delayed(None, item)
            if item.__class__ is Event:  # the common message: one valid event for an open window
                try:
                    if self._add(item):
                        self._events += 1
                        return _APPLIED_ONE
                except EventRejected as exc:
                    return self._refused(None, exc.code, exc.reason, exc.field)
                self._late += 1
                return MessageResult(0, [Problem(None, "late", LATE_REASON, "ts")])
            rej = cast(Rejection, item)
            return self._refused(None, rej.code, rej.reason, rej.field)
        if cls is list:
            return self._process_items(decoded)
        if cls is Rejection:
            return self._refused(None, decoded.code, decoded.reason, decoded.field)
        rej = cast(Rejection, self._parse(decoded))  # not an object: the parser says why
        return self._refused(None, rej.code, rej.reason, rej.field)

    def process_lines(self, lines: Sequence[bytes | None], skip_blank: bool = True) -> list[tuple[int, list[Problem]]]:
        """JSONL lines or message values, as :meth:`process` of each in turn (blank lines skipped
        with ``skip_blank``, as ``replay`` skips them; ``skip_blank=False``: refused, as
        :meth:`process` refuses them, for Kafka values): the same events applied, problems and
        counters. Returns ``(index, problems)`` for the values with problems, in order.

        Columnar where it can (issue 24; :mod:`streammetrics.events.columns`): the lines are
        decoded into columns and the windows take them in one :meth:`WindowManager.add_columns
        <streammetrics.stream.windows.WindowManager.add_columns>` per run of valid events; a line
        the column decoder leaves (refused or unusual: it names them) goes through :meth:`process`
        at its place, and so does every line when there is no column decoder (msgspec not
        installed, the ``labels`` task, slices) or once delayed labels are in use."""
        return self._batch(lines, False, skip_blank)

    def process_rows(self, rows: Sequence[Any]) -> list[tuple[int, list[Problem]]]:
        """Decoded values - the rows of CSV and Parquet files, JSONL values with ``ts`` rescaled
        (see :mod:`streammetrics.events.tables`); None for a blank line, skipped - as
        :meth:`process_decoded` of each in turn, columnar where it can (as :meth:`process_lines`).
        Returns ``(index, problems)`` for the rows with problems, in order."""
        return self._batch(rows, True, True)

    def _batch(self, values: Sequence[Any], decoded: bool, skip_blank: bool) -> list[tuple[int, list[Problem]]]:
        columns = self._columns
        if columns is None or self._labels is not None:
            return self._each_line(values, 0, len(values), skip_blank, decoded)
        lines = values
        cols, odd = columns.convert(values) if decoded else columns.decode(values)
        out: list[tuple[int, list[Problem]]] = []
        pos = 0  # lines before pos are done
        start = 0  # the first column row not applied yet
        rows = cols.rows.tolist() if cols is not None else []
        for stop_line in [*odd, len(lines)]:
            # the valid rows before this odd line, then the odd line itself
            end = bisect_left(rows, stop_line, start)
            if end > start:
                assert cols is not None
                part = cols if (start == 0 and end == len(rows)) else cols.take(start, end)
                out.extend(self._apply_columns(part))
                start = end
            pos = stop_line
            if pos < len(lines):
                out.extend(self._each_line(lines, pos, pos + 1, skip_blank, decoded))
        return out

    def _apply_columns(self, cols: Any) -> list[tuple[int, list[Problem]]]:
        """Valid events as columns: through :meth:`WindowManager.add_columns`, else (it declined,
        or delayed labels are in use) event by event as :meth:`process_event`."""
        late = self._add_columns(cols)
        if late is not None:
            return self._late_rows(cols, late)
        n = len(cols)
        self.column_counts["declined"] += 1
        if n == 1:
            return self._each_event(cols)
        out = self._each_event(cols.take(0, 1))  # declined (e.g. no stream time yet): one event, then again
        rest = cols.take(1, n)
        late = self._add_columns(rest)
        if late is None:
            self.column_counts["declined"] += 1
            return out + self._each_event(rest)
        return out + self._late_rows(rest, late)

    def _add_columns(self, cols: Any) -> Any:
        if self._labels is not None:
            return None
        windows = self.windows
        events = None if windows.packs_events else cols.events()
        items = cols.binary_items() if events is None else object_column(events)
        return windows.add_columns(cols.ts, cols.key_index, cols.keys, items,
                                   tag_event=events[0] if events else None)

    def _each_event(self, cols: Any) -> list[tuple[int, list[Problem]]]:
        self.column_counts["per_event"] += len(cols)
        out = []
        for row, event in zip(cols.rows.tolist(), cols.events()):
            res = self.process_event(event)
            if res.problems:
                out.append((row, list(res.problems)))
        return out

    def _late_rows(self, cols: Any, late: np.ndarray) -> list[tuple[int, list[Problem]]]:
        n = len(cols)
        self._messages += n
        self.column_counts["columns"] += n
        n_late = int(np.count_nonzero(late))
        self._events += n - n_late
        if not n_late:
            return []
        self._late += n_late
        return [(row, [Problem(None, "late", LATE_REASON, "ts")]) for row in cols.rows[late].tolist()]

    def _each_line(self, lines: Sequence[Any], lo: int, hi: int, skip_blank: bool,
                   decoded: bool = False) -> list[tuple[int, list[Problem]]]:
        out = []
        self.column_counts["per_event"] += hi - lo
        for i in range(lo, hi):
            line = lines[i]
            if decoded:
                if line is None:  # (a blank line)
                    continue
                problems = self.process_decoded(line).problems
            elif skip_blank and line is not None and line[:1] in _BLANK_START and not line.strip():
                continue
            else:
                problems = self.process(line).problems
            if problems:
                out.append((i, list(problems)))
        return out

    def process_event(self, event: Event | Label) -> MessageResult:
        """An already-parsed :class:`Event` or :class:`~streammetrics.stream.labels.Label`
        (Spark rows, tests, replay's two-file merge, other sources)."""
        self._messages += 1
        if event.__class__ is Label or (event.__class__ is Event and (
                event.y_true is None or self._labels is not None)):
            return self._delayed(None, event)
        try:
            if self._add(event):
                self._events += 1
                return _APPLIED_ONE
        except EventRejected as exc:
            return self._refused(None, exc.code, exc.reason, exc.field)
        self._late += 1
        return MessageResult(0, [Problem(None, "late", LATE_REASON, "ts")])

    def process_decoded(self, decoded: Any) -> MessageResult:
        """One decoded message value: an object, an array of them, or a
        :class:`~streammetrics.events.records.Rejection` of the decoding (the rows of CSV and
        Parquet files and of DataFrames, typed and with ``ts`` in seconds: see
        :mod:`streammetrics.events.tables`); the same parser and windows as :meth:`process`."""
        if decoded.__class__ is list:
            self._messages += 1
            return self._process_items(decoded)
        if decoded.__class__ is Rejection:
            self._messages += 1
            return self._refused(None, decoded.code, decoded.reason, decoded.field)
        item = self._parse(decoded)
        if item.__class__ is Event or item.__class__ is Label:
            return self.process_event(item)
        self._messages += 1
        rej = cast(Rejection, item)
        return self._refused(None, rej.code, rej.reason, rej.field)

    def _process_items(self, items: list) -> MessageResult:
        parse, add = self._parse, self._add
        applied = 0
        problems: list[Problem] = []
        rejected = self._rejected
        for i, raw in enumerate(items):
            item = parse(raw)
            if item.__class__ is Label or (item.__class__ is Event and (
                    item.y_true is None or self._labels is not None)):
                res = self._delayed(i, item)
                self._events -= res.applied  # counted once, below
                applied += res.applied
                problems.extend(res.problems)
                continue
            if item.__class__ is not Event:
                rej = cast(Rejection, item)
                rejected[rej.code] = rejected.get(rej.code, 0) + 1
                problems.append(Problem(i, rej.code, rej.reason, rej.field))
                continue
            try:
                ok = add(item)
            except EventRejected as exc:
                rejected[exc.code] = rejected.get(exc.code, 0) + 1
                problems.append(Problem(i, exc.code, exc.reason, exc.field))
                continue
            if ok:
                applied += 1
            else:
                self._late += 1
                problems.append(Problem(i, "late", LATE_REASON, "ts"))
        self._events += applied
        return MessageResult(applied, problems)

    def process_events(self, items: Sequence[Event | Label]) -> list[tuple[int, list[Problem]]]:
        """:meth:`process_event` of each of ``items`` in order; returns ``(position, problems)`` of
        those with problems. Once delayed labels are in use, through
        :meth:`~streammetrics.stream.label_stream.LabelStream.add_many` (runs applied together)."""
        out: list[tuple[int, list[Problem]]] = []
        n = len(items)
        pos = 0
        while pos < n and self._labels is None:
            problems = self.process_event(items[pos]).problems
            if problems:
                out.append((pos, list(problems)))
            pos += 1
        stream = self._labels
        if pos == n or stream is None:
            return out
        self._messages += n - pos
        before = stream.counts["events"] + stream.counts["predictions"]
        noted = stream.add_many(items[pos:])
        self._events += stream.counts["events"] + stream.counts["predictions"] - before
        out.extend((pos + i, self._problems_of(None, notes)) for i, notes in noted)
        return out

    def _delayed(self, index: int | None, item: Event | Label) -> MessageResult:
        """A label event, a prediction awaiting its label, or (once delayed labels are in use) any
        prediction: through the label join (:class:`~streammetrics.stream.label_stream.LabelStream`).
        Its notices become problems: ``late``, rejections (``duplicate``, ``expired``,
        ``missing_id``, ``kind_mismatch``, ``future``, ...) and, for what this item's time made
        due, ``prediction_expired`` / ``label_expired`` (reports, not refusals of this item)."""
        stream = self._labels
        if stream is None:
            stream = self._labels = self._label_stream()
        before = stream.counts["events"] + stream.counts["predictions"]
        notes = stream.add(item)
        applied = stream.counts["events"] + stream.counts["predictions"] - before
        self._events += applied
        if not notes:
            return _APPLIED_ONE if applied else MessageResult(0, [])
        return MessageResult(applied, self._problems_of(index, notes))

    def _problems_of(self, index: int | None, notes: Sequence[Any]) -> list[Problem]:
        """The label stream's notices as problems (late and rejected ones counted)."""
        problems = []
        for note in notes:
            code = _NOTICE_CODES.get(note.kind, note.code)
            if note.kind == "late":
                self._late += 1
            elif note.kind == "rejected":
                self._rejected[code] = self._rejected.get(code, 0) + 1
            problems.append(Problem(index, code, note.message, _NOTICE_FIELDS.get(code)))
        return problems

    def _label_stream(self) -> LabelStream:
        c = self.config
        join = LabelJoin(c.label_ttl, store=PendingStore(max_pending=c.max_pending_labels))
        now = self.windows.stream_time()
        if now is not None:  # event time so far (labelled predictions before the first delayed item)
            join.advance(now)
        return LabelStream(self.windows, join)

    def close(self) -> None:
        """Release the pending store's spill files (delayed labels)."""
        if self._labels is not None:
            self._labels.join.store.close()

    def _refused(self, index: int | None, code: str, reason: str, field_name: str | None) -> MessageResult:
        self._rejected[code] = self._rejected.get(code, 0) + 1
        return MessageResult(0, [Problem(index, code, reason, field_name)])

    # ------------------------------------------------------------------ output
    def poll(self, revisions: bool = True, collect: bool = True) -> list[dict[str, Any]]:
        """Snapshots ready since the last call (what :meth:`WindowManager.advance_watermark
        <streammetrics.stream.windows.WindowManager.advance_watermark>` passed closed first);
        ``revisions=False`` leaves label revisions of closed windows for a later poll;
        ``collect=False`` closes what is due and leaves the ready snapshots queued
        (:meth:`WindowManager.poll <streammetrics.stream.windows.WindowManager.poll>`)."""
        return self._emit(self._changed(self._sliced(self.windows.poll(revisions, collect), False)))

    def _changed(self, snaps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """With ``compare`` or references: the snapshots' ``changes`` (one FDR family per poll)."""
        return snaps if self._changes is None else self._changes.annotate(snaps)

    def _sliced(self, snaps: list[dict[str, Any]], end: bool) -> list[dict[str, Any]]:
        """With slicing: slice keys by dimension, then the roll-up windows now complete."""
        if self._slicer is None or not self.config.slice_output:
            return snaps
        if end:
            return self._slicer.process(snaps, None)
        return self._slicer.process(snaps, self.windows.watermark_us() / 1e6)

    def poll_lines(self, revisions: bool = True, collect: bool = True) -> list[str]:
        """:meth:`poll`'s snapshots as their canonical lines (what ``replay`` writes): without
        ``max_snapshot_bytes``, small windows closed together are written straight from their
        JSON texts (:meth:`WindowManager.poll_lines
        <streammetrics.stream.windows.WindowManager.poll_lines>`); the same lines either way."""
        if not self._engine_lines():
            return self._lines(self.poll(revisions, collect))
        if self._changes is not None:
            return self._reference_lines(self.windows.poll_written(revisions, collect))
        return self._counted(self.windows.poll_lines(revisions, collect))

    def flush_lines(self) -> list[str]:
        """:meth:`flush`'s snapshots as their canonical lines (see :meth:`poll_lines`)."""
        if not self._engine_lines():
            return self._lines(self.flush())
        if self._changes is not None:
            return self._reference_lines(self.windows.flush_written())
        return self._counted(self.windows.flush_lines())

    def _engine_lines(self) -> bool:
        """Whether the window engine may write the lines: no size limit, slicing or alerts, and no
        ``changes`` but against references (which annotate only the windows of keys with one: the
        engine writes from texts only those of keys without, ``metrics_text`` of the hook)."""
        changes = self._changes
        return (self.config.max_snapshot_bytes is None and self._slicer is None and self.alerts is None
                and (changes is None or changes.mode == "reference"))

    def _reference_lines(self, ready: list[str | dict[str, Any]]) -> list[str]:
        """The engine's lines and snapshots in order, the snapshots annotated with their ``changes``
        first (one false-discovery family per poll, as :meth:`poll`: the lines have no baseline)."""
        snaps = [r for r in ready if r.__class__ is not str]
        annotated = iter(self._changed(snaps))  # type: ignore[arg-type]
        return self._counted([r if r.__class__ is str else snapshot_line(next(annotated)) for r in ready])

    def _counted(self, lines: list[str]) -> list[str]:
        """Lines of the window engine, counted as :meth:`_emit` counts snapshots (no size check)."""
        self._snapshots += len(lines)
        self.lines = []
        return lines

    def _lines(self, snaps: list[dict[str, Any]]) -> list[str]:
        """The lines of snapshots :meth:`_emit` returned (encoded there for the size check)."""
        if not self.lines:  # (no size check: nothing encoded yet)
            return [snapshot_line(s) for s in snaps]
        return [snapshot_line(s) if line is None else line for s, line in zip(snaps, self.lines)]

    def collect_due(self, at_least: int) -> bool:
        """Whether a poll should return the ready snapshots: some is built already (hold none of
        those: a large window's snapshot), or ``at_least`` small windows wait to be built together."""
        ready = self.windows.ready_count
        return ready != self.windows.deferred_count or ready >= at_least

    def flush(self) -> list[dict[str, Any]]:
        """End of input: close every open window and return every ready snapshot."""
        return self._emit(self._changed(self._sliced(self.windows.flush(), True)))

    def _emit(self, snaps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self._snapshots += len(snaps)
        limit = self.config.max_snapshot_bytes
        lines: list[str | None] = []
        if limit is not None:
            for i, snap in enumerate(snaps):
                line = snapshot_line(snap)
                if len(line) > limit:  # ASCII-only JSON: characters are bytes
                    snaps[i] = self._degrade(snap, limit)
                    self._degraded += 1
                    lines.append(None)
                else:
                    lines.append(line)
        #: with ``max_snapshot_bytes``: the canonical line of each snapshot the last ``poll`` /
        #: ``flush`` returned (encoded for the size check; None for a degraded one), else []
        self.lines = lines
        if self.alerts is not None:
            for snap in snaps:
                self._alert_events += self.alerts.observe(snap)
        return snaps

    def take_alerts(self) -> list[dict[str, Any]]:
        """The alert events (contract section 10) of the snapshots emitted since the last call."""
        events, self._alert_events = self._alert_events, []
        return events

    def _degrade(self, snap: dict[str, Any], limit: int) -> dict[str, Any]:
        """A smaller snapshot: coarser state if the monitor offers it, else no state, else no
        nested metrics. Never raises."""
        out = dict(snap)
        state = out.get("state")
        if state is not None:
            coarse = _coarser_state(state, out, limit)
            if coarse is not None:
                out["state"] = coarse
                out["state_coarsened"] = True
                return out
            del out["state"]
            out["state_dropped"] = True
            if len(snapshot_line(out)) <= limit:
                return out
        metrics = out.get("metrics")
        if isinstance(metrics, Mapping):
            out["metrics"] = {k: v for k, v in metrics.items() if not isinstance(v, (Mapping, list))}
            for extra in ("intervals", "insufficient", "changes"):  # (contract section 9: they go with it)
                out.pop(extra, None)
            out["metrics_truncated"] = True
        return out

    # ------------------------------------------------------------------ checkpoint
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe checkpoint: every key's open windows, queued events included. ValueError
        with slicing at output (``slice_output``: its closed slice windows awaiting the
        watermark are not checkpointed)."""
        if self._slicer is not None and self.config.slice_output:
            raise ValueError("a pipeline with slices (--slice-by, --rollup, --fairness-by) cannot be checkpointed yet")
        out = {"type": "Pipeline", "version": 1, "task": self.config.task, "windows": self.windows.to_dict()}
        if self._labels is not None:  # delayed labels: the join and its pending store (the windows once)
            out["labels"] = {"type": "LabelStream", "version": 1, "counts": dict(self._labels.counts),
                             "join": self._labels.join.to_dict()}
        if self.alerts is not None:  # alert lifecycles: re-run after a restore, the same events
            out["alerts"] = self.alerts.to_dict()
        if self._remembers():  # --compare previous: each key's last windows (contract section 9)
            out["changes"] = self._changes.to_dict()
        return out

    def _remembers(self) -> bool:
        """``--compare previous``: the changes annotator remembers each key's last windows."""
        return self._changes is not None and self._changes.mode == "previous"

    def delta_dict(self) -> dict[str, Any]:
        """What changed since the last :meth:`delta_dict` (or :meth:`track_changes`): the changed
        keys' windows (:meth:`WindowManager.delta_dict`) and the label join's state; see
        :meth:`apply_delta`. Tracking starts with the first call. ValueError with slicing, as
        :meth:`to_dict`."""
        if self._slicer is not None and self.config.slice_output:
            raise ValueError("a pipeline with slices (--slice-by, --rollup, --fairness-by) cannot be checkpointed yet")
        windows = self.windows
        windows.track_changes()
        out = {"type": "PipelineDelta", "version": 1, "task": self.config.task,
               "windows": windows.delta_dict(*windows.take_changed_keys())}
        stream = self._labels
        if stream is not None:
            if stream is self._labels_tracked:  # the join's changes (pending predictions, remembered ids)
                out["labels"] = {"type": "LabelStreamDelta", "version": 1, "counts": dict(stream.counts),
                                 "join": stream.join.delta_dict()}
            else:  # created since the last checkpoint: whole
                out["labels"] = {"type": "LabelStream", "version": 1, "counts": dict(stream.counts),
                                 "join": stream.join.to_dict()}
                stream.join.track_changes()
                self._labels_tracked = stream
        if self.alerts is not None:  # (whole: bounded by the alert rules' keys)
            out["alerts"] = self.alerts.to_dict()
        if self._remembers():  # the keys whose last windows changed
            out["changes"] = self._changes.delta_dict()
        return out

    def track_changes(self) -> None:
        """Start the change record :meth:`delta_dict` reads: call it when the state equals the
        checkpoint just written (after :meth:`to_dict` or :meth:`load_dict`)."""
        self.windows.track_changes()
        self.windows.take_changed_keys()
        if self._labels is not None:
            self._labels.join.track_changes()
        self._labels_tracked = self._labels
        if self._remembers():
            self._changes.track_changes()

    @staticmethod
    def apply_delta(full: Mapping[str, Any], *deltas: Mapping[str, Any]) -> dict[str, Any]:
        """The :meth:`to_dict` checkpoint ``full`` with ``deltas`` (:meth:`delta_dict`, in order)
        applied, as data; ValueError (one line) for a malformed one. :meth:`load_dict` validates
        the result."""
        if not isinstance(full, Mapping) or full.get("type") != "Pipeline":
            raise ValueError("not a streammetrics Pipeline checkpoint (no type 'Pipeline')")
        out = dict(full)
        labels: Any = full.get("labels")
        joins: list[Any] = []  # join deltas since ``labels``, applied together
        for delta in deltas:
            if not isinstance(delta, Mapping) or delta.get("type") != "PipelineDelta" or delta.get("version") != 1:
                raise ValueError("not a Pipeline checkpoint delta (type/version)")
            if delta.get("task") != full.get("task"):
                raise ValueError(f"checkpoint delta for task {delta.get('task')!r}, not {full.get('task')!r}")
            part = delta.get("labels")
            if part is None or (isinstance(part, Mapping) and part.get("type") == "LabelStream"):
                labels, joins = part, []
            elif isinstance(part, Mapping) and part.get("type") == "LabelStreamDelta" and isinstance(labels, Mapping):
                joins.append(part.get("join"))
                labels = {**labels, "counts": part.get("counts")}
            else:
                raise ValueError("malformed Pipeline checkpoint delta: labels")
        if joins:
            labels = {**labels, "join": LabelJoin.apply_delta(labels.get("join"), *joins)}
        if labels is None:
            out.pop("labels", None)
        else:
            out["labels"] = labels
        for delta in deltas:  # alert state is written whole in each delta
            if "alerts" in delta:
                out["alerts"] = delta["alerts"]
            else:
                out.pop("alerts", None)
        changes = [delta["changes"] for delta in deltas if "changes" in delta]
        if changes:
            from streammetrics.stream.changes import Changes

            out["changes"] = Changes.apply_delta(full.get("changes") or {"type": "Changes", "keys": [],
                                                                           "forgotten": 0}, *changes)
        windows = [delta.get("windows") for delta in deltas]
        out["windows"] = WindowManager.apply_delta(full.get("windows"), *windows)  # type: ignore[arg-type]
        return out

    def load_dict(self, data: Mapping[str, Any]) -> Pipeline:
        """Replace the window state with a checkpoint from :meth:`to_dict`; ValueError (one line,
        saying what differs) for anything else, leaving the state unchanged."""
        if not isinstance(data, Mapping) or data.get("type") != "Pipeline":
            raise ValueError("not a streammetrics Pipeline checkpoint (no type 'Pipeline')")
        if data.get("version") != 1:
            raise ValueError(f"Pipeline checkpoint version {data.get('version')!r} is not supported (expected 1)")
        if data.get("task") != self.config.task:
            raise ValueError(f"checkpoint is for task {data.get('task')!r}, this pipeline runs {self.config.task!r}")
        alerts = None
        if self.config.alerts is not None and data.get("alerts") is not None:
            alerts = self.config.alerts.engine().load(data["alerts"])  # validated before anything changes
        changes = None
        if self._remembers() and data.get("changes") is not None:  # (validated before anything changes)
            changes = self.config.changes().load(data["changes"])
        labels = data.get("labels")
        stream = None
        if labels is not None:
            stream = LabelStream(self.windows, LabelJoin(self.config.label_ttl, store=PendingStore(
                max_pending=self.config.max_pending_labels)))
            if not isinstance(labels, Mapping) or not isinstance(labels.get("join"), Mapping):
                raise ValueError("malformed Pipeline checkpoint: labels")
            stream.join.load_dict(labels["join"])
            stream.counts = {k: int(labels["counts"][k]) for k in stream.counts}
        self.windows.load_dict(data.get("windows"))  # type: ignore[arg-type]  # validated there
        if self._labels is not None:
            self._labels.join.store.close()
        self._labels = stream
        if self.config.alerts is not None:
            self.alerts = alerts if alerts is not None else self.config.alerts.engine()
            self._alert_events = []
        if self._remembers():
            self._changes = changes if changes is not None else self.config.changes()
        return self

    # ------------------------------------------------------------------ introspection
    @property
    def counters(self) -> dict[str, Any]:
        """Totals since construction: ``messages``, ``events`` (applied), ``rejected`` (by code,
        late events excluded), ``late``, ``future`` and ``keys_overflow`` (also under
        ``rejected``), ``keys_evicted``, ``keys`` (held now), ``snapshots``, ``snapshots_degraded``."""
        rejected = dict(self._rejected)
        return {
            "messages": self._messages,
            "events": self._events,
            "rejected": rejected,
            "late": self._late,
            "future": rejected.get("future", 0),
            "keys_overflow": rejected.get("key_limit", 0),
            "keys_evicted": self.windows.evicted,
            "keys": self.windows.key_count,
            "snapshots": self._snapshots,
            "snapshots_degraded": self._degraded,
            "labels": None if self._labels is None else self._labels.summary(),
        }


def _coarser_state(state: Mapping[str, Any], snap: dict[str, Any], limit: int) -> dict[str, Any] | None:
    """The state of a coarser copy of the snapshot's monitor that fits ``limit``, when the
    monitor type offers ``coarsened()``; else None."""
    try:
        from streammetrics.core.accumulator import from_dict

        monitor = from_dict(state)
        for _ in range(8):
            coarsen = getattr(monitor, "coarsened", None)
            if coarsen is None:
                return None
            monitor = coarsen()
            candidate = monitor.to_dict()
            if len(json.dumps({**snap, "state": candidate, "state_coarsened": True},
                              separators=(",", ":"), allow_nan=False)) <= limit:
                return candidate
    except Exception:  # noqa: BLE001 - degrading must never fail: fall back to dropping the state
        return None
    return None
