"""``RegressionMonitor``: numeric truth and prediction (``y_true``, ``y_pred``)."""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from streammetrics.core.state import Field, describe
from streammetrics.core.validation import check_number, check_weight
from streammetrics.events.parser import Event
from streammetrics.kernels.exact_sum import BUFFER, ExactSum, fold_sums
from streammetrics.metrics.regression import Regression, fold_many
from streammetrics.monitors.base import Monitor, batch_weights, json_number, part

__all__ = ["RegressionMonitor"]

#: an exact sum's units per 1.0 (kernels.exact_sum: units of 2**-1074)
_UNIT = 1 << 1074


def _decode_weight(raw: tuple, m: Any, loaded: Mapping[str, Any]) -> ExactSum:
    value, residue = raw
    if type(value) not in (int, float) or not value >= 0:
        raise ValueError(f"prediction_weight must be a non-negative number, got {describe(value)}")
    return ExactSum.from_parts(float(value), residue, "prediction_weight")


def _decode_sum(raw: tuple, m: Any, loaded: Mapping[str, Any]) -> ExactSum | None:
    value, residue = raw
    if value is None:
        return None
    if value in _OVERFLOWED and residue is None:  # only its float survives (see _encode)
        out = ExactSum()
        out._special = float(value)
        return out
    if type(value) not in (int, float):
        raise ValueError(f"must be null, a number or one of {sorted(_OVERFLOWED)}, got {describe(value)}")
    return ExactSum.from_parts(float(value), residue, "prediction_sum")


#: an overflowed sum's value as written (huge ``w * y_pred``: |sum| beyond the float range)
_OVERFLOWED = {"inf", "-inf", "nan"}


def _encode(v: ExactSum | None, m: Any) -> tuple:
    """The rounded sum and the rest of its exact expansion (null when none; kernels.exact_sum);
    a sum beyond the float range as ``'inf'``, ``'-inf'`` or ``'nan'`` (JSON has no such
    numbers), without residue, as ScoreDistribution writes its score sum."""
    if v is None:
        return None, None
    value = v.value
    if not math.isfinite(value):
        return repr(value), None
    return value, (v.residue() or None)


def _migrate_v2(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 2 had float sums: taken as exact (no residues)."""
    return {**state, "prediction_weight_residue": None, "prediction_sum_residue": None}


def _migrate_v1(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 1 (``regression`` only) to version 2: counts from the regression state; the
    prediction sum was not kept (``null``: ``mean_prediction`` stays None for such state)."""
    reg = state["regression"]
    if not isinstance(reg, Mapping) or not isinstance(reg.get("state"), Mapping):
        raise ValueError("state['regression'] must be an accumulator dict")
    return {"count": reg["state"]["count"], "prediction_weight": reg["state"]["weight"],
            "prediction_sum": None, "regression": reg}


def _value(fn: Callable[[], float]) -> float | None:
    """:func:`~streammetrics.monitors.base.quiet` without its own warnings context (the caller's)."""
    try:
        return json_number(fn())
    except (ValueError, ZeroDivisionError):
        return None


class RegressionMonitor(Monitor):
    """Numeric truth and prediction. Label-free part: ``count``, ``total_weight`` and
    ``mean_prediction`` (weighted). Label-based part: ``mse``, ``rmse``, ``mae``, ``r2``,
    ``rmsle`` (None once a value <= -1 was seen), ``mape``, ``max_error``.

    >>> m = RegressionMonitor().update({"y_true": 3.0, "y_pred": 2.5}).update({"y_true": 1.0, "y_pred": 1.5})
    >>> s = m.snapshot()
    >>> s["mae"], s["mean_prediction"]
    (0.5, 2.0)
    """

    type_name = "RegressionMonitor"
    task = "regression"
    parts = ("regression",)
    fields = ("y_true", "y_pred", "weight")
    #: version 3: exact prediction weight and sum (``*_residue``); versions 1 and 2 load
    version = 3
    migrations = {1: _migrate_v1, 2: _migrate_v2}
    state_fields = (
        Field("count", lambda m: 0, "count", attrs="_pcount"),
        # exact sums (kernels.exact_sum): the rounded value and the rest of its expansion
        Field(("prediction_weight", "prediction_weight_residue"), lambda m: ExactSum(), attrs="_ptotal",
              merge=lambda a, b, m: a.merge(b), copy=lambda v: v.copy(), encode=_encode, decode=_decode_weight),
        # sum of weight * y_pred (None: unknown, state from a version-1 dict)
        Field(("prediction_sum", "prediction_sum_residue"), lambda m: ExactSum(), attrs="_psum",
              merge=lambda a, b, m: None if a is None or b is None else a.merge(b),
              copy=lambda v: None if v is None else v.copy(), encode=_encode, decode=_decode_sum),
        part("regression", lambda m: Regression()),
    )

    _pcount: int
    _ptotal: ExactSum
    _psum: ExactSum | None
    regression: Regression

    def __init__(self) -> None:
        self.reset()

    @property
    def count(self) -> int:  # type: ignore[override]  # read-only: predictions seen
        return self._pcount

    @property
    def total_weight(self) -> float:  # type: ignore[override]  # read-only: weight of the predictions
        return self._ptotal.value

    def update_prediction(self, event: Event) -> "RegressionMonitor":
        p = check_number(event.y_pred, "y_pred")
        w = check_weight(event.weight)
        self._pcount += 1
        self._ptotal.add(w)
        if self._psum is not None:
            self._psum.add(w * p)
        return self

    def update_predictions(self, events: Sequence[Event]) -> "RegressionMonitor":
        n = len(events)
        p = np.fromiter([e.y_pred for e in events], dtype=np.float64, count=n)
        w = batch_weights(events)
        if not np.isfinite(p).all():
            raise ValueError("y_pred must be finite")
        self._pcount += n
        if w is None:
            self._ptotal.add_units(n * _UNIT)  # (n ones, exactly)
        else:
            self._ptotal.add_array(w)
        psum = self._psum
        if psum is not None:
            if w is None and len(psum.terms) + n <= BUFFER:  # buffered as update() does (see snapshot_many)
                psum.terms += p.tolist()
            else:
                psum.add_array(p if w is None else w * p)
        return self

    def update_outcome(self, event: Event) -> "RegressionMonitor":
        self.regression.update(event.y_true, event.y_pred, event.weight)
        return self

    def update_outcomes(self, events: Sequence[Event]) -> "RegressionMonitor":
        n = len(events)
        y = np.fromiter([e.y_true for e in events], dtype=np.float64, count=n)
        p = np.fromiter([e.y_pred for e in events], dtype=np.float64, count=n)
        self.regression.update_many(y, p, batch_weights(events))
        return self

    def update_event(self, event: Event) -> "RegressionMonitor":
        self.regression.update(event.y_true, event.y_pred, event.weight)  # validates the event first
        return self.update_prediction(event)

    def update_events(self, events: Sequence[Event]) -> "RegressionMonitor":
        self.update_outcomes(events)  # validates the whole batch first
        return self.update_predictions(events)

    #: the snapshot metrics with an interval (``r2``: always null, see ``Regression.interval``)
    interval_metrics = ("mse", "mae", "r2", "rmse")

    def intervals(self, confidence: float | None = None,
                  metrics: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The snapshot's ``intervals`` of ``mse``, ``mae``, ``r2`` and ``rmse`` (``Regression.interval``),
        None without labelled events."""
        from streammetrics.kernels.intervals import check_confidence, pairs_record

        c = self.confidence if confidence is None else check_confidence(confidence)
        r = self.regression
        if not r.count:
            return None
        return pairs_record({name: r.interval(name, c) for name in self.interval_metrics}, c)

    def snapshot(self) -> dict[str, Any]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return self._metrics()

    def _metrics(self) -> dict[str, Any]:
        """:meth:`snapshot` inside the caller's ``warnings.catch_warnings`` (undefined: None)."""
        r = self.regression
        total = self._ptotal.value
        return {
            "count": self.count,
            "total_weight": json_number(total),
            "mse": _value(r.mse),
            "rmse": _value(r.rmse),
            "mae": _value(r.mae),
            "r2": _value(r.r2),
            "rmsle": _value(r.rmsle),
            "mape": _value(r.mape),
            "max_error": _value(r.max_error),
            "mean_prediction": json_number(self._psum.value / total) if self._psum is not None and total > 0 else None,
        }

    #: small closed windows are built together (:meth:`snapshot_many`)
    snapshots_together = True

    @classmethod
    def snapshot_many(cls, monitors: Sequence[Any], include_state: bool = True) -> list[tuple[Any, ...]]:
        """:meth:`Monitor.snapshot_many`: the exact sums of every window's buffered events folded in
        one vectorised pass (:func:`~streammetrics.metrics.regression.fold_many`, the prediction sums
        by :func:`~streammetrics.kernels.exact_sum.fold_sums`), then each
        window's record by its own methods; the same records.

        >>> a = RegressionMonitor().update_many([{"y_true": 1.0, "y_pred": 1.5}, {"y_true": 2.0, "y_pred": 2.5}])
        >>> RegressionMonitor.snapshot_many([a])[0] == (a.snapshot(), a.to_dict(), a.intervals())
        True
        """
        from streammetrics.kernels.intervals import MIN_MEAN_EVENTS, MIN_R2_EVENTS, pairs_record

        fold_many([m.regression for m in monitors])
        fold_sums([m._psum for m in monitors if m._psum is not None])  # (the buffered prediction sums at once)
        out = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for m in monitors:
                metrics = m._metrics()
                r = m.regression
                n = r.effective_events() if r.count else None
                if n is not None and n < min(MIN_MEAN_EVENTS, MIN_R2_EVENTS):  # (every interval's minimum rule)
                    record = pairs_record(dict.fromkeys(m.interval_metrics), m.confidence)
                else:
                    record = m.intervals(metrics=metrics)
                out.append((metrics, m.to_dict() if include_state else None, record))
        return out
