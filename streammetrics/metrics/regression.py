"""Regression errors over a stream: MSE, RMSE, MAE, R², RMSLE, MAPE and max error.

Each metric equals the scikit-learn function of the same name on the same events
(``sklearn.metrics.mean_squared_error``, ``root_mean_squared_error``,
``mean_absolute_error``, ``r2_score``, ``root_mean_squared_log_error``,
``mean_absolute_percentage_error``, ``max_error``), with sample weights.

State (all mergeable by addition except where noted), with ``d = y_true - y_pred``::

    W   = Σ w                       sse = Σ w·d²           sae = Σ w·|d|
    sle = Σ w·(log1p y_true - log1p y_pred)²                ape = Σ w·|d| / max(|y_true|, eps)
    max_error = max |d| over events with w > 0              log_invalid = #events with a value <= -1
    mean, m2  = weighted mean and Σ w·(y_true - mean)² of y_true

``mean``/``m2`` use the weighted Welford update (West 1979) and the pairwise combination
of Chan, Golub & LeVeque (1979), ``m2 = m2_a + m2_b + δ²·W_a·W_b/W``; the mean is kept as
an unevaluated sum of two floats (``hi + lo``, "double-double") so that data with a large
offset (1e9 + noise) keeps full precision: the naive ``Σw·y² - (Σw·y)²/W`` loses all of it.
R² = 1 - sse/m2, with scikit-learn's ``force_finite`` rule.

Conventions (documented divergences from scikit-learn, which raises on these):

* no events, or only zero-weight events: every metric is ``nan`` with an
  :class:`~streammetrics.core.exceptions.UndefinedMetricWarning` (scikit-learn raises
  ``ValueError`` on empty input or all-zero weights; a stream is legitimately empty);
* ``max_error`` ignores zero-weight events (scikit-learn's ``max_error`` takes no weights;
  with unit weights the two are equal, in general ours is ``max_error`` of the events
  whose weight is positive);
* constant ``y_true``: m2 is exactly 0, so R² follows scikit-learn's documented rule
  (1.0 if predictions are perfect, else 0.0; or nan/-inf with ``force_finite=False``),
  where scikit-learn's two-pass mean can leave rounding noise (e.g. ``r2_score([.1]*3,
  [.2, .1, .1])`` is -1.7e31 in scikit-learn and 0.0 here).

Like scikit-learn, ``rmsle`` raises ``ValueError`` when any event (of any weight) has a
value <= -1; such events are counted, the other metrics keep working, and the count
survives ``merge`` and ``to_dict``.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Mapping

import numpy as np

from streammetrics.core.accumulator import Accumulator
from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.core.state import Field, describe
from streammetrics.core.validation import (
    as_float_array,
    as_weight_array,
    check_number,
    check_same_length,
    check_weight,
)

__all__ = ["Regression"]

#: scikit-learn's MAPE floor for |y_true|: ``np.finfo(np.float64).eps``
EPS = float(np.finfo(np.float64).eps)
_INF = math.inf
_log1p = math.log1p
_sqrt = math.sqrt

_R2_FEW = "R^2 score is not well-defined with less than two samples."
_RMSLE_INVALID = (
    "Root Mean Squared Logarithmic Error cannot be used when targets contain values "
    "less than or equal to -1 ({n} such event(s) seen)."
)


def _two_sum(a: float, b: float) -> tuple[float, float]:
    """Knuth's TwoSum: ``s + e == a + b`` exactly, ``s = fl(a + b)``."""
    s = a + b
    bp = s - a
    return s, (a - (s - bp)) + (b - bp)


def _combine_moments(
    wa: float, ha: float, la: float, ma: float, wb: float, hb: float, lb: float, mb: float
) -> tuple[float, float, float, float]:
    """Chan et al. combination of (weight, mean = h + l, m2) of two disjoint parts.

    Operands are put in a canonical order first, so the result is bitwise symmetric.
    """
    if wb == 0.0:
        return wa, ha, la, ma
    if wa == 0.0:
        return wb, hb, lb, mb
    if (wa, ha, la, ma) > (wb, hb, lb, mb):
        wa, ha, la, ma, wb, hb, lb, mb = wb, hb, lb, mb, wa, ha, la, ma
    w = wa + wb
    frac = wb / w
    delta = (hb - ha) + (lb - la)
    hi, err = _two_sum(ha, delta * frac)
    lo = la + err
    h = hi + lo
    return w, h, lo - (h - hi), ma + mb + delta * delta * (wa * frac)


def _enc(x: float) -> float | str:
    """JSON-safe float: non-finite values (only reachable by overflow) become strings."""
    return x if math.isfinite(x) else repr(x)  # 'inf', '-inf', 'nan'


def _dec(value: Any, name: str, *, nonneg: bool = True) -> float:
    if value.__class__ is bool or not isinstance(value, (int, float, str)):
        raise ValueError(f"state {name!r} must be a number, got {value!r:.80}")
    if isinstance(value, str):
        if value not in ("inf", "nan") and (nonneg or value != "-inf"):
            raise ValueError(f"state {name!r} must be a number, got {value!r:.80}")
    x = float(value)
    if nonneg and x < 0:
        raise ValueError(f"state {name!r} must be non-negative, got {x!r}")
    return x


def _dec_int(value: Any, name: str) -> int:
    if value.__class__ is not int or value < 0:
        raise ValueError(f"state {name!r} must be a non-negative int, got {value!r:.80}")
    return value


def _undefined(metric: str, reason: str) -> float:
    warnings.warn(f"{metric} is undefined: {reason}; returning nan.", UndefinedMetricWarning, stacklevel=3)
    return math.nan


# ----------------------------------------------------------------------------- declared state
def _decode_mean(raw: Any, acc: Any, loaded: Mapping[str, Any]) -> tuple[float, float]:
    if not isinstance(raw, list) or len(raw) != 2:
        raise ValueError(f"must be a list [hi, lo], got {describe(raw)}")
    return _dec(raw[0], "mean", nonneg=False), _dec(raw[1], "mean", nonneg=False)


def _decode_moments(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> tuple:
    weight, mean, m2 = raw
    w = _dec(weight, "weight")
    hi, lo = _decode_mean(mean, acc, loaded)
    return w, hi, lo, _dec(m2, "m2")


def _merge_moments(mine: tuple, theirs: tuple, acc: Any) -> tuple:
    return _combine_moments(*mine, *theirs)


def _float_field(key: str) -> Field:
    """A non-negative float sum (JSON: non-finite values, reachable by overflow, as strings)."""
    return Field(key, lambda acc: 0.0, "weight", encode=lambda v, acc: _enc(v),
                 decode=lambda raw, acc, ld: _dec(raw, key))


_REGRESSION_STATE = (
    Field("count", lambda acc: 0, "count", attrs="count", decode=lambda raw, acc, ld: _dec_int(raw, "count")),
    # (total weight, weighted mean as hi + lo, m2): Chan et al.'s combination on merge
    Field(("weight", "mean", "m2"), lambda acc: (0.0, 0.0, 0.0, 0.0), attrs=("total_weight", "_hi", "_lo", "_m2"),
          merge=_merge_moments, copy=tuple,
          encode=lambda v, acc: (_enc(v[0]), [_enc(v[1]), _enc(v[2])], _enc(v[3])), decode=_decode_moments),
    _float_field("sse"),
    _float_field("sae"),
    _float_field("sle"),
    _float_field("ape"),
    Field("max_error", lambda acc: 0.0, "weight", merge=lambda a, b, acc: b if b > a else a,
          encode=lambda v, acc: _enc(v), decode=lambda raw, acc, ld: _dec(raw, "max_error")),
    # events with a value <= -1 (RMSLE undefined)
    Field("log_invalid", lambda acc: 0, "count", decode=lambda raw, acc, ld: _dec_int(raw, "log_invalid")),
)


class Regression(Accumulator):
    """Mergeable regression errors of a stream of ``(y_true, y_pred, weight)`` events.

    >>> r = Regression().update_many([3, -0.5, 2, 7], [2.5, 0.0, 2, 8])
    >>> r.mse(), r.mae(), round(r.r2(), 4)
    (0.375, 0.5, 0.9486)
    """

    type_name = "Regression"
    state_fields = _REGRESSION_STATE

    # the declared state (see _REGRESSION_STATE)
    _hi: float
    _lo: float
    _m2: float
    _sse: float
    _sae: float
    _sle: float
    _ape: float
    _max_error: float
    _log_invalid: int

    __slots__ = (
        "count", "total_weight", "_hi", "_lo", "_m2", "_sse", "_sae", "_sle", "_ape",
        "_max_error", "_log_invalid",
    )

    def __init__(self) -> None:
        self.reset()

    def _check_state(self, loaded: dict[str, Any]) -> None:
        count, log_invalid = loaded["count"], loaded["log_invalid"]
        weight, hi, lo, _ = loaded["weight"]
        if log_invalid > count:
            raise ValueError(f"state 'log_invalid' ({log_invalid}) exceeds 'count' ({count})")
        if count == 0 and weight != 0.0:
            raise ValueError(f"state has no events but a total weight of {weight!r}")
        sums = [loaded[k] for k in ("sse", "sae", "sle", "ape", "max_error")] + [loaded["weight"][3]]
        if weight == 0.0 and (hi != 0.0 or lo != 0.0 or any(sums)):
            raise ValueError("state holds sums but no events of positive weight")

    # ------------------------------------------------------------------ updates
    def update(self, y_true: float, y_pred: float, weight: float = 1.0) -> "Regression":
        """Add one event (pure Python, O(1))."""
        # validate everything first (fast path for built-in floats)
        yt = y_true if y_true.__class__ is float and -_INF < y_true < _INF else check_number(y_true, "y_true")
        yp = y_pred if y_pred.__class__ is float and -_INF < y_pred < _INF else check_number(y_pred, "y_pred")
        w = weight if weight.__class__ is float and 0.0 <= weight < _INF else check_weight(weight)

        self.count += 1
        log_ok = yt > -1.0 and yp > -1.0
        if not log_ok:
            self._log_invalid += 1
        if w == 0.0:
            return self
        d = yt - yp
        ad = abs(d)
        self._sse += w * (d * d)
        self._sae += w * ad
        at = abs(yt)
        self._ape += w * (ad / (at if at > EPS else EPS))
        if log_ok:
            ld = _log1p(yt) - _log1p(yp)
            self._sle += w * (ld * ld)
        if ad > self._max_error:
            self._max_error = ad
        # weighted Welford step with a double-double mean (see _combine_moments)
        w0 = self.total_weight
        if w0 == 0.0:
            self.total_weight = w
            self._hi = yt
            self._lo = 0.0
            return self
        wt = w0 + w
        self.total_weight = wt
        frac = w / wt
        hi = self._hi
        lo = self._lo
        delta = (yt - hi) - lo
        inc = delta * frac
        s = hi + inc
        bp = s - hi
        lo += (hi - (s - bp)) + (inc - bp)
        hi = s + lo
        self._lo = lo - (hi - s)
        self._hi = hi
        self._m2 += delta * delta * (w0 * frac)
        return self

    def update_many(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> "Regression":
        """Add a batch (vectorised); the whole batch is validated before any state changes."""
        yt = as_float_array(y_true, "y_true")
        yp = as_float_array(y_pred, "y_pred")
        n = check_same_length(y_true=yt, y_pred=yp)
        w = as_weight_array(sample_weight, n)
        if n == 0:
            return self
        invalid = (yt <= -1.0) | (yp <= -1.0)
        n_invalid = int(np.count_nonzero(invalid))
        if w is not None:
            pos = w > 0.0
            if not pos.all():
                yt, yp, w, invalid = yt[pos], yp[pos], w[pos], invalid[pos]
        # from here on, every remaining event has a positive weight
        self.count += n
        self._log_invalid += n_invalid
        if len(yt) == 0:
            return self
        d = yt - yp
        ad = np.abs(d)
        ape = ad / np.maximum(np.abs(yt), EPS)
        ok = ~invalid
        ld = np.log1p(yt[ok]) - np.log1p(yp[ok]) if n_invalid else np.log1p(yt) - np.log1p(yp)
        if w is None:
            wb = float(len(yt))
            sse, sae, sape, sle = (float(np.sum(d * d)), float(np.sum(ad)), float(np.sum(ape)),
                                   float(np.sum(ld * ld)))
        else:
            wb = float(np.sum(w))
            sse, sae, sape = float(np.sum(w * (d * d))), float(np.sum(w * ad)), float(np.sum(w * ape))
            sle = float(np.sum((w[ok] if n_invalid else w) * (ld * ld)))
        hb, lb, mb = _batch_moments(yt, w, wb)
        self._sse += sse
        self._sae += sae
        self._ape += sape
        self._sle += sle
        mx = float(np.max(ad))
        if mx > self._max_error:
            self._max_error = mx
        self.total_weight, self._hi, self._lo, self._m2 = _combine_moments(
            self.total_weight, self._hi, self._lo, self._m2, wb, hb, lb, mb
        )
        return self

    # ------------------------------------------------------------------ removal
    def remove(self, y_true: float, y_pred: float, weight: float = 1.0) -> "Regression":
        """Undo one earlier ``update(y_true, y_pred, weight)``; returns ``self``.

        Not part of the accumulator protocol: it lets sliding windows (e.g. river's
        ``utils.Rolling``) subtract the event that leaves the window. With ``W' = W - w``
        and ``d = y_true - y_pred``: the sums lose the event's terms (``sse -= w·d²``,
        ... clamped at 0), and the Welford step is reversed exactly in exact arithmetic::

            mean' = mean - w·(y - mean)/W'        m2' = m2 - w·(W/W')·(y - mean)²

        (the mean kept as a double-double, as in :meth:`update`).

        Numerical caveat: the reversal subtracts, so it loses what the subtraction
        cancels: after removing values much larger than those that remain, the mean and
        m2 carry an absolute error of a few ulps of the removed terms (and so does R²);
        an m2 that falls to at most 1e-12 of its value before the removal is taken as
        rounding residue and set to 0 (constant remaining ``y_true``, as :meth:`update`
        computes it). When no weight is left every sum is reset exactly to 0, and an
        accumulator with no event left is a fresh one.

        ``max_error`` cannot be reversed: removing an event whose ``|d|`` equals the
        current maximum makes it unknown, stored as nan (``max_error()`` returns nan)
        until no positive-weight event is left or :meth:`reset`.

        ``ValueError`` (state unchanged) when the event cannot have been added: no event
        left, no event with a value <= -1 left for one that has such a value, a weight
        larger than the total weight (beyond a relative rounding tolerance of 1e-9), the
        last event leaving weight behind, or ``|d|`` above ``max_error``. The float sums are not checked: their rounding
        depends on the whole history of the stream.
        """
        yt = check_number(y_true, "y_true")
        yp = check_number(y_pred, "y_pred")
        w = check_weight(weight)
        log_ok = yt > -1.0 and yp > -1.0
        d = yt - yp
        ad = abs(d)
        at = abs(yt)
        ape = ad / (at if at > EPS else EPS)
        if log_ok:
            ld = _log1p(yt) - _log1p(yp)
            sle = w * (ld * ld)
        else:
            sle = 0.0
        reason = None
        if self.count == 0:
            reason = "no event is left"
        elif not log_ok and self._log_invalid == 0:
            reason = "no event with a value <= -1 is left"
        elif self.count == 1 and self.total_weight - w > 1e-9 * (self.total_weight + w):
            reason = f"it would be the last event, but weight {self.total_weight - w!r} would remain"
        elif w:
            tol = 1.0 + 1e-9
            if w > self.total_weight * tol:
                reason = f"its weight exceeds the total weight {self.total_weight!r}"
            elif ad > self._max_error:  # exact maxima; False when max_error is nan (unknown)
                reason = f"|y_true - y_pred| = {ad!r} exceeds max_error {self._max_error!r}"
        if reason is not None:
            raise ValueError(
                f"cannot remove an event (y_true={yt!r}, y_pred={yp!r}, weight={w!r}) that was "
                f"never added: {reason}"
            )
        # ---- nothing below can fail
        self.count -= 1
        if not log_ok:
            self._log_invalid -= 1
        if self.count == 0:
            self.reset()
            return self
        if w == 0.0:
            return self
        w0 = self.total_weight
        wt = w0 - w
        if wt <= 1e-12 * w0:  # no positive weight left: the sums of no event
            count, log_invalid = self.count, self._log_invalid
            self.reset()
            self.count, self._log_invalid = count, log_invalid
            return self
        self._sse = max(self._sse - w * (d * d), 0.0)
        self._sae = max(self._sae - w * ad, 0.0)
        self._ape = max(self._ape - w * ape, 0.0)
        self._sle = max(self._sle - sle, 0.0)
        if ad >= self._max_error:
            self._max_error = math.nan  # the maximum of the remaining events is unknown
        # reversed weighted Welford step on the double-double mean hi + lo
        hi = self._hi
        lo = self._lo
        delta = (yt - hi) - lo  # y - mean (after the event was added)
        inc = -(delta * (w / wt))
        s = hi + inc
        bp = s - hi
        lo += (hi - (s - bp)) + (inc - bp)
        hi = s + lo
        self._lo = lo - (hi - s)
        self._hi = hi
        m2 = self._m2
        new_m2 = m2 - delta * delta * (w * (w0 / wt))
        self._m2 = new_m2 if new_m2 > 1e-12 * m2 else 0.0
        self.total_weight = wt
        return self

    # ------------------------------------------------------------------ metrics
    def _mean_of(self, total: float, metric: str) -> float:
        if self.count == 0:
            return _undefined(metric, "no events")
        if self.total_weight == 0.0:
            return _undefined(metric, "all events have zero weight")
        return total / self.total_weight

    def mse(self) -> float:
        """Mean squared error Σw·d²/Σw (``sklearn.metrics.mean_squared_error``)."""
        return self._mean_of(self._sse, "mse")

    def rmse(self) -> float:
        """√MSE (``sklearn.metrics.root_mean_squared_error``)."""
        return _sqrt(self._mean_of(self._sse, "rmse"))

    def mae(self) -> float:
        """Mean absolute error Σw·|d|/Σw (``sklearn.metrics.mean_absolute_error``)."""
        return self._mean_of(self._sae, "mae")

    def mape(self) -> float:
        """Σw·|d|/max(|y_true|, eps) / Σw (``sklearn.metrics.mean_absolute_percentage_error``).

        A fraction, not a percentage; huge when y_true is 0 and y_pred is not (as in sklearn).
        """
        return self._mean_of(self._ape, "mape")

    def rmsle(self) -> float:
        """√(Σw·(log1p y_true - log1p y_pred)²/Σw) (``sklearn.metrics.root_mean_squared_log_error``).

        Raises ``ValueError`` if any event seen had ``y_true <= -1`` or ``y_pred <= -1``.
        """
        if self._log_invalid:
            raise ValueError(_RMSLE_INVALID.format(n=self._log_invalid))
        return _sqrt(self._mean_of(self._sle, "rmsle"))

    def max_error(self) -> float:
        """max |y_true - y_pred| over events with positive weight (``sklearn.metrics.max_error``)."""
        if self.count == 0:
            return _undefined("max_error", "no events")
        if self.total_weight == 0.0:
            return _undefined("max_error", "all events have zero weight")
        return self._max_error

    def r2(self, force_finite: bool = True) -> float:
        """Coefficient of determination 1 - Σw·d² / Σw·(y_true - ȳ)² (``sklearn.metrics.r2_score``).

        Fewer than two events (counting zero-weight ones, as sklearn does): nan and an
        ``UndefinedMetricWarning``. Zero denominator with ``force_finite=True``: 1.0 for
        perfect predictions, else 0.0; with ``force_finite=False``: nan (0/0) or -inf.
        """
        if self.count == 0:
            return _undefined("r2", "no events")
        if self.count < 2:
            warnings.warn(_R2_FEW, UndefinedMetricWarning, stacklevel=2)
            return math.nan
        if self.total_weight == 0.0:
            return _undefined("r2", "all events have zero weight")
        num, den = self._sse, self._m2
        if not force_finite:
            if den == 0.0:
                # numpy's 1 - num/0: nan for 0/0, -inf otherwise (sklearn also warns RuntimeWarning)
                warnings.warn(
                    "invalid value encountered in divide" if num == 0.0 else "divide by zero encountered in divide",
                    RuntimeWarning, stacklevel=2,
                )
                return math.nan if num == 0.0 else -_INF
            return 1.0 - num / den
        if num == 0.0:
            return 1.0
        if den == 0.0:
            return 0.0
        return 1.0 - num / den


def _batch_moments(y: np.ndarray, w: np.ndarray | None, wsum: float) -> tuple[float, float, float]:
    """(mean hi, mean lo, m2) of a batch with positive weights: corrected two-pass algorithm.

    m0 = Σw·y/W; r = y - m0; c = Σw·r/W (the rounding error of m0); m2 = Σw·(r - c)²;
    mean = m0 + c kept as a double-double. A constant batch gives m2 == 0 exactly.
    """
    lo_v, hi_v = float(np.min(y)), float(np.max(y))
    if lo_v == hi_v:
        return lo_v, 0.0, 0.0
    if w is None:
        m0 = float(np.sum(y)) / wsum
        r = y - m0
        c = float(np.sum(r)) / wsum
        rc = r - c
        m2 = float(np.sum(rc * rc))
    else:
        m0 = float(np.sum(w * y)) / wsum
        r = y - m0
        c = float(np.sum(w * r)) / wsum
        rc = r - c
        m2 = float(np.sum(w * (rc * rc)))
    hi, lo = _two_sum(m0, c)
    return hi, lo, m2
