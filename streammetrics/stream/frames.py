"""Windowed snapshots of a pandas DataFrame: ``sm.replay_frame(df, task=..., window=...)``.

Contract section 12. The rows go, in the DataFrame's order, through what ``streammetrics replay``
runs on a file (:class:`~streammetrics.stream.pipeline.Pipeline`: the same event parser, windows
and snapshot code; rows read as :func:`streammetrics.events.tables.frame_rows` says: missing
values are absent fields, ``datetime64`` columns are event times, numeric ``ts`` in ``ts_unit``).
So ``replay_frame(df)["snapshot"]`` holds the lines ``replay`` prints for the same rows written
as JSONL, CSV or Parquet, and, for rows in time order, the ``snapshot`` column
:func:`streammetrics.spark.window_snapshots` gives::

    import pandas as pd, streammetrics as sm

    df = pd.read_parquet("predictions.parquet")       # ts, model, y_true, score (segment, weight, id)
    out = sm.replay_frame(df, task="binary", window="1h")
    out[["model", "window_start", "roc_auc", "f1"]]

Bad input raises one ``ValueError`` line naming the column or the row and field (``errors="skip"``:
rejected rows are left out and counted in ``out.attrs["rejected"]``, as ``replay`` does).
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from streammetrics.events.tables import frame_rows, ts_scale
from streammetrics.stream.label_replay import Source, replay_merged
from streammetrics.stream.pipeline import DEFAULT_LABEL_TTL, Pipeline, PipelineConfig, Problem
from streammetrics.stream.replay import EXPIRY_CODES, ReplayStats, replay_lines
from streammetrics.stream.windows import parse_duration

__all__ = ["replay_frame"]

#: the columns every result has, before one column per scalar metric and the ``snapshot`` line
FRAME_COLUMNS = ("window_start", "window_end", "revision", "final", "count", "late")
#: PipelineConfig fields replay_frame sets itself (as replay does)
_SET_HERE = ("task", "window", "slide", "grace", "threshold", "classes", "labels", "fields", "include_state",
             "label_ttl")
_PREDICTION = {"binary": "score", "multiclass": "scores", "labels": "y_pred", "regression": "y_pred"}


def replay_frame(
    df: Any,
    *,
    task: str = "binary",
    window: str | float = "60s",
    slide: str | float | None = None,
    grace: str | float = "0s",
    threshold: float = 0.5,
    classes: Sequence[Hashable] | None = None,
    labels: Sequence[Hashable] | None = None,
    fields: Mapping[str, str] | None = None,
    ts_unit: str = "s",
    label_events: Any = None,
    label_ttl: str | float = DEFAULT_LABEL_TTL,
    include_state: bool = True,
    errors: str = "raise",
    **options: Any,
) -> Any:
    """The snapshots of the rows of ``df`` (a pandas DataFrame of prediction events, columns named
    as in contract section 2 or remapped by ``fields``, as ``--field``), one row per snapshot.

    Parameters mirror ``replay``'s flags: ``task``, ``window``/``slide``/``grace`` (``"60s"`` or
    seconds), ``threshold``, ``classes`` (multiclass), ``labels`` (the labels task's label set),
    ``ts_unit`` (``s``, ``ms``, ``us``, ``ns``: numeric ``ts``), ``label_events`` (a DataFrame of
    ``{id, y_true, ts}``: delayed labels, merged by ``ts`` as ``replay --labels``) and
    ``label_ttl``. Columns of the result: the key's (``model``, ``segment``), ``window_start``,
    ``window_end`` (epoch seconds), ``revision``, ``final``, ``count``, ``late``, one per scalar
    metric, and ``snapshot`` (the JSON line). ``errors``: ``"raise"`` (a ValueError naming the
    row and field) or ``"skip"``. Other keywords are
    :class:`~streammetrics.stream.pipeline.PipelineConfig` fields (``references=``
    ``load_references(path)``, ``cumulative=True``, ``max_keys=``, ...).
    """
    import pandas as pd

    if errors not in ("raise", "skip"):
        raise ValueError(f"errors must be 'raise' or 'skip', got {errors!r}")
    scale = ts_scale(ts_unit)
    known = {f.name for f in dataclasses.fields(PipelineConfig)} - set(_SET_HERE)
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"replay_frame: unknown option {unknown[0]!r}; PipelineConfig fields: {sorted(known)}")
    config = PipelineConfig(**options,
        task=task, window=parse_duration(window, "window"),
        slide=None if slide is None else parse_duration(slide, "slide"), grace=parse_duration(grace, "grace"),
        threshold=threshold, classes=None if classes is None else list(classes),
        labels=None if labels is None else list(labels), fields=dict(fields or {}), include_state=include_state,
        label_ttl=parse_duration(label_ttl, "label_ttl"),
    )
    pipeline = Pipeline(config)  # configuration errors raise here, naming the parameter
    names = pipeline.parser.fields
    _check_frame(df, "df", names, task, delayed=label_events is not None)
    if label_events is not None:
        _check_frame(label_events, "label_events", names, task, labels_only=True)

    lines: list[str] = []
    rejected: dict[str, int] = {}

    def on_problem(where: Any, problem: Problem) -> None:
        if problem.code == "late" or problem.code in EXPIRY_CODES:
            return
        if errors == "raise":
            raise ValueError(f"replay_frame: {where}: {problem.reason}")  # reasons name their field
        rejected[problem.code] = rejected.get(problem.code, 0) + 1

    ts_name = names["ts"]
    try:
        if label_events is None:
            replay_lines(frame_rows(df, ts_name, scale), pipeline, lines.append, decoded=True, first_line=0,
                         on_problem=lambda i, problem: on_problem(f"row {i}", problem))
        else:
            parse = pipeline.parser.parse_decoded
            replay_merged([Source("row", frame_rows(df, ts_name, scale), parse, 0),
                           Source("label_events row", frame_rows(label_events, ts_name, scale), parse, 0)],
                          pipeline, lines.append, ReplayStats(),
                          lambda where, problem: on_problem(where.replace(":", " "), problem))
    finally:
        pipeline.close()
    out = _frame(pd, lines)
    out.attrs["rejected"] = rejected
    return out


def _check_frame(df: Any, what: str, names: Mapping[str, str], task: str, delayed: bool = False,
                 labels_only: bool = False) -> None:
    """ValueError (one line, naming the column) unless ``df`` has the columns its events need."""
    columns = getattr(df, "columns", None)
    if columns is None or not hasattr(df, "items"):
        raise ValueError(f"replay_frame: {what} must be a pandas DataFrame, got {type(df).__name__}")
    have = {str(c) for c in columns}
    need = ["ts", "id", "y_true"] if labels_only else ["ts", "model", _PREDICTION[task]]
    if not labels_only and not delayed and names["id"] not in have:
        need.append("y_true")  # without ids, every prediction carries its label
    for field in need:
        if names[field] not in have:
            remap = "" if names[field] == field else f" (fields maps {field!r} to it)"
            raise ValueError(f"replay_frame: {what} has no column {names[field]!r}{remap}; "
                             f"columns: {sorted(have)[:20]}")


def _frame(pd: Any, lines: list[str]) -> Any:
    rows = []
    metric_names: dict[str, None] = {}
    key_names: dict[str, None] = {}
    for line in lines:
        snap = json.loads(line)
        row: dict[str, Any] = dict(snap.get("key") or {})
        key_names.update(dict.fromkeys(row))
        window = snap.get("window") or {}
        row["window_start"], row["window_end"] = window.get("start"), window.get("end")
        for name in FRAME_COLUMNS[2:]:
            row[name] = snap.get(name)
        for name, value in (snap.get("metrics") or {}).items():
            if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
                if name not in row:
                    row[name] = value
                    metric_names[name] = None
        row["snapshot"] = line
        rows.append(row)
    columns = [*key_names, *FRAME_COLUMNS, *(m for m in metric_names if m not in key_names), "snapshot"]
    return pd.DataFrame(rows, columns=columns)
