"""Windowed snapshots on Spark, equal to ``streammetrics replay`` (``pip install 'streammetrics[spark]'``).

Contract section 8. :func:`window_snapshots` turns a DataFrame of prediction events (columns
named as in contract section 2; ``segment``, ``weight`` and ``id`` optional; other names through
``fields=`` like ``--field``) into one row per (model, segment, window) whose string column
``snapshot`` is the JSON line ``replay`` prints for the same events taken in time order.

Only monitor states cross the network, never rows: ``mapInArrow`` parses each partition's rows
with replay's parser (binary rows of well-typed columns as Arrow columns) into one monitor per
(key, pane) and emits their states, then ``groupBy(model, segment, window).applyInPandas`` merges
each window's panes in pane order and builds the snapshot with the window engine's own code. No
RDD or SparkContext (Spark Connect and Databricks serverless work). Snapshot lines equal
replay's byte for byte because every float sum in the states is exact
(:mod:`streammetrics.kernels.exact_sum`, :mod:`streammetrics.kernels.exact_weights`); events in
time order are never late (``late`` is 0) and ``max_future`` does not apply. Delayed labels:
``label_events=`` (see :func:`window_snapshots`). More in ``docs/guide/spark.md``.

A Structured Streaming job writes the snapshots of each micro-batch with ``foreachBatch``::

    def write(batch_df, batch_id):
        window_snapshots(batch_df, task="binary", window="60s").write.mode("append").json(out)

    stream.writeStream.foreachBatch(write).start()

Each micro-batch then yields partial windows (a window spread over two batches gives two
snapshots), which :func:`merge_snapshots` combines exactly.
"""
from __future__ import annotations

import json
import math
from typing import Any, Callable, Hashable, Iterator, Mapping, Sequence

from streammetrics.core.accumulator import from_dict
from streammetrics.events.parser import FIELDS, Event, EventParser
from streammetrics.monitors import DEFAULT_MAX_LABELS, make_monitor
from streammetrics.stream.slicing import Slicer, slice_label
from streammetrics.stream.snapshots import build_snapshot, snapshot_line
from streammetrics.stream.windows import WindowSpec, parse_duration

try:
    import pandas as pd
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.window import Window
except ImportError as exc:  # pragma: no cover - exercised where pyspark is absent
    raise ImportError("streammetrics.integrations.spark needs pyspark, pandas and pyarrow: "
                      "pip install 'streammetrics[spark]'") from exc

__all__ = ["window_snapshots", "merge_snapshots", "SNAPSHOT_COLUMNS", "REJECTION_COLUMNS"]

#: columns of the DataFrames :func:`window_snapshots` and :func:`merge_snapshots` return
SNAPSHOT_COLUMNS = ("model", "segment", "window_start", "window_end", "snapshot")
#: columns of the rejections DataFrame (``with_rejections=True``)
REJECTION_COLUMNS = ("reason", "field", "count")

_STAGE1_SCHEMA = (
    "model string, segment string, window long, pane long, state string, "
    "labeled long, expired long, pending long, reason string, field string, n long"
)
_STAGE2_SCHEMA = "model string, segment string, start_ms long, end_ms long, snapshot string"
#: (key, pane) states a partition holds at most before it ships them (partial states merge exactly,
#: so shipping early changes only how many partials a window merges)
DEFAULT_MAX_OPEN_STATES = 10_000
_MAX_PENDING = 4096  # events queued per pane before a vectorised update, as replay's WindowManager
_OUT_ROWS = 2048  # rows per Arrow batch emitted by the partial-state stage
_STATUS = "__sm_status"  # internal columns of the delayed-label join
_LABEL = "__sm_label"
_TS_US = "__sm_ts_us"


class _Config:
    """Everything an executor needs, as plain picklable values."""

    def __init__(self, task: str, threshold: float, classes: Sequence[Hashable] | None,
                 labels: Sequence[Hashable] | None, fields: Mapping[str, str] | None,
                 spec: WindowSpec, include_state: bool, map_columns: Sequence[str], max_open: int,
                 vectorised: bool = True, max_labels: int | None = DEFAULT_MAX_LABELS,
                 operating_points: Any = None, slicing: Any = None) -> None:
        self.task = task
        #: slices and roll-ups (contract section 11: a SliceSpec), None: none
        self.slicing = slicing
        #: binary operating points in snapshots (contract section 11), None: none
        self.operating_points = operating_points
        self.max_labels = max_labels
        self.threshold = threshold
        self.classes = None if classes is None else list(classes)
        self.labels = None if labels is None else list(labels)
        self.fields = dict(fields or {})
        self.size_ms, self.slide_ms, self.pane_ms = spec.size_ms, spec.slide_ms, spec.pane_ms
        self.include_state = include_state
        self.map_columns = list(map_columns)
        self.max_open = max_open
        self.vectorised = vectorised

    def spec(self) -> WindowSpec:
        return WindowSpec(self.size_ms / 1000, self.slide_ms / 1000)

    def factory(self) -> Callable[[], Any]:
        task, threshold, classes, labels, max_labels = self.task, self.threshold, self.classes, self.labels, \
            self.max_labels
        return lambda: make_monitor(task, threshold=threshold, classes=classes, labels=labels, max_labels=max_labels)

    def parser(self) -> EventParser:
        return EventParser(self.task, classes=self.labels if self.task == "labels" else self.classes,
                           fields=self.fields)


# --------------------------------------------------------------------------- snapshots
def _snapshot(include_state: bool, key: tuple[str, str], monitor: Any, start_ms: int, end_ms: int,
              expired: int = 0, pending: int = 0, revision: int = 0, extra_metrics: Any = None) -> dict:
    """The snapshot of ``monitor`` for ``key`` and a window, built as the window engine builds
    it (:func:`~streammetrics.stream.snapshots.build_snapshot`; events in time order are never
    late). Spark computes each window once, with every label in: ``revision`` is the number
    replay gives its last revision (see :func:`_revisions`)."""
    return build_snapshot(key, monitor, start_ms, end_ms, final=pending == 0, pending=pending, expired=expired,
                          include_state=include_state, revision=revision, extra_metrics=extra_metrics)


# --------------------------------------------------------------------------- stage 1
def _partial_states(cfg: _Config) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """mapInArrow function: rows of one partition -> partial states per (key, pane, window)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        parser = cfg.parser()
        parse: Callable[[Any], Any] = parser.parse
        if cfg.slicing is not None:  # events keyed by slice, as replay keys them (stream.slicing)
            parse = Slicer(cfg.slicing).wrap_parse(parse)
        factory = cfg.factory()
        spec = cfg.spec()
        pane_us = spec.pane_ms * 1000
        y_key = parser.fields["y_true"]
        dummy = _dummy_truth(cfg)
        maps = cfg.map_columns
        floor = math.floor
        queues: dict[tuple[str, str, int], list[Event]] = {}
        monitors: dict[tuple[str, str, int], Any] = {}
        counts: dict[tuple[str, str, int], list[int]] = {}  # labeled, expired, pending
        rejected: dict[tuple[str, str | None], int] = {}

        def drain(k: tuple[str, str, int]) -> None:
            events = queues.pop(k)
            monitor = monitors.get(k)
            if monitor is None:
                monitor = monitors[k] = factory()
            monitor.update_events(events)

        cols: dict[str, list] = {name: [] for name in ("model", "segment", "window", "pane", "state", "labeled",
                                                       "expired", "pending", "reason", "field", "n")}

        def flush() -> Any:
            out = pa.RecordBatch.from_pydict(cols)
            for v in cols.values():
                v.clear()
            return out

        def emit() -> Iterator[Any]:
            """Every open (key, pane) state as rows (one per window of the pane), then forget them."""
            for k in list(queues):
                drain(k)
            for (model, segment, pane), (labeled, expired, pending) in sorted(counts.items()):
                monitor = monitors.get((model, segment, pane))
                state = None if monitor is None else json.dumps(monitor.to_dict(), separators=(",", ":"))
                for w in range(spec.first_window_of_pane(pane), spec.last_window_of_pane(pane) + 1):
                    for name, value in (("model", model), ("segment", segment), ("window", w), ("pane", pane),
                                        ("state", state), ("labeled", labeled), ("expired", expired),
                                        ("pending", pending), ("reason", None), ("field", None), ("n", None)):
                        cols[name].append(value)
                    if len(cols["model"]) >= _OUT_ROWS:
                        yield flush()
            counts.clear()
            monitors.clear()

        vectorised = _binary_columns(cfg, parser) if (cfg.vectorised and cfg.task == "binary" and not maps
                                                      and cfg.slicing is None) else None
        for batch in batches:
            labelled = _STATUS in batch.schema.names
            if vectorised is not None and not labelled:
                taken = vectorised(batch)
                if taken is not None:  # the rows replay's parser surely accepts, one batch update per key and pane
                    keys, groups, rest = taken
                    for k, (y, sc, w) in zip(keys, groups):
                        c = counts.get(k)
                        if c is None:
                            c = counts[k] = [0, 0, 0]
                        c[0] += len(y)
                        monitor = monitors.get(k)
                        if monitor is None:
                            monitor = monitors[k] = factory()
                        _update_binary(monitor, y, sc, w)
                    batch = rest
            for row in batch.to_pylist():
                status = label = None
                if labelled:
                    status, label = row.pop(_STATUS), row.pop(_LABEL)
                    del row[_TS_US]
                for m in maps:
                    if row.get(m) is not None:
                        row[m] = dict(row[m])
                if label is not None:
                    row[y_key] = json.loads(label)
                elif status is not None:  # no label: validate the rest with a stand-in truth
                    row[y_key] = dummy(row, parser)
                ev = parse(row)  # a null reads as absent for the optional fields
                if ev.__class__ is not Event:  # and for the others, as spark.read.json reads absent fields
                    ev = parse({k: v for k, v in row.items() if v is not None})
                    if ev.__class__ is not Event:
                        rk = (ev.reason, ev.field)
                        rejected[rk] = rejected.get(rk, 0) + 1
                        continue
                k = (ev.model, ev.segment, floor(ev.ts * 1e6 + 0.5) // pane_us)
                c = counts.get(k)
                if c is None:
                    c = counts[k] = [0, 0, 0]
                if status is not None and label is None:  # its label-free part only, as replay applies it
                    c[1 if status == "expired" else 2] += 1
                    monitor = monitors.get(k)
                    if monitor is None:
                        monitor = monitors[k] = factory()
                    monitor.update_prediction(ev)
                    continue
                c[0] += 1
                q = queues.get(k)
                if q is None:
                    q = queues[k] = []
                q.append(ev)
                if len(q) >= _MAX_PENDING:
                    drain(k)
            if len(counts) >= cfg.max_open:  # bounded memory: ship these partial states now
                yield from emit()
        yield from emit()
        for (reason, field), n in sorted(rejected.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
            for name, value in (("model", None), ("segment", None), ("window", None), ("pane", None),
                                ("state", None), ("labeled", None), ("expired", None), ("pending", None),
                                ("reason", reason), ("field", field), ("n", n)):
                cols[name].append(value)
        if cols["model"]:
            yield flush()

    return run


def _binary_columns(cfg: _Config, parser: EventParser) -> Callable[[Any], Any] | None:
    """The vectorised reader of well-typed binary columns, or None when the columns' types do
    not allow it (then every row goes through replay's parser).

    For an Arrow batch it returns ``None`` (nothing taken) or ``(keys, groups, rest)``: the rows
    that replay's parser accepts as they are - ``ts`` a float in its range, ``model`` a non-empty
    string and ``segment`` a string or null, both at most 1,000 characters and without ``|``,
    ``y_true`` 0 or 1, ``score`` finite, ``weight`` null or in ``[0, 1e15]``, ``id`` null or at
    most 1,000 characters - grouped by (model, segment, pane) as arrays ``(y, score, weight or
    None)``; ``rest`` holds the other rows, for the per-row path (which gives replay's reasons).
    The states equal the per-row path's: every sum in them is exact (kernels.exact_sum)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from streammetrics.events.fields import MAX_NAME_LENGTH, MAX_WEIGHT, TS_MAX, TS_MIN

    f = parser.fields
    pane_us = cfg.pane_ms * 1000

    def run(batch: Any) -> Any:
        names = batch.schema.names
        if f["ts"] not in names or f["model"] not in names or f["y_true"] not in names or f["score"] not in names:
            return None
        ts, model, y, sc = (batch.column(f[k]) for k in ("ts", "model", "y_true", "score"))
        numeric = (pa.types.is_floating, pa.types.is_integer)
        if not (pa.types.is_floating(ts.type) and pa.types.is_string(model.type)
                and (pa.types.is_integer(y.type) or pa.types.is_boolean(y.type) or pa.types.is_floating(y.type))
                and any(t(sc.type) for t in numeric)):
            return None
        seg = batch.column(f["segment"]) if f["segment"] in names else None
        wcol = batch.column(f["weight"]) if f["weight"] in names else None
        ident = batch.column(f["id"]) if f["id"] in names else None
        if (seg is not None and not pa.types.is_string(seg.type)) or (
                wcol is not None and not any(t(wcol.type) for t in numeric)) or (
                ident is not None and not (pa.types.is_string(ident.type) or pa.types.is_null(ident.type))):
            return None
        n = batch.num_rows
        tsv = ts.to_numpy(zero_copy_only=False)
        yv = pc.cast(y, pa.float64()).to_numpy(zero_copy_only=False)  # nulls -> nan: refused below
        sv = pc.cast(sc, pa.float64()).to_numpy(zero_copy_only=False)
        with np.errstate(invalid="ignore"):
            ok = (tsv >= TS_MIN) & (tsv < TS_MAX) & ((yv == 0.0) | (yv == 1.0)) & np.isfinite(sv)
        mlen = pc.utf8_length(model)
        ok &= pc.fill_null(pc.and_(pc.greater(mlen, 0), pc.less_equal(mlen, MAX_NAME_LENGTH)), False).to_numpy(
            zero_copy_only=False)
        ok &= ~pc.fill_null(pc.match_substring(model, "|"), True).to_numpy(zero_copy_only=False)
        if seg is not None:
            ok &= pc.fill_null(pc.less_equal(pc.utf8_length(seg), MAX_NAME_LENGTH), True).to_numpy(
                zero_copy_only=False)
            ok &= ~pc.fill_null(pc.match_substring(seg, "|"), False).to_numpy(zero_copy_only=False)
        if ident is not None and pa.types.is_string(ident.type):
            ok &= pc.fill_null(pc.less_equal(pc.utf8_length(ident), MAX_NAME_LENGTH), True).to_numpy(
                zero_copy_only=False)
        wv = None
        if wcol is not None:
            wv = pc.fill_null(pc.cast(wcol, pa.float64()), 1.0).to_numpy(zero_copy_only=False)
            with np.errstate(invalid="ignore"):
                ok &= (wv >= 0.0) & (wv <= MAX_WEIGHT)
        if not ok.any():
            return None
        idx = np.flatnonzero(ok)
        rest = batch.filter(pa.array(~ok)) if len(idx) < n else batch.slice(0, 0)
        tsv, yv, sv = tsv[idx], yv[idx].astype(np.int64), sv[idx]
        wv = None if wv is None else wv[idx]
        pane = np.floor(tsv * 1e6 + 0.5).astype(np.int64) // pane_us  # as floor(ts*1e6 + 0.5) // pane_us
        models = model.take(pa.array(idx)).to_pylist()
        segs = [""] * len(idx) if seg is None else ["" if v is None else v for v in seg.take(pa.array(idx)).to_pylist()]
        groups: dict[tuple[str, str, int], list[int]] = {}
        for i, key in enumerate(zip(models, segs, pane.tolist())):
            g = groups.get(key)
            if g is None:
                groups[key] = [i]
            else:
                g.append(i)
        keys = list(groups)
        out = []
        for key in keys:
            rows = np.asarray(groups[key], dtype=np.int64)
            w = None if wv is None else wv[rows]
            if w is not None and (w == 1.0).all():
                w = None  # as batch_weights: all weights 1 is the unweighted path
            out.append((yv[rows], sv[rows], w))
        return keys, out, rest

    return run


def _update_binary(monitor: Any, y: Any, s: Any, w: Any) -> None:
    """``BinaryMonitor.update_events`` of events given as arrays."""
    monitor.predictions.update_many(s, w)
    monitor.scores.update_many(y, s, w)
    monitor.confusion.update_many(y, (s >= monitor.threshold).astype(y.dtype), w)


def _dummy_truth(cfg: _Config) -> Callable[[dict, EventParser], Any]:
    """A valid ``y_true`` for the task, so that an unlabelled prediction is checked like any other."""
    if cfg.task == "binary":
        return lambda obj, parser: 0
    if cfg.task == "multiclass":
        first = cfg.classes[0]  # type: ignore[index]
        return lambda obj, parser: first
    if cfg.task == "regression":
        return lambda obj, parser: 0.0
    return lambda obj, parser: obj.get(parser.fields["y_pred"])  # labels: the prediction's own kind


# --------------------------------------------------------------------------- stage 2
def _merge_windows(cfg: _Config) -> Callable[[Any], Any]:
    """applyInPandas function: the partial states of one (key, window) -> its snapshot line."""

    def run(pdf: Any) -> Any:
        model, segment, k = pdf["model"].iat[0], pdf["segment"].iat[0], int(pdf["window"].iat[0])
        revision = 0
        if "revision" in pdf.columns and not pd.isna(pdf["revision"].iat[0]):  # delayed labels
            revision = int(pdf["revision"].iat[0])
        states = [s if isinstance(s, str) else None for s in pdf["state"].tolist()]  # pandas: null -> NaN
        rows = sorted(zip(pdf["pane"].tolist(), states, pdf["labeled"].tolist(), pdf["expired"].tolist(),
                          pdf["pending"].tolist()), key=lambda r: (r[0], r[1] or ""))
        window = None
        pane_monitor = None
        current = None
        labeled = expired = pending = 0

        def fold(total: Any, part: Any) -> Any:
            return part if total is None else total.merge(part)

        for pane, state, n_lab, n_exp, n_pend in rows:
            labeled, expired, pending = labeled + int(n_lab), expired + int(n_exp), pending + int(n_pend)
            if pane != current:  # panes in order, each the merge of its partitions' states
                window = fold(window, pane_monitor) if pane_monitor is not None else window
                pane_monitor, current = None, pane
            if state is not None:
                pane_monitor = fold(pane_monitor, from_dict(json.loads(state)))
        if pane_monitor is not None:
            window = fold(window, pane_monitor)
        if window is None:
            window = cfg.factory()()
        start = k * cfg.slide_ms
        end = start + cfg.size_ms
        points = cfg.operating_points
        snap = _snapshot(cfg.include_state or cfg.slicing is not None, (model, segment), window, start, end, expired,
                         pending, revision, None if points is None else points.hook())
        return pd.DataFrame({"model": [model], "segment": [segment], "start_ms": [start], "end_ms": [end],
                             "snapshot": [snapshot_line(snap)]})

    return run


def _slice_windows(cfg: _Config) -> Callable[[Any], Any]:
    """applyInPandas function: the slice windows of one (model, window) -> its slice snapshots,
    the budget applied, then its roll-ups (:meth:`Slicer.process
    <streammetrics.stream.slicing.Slicer.process>` on the slices' states, as replay)."""

    def run(pdf: Any) -> Any:
        points = cfg.operating_points
        slicer = Slicer(cfg.slicing, include_state=cfg.include_state,
                        extra_metrics=None if points is None else points.hook())
        snaps = []
        for line in sorted(pdf["snapshot"].tolist()):
            snap = json.loads(line)
            monitor = from_dict(snap["state"])
            if not cfg.include_state:
                del snap["state"]
            slicer.add_source(snap, monitor)
            snaps.append(snap)
        out = slicer.process(snaps, None)
        return pd.DataFrame({"model": [s["key"]["model"] for s in out],
                             "segment": [slice_label(s, s["key"], s["key"].get("segment", "")) for s in out],
                             "start_ms": [_ms(s["window"]["start"]) for s in out],
                             "end_ms": [_ms(s["window"]["end"]) for s in out],
                             "snapshot": [snapshot_line(s) for s in out]})

    return run


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


# --------------------------------------------------------------------------- input
def _prepare(df: DataFrame, names: Mapping[str, str], extra: Sequence[str] = ()) -> tuple[DataFrame, list[str]]:
    """Only the event columns (and the ``extra`` ones present: slice fields), with timestamps as
    epoch seconds and decimals as doubles."""
    types = {f.name: f.dataType for f in df.schema.fields}
    cols = []
    maps = []
    for canonical in (*FIELDS, *extra):
        source = names.get(canonical, canonical)
        if source not in types:
            continue
        dt = types[source]
        col = F.col(_quote(source))
        if canonical == "ts" and isinstance(dt, T.TimestampType):  # an instant: exact epoch microseconds
            col = F.unix_micros(col).cast("double") / 1e6
        elif canonical == "ts" and isinstance(dt, (T.TimestampNTZType, T.DateType)):  # wall clock: UTC, as
            col = F.date_format(col.cast("timestamp_ntz"), "yyyy-MM-dd'T'HH:mm:ss.SSSSSS")  # replay reads ISO
        elif isinstance(dt, T.DecimalType):
            col = col.cast("double")
        elif isinstance(dt, T.MapType):
            maps.append(source)
        cols.append(col.alias(source))
    return df.select(*cols), maps


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _ts_us(df: DataFrame, ts: str) -> Any:
    """Event time in whole microseconds, as the window engine rounds it (``floor(ts*1e6 + 0.5)``)."""
    dt = df.schema[ts].dataType
    if isinstance(dt, T.StringType):  # ISO-8601 text, read by replay's parser
        return _iso_us(F.col(_quote(ts)))
    return F.floor(F.col(_quote(ts)).cast("double") * 1e6 + 0.5)


def _iso_us(col: Any) -> Any:
    """Epoch microseconds of ISO-8601 strings as replay's parser reads them (null if invalid)."""

    def iso_us(texts: pd.Series) -> pd.Series:
        parse = EventParser("regression", require_key=False).parse

        def one(text: Any) -> Any:
            ev = parse({"ts": text, "y_true": 0.0, "y_pred": 0.0}) if isinstance(text, str) else None
            return math.floor(ev.ts * 1e6 + 0.5) if ev.__class__ is Event else None

        return pd.Series([one(t) for t in texts], dtype="Int64")

    return F.pandas_udf(iso_us, "long")(col)  # type: ignore[call-overload]


def _field_names(fields: Mapping[str, str] | None) -> dict[str, str]:
    names = {f: f for f in FIELDS}
    names.update(fields or {})
    return names


# --------------------------------------------------------------------------- public
def window_snapshots(
    df: DataFrame,
    *,
    task: str = "binary",
    window: str | float = "60s",
    slide: str | float | None = None,
    grace: str | float = "0s",
    threshold: float = 0.5,
    classes: Sequence[Hashable] | None = None,
    labels: Sequence[Hashable] | None = None,
    fields: Mapping[str, str] | None = None,
    include_state: bool = True,
    max_labels: int | None = DEFAULT_MAX_LABELS,
    label_events: DataFrame | None = None,
    label_ttl: str | float = "7d",
    with_rejections: bool = False,
    max_open_states: int = DEFAULT_MAX_OPEN_STATES,
    vectorised: bool = True,
    operating_points: Any = None,
    slicing: Any = None,
) -> Any:
    """Windowed snapshots of the prediction events in ``df``, as ``replay`` prints them.

    Parameters mirror ``streammetrics replay``: ``task``, ``window``/``slide`` (durations such
    as ``"60s"``), ``threshold`` (binary), ``classes`` (multiclass), ``labels`` (the label set
    of the ``labels`` task; ``max_labels``: its bound on discovered labels, as
    ``--max-labels``), ``fields`` (contract name -> column name, like ``--field``),
    ``include_state`` (``--no-state`` when False), ``grace`` (``--grace``: events taken in
    time order are never late, so it changes only the revision ticks of delayed labels).

    Columns: ``ts`` (epoch seconds, a timestamp or an ISO-8601 string), ``model``,
    optional ``segment``, ``weight`` and ``id``, and the task's ``y_true``/``score``/
    ``scores`` (array aligned with ``classes``, map or struct class -> score)/``y_pred``.
    A null is an absent field (``spark.read.json`` gives null for both).

    Returns a DataFrame of :data:`SNAPSHOT_COLUMNS` (``window_start``/``window_end`` as
    timestamps); with ``with_rejections=True`` a pair ``(snapshots, rejections)``, the latter
    one row per rejection reason (replay's wording) with its ``field`` and ``count``. Both
    come from the same partial-state stage: persist ``df`` (or the stage) if you use both.

    ``label_events``: a DataFrame of label events ``{id, y_true, ts}`` (same ``fields``
    names). A prediction with a null ``y_true`` takes the earliest label of its ``id`` within
    ``label_ttl`` of its ``ts`` (later ones are duplicates); without one it is *expired* when the
    largest ``ts`` of all rows is more than ``label_ttl`` past its own, else *pending*, and only
    its label-free part enters the monitor. Snapshots are the last revision ``replay PREDICTIONS
    --labels LABELS`` prints for each window (both files sorted by ``ts``), byte for byte, its
    ``revision`` number computed from the timestamps (:func:`_revisions`). Label rows with a null
    ``id``, ``ts`` or ``y_true`` are dropped uncounted; rows replay would reject still count as
    event time here, so ``expired``/``pending`` and revision numbers may then differ from replay's.

    Bounds: a partition task holds at most ``max_open_states`` (key, pane) monitors (checked
    after each Arrow batch) and 4,096 queued events per (key, pane); at the bound it ships its
    partial states and starts afresh (exact: they merge).

    ``vectorised`` (binary task): well-typed rows are read as Arrow columns, one batch update per
    (key, pane); the others (all with ``vectorised=False``) go through replay's parser row by row.
    Same snapshots either way.

    ``operating_points`` (binary task): an
    :class:`~streammetrics.monitors.operating_points.OperatingPoints`, the snapshot metrics of
    replay's ``--target-recall``, ``--target-precision``, ``--target-fpr``, ``--cost-fp`` and
    ``--cost-fn`` (contract section 11).

    ``slicing``: a :class:`~streammetrics.stream.slicing.SliceSpec`, replay's ``--slice-by``,
    ``--max-slice-values``, ``--rollup``, ``--fairness-by``, ``--worst-metric`` and
    ``--worst-slices`` (contract section 11): the slice fields are columns of ``df`` (an absent
    column: every value ``""``); rows are the slice snapshots (``segment``: the slice's label,
    ``segment / d1=v1``; a roll-up's ``rollup: d1=v1``) and the roll-ups, replay's lines byte for
    byte. A third stage groups each (model, window)'s slice windows (with their states) to apply
    the budget and roll up, as replay does. Not with ``label_events``.
    """
    if operating_points is not None and operating_points.enabled and task != "binary":
        raise ValueError(f"operating_points apply to the binary task, not {task!r}")
    spec = WindowSpec(parse_duration(window, "window"), None if slide is None else parse_duration(slide, "slide"),
                      parse_duration(grace, "grace"))
    make_monitor(task, threshold=threshold, classes=classes, labels=labels, max_labels=max_labels)  # errors now
    EventParser(task, classes=labels if task == "labels" else classes, fields=fields)
    names = _field_names(fields)
    if slicing is not None and label_events is not None:
        raise ValueError("slicing reads the slice fields of each prediction with its label: not with label_events")
    events, maps = _prepare(df, names, () if slicing is None else slicing.fields)
    if names["model"] not in events.columns or names["ts"] not in events.columns:
        missing = [names[f] for f in ("ts", "model") if names[f] not in events.columns]
        raise ValueError(f"the DataFrame has no column {missing[0]!r} (columns: {df.columns})")
    revisions = None
    if label_events is not None:
        events, revisions = _join_labels(events, label_events, names, parse_duration(label_ttl, "label_ttl"),
                                         spec)
    if type(max_open_states) is not int or max_open_states < 1:
        raise ValueError(f"max_open_states must be a positive int, got {max_open_states!r}")
    cfg = _Config(task, threshold, classes, labels, fields, spec, include_state, maps, max_open_states,
                  bool(vectorised), max_labels,
                  operating_points if operating_points is not None and operating_points.enabled else None,
                  slicing)
    partial = events.mapInArrow(_partial_states(cfg), _STAGE1_SCHEMA)
    states = partial.filter(F.col("reason").isNull()).drop("reason", "field", "n")
    if revisions is not None:  # each window's revision number, on its partial states
        states = states.join(revisions, ["model", "segment", "window"], "left")
    snaps = states.groupBy("model", "segment", "window").applyInPandas(_merge_windows(cfg), _STAGE2_SCHEMA)
    if slicing is not None:  # each (model, window)'s slices: the budget, then the roll-ups
        snaps = snaps.groupBy("model", "start_ms").applyInPandas(_slice_windows(cfg), _STAGE2_SCHEMA)
    snaps = snaps.select("model", "segment", F.timestamp_millis("start_ms").alias("window_start"),
                         F.timestamp_millis("end_ms").alias("window_end"), "snapshot")
    if not with_rejections:
        return snaps
    rejections = (partial.filter(F.col("reason").isNotNull()).groupBy("reason", "field")
                  .agg(F.sum("n").alias("count")))
    return snaps, rejections


def _join_labels(events: DataFrame, label_events: DataFrame, names: Mapping[str, str], ttl_s: float,
                 spec: WindowSpec) -> tuple[DataFrame, DataFrame]:
    """Predictions without ``y_true`` get their label (JSON text in ``_LABEL``) or a status;
    also returns the revision number of each window that labels or expiries changed after it
    closed (:func:`_revisions`)."""
    ts, ident, y = names["ts"], names["id"], names["y_true"]
    for col in (ts, ident, y):
        if col not in label_events.columns:
            raise ValueError(f"label_events has no column {col!r} (columns: {label_events.columns})")
    if ident not in events.columns:
        raise ValueError(f"label_events needs an {ident!r} column in the predictions")
    ttl_us = round(ttl_s * 1e6)
    labels_df, _ = _prepare(label_events.select(ts, ident, y), names)
    labels_df = labels_df.select(F.col(_quote(ident)).cast("string").alias("lid"), _ts_us(labels_df, ts).alias("lts"),
                                 F.to_json(F.array(F.col(_quote(y)))).alias("ljson"))
    labels_df = labels_df.filter(F.col("lid").isNotNull() & F.col("lts").isNotNull() & F.col("ljson").isNotNull()
                                 & (F.col("ljson") != "[null]"))
    accepted = labels_df.groupBy("lid").applyInPandas(_accept_labels(ttl_us),
                                                     "lid string, lo long, hi long, ljson string, jts long")
    events = events.withColumn(_TS_US, _ts_us(events, ts))
    if y not in events.columns:
        events = events.withColumn(y, F.lit(None).cast("string"))
    inline = events.filter(F.col(_quote(y)).isNotNull()).withColumn(_STATUS, F.lit(None).cast("string")) \
        .withColumn(_LABEL, F.lit(None).cast("string"))
    waiting = events.filter(F.col(_quote(y)).isNull())
    watermark = (events.select(F.max(_TS_US).alias("w"))
                 .unionByName(labels_df.select(F.max("lts").alias("w"))).agg(F.max("w").alias("__sm_w")))
    joined = waiting.join(accepted, (F.col(_quote(ident)).cast("string") == F.col("lid"))
                          & F.col(_TS_US).between(F.col("lo"), F.col("hi")), "left")
    joined = joined.crossJoin(F.broadcast(watermark))
    status = (F.when(F.col("ljson").isNotNull(), F.lit("joined"))
              .when(F.col("__sm_w") > F.col(_TS_US) + F.lit(ttl_us), F.lit("expired")).otherwise(F.lit("pending")))
    label = F.when(F.col("ljson").isNotNull(), F.expr("substring(ljson, 2, length(ljson) - 2)"))
    joined = joined.withColumn(_STATUS, status).withColumn(_LABEL, label).drop("lid", "lo", "hi", "ljson", "__sm_w")
    cols = list(inline.columns)
    revisions = _revisions(events, joined, labels_df, names, spec, ttl_us)
    return inline.unionByName(joined.select(*cols)), revisions


def _floordiv(col: Any, n: int) -> Any:
    """``floor(col / n)`` of a long column, exactly (``col - pmod(col, n)`` is a multiple of n)."""
    return ((col - F.pmod(col, F.lit(n))) / F.lit(n)).cast("long")


def _revisions(events: DataFrame, joined: DataFrame, labels_df: DataFrame, names: Mapping[str, str],
               spec: WindowSpec, ttl_us: int) -> DataFrame:
    """``(model, segment, window, revision)``: replay's last revision number of each window
    that labels or expiries changed after it closed (windows absent: revision 0).

    Replay emits a new revision of a closed window changed by labels or expiries at each
    revision tick, when event time (the largest ``ts`` of predictions and labels so far) minus
    ``grace`` enters a new pane, and at the end
    (:meth:`~streammetrics.stream.windows.WindowManager.revision_tick`). For events in time
    order (predictions before labels on equal ``ts``) the last revision of window ``k`` of a
    key is the number of distinct panes ``(t - grace) // pane`` of the times ``t`` of its
    changes after its close, where, with ``C`` the first ``ts`` of any prediction (of any key:
    windows close by the stream's one watermark) at or after the window's end + grace (the event
    that closes it; none: it closes at the end, revision 0):

    * a prediction joined by its label at ``J = max(label ts, prediction ts)`` changed it at
      ``J``, after the close iff ``J >= C``;
    * a prediction expired at ``X``, the first ``ts`` of any prediction or label past its
      ``ts + label_ttl`` (expiries due at an event's time are settled before the windows it
      closes), after the close iff ``C <= ts + label_ttl``.

    Computed with DataFrame operations on small rows: the first ``ts`` per pane (for ``C``, a
    running minimum over the panes) and the largest ``ts`` per pane of all
    events (for ``X``'s pane, a global ordered window over those panes: one row per non-empty
    pane, e.g. ~525,000 for a year of minute panes).
    """
    pane, grace = spec.pane_ms * 1000, spec.grace_ms * 1000  # us
    s, w = spec.panes_per_slide, spec.panes_per_window
    model = F.col(_quote(names["model"])).cast("string").alias("model")
    seg_name = names["segment"]
    segment = (F.coalesce(F.col(_quote(seg_name)).cast("string"), F.lit("")) if seg_name in events.columns
               else F.lit("")).alias("segment")
    ts = F.col(_TS_US)

    def tick(col: Any) -> Any:  # the revision-tick pane of an event time
        return _floordiv(col - F.lit(grace), pane)

    # the changes: joined (at J) and expired (threshold D = ts + ttl; pane of X below) predictions
    settled = joined.filter(F.col(_STATUS).isin("joined", "expired")).select(
        model, segment, _floordiv(ts, pane).alias("pane"), F.col(_STATUS).alias("status"),
        F.when(F.col(_STATUS) == "joined", F.greatest(F.col("jts"), ts)).otherwise(ts + F.lit(ttl_us)).alias("m"))
    # X: the first event time past D. Per tick pane b: the largest event time in it and the next
    # non-empty pane after it; X lies in b(D) if that pane holds a time > D, else in the next one
    items = (events.filter(ts.isNotNull()).select(ts.alias("t"))
             .unionByName(labels_df.select(F.col("lts").alias("t"))))
    panes = items.groupBy(tick(F.col("t")).alias("b")).agg(F.max("t").alias("maxts"))
    due = (settled.filter(F.col("status") == "expired").select(tick(F.col("m")).alias("b")).distinct()
           .withColumn("maxts", F.lit(None).cast("long")))
    following = Window.orderBy("b").rangeBetween(1, Window.unboundedFollowing)
    nxt = (panes.unionByName(due).groupBy("b").agg(F.max("maxts").alias("maxts"))
           .withColumn("next", F.min(F.when(F.col("maxts").isNotNull(), F.col("b"))).over(following))
           .withColumnRenamed("b", "bd"))
    expired = (settled.filter(F.col("status") == "expired").withColumn("bd", tick(F.col("m")))
               .join(nxt, "bd", "left")
               .select("model", "segment", "pane", "m",
                       F.when(F.col("maxts") > F.col("m"), F.col("bd")).otherwise(F.col("next")).alias("b")))
    labelled = settled.filter(F.col("status") == "joined").select("model", "segment", "pane", "m",
                                                                   tick(F.col("m")).alias("b"))
    # per (key, event pane, tick pane) first, then once per window holding the pane: a tick pane
    # counts for a window if one of its changes came after the close (the largest m decides)
    p = F.col("pane")
    changes = (labelled.unionByName(expired).groupBy("model", "segment", "pane", "b").agg(F.max("m").alias("m"))
               .withColumn("window", F.explode(F.sequence(-_floordiv(F.lit(w - 1) - p, s), _floordiv(p, s))))
               .groupBy("model", "segment", "window", "b").agg(F.max("m").alias("m")))
    # C: the first prediction time (any key) in a tick pane at or after the window's end (+ grace)
    firsts = (events.filter(ts.isNotNull() & F.col(_quote(names["model"])).isNotNull())
              .select(tick(ts).alias("b"), ts.alias("t"))
              .groupBy("b").agg(F.min("t").alias("first"))
              .withColumn("window", F.lit(None).cast("long")))
    ends = (changes.select("window").distinct()
            .withColumn("b", F.col("window") * F.lit(s) + F.lit(w)).withColumn("first", F.lit(None).cast("long")))
    later = Window.orderBy("b").rangeBetween(0, Window.unboundedFollowing)
    closes = (firsts.unionByName(ends).withColumn("close", F.min("first").over(later))
              .filter(F.col("window").isNotNull()).select("window", "close"))
    return (changes.join(closes, ["window"]).filter(F.col("m") >= F.col("close"))
            .groupBy("model", "segment", "window").agg(F.count("*").cast("long").alias("revision")))


def _accept_labels(ttl_us: int) -> Callable[[Any], Any]:
    """applyInPandas over the labels of one id: drop duplicates (a label within ``ttl`` of the
    previous accepted one), and give each accepted label the prediction times it serves:
    ``[ts - ttl, ts + ttl]`` less what an earlier accepted label of the id already serves."""

    def run(pdf: Any) -> Any:
        pdf = pdf.sort_values(["lts", "ljson"], kind="stable")
        out: dict[str, list] = {"lid": [], "lo": [], "hi": [], "ljson": [], "jts": []}
        last = None
        prev_hi = None
        for lid, lts, text in zip(pdf["lid"], pdf["lts"], pdf["ljson"]):
            lts = int(lts)
            if last is not None and lts <= last + ttl_us:
                continue  # a duplicate: the id still has its label
            last = lts
            lo = lts - ttl_us if prev_hi is None else max(lts - ttl_us, prev_hi + 1)
            prev_hi = lts + ttl_us
            out["lid"].append(lid)
            out["lo"].append(lo)
            out["hi"].append(prev_hi)
            out["ljson"].append(text)
            out["jts"].append(lts)
        return pd.DataFrame(out)

    return run


def merge_snapshots(df: DataFrame, *, window: str | float | None = None, by: Sequence[str] = ("model", "segment"),
                    include_state: bool = True) -> DataFrame:
    """Roll snapshots up by merging their states: into ``window``-sized tumbling windows (a
    multiple of theirs, e.g. minutes -> days) and/or across the key fields left out of ``by``
    (``by=("model",)`` merges every segment of a model into segment ``""``, as replay sees
    events without a segment). ``df`` needs a ``snapshot`` column with states (the default
    ``include_state=True`` of :func:`window_snapshots`); windows of one output window and key
    are merged in the order of their start. Returns :data:`SNAPSHOT_COLUMNS`.

    Snapshots of tumbling windows only (hopping windows would count an event more than once);
    ``late`` is the largest of each merged key's, summed over keys; ``expired`` and ``pending``
    are summed (``final`` when nothing is pending), ``revision`` is 0.
    """
    by = tuple(by)
    if not set(by) <= {"model", "segment"} or "model" not in by:
        raise ValueError(f"by must be ('model',) or ('model', 'segment'), got {by!r}")
    size_ms = None if window is None else WindowSpec(parse_duration(window, "window")).size_ms
    parsed = df.select(F.col("snapshot"),
                       F.get_json_object("snapshot", "$.key.model").alias("model"),
                       F.get_json_object("snapshot", "$.key.segment").alias("segment"),
                       F.get_json_object("snapshot", "$.window.start").cast("double").alias("_start"))
    start_ms = F.round(F.col("_start") * 1000).cast("long")
    group = start_ms if size_ms is None else F.floor(start_ms / size_ms) * size_ms
    parsed = parsed.withColumn("group_ms", group.cast("long"))
    if "segment" not in by:
        parsed = parsed.withColumn("segment", F.lit(""))
    return (parsed.groupBy("model", "segment", "group_ms")
            .applyInPandas(_rollup(size_ms, include_state), _STAGE2_SCHEMA)
            .select("model", "segment", F.timestamp_millis("start_ms").alias("window_start"),
                    F.timestamp_millis("end_ms").alias("window_end"), "snapshot"))


def _rollup(size_ms: int | None, include_state: bool) -> Callable[[Any], Any]:
    def run(pdf: Any) -> Any:
        snaps = [json.loads(s) for s in pdf["snapshot"]]
        if any("state" not in s for s in snaps):
            raise ValueError("merge_snapshots needs snapshots with their state (include_state=True)")
        snaps.sort(key=lambda s: (s["window"]["start"], s["key"]["segment"]))
        spans = [(round(s["window"]["start"] * 1000), round(s["window"]["end"] * 1000)) for s in snaps]
        if any(lo % (hi - lo) for lo, hi in spans):
            raise ValueError("merge_snapshots merges tumbling windows only (a hopping window overlaps the next)")
        starts, ends = {lo for lo, _ in spans}, {hi for _, hi in spans}
        if size_ms is None:
            if len(starts) != 1 or len(ends) != 1:
                raise ValueError("snapshots of one window must share their start and end to merge across keys")
            start, end = starts.pop(), ends.pop()
        else:
            start = int(pdf["group_ms"].iat[0])
            end = start + size_ms
            if min(starts) < start or max(ends) > end:
                raise ValueError(f"window size {size_ms} ms is not a multiple of the snapshots' windows")
        merged = None
        for s in snaps:
            part = from_dict(s["state"])
            merged = part if merged is None else merged.merge(part)
        model, segment = pdf["model"].iat[0], pdf["segment"].iat[0]
        snap = _snapshot(include_state, (model, segment), merged, start, end,
                         sum(s.get("expired", 0) for s in snaps), sum(s.get("pending", 0) for s in snaps))
        late: dict[str, int] = {}
        for s in snaps:
            late[s["key"]["segment"]] = max(late.get(s["key"]["segment"], 0), s.get("late", 0))
        snap["late"] = sum(late.values())
        return pd.DataFrame({"model": [model], "segment": [segment], "start_ms": [start], "end_ms": [end],
                             "snapshot": [snapshot_line(snap)]})

    return run
