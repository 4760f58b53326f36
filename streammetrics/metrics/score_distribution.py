"""``ScoreDistribution``: the label-free summary of a binary model's scores.

Every prediction counts, labelled or not: a weighted histogram of the scores on
:class:`~streammetrics.metrics.binary_scores.BinaryScores`' binning: every distinct score while
there are at most ``max_bins`` of them (exact while small; always with ``exact=True``), beyond
that the log-relative :class:`~streammetrics.kernels.binning.LogGridBinning` at ``bins`` bins per
octave, halved while the histogram holds more than ``max_bins`` keys; a function of the
events only, so splits and merges give the same state), the number of predictions, their
total weight ``W``, the weighted score sum
``S = sum(w * s)`` and the weight ``P`` of the predictions with ``s >= threshold``:

* ``mean_score() = S / W``;
* ``predicted_positive_rate() = P / W``;
* ``histogram()``: ``(thresholds, weights)`` per non-empty bin in ascending score order,
  the input of drift statistics against a reference.

All parts merge by addition (histograms on the coarser of two grids), so any split of a
stream merges into the state of the whole stream. The summed weights (``W``, ``P``, the
histogram bins) are exact (:mod:`streammetrics.kernels.exact_weights`): floats while every
weight is whole and the total weight at most 2**52 (float sums exact), else exact ints of units of 2**-1074
(units mode, at most ~2,100 bits each); the JSON writes their correctly rounded floats, plus
``weight_residues`` and the histogram's ``residues`` only when a float is not exact.

>>> d = ScoreDistribution(threshold=0.5).update_many([0.2, 0.6, 0.9, 0.4])
>>> d.count, d.mean_score(), d.predicted_positive_rate()
(4, 0.525, 0.5)
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from streammetrics.core.accumulator import Accumulator
from streammetrics.core.exceptions import undefined
from streammetrics.core.state import Field, describe
from streammetrics.core.validation import as_float_array, as_weight_array, check_number, check_weight
from streammetrics.kernels.binning import Binning, ExactBinning, LogGridBinning, bit_views, grid_budget, make_binning
from streammetrics.kernels.exact_sum import BUFFER, ExactSum, exact_units_rows
from streammetrics.kernels.exact_weights import (
    FLOAT_EXACT,
    UNIT,
    all_whole,
    decode_sums,
    encode_residues,
    is_whole,
    residue_of,
    to_units,
    units_by_key,
    units_of,
    value_of,
    whole_floats,
    with_residue,
)
from streammetrics.kernels.histogram import (
    MAX_TOTAL_WEIGHT,
    ScoreHistogram,
    aggregate,
    aligned,
    bound,
    coarsen_all,
    coarsen_table,
    histograms_from_json,
    histograms_to_json,
    insert_table,
    levels_of_table,
    merge_into,
    table_to_grid,
    to_grid,
    units_mode,
)
from streammetrics.kernels.histogram import to_units as histograms_to_units
from streammetrics.kernels.histogram_json import SMALL_KEYS

__all__ = ["ScoreDistribution"]

_ONE = 1.0  # the default weight: ``weight is _ONE`` selects the unit-weight fast path
# units mode: below these, the total weight plus any weight (and event count) stays below the bound
_NEAR_MAX = MAX_TOTAL_WEIGHT / 4
# float mode while the total weight stays at most this (float sums of whole weights exact: < 2**53)
_FLOAT_EXACT = FLOAT_EXACT
_NEAR_MAX_UNITS = units_of(_NEAR_MAX)


# ----------------------------------------------------------------------------- declared state
def _fresh(acc: "ScoreDistribution") -> tuple[Binning, ScoreHistogram]:
    binning = ExactBinning()  # exact while small: exact=False moves to the grid past max_bins
    return binning, ScoreHistogram(binning)


def _merge_hist(mine: tuple, theirs: tuple, acc: "ScoreDistribution") -> tuple:
    # (_check_merge moved self to units if other is)
    binning, hist = mine
    return merge_into(binning, [hist], theirs[0], [theirs[1]], acc._units, acc._finest, acc._max_bins), hist


def _encode_hist(value: tuple, acc: "ScoreDistribution") -> tuple:
    binning, hist = value
    levels = None
    if hist is acc._hist:  # (the levels when held, or when building them pays: many keys)
        levels = acc._level_cache
        if levels is None and len(hist) > SMALL_KEYS:
            levels = acc._aligned()
    return (None if binning.exact else binning.bins), histograms_to_json([hist], ["weights"], levels)


def _decode_hist(raw: tuple, acc: "ScoreDistribution", loaded: Mapping[str, Any]) -> tuple:
    bpo, data = raw
    binning: Binning
    if not acc._exact and bpo is not None:
        if type(bpo) is not int or bpo > acc._finest:  # type: ignore[operator]  # _finest is an int unless exact
            raise ValueError(f"bins_per_octave must be an int <= bins, got {describe(bpo)}")
        binning = LogGridBinning(bpo)
    elif bpo is not None:
        raise ValueError("bins_per_octave must be null for an exact ScoreDistribution")
    else:
        binning = ExactBinning()
    if binning.exact and not acc._exact and isinstance(data, Mapping) and len(data.get("scores", ())) > acc._max_bins:  # type: ignore[operator]  # an int unless exact
        raise ValueError(f"an exact state (bins_per_octave null) holds more than max_bins={acc._max_bins} scores")
    (hist,) = histograms_from_json(data, binning, ["weights"], exact_weights=True)
    if not binning.exact and binning.bins > 1 and len(hist) > acc._max_bins:  # type: ignore[operator]  # max_bins is set on a log grid
        raise ValueError(f"the histogram holds more than max_bins={acc._max_bins} keys")
    count, total, _, _ = _totals(loaded["count"])
    if len(hist) > count:
        raise ValueError(f"{len(hist)} weighted bins cannot come from count={count}")
    hist_total = hist.total()
    if abs(hist_total - total) > 1e-9 * max(1.0, total):
        raise ValueError(f"total_weight={total!r} differs from the histogram's total {hist_total!r}")
    return binning, hist


# [count, score sum (an exact ExactSum), unit-weight events at score >= threshold, weighted
# events, their weight, their weight at score >= threshold]: the unit-weight path touches three.
# The two summed weights are floats in float mode, ints of units in units mode.
# Then the exact sum (units) of fl(w * w) over the weighted events (None: unknown, a weighted
# state written before it was kept): Kish's effective sample size for the intervals (issue 26).
_COUNT, _SUM, _UNIT_ABOVE, _WEVENTS, _WTOTAL, _WABOVE, _WSQ = range(7)
_INF_SQ = float("inf")


def _weight_sums(sums: list) -> tuple[int, float | int, float | int]:
    """``(count, total weight, weight at score >= threshold)``: exact, the weights floats in
    float mode and ints of units in units mode."""
    count = sums[_COUNT]
    if sums[_WTOTAL].__class__ is int:
        return count, (count - sums[_WEVENTS]) * UNIT + sums[_WTOTAL], sums[_UNIT_ABOVE] * UNIT + sums[_WABOVE]
    return count, (count - sums[_WEVENTS]) + sums[_WTOTAL], sums[_UNIT_ABOVE] + sums[_WABOVE]


def _weight_totals(sums: list) -> tuple[int, float, float]:
    """``(count, total weight, weight at score >= threshold)``, the weights as floats."""
    count, total, above = _weight_sums(sums)
    if total.__class__ is int:
        return count, value_of(total), value_of(above)  # type: ignore[arg-type]  # ints in units mode
    return count, total, above


def _totals(sums: list) -> tuple[int, float, float, float]:
    """``(count, total weight, score sum, weight at score >= threshold)``."""
    count, total, above = _weight_totals(sums)
    return count, total, sums[_SUM].value, above


def _merge_sums(mine: list, theirs: list, acc: Any) -> list:
    units = mine[_WTOTAL].__class__ is int  # (_check_merge moved self to units if other is)
    for i, v in enumerate(theirs):
        if i == _WSQ:
            mine[i] = None if mine[i] is None or v is None else mine[i] + v
        elif i == _SUM:
            mine[i].merge(v)  # exact (kernels.exact_sum): independent of the merge order
        elif units and (i == _WTOTAL or i == _WABOVE):
            mine[i] += to_units(v)
        else:
            mine[i] += v
    return mine


def _copy_sums(sums: list) -> list:
    out = list(sums)
    out[_SUM] = sums[_SUM].copy()
    return out


def _encode_sums(sums: list, acc: Any) -> tuple:
    return (*encode_sums_from_parts(sums, *sums[_SUM].parts()), *encode_squares(sums))


def encode_squares(sums: list) -> tuple:
    """``(weight_squares, weight_squares_residue)``: the predictions' ``sum w^2`` (unit-weight
    events count 1, correctly rounded, and the rest of its exact sum); ``(None, None)`` when every
    weight was 1 (or the squares are unknown), so such states keep their bytes."""
    squares, weighted = sums[_WSQ], sums[_WEVENTS]
    if squares is None or not weighted:
        return None, None
    count, total, _ = _weight_sums(sums)
    if squares == weighted * UNIT and to_units(total) == count * UNIT:  # every weight was 1.0
        return None, None
    units = (count - weighted) * UNIT + squares
    return value_of(units), residue_of(units)


def encode_sums_from_parts(sums: list, score_sum: float, residue: list) -> tuple:
    """The encoded sums (``count``, ``total_weight``, ``score_sum``, ``positive_weight``,
    ``score_sum_residue``, ``weight_residues``), given the score sum's ``ExactSum.parts()``
    (a caller that also needs the value, e.g. a one-pass snapshot, expands it once)."""
    count, total, above = _weight_sums(sums)
    weight_residues = None
    if total.__class__ is int:  # units mode: the floats, and the rest of the exact sums (if any)
        weight_residues = encode_residues([total, above])
        total, above = value_of(total), value_of(above)  # type: ignore[arg-type]  # ints here
    # score_sum: overflow of huge margins is written as 'inf', '-inf' or 'nan' (no residue then)
    if not math.isfinite(score_sum):
        return count, total, repr(score_sum), above, None, weight_residues
    # the rest of the exact sum (kernels.exact_sum), null if none
    return count, total, score_sum, above, residue or None, weight_residues


def _decode_sums(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> list:
    count, total, score_sum, above, residue, weight_residues, squares, square_residue = raw
    if type(count) is not int or count < 0:
        raise ValueError(f"count must be a non-negative int, got {describe(count)}")
    total = check_weight(total, "total_weight")
    if total > MAX_TOTAL_WEIGHT or (count == 0 and total):
        raise ValueError(f"total_weight={total!r} is not possible for count={count}")
    score_sum = float(score_sum) if score_sum in ("inf", "-inf", "nan") else check_number(score_sum, "score_sum")
    above = check_weight(above, "positive_weight")
    if above > total * (1 + 1e-9):
        raise ValueError(f"positive_weight={above!r} exceeds total_weight={total!r}")
    if math.isfinite(score_sum):
        exact = ExactSum.from_parts(score_sum, residue, "score_sum")
    else:  # an overflowed sum (huge margins or weights): only its float survives, and stays
        exact = ExactSum.overflowed(score_sum)
    # the summed weights: floats while whole, else units (with their residues, if any)
    total, above = decode_sums([total, above], weight_residues, "weight_residues")
    if squares is not None:  # weights other than 1: every loaded event counts as weighted
        squares = check_weight(squares, "weight_squares")
        units = units_of(squares) if square_residue is None else with_residue(
            squares, square_residue, "weight_squares_residue")
        total_value = value_of(to_units(total))
        if not count or squares > total_value * total_value * (1.0 + 1e-9):
            raise ValueError(f"weight_squares={squares!r} cannot be the sum of squared weights of {count} "
                             f"event(s) of total weight {total_value!r}")
        return [count, exact, 0, count, total, above, units]
    if square_residue is not None:
        raise ValueError("weight_squares_residue given without weight_squares")
    # no squared weights written: unit weights, or a state written before they were kept. Float
    # mode (every weight whole) with a total equal to the count is read as unit-weight predictions
    # (what a state without squared weights holds, unless written before they were kept); any
    # other state counts every loaded event as weighted (total = count - weighted events + their
    # weight), its squared weights unknown
    if total.__class__ is not int and total == count and above == int(above):
        return [count, exact, int(above), 0, 0.0, 0.0, 0]
    return [count, exact, 0, count, total, above, None]


def _migrate_v1(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 1 had no ``score_sum_residue``: its ``score_sum`` is taken as exact."""
    return {**state, "score_sum_residue": None}


_STATE = (
    # count, total weight, sum of weight * score (for mean_score), weight at score >= threshold
    # (score_sum is exact: score_sum_residue holds the rest of its expansion, kernels.exact_sum)
    # (the summed weights: floats while whole, else exact units, the rest of whose floats is
    # written under weight_residues, omitted while there is none; kernels.exact_weights)
    # (weight_squares: the sum of squared weights, written only once a weight other than 1 was seen)
    Field(("count", "total_weight", "score_sum", "positive_weight", "score_sum_residue", "weight_residues",
           "weight_squares", "weight_squares_residue"),
          lambda acc: [0, ExactSum(), 0, 0, 0.0, 0.0, 0],
          attrs="_sums", merge=_merge_sums, copy=_copy_sums, encode=_encode_sums, decode=_decode_sums,
          optional=("weight_residues", "weight_squares", "weight_squares_residue")),
    # the grid in force and the histogram on it: merged together (grids coarsen)
    Field(("bins_per_octave", "histogram"), _fresh, attrs=("_binning", "_hist"), merge=_merge_hist,
          copy=lambda v: (v[0], v[1].copy()), encode=_encode_hist, decode=_decode_hist),
)


#: the state keys :meth:`ScoreDistribution._state` writes directly (another declaration: generic)
DIRECT_STATE = tuple(k for f in _STATE for k in f.keys) == (
    "count", "total_weight", "score_sum", "positive_weight", "score_sum_residue", "weight_residues",
    "weight_squares", "weight_squares_residue", "bins_per_octave", "histogram")


class ScoreDistribution(Accumulator):
    """Weighted score histogram, count, total weight, score sum and weight at
    ``score >= threshold`` of every prediction (no labels needed); see the module docstring.

    ``bins``, ``max_bins`` and ``exact`` are those of :class:`~streammetrics.BinaryScores`
    (same defaults, hence the same grid).

    >>> d = ScoreDistribution()
    >>> d.update(0.25).update(0.75, weight=3.0).mean_score()
    0.625
    """

    type_name = "ScoreDistribution"
    state_fields = _STATE
    #: version 2: the score sum is exact (``score_sum_residue``); version 1 dicts still load
    version = 2
    migrations = {1: _migrate_v1}

    _sums: list
    _binning: Binning
    _hist: ScoreHistogram

    def __init__(
        self, threshold: float = 0.5, bins: int | None = 1024, exact: bool = False, max_bins: int | None = 4096
    ) -> None:
        self._threshold = check_number(threshold, "threshold")
        make_binning(64 if exact else bins, exact)  # type: ignore[arg-type]  # validates bins / exact
        self._finest, self._max_bins = grid_budget(bins, exact, max_bins)
        self._exact = exact
        self.reset()

    def _config(self) -> dict[str, Any]:
        return {"threshold": self._threshold, "bins": self._finest, "exact": self._exact,
                "max_bins": self._max_bins}

    def _state(self) -> dict[str, Any]:
        """The declared fields' encoders, called directly (one snapshot per key and window)."""
        if not DIRECT_STATE:
            return super()._state()
        count, total, score_sum, above, residue, weight_residues, squares, square_residue = _encode_sums(
            self._sums, self)
        bpo, hist = _encode_hist((self._binning, self._hist), self)
        if squares is not None:  # (optional keys: as the declared fields write them)
            out = {"count": count, "total_weight": total, "score_sum": score_sum, "positive_weight": above,
                   "score_sum_residue": residue}
            if weight_residues is not None:
                out["weight_residues"] = weight_residues
            out["weight_squares"] = squares
            if square_residue is not None:
                out["weight_squares_residue"] = square_residue
            out["bins_per_octave"], out["histogram"] = bpo, hist
            return out
        if weight_residues is not None:  # (an optional key: as the declared fields write it)
            return {"count": count, "total_weight": total, "score_sum": score_sum, "positive_weight": above,
                    "score_sum_residue": residue, "weight_residues": weight_residues, "bins_per_octave": bpo,
                    "histogram": hist}
        return {"count": count, "total_weight": total, "score_sum": score_sum, "positive_weight": above,
                "score_sum_residue": residue, "bins_per_octave": bpo, "histogram": hist}

    def _refresh(self) -> None:
        self._level_cache = None  # (a container replaced, or the histogram changed: levels rebuilt)
        b = self._binning
        # the weight a default-weight prediction adds to its bin: 1.0, or UNIT in units mode
        self._inc = inc = UNIT if self._sums[_WTOTAL].__class__ is int else 1.0
        # a histogram holding a batch's arrays (ScoreHistogram.pending): the per-event path, which
        # writes the dict, waits until _update_general builds it
        self._waiting = self._hist.pending
        if self._waiting:
            self._fast = None
            return
        self._fast = (
            (self._hist.weights, b.shift, b.rounding, b.one_key, self._sums, self._threshold, self._sums[_SUM].terms,
             *bit_views(), inc)
            if isinstance(b, LogGridBinning) else None
        )

    @property
    def _units(self) -> bool:
        """Units mode: the summed weights (total, above threshold, the histogram) are exact ints of units."""
        return self._sums[_WTOTAL].__class__ is int

    def _to_units(self) -> None:
        """Switch to units mode (exact conversion; the encoded state does not change)."""
        if not self._units:
            sums = self._sums
            sums[_WTOTAL], sums[_WABOVE] = units_of(sums[_WTOTAL]), units_of(sums[_WABOVE])
            histograms_to_units([self._hist])
            self._refresh()

    def _check_state(self, loaded: dict[str, Any]) -> None:
        """One mode for the whole accumulator: units if any summed weight decoded as units."""
        sums = loaded["count"]
        _, hist = loaded["bins_per_octave"]
        if sums[_WTOTAL].__class__ is int or units_mode([hist]):
            sums[_WTOTAL], sums[_WABOVE] = to_units(sums[_WTOTAL]), to_units(sums[_WABOVE])
            histograms_to_units([hist])

    def _check_merge(self, other: Accumulator) -> None:
        assert isinstance(other, ScoreDistribution)
        if self.total_weight + other.total_weight > MAX_TOTAL_WEIGHT:
            raise ValueError(f"merged weight would exceed {MAX_TOTAL_WEIGHT:g}")
        if other._units or self.total_weight + other.total_weight > _FLOAT_EXACT:  # cannot fail now: to units
            self._to_units()

    def _collapse(self) -> None:
        self._binning = bound(self._binning, [self._hist], self._finest, self._max_bins)
        self._refresh()

    # ------------------------------------------------------------------ reading
    @property
    def count(self) -> int:  # type: ignore[override]  # a read-only view of the declared state
        """Number of predictions seen (zero weights included)."""
        return self._sums[_COUNT]

    @property
    def total_weight(self) -> float:  # type: ignore[override]  # a read-only view of the declared state
        """Summed weight of the predictions."""
        return _weight_totals(self._sums)[1]

    @property
    def threshold(self) -> float:
        """Predictions with ``score >= threshold`` count as predicted positive."""
        return self._threshold

    @property
    def score_sum(self) -> float:
        """``sum(weight * score)``."""
        return self._sums[_SUM].value

    @property
    def unit_weights(self) -> bool:
        """Every prediction added had the default weight (the intervals' effective sample size is
        then the count). A loaded state without squared weights whose whole weights add up to its
        count reads so (states written since squared weights are kept write them for any weight
        other than 1)."""
        return not self._sums[_WEVENTS]

    @property
    def weight_squares(self) -> float | None:
        """The predictions' sum of squared weights ``sum w^2`` (exact, correctly rounded; a
        unit-weight event counts 1), None for a weighted state loaded without it: Kish's
        effective sample size ``W^2 / sum w^2`` of the intervals."""
        sums = self._sums
        if sums[_WSQ] is None:
            return None
        return value_of((sums[_COUNT] - sums[_WEVENTS]) * UNIT + sums[_WSQ])

    @property
    def positive_weight(self) -> float:
        """Weight of the predictions with ``score >= threshold``."""
        return _weight_totals(self._sums)[2]

    @property
    def bins_per_octave(self) -> int | None:
        """Resolution in force (None while every distinct score is kept)."""
        return None if self._binning.exact else self._binning.bins  # type: ignore[attr-defined]  # a LogGridBinning

    def _ratio(self, name: str, value: float) -> float:
        total = self.total_weight
        if not total > 0:
            return undefined(f"No prediction with a non-zero weight: {name} is not defined.", 3)
        return value / total

    def whole_weights(self) -> dict | None:
        """The histogram's ``{key: weight}`` as floats while every weight is whole (None otherwise)."""
        return whole_floats(self._hist.weights, self._units)

    def mean_score(self) -> float:
        """Weighted mean score ``S / W`` (nan with a warning when ``W == 0``)."""
        return self._ratio("mean_score", self.score_sum)

    def predicted_positive_rate(self) -> float:
        """Weight share of ``score >= threshold`` (nan with a warning when ``W == 0``)."""
        return self._ratio("predicted_positive_rate", self.positive_weight)

    #: :func:`~streammetrics.kernels.histogram.aligned` of the histogram (read-only arrays) while
    #: it is unchanged; None: built on the next reading. Every writer of the histogram clears it
    #: (the update paths, and ``_refresh``, which merges, loads, resets, copies and regrids call);
    #: ``update_many`` into an empty histogram sets it from its batch table
    _level_cache: tuple[np.ndarray, np.ndarray] | None = None

    def _aligned(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, weights)`` of the histogram, built once while it is unchanged."""
        cached = self._level_cache
        if cached is None:
            keys, w = aligned(self._hist)
            keys.flags.writeable = w.flags.writeable = False  # (shared by every reader)
            cached = self._level_cache = (keys, w)
        return cached

    def histogram(self) -> tuple[np.ndarray, np.ndarray]:
        """``(thresholds, weights)``: per non-empty bin in ascending score order, the smallest
        score of the bin (the score itself when ``exact``) and the summed weight."""
        keys, w = self._aligned()
        return self._binning.lowest(keys), w[0]

    # ------------------------------------------------------------------ updates
    def update(self, score: float, weight: float = _ONE) -> "ScoreDistribution":
        """Add one prediction: a finite ``score`` and a finite ``weight >= 0``."""
        fast = self._fast
        self._level_cache = None
        if fast is not None and weight is _ONE and score.__class__ is float:
            h, shift, rnd, c, sums, threshold, terms, as_float, as_int, inc = fast
            if 0.0 < score < 0.5:  # key: see LogGridBinning
                as_float[0] = score
                k = (as_int[0] + rnd) >> shift
            elif 0.5 <= score < 1.0:
                as_float[0] = 1.0 - score
                k = c - ((as_int[0] + rnd) >> shift)
            else:
                return self._update_general(score, weight)
            try:
                h[k] += inc
            except KeyError:
                h[k] = inc
                if len(h) > self._max_bins:  # type: ignore[operator]  # a log grid: max_bins set
                    self._collapse()
            sums[0] += 1
            terms.append(score)  # the score sum: buffered, folded exactly
            if len(terms) >= BUFFER:
                sums[1].fold()
            if score >= threshold:
                sums[2] += 1
            return self
        return self._update_general(score, weight)

    def _update_general(self, score: Any, weight: Any) -> "ScoreDistribution":
        self._level_cache = None
        if self._waiting:
            self._hist.weights  # noqa: B018  # (reading builds the dict)
            self._refresh()
        s = check_number(score, "score")
        w = check_weight(weight)
        sums = self._sums
        u: float | int
        if sums[_WTOTAL].__class__ is int:  # units mode: the weight in exact units
            # (the total is rounded only when it or the weight could reach the bound)
            if (sums[_WTOTAL] >= _NEAR_MAX_UNITS or w >= _NEAR_MAX) and self.total_weight + w > MAX_TOTAL_WEIGHT:
                raise ValueError(f"weight {w!r} would make the total weight exceed {MAX_TOTAL_WEIGHT:g}")
            u = UNIT if w == 1.0 else units_of(w)
        else:
            total = (sums[_COUNT] - sums[_WEVENTS]) + sums[_WTOTAL] + w
            if total > MAX_TOTAL_WEIGHT:
                raise ValueError(f"weight {w!r} would make the total weight exceed {MAX_TOTAL_WEIGHT:g}")
            if is_whole(w) and total <= _FLOAT_EXACT:
                u = w
            else:  # the first weight that is not whole: every summed weight to units
                self._to_units()
                u = units_of(w)
        if w:
            k = self._binning.key(s)
            h = self._hist.weights
            old = h.get(k)
            h[k] = u if old is None else old + u
            if old is None and self._max_bins is not None and len(h) > self._max_bins:  # exact or grid
                self._collapse()
        sums[_COUNT] += 1
        if weight is _ONE:
            sums[_SUM].add(s)
            if s >= self._threshold:
                sums[_UNIT_ABOVE] += 1
        else:
            sums[_WEVENTS] += 1
            sums[_WTOTAL] += u
            if sums[_WSQ] is not None:
                square = w * w
                sums[_WSQ] = sums[_WSQ] + units_of(square) if square < _INF_SQ else None  # (w > 1e154: unknown)
            sums[_SUM].add(w * s)
            if s >= self._threshold:
                sums[_WABOVE] += u
        return self

    @classmethod
    def update_columns(cls, dists: list["ScoreDistribution"], scores: np.ndarray,
                       sample_weight: np.ndarray | None = None) -> list[int] | None:
        """:meth:`update_many` of column ``c`` of the 2-D ``scores`` into ``dists[c]`` for every
        ``c`` (the same states). Unit weights into distributions holding nothing, each on an
        exact binning that keeps the batch's distinct scores (a window's columns at its close):
        one pass over the matrix (sorted along the events once; per column the distinct scores
        and their counts, the exact score sum and the count at or above the threshold), else
        column by column. Returns the columns' exact sums in units of ``2**-1074`` when the one
        pass made them (a caller summing the same columns takes them), else None."""
        n = len(scores)
        if (sample_weight is None and n and scores.ndim == 2 and scores.shape[1] == len(dists)
                and scores.dtype == np.float64 and all(d._takes_fresh(n) for d in dists)
                and np.isfinite(scores).all()):
            return cls._fresh_columns(dists, scores)
        for c, d in enumerate(dists):
            d.update_many(scores[:, c], sample_weight)
        return None

    def _takes_fresh(self, n: int) -> bool:
        """Nothing held yet, float mode, exact binning kept for ``n`` distinct scores."""
        return (not self._sums[_COUNT] and not len(self._hist) and self._binning.exact
                and self._sums[_WTOTAL].__class__ is not int and (self._max_bins is None or n <= self._max_bins))

    @staticmethod
    def _fresh_columns(dists: list["ScoreDistribution"], scores: np.ndarray) -> list[int]:
        """:meth:`update_columns`' one pass (finite float64 scores, unit weights, fresh exact columns)."""
        n, k = scores.shape
        columns = np.ascontiguousarray(scores.T)
        ordered = np.sort(columns + 0.0, axis=1)  # (+ 0.0: ExactBinning's keys, -0.0 as 0.0)
        first = np.empty((k, n), dtype=bool)
        first[:, 0] = True
        np.not_equal(ordered[:, 1:], ordered[:, :-1], out=first[:, 1:])
        starts = np.flatnonzero(first)  # each distinct score's first place (a row's first always)
        keys = ordered.reshape(-1)[starts]
        counts = np.diff(starts, append=k * n).astype(np.float64)  # (runs end where the next row starts)
        bounds = np.searchsorted(starts, np.arange(0, k * n + 1, n)).tolist()
        units = exact_units_rows(columns)
        thresholds = np.array([d._threshold for d in dists])
        above = np.count_nonzero(scores >= thresholds, axis=0).tolist()
        for c, d in enumerate(dists):
            a, b = bounds[c], bounds[c + 1]
            hist_keys, weights = keys[a:b], counts[a:b]
            d._hist.hold(hist_keys, weights)
            d._refresh()
            d._level_cache = (hist_keys, weights.reshape(1, -1))  # (levels_of_table: the same arrays)
            sums = d._sums
            sums[_COUNT] += n
            sums[_SUM].add_units(units[c])
            sums[_UNIT_ABOVE] += above[c]
        return units

    def update_many(self, scores: Any, sample_weight: Any = None) -> "ScoreDistribution":
        """Add a batch, validated in full before any change: one vectorised key transform
        and one ``np.bincount``."""
        s = as_float_array(scores, "scores")
        n = len(s)
        w = as_weight_array(sample_weight, n)
        if n == 0:
            return self
        total = float(n) if w is None else float(w.sum())
        if self.total_weight + total > MAX_TOTAL_WEIGHT:
            raise ValueError(f"sample_weight would make the total weight exceed {MAX_TOTAL_WEIGHT:g}")
        # units mode (exact sums) if already in it, if some weight of the batch is not whole, or
        # if a float sum could round (a total beyond 2**52)
        units = self._units or (w is not None and (self.total_weight + total > _FLOAT_EXACT or not all_whole(w)))
        binning = self._binning
        keys, table = aggregate(binning.keys(s), None, 1, w, exact=units)
        if binning.exact and self._finest is not None and len(keys) > self._max_bins:  # type: ignore[operator]  # an int unless exact
            # the batch alone has too many distinct scores: to the finest grid right away
            binning, keys, table = table_to_grid(LogGridBinning(self._finest), keys, table)
        if not binning.exact:  # the batch alone may already need a coarser grid
            while np.count_nonzero(table) > self._max_bins and binning.bins > 1:  # type: ignore[attr-defined,operator]  # a log grid
                binning, keys, table = coarsen_table(binning, keys, table)  # type: ignore[arg-type]  # a LogGridBinning
        above = s >= self._threshold
        total_w: float | int
        above_w: float | int
        if w is None:
            total_w, above_w = 0.0, 0.0
        elif units:  # exact sums of the weights below and at or above the threshold
            got = units_by_key(above.view(np.int8), w)
            total_w, above_w = got.get(0, 0) + got.get(1, 0), got.get(1, 0)
        else:  # whole weights: float sums are exact
            total_w, above_w = total, float(w[above].sum())
        score_terms = s if w is None else w * s  # the per-event terms, summed exactly below
        squares: int | None = 0
        if w is not None and self._sums[_WSQ] is not None:
            w2 = w * w  # (a weight above 1e154 overflows its square: the squares become unknown)
            squares = units_by_key(np.zeros(n, dtype=np.int8), w2).get(0, 0) if np.isfinite(w2).all() else None
        # ---- nothing below can fail
        fresh = not len(self._hist)
        if units:
            self._to_units()
        if self._binning.exact and not binning.exact:
            self._binning = to_grid([self._hist], LogGridBinning(self._finest))  # type: ignore[arg-type]  # an int here
        while not binning.exact and self._binning.bins > binning.bins:  # type: ignore[attr-defined]  # log grids
            self._binning = coarsen_all([self._hist])
        insert_table([self._hist], keys, table, arrays=True)
        self._collapse()  # (clears the levels)
        if fresh and not units and self._binning == binning:
            levels = levels_of_table(keys, table, (len(self._hist),))
            if levels is not None:
                self._level_cache = levels
        sums = self._sums
        sums[_COUNT] += n
        sums[_SUM].add_array(score_terms)
        if w is None:
            sums[_UNIT_ABOVE] += int(np.count_nonzero(above))
        else:
            sums[_WEVENTS] += n
            sums[_WTOTAL] += total_w
            sums[_WABOVE] += above_w
            if sums[_WSQ] is not None:
                sums[_WSQ] = None if squares is None else sums[_WSQ] + squares
        return self
