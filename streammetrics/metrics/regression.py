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

Every sum is exact (:mod:`streammetrics.kernels.exact_sum`): the per-event path buffers
``(y_true, y_pred, weight)`` (at most 1,024 events), folded in one vectorised pass that computes
each event's terms with numpy (one formula for every path) and adds them exactly; ``mean`` and
``m2`` come from the exact ``Σw``, ``Σw·y`` and ``Σw·y²`` (products split exactly, Dekker's
TwoProduct; products that would fall below ``2**-1074``, and those of values or weights too
large for its split (an operand or product beyond ``2**990``), are summed as ints in units of
``2**-2148`` and ``2**-3222`` instead, the *fine sums*) as ``Σw·y / W`` and
``Σw·y² - (Σw·y)²/W``, evaluated exactly and rounded once - so the state is a function of
the multiset of events (any split, batching, merge order or removal gives the same bits)
and data with a large offset (1e9 + noise) keeps full precision.
R² = 1 - sse/m2, with scikit-learn's ``force_finite`` rule.

For the intervals (issue 26), exact sums of per-event terms computed once per event in float64
(the same formula on every path, summed exactly: order-free): the fourth moments R²'s delta
method needs, ``Σw·d⁴``, ``Σw·y³``, ``Σw·y⁴``, ``Σw·d²·y``, ``Σw·d²·y²`` (``exact_sums`` keys
``wd4``, ``wy3``, ``wy4``, ``wd2y``, ``wd2y2``; a state written before them loads without an R²
interval), and the squared weights ``Σw²`` (``ww``: Kish's effective sample size), written only
when some weight is not 1 (a state without it: unit weights when ``W`` equals the count).

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
from streammetrics.kernels.exact_sum import (
    BUFFER,
    ExactSum,
    add_rows,
    as_array,
    exact_units_rows,
    from_pair,
    to_pairs,
    two_product,
    units_of,
)

__all__ = ["ORDINARY", "Regression", "fold_many"]

#: scikit-learn's MAPE floor for |y_true|: ``np.finfo(np.float64).eps``
EPS = float(np.finfo(np.float64).eps)
_INF = math.inf
_sqrt = math.sqrt

_R2_FEW = "R^2 score is not well-defined with less than two samples."
_RMSLE_INVALID = (
    "Root Mean Squared Logarithmic Error cannot be used when targets contain values "
    "less than or equal to -1 ({n} such event(s) seen)."
)


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
#: the exact sums, in the order of the rows :func:`_terms` returns
_SUMS = ("weight", "wy", "wyy", "sse", "sae", "sle", "ape")
#: the exact sums behind R²'s interval (written while known), after :data:`_SUMS`' rows
_MOMENTS = ("wd4", "wy3", "wy4", "wd2y", "wd2y2")
#: the exact sum of squared weights (``w·|w|`` per event: a removal's negated weight subtracts)
_SQUARES = "ww"


def _terms(a: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Per-event terms of the rows ``(y_true, y_pred, weight)`` of ``a``, in :data:`_SUMS`
    order (``wy`` and ``wyy`` as exact products: 2 and 4 rows), and the mask of the rows whose
    products are *not* exact in float64 (:func:`_products_inexact`): their product terms are
    0 here and go to the fine sums instead. The same numpy formulas on every path, so a term
    depends only on its event."""
    yt, yp, w = a[:, 0].copy(), a[:, 1].copy(), a[:, 2].copy()
    d = yt - yp
    ad = np.abs(d)
    ape = ad / np.maximum(np.abs(yt), EPS)
    ok = (yt > -1.0) & (yp > -1.0)
    ld = np.log1p(np.where(ok, yt, 0.0)) - np.log1p(np.where(ok, yp, 0.0))
    fine = _products_inexact(w, yt)
    yt_p, w_p = (np.where(fine, 0.0, yt), np.where(fine, 0.0, w)) if fine.any() else (yt, w)
    p1, e1 = two_product(w_p, yt_p)
    p2, e2 = two_product(yt_p, yt_p)
    p3, e3 = two_product(w_p, p2)
    p4, e4 = two_product(w_p, e2)
    d2 = d * d
    return [w, p1, e1, p3, e3, p4, e4, w * d2, w * ad, w * (ld * ld), w * ape,
            w * (d2 * d2), w * (yt * yt * yt), w * ((yt * yt) * (yt * yt)), w * (d2 * yt), w * (d2 * (yt * yt)),
            w * np.abs(w)], fine


#: exponent floors (``math.frexp``) above which Dekker's TwoProduct of ``w * y``, ``y * y`` and
#: ``w * y**2`` (through ``y*y``'s error term, ~2**-105 of it) is exact: every partial product
#: a multiple of ``2**-1074`` (``e_a + e_b - 106 >= -1074``), with a margin
_FLOOR_WY, _FLOOR_YY, _FLOOR_WYY = -960, -960, -850
#: exponent ceiling: Dekker's split (``134217729 * a``) overflows to nan from ``|a| >= 2**996``
#: (``w``, ``y`` and ``y*y`` are split) and ``w*y``, ``w*y**2`` must stay finite, with a margin
_CEIL = 990


def _products_inexact(w: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Rows whose ``w*y`` or ``w*y**2`` may fall below ``2**-1074`` (tiny values or weights), or
    whose operands or products reach ``2**990`` (huge ones: the split would overflow to nan,
    e.g. ``w = 1e300, y = 0``): a function of the event alone, so the split between the float
    and the fine sums is too."""
    ew = np.frexp(w)[1]
    ey = np.frexp(y)[1]
    return ((ew + ey < _FLOOR_WY) | (2 * ey < _FLOOR_YY) | (ew + 2 * ey < _FLOOR_WYY)
            | (ew > _CEIL) | (2 * ey > _CEIL) | (ew + ey > _CEIL) | (ew + 2 * ey > _CEIL))


#: the fine sums' units: ``w*y`` is a multiple of ``2**-2148``, ``w*y**2`` of ``2**-3222``
_FINE_EXP = {"wy": 2148, "wyy": 3222}


def _fine_units(w: float, y: float) -> tuple[int, int]:
    """``w*y`` in units of ``2**-2148`` and ``w*y**2`` in units of ``2**-3222``, exactly."""
    nw, dw = w.as_integer_ratio()  # dw, dy: powers of two <= 2**1074
    ny, dy = y.as_integer_ratio()
    kw, ky = dw.bit_length() - 1, dy.bit_length() - 1
    return (nw * ny) << (2148 - kw - ky), (nw * ny * ny) << (3222 - kw - 2 * ky)


def _fine_pairs(units: int, exp: int) -> list[list[int]] | None:
    """``units * 2**-exp`` as canonical ``[m, e]`` int pairs (53-bit chunks, low first,
    zero chunks left out); None for 0."""
    if not units:
        return None
    sign, rest, e, out = (-1 if units < 0 else 1), abs(units), -exp, []
    while rest:
        m = rest & _CHUNK_MASK
        if m:
            out.append([sign * m, e])
        rest >>= 53
        e += 53
    return out


def _fine_from_pairs(raw: Any, exp: int, name: str) -> int:
    """The units of :func:`_fine_pairs`; ``ValueError`` unless ``raw`` is its canonical form."""
    if not isinstance(raw, list) or not 1 <= len(raw) <= _FINE_PAIRS_MAX or not all(
            isinstance(p, list) and len(p) == 2 and p[0].__class__ is int and p[1].__class__ is int
            and 0 < abs(p[0]) <= _CHUNK_MASK and 0 <= p[1] + exp <= 53 * _FINE_PAIRS_MAX for p in raw):
        raise ValueError(f"exact_sums.{name} must be a list of [mantissa, exponent] int pairs, got {describe(raw)}")
    units = sum(m << (e + exp) for m, e in raw)
    if _fine_pairs(units, exp) != raw:
        raise ValueError(f"exact_sums.{name} is not the canonical form of its sum: {raw!r:.120}")
    return units


_FINE_KEYS = {f"{k}_fine" for k in _FINE_EXP}
_CHUNK_MASK = (1 << 53) - 1
#: the longest fine sum written: 53 * 128 bits (2**6784 units), beyond what the largest products
#: (``w*y**2 < 2**3072``: ``2**6294`` units of ``2**-3222``) can sum to in ``2**490`` events
_FINE_PAIRS_MAX = 128


class _Sums:
    """The exact sums of :data:`_SUMS`, the per-event buffer (flat ``y_true, y_pred, w``) and
    the fine sums: ``w*y`` and ``w*y**2`` of the events whose products are not exact in float64
    (:func:`_products_inexact`), as ints in units of ``2**-2148`` and ``2**-3222``."""

    __slots__ = ("buffer", "sums", "fine", "unknown", "_moments")

    def __init__(self) -> None:
        self.buffer: list[float] = []
        self.sums = {k: ExactSum() for k in (*_SUMS, *_MOMENTS, _SQUARES)}
        self.fine = {"wy": 0, "wyy": 0}
        #: the groups of sums a loaded state did not carry ("moments", "squares"): unknown
        self.unknown: frozenset[str] = frozenset()
        #: (the sums moments() read, its result): the last one, kept while they stay the same
        self._moments: tuple = ((), ())

    def fold(self) -> "_Sums":
        if self.buffer:
            self.add(as_array(self.buffer).reshape(-1, 3))
            self.buffer.clear()
        return self

    def targets(self) -> list[ExactSum]:
        """The sums :func:`_terms`' rows go to, in order (a sum named twice receives both rows)."""
        s = self.sums
        return [s["weight"], s["wy"], s["wy"], s["wyy"], s["wyy"], s["wyy"], s["wyy"],
                s["sse"], s["sae"], s["sle"], s["ape"], *(s[k] for k in _MOMENTS), s[_SQUARES]]

    def add(self, rows: np.ndarray) -> None:
        """Add events given as rows ``(y_true, y_pred, weight)`` exactly."""
        targets = self.targets()
        terms, fine = _terms(rows)
        add_rows(targets, terms)
        if fine.any():
            for yt, w in rows[fine][:, [0, 2]].tolist():
                wy, wyy = _fine_units(w, yt)
                self.fine["wy"] += wy
                self.fine["wyy"] += wyy

    def get(self, key: str) -> ExactSum:
        return self.fold().sums[key]

    def value(self, key: str) -> float:
        return self.get(key).value

    def merge(self, other: "_Sums") -> "_Sums":
        self.fold()
        for k, v in other.fold().sums.items():
            self.sums[k].merge(v)
        for k, u in other.fine.items():
            self.fine[k] += u
        self.unknown |= other.unknown
        return self

    def copy(self) -> "_Sums":
        out = _Sums()
        out.sums = {k: v.copy() for k, v in self.fold().sums.items()}
        out.fine = dict(self.fine)
        out.unknown = self.unknown
        return out

    def moments(self) -> tuple[float, float, float, float]:
        """``(W, mean hi, mean lo, m2)``: ``mean = Σw·y / W`` (hi + lo, each correctly rounded)
        and ``m2 = Σw·y² - (Σw·y)²/W``, exact then rounded (0 when ``W`` is 0, and when ``W``
        is beyond the float range: only its float, inf, is written, so a loaded state reads so)."""
        special = [self.get(k)._special for k in ("weight", "wy", "wyy")]
        key = (*(self.get(k).units for k in ("weight", "wy", "wyy")), *special, self.fine["wy"], self.fine["wyy"])
        if self._moments[0] != key:  # (a snapshot and its state read them: computed once)
            self._moments = (key, self._moments_of(special))
        return self._moments[1]

    def _moments_of(self, special: list[float]) -> tuple[float, float, float, float]:
        """:meth:`moments`, computed (``special``: the overflowed floats of W, Σw·y and Σw·y²)."""
        w, total = self.get("weight").units, self.get("weight").value
        if w <= 0 or special[0] or total == _INF:
            return total if w > 0 or special[0] else 0.0, 0.0, 0.0, 0.0
        if special[1]:  # an overflowed term (|w·y| beyond the float range)
            return _ratio(w, 1 << 1074), special[1], 0.0, math.inf
        # Σw·y in units of 2**-2148 and Σw·y² in units of 2**-3222 (W: units of 2**-1074)
        wy = (self.get("wy").units << 1074) + self.fine["wy"]
        wyy = (self.get("wyy").units << 2148) + self.fine["wyy"]
        hi = _ratio(wy, w << 1074)
        lo = _ratio(wy - units_of(hi) * w, w << 1074) if math.isfinite(hi) else 0.0
        m2 = math.inf if special[2] else _ratio(max(wyy * w - wy * wy, 0), w << 3222)
        return _ratio(w, 1 << 1074), hi, lo, m2


#: values and weights below this (in magnitude) are *ordinary*: no term of :func:`_terms` can
#: overflow (``w d^4 < 2**854``), so computing them warns of nothing, whenever it happens
ORDINARY = 2.0**200


def fold_many(accumulators: list["Regression"]) -> None:
    """Fold the per-event buffers of many accumulators (a window engine's small windows) in one
    vectorised pass: :func:`_terms` of all their events at once (a term depends only on its
    event), then every exact sum of every accumulator by one ``exact_units_rows`` over rows
    zero-padded to the longest buffer (zeros add nothing to an exact sum). The same state as
    folding each alone. Only buffers of :data:`ORDINARY` values take part (the others fold when
    first read, as before, so that numpy's warnings about them come at the same time); with
    terms that are not exact products (fine sums) each buffer folds alone."""
    sums = [acc._sums for acc in accumulators if acc._sums.buffer]
    if not sums:
        return
    sizes = [len(v.buffer) // 3 for v in sums]
    rows = as_array([x for v in sums for x in v.buffer]).reshape(-1, 3)
    top = np.abs(rows).max(axis=1)
    starts = np.cumsum([0, *sizes[:-1]])
    keep = (np.maximum.reduceat(top, starts) < ORDINARY).tolist()  # (nan compares false)
    if not all(keep):
        chosen = [i for i, k in enumerate(keep) if k]
        rows = np.concatenate([rows[starts[i]:starts[i] + sizes[i]] for i in chosen]) if chosen else rows[:0]
        sums, sizes = [sums[i] for i in chosen], [sizes[i] for i in chosen]
        starts = np.cumsum([0, *sizes[:-1]])
    if len(sums) < 2:
        for v in sums:
            v.fold()
        return
    terms, fine = _terms(rows)
    if fine.any():
        for v in sums:
            v.fold()
        return
    width, n = max(sizes), len(sums)
    column = np.arange(len(rows)) - np.repeat(starts, sizes)
    padded = np.zeros((len(terms), n, width))
    padded[:, np.repeat(np.arange(n), sizes), column] = np.stack(terms)
    units = exact_units_rows(padded.reshape(len(terms) * n, width))
    for i, v in enumerate(sums):
        for target, u in zip(v.targets(), units[i::n]):
            target.add_units(u)
        v.buffer.clear()


#: the smallest positive float, 2**-1074: the unit of the exact sums
_TINY = 5e-324


def _ratio(num: int, den: int) -> float:
    """``num / den`` correctly rounded; +-inf beyond the float range."""
    try:
        return num / den
    except OverflowError:
        return math.inf if num > 0 else -math.inf


_UNIT = 1 << 1074  # units of an exact sum per 1.0


def acc_count(acc: Any) -> int:
    """The events of the accumulator being encoded (-1 without one: a migration's rewrite)."""
    return -1 if acc is None else acc.count


def _encode_sums(v: _Sums, acc: Any) -> tuple:
    w, hi, lo, m2 = v.moments()
    values = [v.value(k) for k in ("sse", "sae", "sle", "ape")]
    exact: dict[str, list[list[int]] | None] = {}
    written = list(_SUMS)
    if "moments" not in v.unknown:
        written += _MOMENTS
    square = v.get(_SQUARES)
    if "squares" not in v.unknown and not (square.units == v.get("weight").units == acc_count(acc) * _UNIT
                                           and math.isfinite(square.value)):
        written.append(_SQUARES)  # (unit weights: the sum of squares is the count, not written)
    # each exact sum's canonical expansion as [m, e] pairs (one pass for all); None: overflowed (inf)
    expansions: dict[str, list[float] | None] = {}
    for k in written:
        e = v.get(k).expansion()
        expansions[k] = e if all(map(math.isfinite, e)) and not v.get(k)._special else None
    pairs = to_pairs([c for x in expansions.values() if x is not None for c in x])
    at = 0
    for k, x in expansions.items():
        exact[k] = None if x is None else pairs[at:at + len(x)]
        at += 0 if x is None else len(x)
    for k, u in v.fine.items():  # only when events with underflowing products were seen
        if u:
            exact[f"{k}_fine"] = _fine_pairs(u, _FINE_EXP[k])
    return (_enc(w), [_enc(hi), _enc(lo)], _enc(m2), *map(_enc, values), exact)


def _decode_sums(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> _Sums:
    weight, mean, m2, sse, sae, sle, ape, exact = raw
    given: dict[str, Any] = {"weight": _dec(weight, "weight"), "mean": _decode_mean(mean),
             "m2": _dec(m2, "m2"), "sse": _dec(sse, "sse"), "sae": _dec(sae, "sae"),
             "sle": _dec(sle, "sle"), "ape": _dec(ape, "ape")}
    optional = _FINE_KEYS | set(_MOMENTS) | {_SQUARES}
    if not isinstance(exact, Mapping) or not set(_SUMS) <= set(exact) <= set(_SUMS) | optional:
        raise ValueError(f"exact_sums must map {list(_SUMS)} (and optionally {sorted(optional)}) "
                         f"to expansions, got {describe(exact)}")
    moments = [k for k in _MOMENTS if k in exact]
    if moments and len(moments) != len(_MOMENTS):
        raise ValueError(f"exact_sums must hold all of {list(_MOMENTS)} or none, got {moments}")
    out = _Sums()
    for k, e in _FINE_EXP.items():
        if f"{k}_fine" in exact:
            out.fine[k] = _fine_from_pairs(exact[f"{k}_fine"], e, f"{k}_fine")
    for k in (*_SUMS, *moments, *([_SQUARES] if _SQUARES in exact else [])):
        if exact[k] is None:  # an overflowed sum: only its float survives
            out.sums[k] = ExactSum()
            out.sums[k]._special = given[k] if k in given and not math.isfinite(given[k]) else math.inf
        else:
            pairs = exact[k]
            if not isinstance(pairs, list) or not pairs:
                raise ValueError(f"exact_sums.{k} must be a list of [mantissa, exponent] pairs, got {describe(pairs)}")
            out.sums[k] = ExactSum.from_parts(from_pair(pairs[0], f"exact_sums.{k}"), pairs[1:], f"exact_sums.{k}")
    w, hi, lo, m2_ = out.moments()
    derived = {"weight": w, "mean": (hi, lo), "m2": m2_, **{k: out.value(k) for k in ("sse", "sae", "sle", "ape")}}
    for k, v in derived.items():
        if v != given[k] and not (v != v and given[k] != given[k]):
            raise ValueError(f"state {k!r} = {given[k]!r} differs from its exact sums ({v!r})")
    if out.sums["weight"].units < 0 or any(out.sums[k].units < 0 for k in ("sse", "sae", "sle", "ape")):
        raise ValueError("exact_sums of weights and errors must be non-negative")
    count = loaded["count"]
    unknown = set() if moments or not count else {"moments"}
    if _SQUARES in exact:
        if out.sums[_SQUARES].units < 0:
            raise ValueError("exact_sums.ww (squared weights) must be non-negative")
    elif out.sums["weight"].units == count * _UNIT:  # unit weights: the squares are the count
        out.sums[_SQUARES] = ExactSum(count * _UNIT)
    else:
        unknown.add("squares")  # (a weighted state written before squared weights were kept)
    out.unknown = frozenset(unknown)
    return out


def _decode_mean(raw: Any) -> tuple[float, float]:
    if not isinstance(raw, list) or len(raw) != 2:
        raise ValueError(f"must be a list [hi, lo], got {describe(raw)}")
    return _dec(raw[0], "mean", nonneg=False), _dec(raw[1], "mean", nonneg=False)


def _migrate_v1(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 1 kept Welford moments and float sums: they are taken as exact values
    (``Σw·y = W·mean``, ``Σw·y² = m2 + W·mean²``, exactly in dyadic rationals) and the
    rounded fields rewritten from them."""
    from fractions import Fraction

    if set(state) != {"count", "weight", "mean", "m2", "sse", "sae", "sle", "ape", "max_error", "log_invalid"}:
        return dict(state)  # not a version-1 layout: the key check names what is wrong

    def units(x: Fraction) -> int:
        return int(x * (1 << 1074))  # dyadic with denominator <= 2**1074: exact

    def num(key: Any) -> Fraction:
        v = state[key] if not isinstance(key, tuple) else state[key[0]][key[1]]
        if v.__class__ is bool or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"state {key!r} must be a finite number in a version-1 dict, got {describe(v)}")
        return Fraction(v)

    w = num("weight")
    mean = num(("mean", 0)) + num(("mean", 1)) if isinstance(state.get("mean"), list) and len(state["mean"]) == 2 \
        else num("mean")
    exact = {"weight": units(w), "wy": units(w * mean), "wyy": units(num("m2") + w * mean * mean)}
    for k in ("sse", "sae", "sle", "ape"):
        exact[k] = units(num(k))
    sums = _Sums()
    for k, u in exact.items():
        sums.sums[k] = ExactSum(u)
    sums.unknown = frozenset({"moments", "squares"})  # (not kept by version 1)
    enc = _encode_sums(sums, None)
    return {**state, "weight": enc[0], "mean": enc[1], "m2": enc[2], "sse": enc[3], "sae": enc[4], "sle": enc[5],
            "ape": enc[6], "exact_sums": enc[7]}


_REGRESSION_STATE = (
    Field("count", lambda acc: 0, "count", attrs="count"),  # an int from 0 to MAX_EVENTS
    # the exact sums (exact_sums: canonical expansions, kernels.exact_sum) and, before them,
    # what they give rounded: total weight, mean as [hi, lo], m2, sse, sae, sle, ape
    Field(("weight", "mean", "m2", "sse", "sae", "sle", "ape", "exact_sums"), lambda acc: _Sums(), attrs="_sums",
          merge=lambda a, b, acc: a.merge(b), copy=lambda v: v.copy(), encode=_encode_sums, decode=_decode_sums),
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
    #: version 2: exact sums (``exact_sums``); version 1 dicts (Welford moments) still load
    version = 2
    migrations = {1: _migrate_v1}

    # the declared state (see _REGRESSION_STATE)
    _sums: _Sums
    _max_error: float
    _log_invalid: int

    __slots__ = ("count", "_sums", "_max_error", "_log_invalid")

    def __init__(self) -> None:
        self.reset()

    @property
    def total_weight(self) -> float:  # type: ignore[override]  # a read-only property over the exact sum
        """Summed weight of the events seen (exact, rounded once)."""
        return self._sums.value("weight")

    @property
    def _sse(self) -> float:
        return self._sums.value("sse")

    @property
    def _sae(self) -> float:
        return self._sums.value("sae")

    @property
    def _sle(self) -> float:
        return self._sums.value("sle")

    @property
    def _ape(self) -> float:
        return self._sums.value("ape")

    @property
    def _m2(self) -> float:
        return self._sums.moments()[3]

    def _check_state(self, loaded: dict[str, Any]) -> None:
        count, log_invalid = loaded["count"], loaded["log_invalid"]
        sums: _Sums = loaded["weight"]
        weight = sums.value("weight")
        if log_invalid > count:
            raise ValueError(f"state 'log_invalid' ({log_invalid}) exceeds 'count' ({count})")
        if count == 0 and weight != 0.0:
            raise ValueError(f"state has no events but a total weight of {weight!r}")
        if weight == 0.0 and (loaded["max_error"] or any(sums.get(k).units for k in _SUMS)
                              or any(sums.fine.values())):
            raise ValueError("state holds sums but no events of positive weight")

    # ------------------------------------------------------------------ updates
    def update(self, y_true: float, y_pred: float, weight: float = 1.0) -> "Regression":
        """Add one event (pure Python, O(1)): validated, counted, and buffered for the exact sums."""
        # validate everything first (fast path for built-in floats)
        yt = y_true if y_true.__class__ is float and -_INF < y_true < _INF else check_number(y_true, "y_true")
        yp = y_pred if y_pred.__class__ is float and -_INF < y_pred < _INF else check_number(y_pred, "y_pred")
        w = weight if weight.__class__ is float and 0.0 <= weight < _INF else check_weight(weight)

        self.count += 1
        if not (yt > -1.0 and yp > -1.0):
            self._log_invalid += 1
        if w == 0.0:
            return self
        ad = abs(yt - yp)
        if ad > self._max_error:
            self._max_error = ad
        buf = self._sums.buffer
        buf += (yt, yp, w)
        if len(buf) >= 3 * BUFFER:
            self._sums.fold()
        return self

    def update_many(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> "Regression":
        """Add a batch (vectorised); the whole batch is validated before any state changes."""
        yt = as_float_array(y_true, "y_true")
        yp = as_float_array(y_pred, "y_pred")
        n = check_same_length(y_true=yt, y_pred=yp)
        w = as_weight_array(sample_weight, n)
        if n == 0:
            return self
        n_invalid = int(np.count_nonzero((yt <= -1.0) | (yp <= -1.0)))
        if w is not None:
            pos = w > 0.0
            if not pos.all():
                yt, yp, w = yt[pos], yp[pos], w[pos]
        # from here on, every remaining event has a positive weight
        self.count += n
        self._log_invalid += n_invalid
        if len(yt) == 0:
            return self
        mx = float(np.max(np.abs(yt - yp)))
        if mx > self._max_error:
            self._max_error = mx
        rows = np.empty((len(yt), 3))
        rows[:, 0], rows[:, 1], rows[:, 2] = yt, yp, 1.0 if w is None else w
        buf = self._sums.buffer
        if len(buf) + rows.size <= 3 * BUFFER and float(np.abs(rows).max()) < ORDINARY:
            buf += rows.ravel().tolist()  # a few ordinary events: buffered as update() does (see fold_many)
        else:
            self._sums.add(rows)
        return self

    # ------------------------------------------------------------------ removal
    def remove(self, y_true: float, y_pred: float, weight: float = 1.0) -> "Regression":
        """Undo one earlier ``update(y_true, y_pred, weight)``; returns ``self``.

        Not part of the accumulator protocol: it lets sliding windows (e.g. river's
        ``utils.Rolling``) subtract the event that leaves the window. Every sum is exact, so
        the event's terms (weight negated) cancel exactly: the state is that of the remaining
        events, except ``max_error``, which cannot be reversed: removing an event whose ``|d|``
        equals the current maximum makes it unknown, stored as nan (``max_error()`` returns
        nan) until no positive-weight event is left or :meth:`reset`. An accumulator with no
        event left is a fresh one.

        ``ValueError`` (state unchanged) when the event cannot have been added: no event
        left, no event with a value <= -1 left for one that has such a value, a weight
        larger than the total weight, the last event leaving weight behind, or ``|d|`` above
        ``max_error``.
        """
        yt = check_number(y_true, "y_true")
        yp = check_number(y_pred, "y_pred")
        w = check_weight(weight)
        log_ok = yt > -1.0 and yp > -1.0
        ad = abs(yt - yp)
        total = self.total_weight
        reason = None
        if self.count == 0:
            reason = "no event is left"
        elif not log_ok and self._log_invalid == 0:
            reason = "no event with a value <= -1 is left"
        elif self.count == 1 and total != w:
            reason = f"it would be the last event, but weight {total - w!r} would remain"
        elif w:
            if w > total:
                reason = f"its weight exceeds the total weight {total!r}"
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
        self._sums.add(np.array([[yt, yp, -w]]))  # the event's exact terms, negated
        if self._sums.get("weight").units == 0:  # no positive weight left: the sums of no event
            count, log_invalid = self.count, self._log_invalid
            self.reset()
            self.count, self._log_invalid = count, log_invalid
            return self
        if ad >= self._max_error:
            self._max_error = math.nan  # the maximum of the remaining events is unknown
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
        if den <= 2 * self.count * _TINY:
            # m2 is exact, but a spread this close to the float floor is below what
            # scikit-learn's float arithmetic resolves (its m2 is rounding noise there): 0
            den = 0.0
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

    # ------------------------------------------------------------------ intervals (issue 26)
    @property
    def weight_squares(self) -> float | None:
        """``sum w^2`` of the events (exact, correctly rounded), None for a weighted state loaded
        without it: Kish's effective sample size ``W^2 / sum w^2`` of the intervals."""
        if "squares" in self._sums.unknown:
            return None
        return self._sums.value(_SQUARES)

    def _r2_moments(self) -> tuple[float, float, float, float, float] | None:
        """``(A, B, E d^4, E (y - mean)^4, E d^2 (y - mean)^2)`` (weighted means; ``A = sse / W``,
        ``B = m2 / W``) from the exact sums, the central ones evaluated exactly from the raw power
        sums; None when they are not kept (an older state), not finite, or the raw sums' per-event
        rounding (at most ``2**-51`` of each term, bounded through Cauchy-Schwarz) could reach
        ``2**-10`` of a central moment (values some thousands of standard deviations from 0)."""
        try:
            return self._r2_moments_exact()
        except OverflowError:  # (a moment beyond the float range)
            return None

    def _r2_moments_exact(self) -> tuple[float, float, float, float, float] | None:
        from fractions import Fraction

        sums = self._sums
        if "moments" in sums.unknown:
            return None
        parts = [sums.get(k) for k in ("weight", "wy", "wyy", "sse", *_MOMENTS)]
        if not all(math.isfinite(p.value) for p in parts) or sums.get("weight").units <= 0:
            return None
        unit = Fraction(1, _UNIT)
        w = Fraction(sums.get("weight").units, _UNIT)
        s1 = Fraction((sums.get("wy").units << 1074) + sums.fine["wy"], 1 << 2148)
        s2 = Fraction((sums.get("wyy").units << 2148) + sums.fine["wyy"], 1 << 3222)
        sd2 = sums.get("sse").units * unit
        sd4, s3, s4, sd2y, sd2y2 = (sums.get(k).units * unit for k in _MOMENTS)
        mu = s1 / w
        c4 = s4 - 4 * mu * s3 + 6 * mu * mu * s2 - 4 * mu ** 3 * s1 + mu ** 4 * w
        c22 = sd2y2 - 2 * mu * sd2y + mu * mu * sd2
        m2 = s2 - mu * s1
        f4, f2, fd2y2, fd2 = float(s4), float(s2), float(sd2y2), float(sd2)
        err4 = 2.0 ** -51 * (f4 + 4.0 * abs(float(mu)) * math.sqrt(f2 * f4))
        err22 = 2.0 ** -51 * (fd2y2 + 2.0 * abs(float(mu)) * math.sqrt(fd2 * fd2y2))
        if float(c4) <= 2.0 ** 10 * err4 or 2.0 ** 10 * err22 > math.sqrt(float(c4) * float(sd4)):
            return None  # (E d^2 (y - mean)^2 <= sqrt(E d^4 E (y - mean)^4): its error must be small beside that)
        if not all(math.isfinite(float(x)) for x in (c4, c22, m2, sd4)):
            return None
        return float(sd2 / w), float(m2 / w), float(sd4 / w), float(c4 / w), float(c22 / w)

    def effective_events(self) -> float | None:
        """Kish's effective number of events ``W f``, ``f = W / sum w^2``
        (:func:`~streammetrics.kernels.intervals.kish_factor`; the count for unit weights): what
        the intervals' minimum rules read. None without events, or for a state lacking ``sum w^2``."""

        kish = self._kish()
        return None if kish is None else kish[0]

    def _kish(self) -> tuple[float, float] | None:
        """``(W f, f)`` of :meth:`effective_events`."""
        from streammetrics.kernels.intervals import kish_factor

        squares = self.weight_squares
        total = self.total_weight
        if not self.count or squares is None or not total > 0 or not math.isfinite(total):
            return None
        f = float(kish_factor(total, squares)[0])  # (exactly 1 for unit weights)
        return total * f, f

    def interval(self, metric: str, confidence: float = 0.95) -> tuple[float, float] | None:
        """Confidence interval of ``mae``, ``mse``, ``rmse`` (the MSE's, square-rooted:
        :func:`~streammetrics.kernels.intervals.root_intervals`) or ``r2``, weighted events on Kish pseudo-counts
        (``f = W / sum w^2``: :func:`~streammetrics.kernels.intervals.kish_factor`). MAE and MSE:
        ``mean +- t s / sqrt(n)`` of the per-event errors
        (:func:`~streammetrics.kernels.intervals.mean_intervals`), for MAE ``s^2`` from the exact
        ``sum d^2`` and on the log scale (``mae exp(+- t s / (mae sqrt(n)))``), for MSE from
        ``sum d^4 <= max_error^2 sum d^2`` (an upper bound: a conservative interval). R²:
        :func:`~streammetrics.kernels.intervals.r2_intervals` (delta method on ``log(1 - R²)``)
        from the exact fourth-moment sums; for heavy-tailed errors ``E d^4`` bounded by
        ``max_error^2 E d^2`` as for MSE. None below the minimum rule, or when a loaded state
        lacks the sums it needs.

        >>> r = Regression().update_many(list(range(40)), [x + (-1) ** x for x in range(40)])
        >>> r.interval("mae")
        (1.0, 1.0)
        """
        from streammetrics.kernels import intervals as iv

        z = iv.z_value(confidence)
        if metric not in ("mae", "mse", "rmse", "r2"):
            raise ValueError(f"metric must be 'mae', 'mse', 'rmse' or 'r2', got {metric!r:.40}")
        if metric == "rmse":
            pair = self.interval("mse", confidence)
            return None if pair is None else iv.as_pair(*iv.root_intervals(*pair))
        kish = self._kish()
        if kish is None or not kish[0] >= (iv.MIN_R2_EVENTS if metric == "r2" else iv.MIN_MEAN_EVENTS):
            return None  # (the minimum rule of r2_intervals / mean_intervals, before their inputs)
        n, f = kish
        total = self.total_weight
        if metric == "r2":
            moments = self._r2_moments()
            if moments is None:
                return None
            top = self._max_error * self._max_error  # (inf beyond the float range, nan unknown: no bound)
            return iv.as_pair(*iv.r2_intervals(*moments, n, z, top * moments[0]))
        if math.isnan(self._max_error):
            return None
        sse = self._sse
        if metric == "mae":
            return iv.as_pair(*iv.mean_intervals(self._sae / total, sse * f, n, z, log_scale=True))
        bound = self._max_error * self._max_error * sse * f  # (inf beyond the float range: no interval; ** raised)
        return iv.as_pair(*iv.mean_intervals(sse / total, bound, n, z))
