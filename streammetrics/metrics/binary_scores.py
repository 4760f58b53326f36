"""``BinaryScores``: ranking and probabilistic metrics of a binary score stream.

State: two weighted score histograms (negatives, positives) over a fixed binning
(:mod:`streammetrics.kernels.binning`), the number of events and summed weight per class, and
the exact running sums behind log loss and the Brier score. Every ranking metric
(ROC AUC and its guaranteed bounds, partial AUC, ROC and precision-recall curves,
average precision, confusion at a threshold) is computed from the histograms by
:mod:`streammetrics.kernels.ranking`, exactly as scikit-learn computes it from the events when
``exact=True`` (one level per distinct score), and from the bins otherwise.

Binning (exact while small, then the log grid coarsened within ``max_bins``): see
:class:`BinaryScores`. Whether the state is exact, and the grid in force, depend only on the
multiset of events, so any split, merge order or batching gives the same state. On the streams
of ``benchmarks/bench_auc_accuracy.py`` the binned AUC is within 1.1e-5 of the exact value, and
:meth:`BinaryScores.roc_auc_bounds` always says how far off it can be at most.

The log-loss and Brier sums (:class:`~streammetrics.kernels.exact_sum.ProbabilitySums`) and the
summed weights (:mod:`streammetrics.kernels.exact_weights`: floats while every weight is whole and
every sum below 2**52, else the whole accumulator holds ints of units of 2**-1074) are exact, so
the state depends only on the multiset of events. The JSON writes each sum as its correctly
rounded float, plus the rest of the exact sum only when that float is not exact
(``sum_residues``, ``weighted_residues``, the histogram's ``residues``), so states of whole
weights keep their bytes.

Squared weights (Kish's effective sample size ``(sum w)^2 / sum w^2`` of each class, for the
intervals): per class the exact sum of ``fl(w * w)`` over the events of weight other than 1,
written only while there are such events (``weighted_squares``, ``weighted_squares_residues``);
a weighted state written before them loads with the squares unknown (its intervals are None).
"""
from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any, Hashable, Mapping

import numpy as np

from streammetrics.core.accumulator import Accumulator
from streammetrics.core.exceptions import UndefinedMetricWarning, undefined
from streammetrics.core.state import Field, decode_list, describe
from streammetrics.core.validation import (
    as_float_array,
    as_label_array,
    as_weight_array,
    check_number,
    check_same_length,
    check_weight,
    to_builtin_label,
)
from streammetrics.kernels import ranking
from streammetrics.kernels.binning import Binning, ExactBinning, LogGridBinning, bit_views, grid_budget, make_binning
from streammetrics.kernels.exact_sum import BUFFER, ExactSum, ProbabilitySums
from streammetrics.kernels.exact_weights import (
    FLOAT_EXACT,
    UNIT,
    all_whole,
    decode_residues,
    encode_residues,
    is_whole,
    to_units,
    units_by_key,
    units_of,
    value_of,
    values_of,
    whole_floats,
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
from streammetrics.kernels.ranking_small import levels

if TYPE_CHECKING:  # the module imports ConfusionMatrix lazily (it imports this one)
    from streammetrics.metrics.confusion import ConfusionMatrix

__all__ = ["BinaryScores", "one_element_score"]

_INF = math.inf
_ONE = 1.0  # the default weight: ``weight is _ONE`` selects the unit-weight fast path
# units mode: below these, a summed weight plus any weight (and event count) stays below the bound
_NEAR_MAX = MAX_TOTAL_WEIGHT / 4
_NEAR_MAX_UNITS = units_of(_NEAR_MAX)
# float mode while a class weight stays at most this (float sums of whole weights exact: < 2**53)
_FLOAT_EXACT = FLOAT_EXACT


def _value(x: float | int) -> float:
    """A summed weight as a float (units rounded correctly)."""
    return x if isinstance(x, float) else value_of(x)


def _y_value(y_true: Any, name: str) -> int:
    """0 or 1 from 0/1, True/False (or numpy / float equivalents); else a clear error."""
    try:
        label = to_builtin_label(y_true, name)
    except TypeError:
        raise TypeError(f"{name} must be 0, 1, True or False, got {y_true!r}") from None
    if label.__class__ is not str and (label == 0 or label == 1):
        return int(label)
    raise ValueError(f"{name} must be 0, 1, True or False, got {y_true!r} (other labels: give pos_label=, "
                     f"e.g. BinaryScores(pos_label=1) for -1/+1 or pos_label='yes')")


def one_element_score(score: Any) -> Any:
    """The element of a one-element array (``model.predict_proba(x)[:, 1]`` for one row), else ``score``."""
    if isinstance(score, np.ndarray) and score.size == 1:
        return score.reshape(-1)[0]
    return score


def _as_binary_array(y_true: Any, name: str) -> np.ndarray:
    """Validated 0/1 labels (bools, 0/1 ints or floats, or objects of those) as uint8."""
    y = as_label_array(y_true, name)
    kind = y.dtype.kind
    if kind == "b":
        return y.view(np.uint8)
    if kind == "O":
        return np.fromiter(
            (_y_value(v, f"{name}[{i}]") for i, v in enumerate(y)), dtype=np.uint8, count=len(y)
        )
    if kind in "iuf":
        if len(y) and (y.min() < 0 or y.max() > 1 or kind == "f"):
            i = int(np.argmax((y != 0) & (y != 1)))
            raise ValueError(f"{name}[{i}] must be 0, 1, True or False, got {y[i].item()!r}")
        return y.astype(np.uint8)
    raise TypeError(f"{name} must hold 0, 1, True or False, got dtype {y.dtype}")


def _one_score_per_key(g: np.ndarray, s: np.ndarray, keys: np.ndarray) -> np.ndarray | None:
    """The exact key (``score + 0.0``) of each of ``keys`` (grid keys of the batch's table) when all
    events of a batch that share a grid key (``g``, per event) have one score; else None. One
    scatter and one gather over the grid's key range (no sort); None too when that range is
    more than four times the batch (the scratch array would outgrow the batch's own)."""
    lo, hi = int(g.min()), int(g.max())
    if hi - lo >= 4 * len(g):
        return None
    at = g - lo
    one = np.empty(hi - lo + 1)
    one[at] = s  # (any of a key's scores)
    if not np.array_equal(one[at], s):  # some key holds two scores (-0.0 and 0.0 are one)
        return None
    return one[keys - lo] + 0.0


# ----------------------------------------------------------------------------- declared state
def _fresh_histograms(acc: "BinaryScores") -> tuple[Binning, ScoreHistogram, ScoreHistogram]:
    # every accumulator starts exact: exact=False switches to the grid past max_bins scores
    binning = ExactBinning()
    return binning, ScoreHistogram(binning), ScoreHistogram(binning)


def _merge_histograms(mine: tuple, theirs: tuple, acc: "BinaryScores") -> tuple:
    # (_check_merge moved self to units if other is)
    binning, neg, pos = mine
    return merge_into(binning, [neg, pos], theirs[0], theirs[1:], acc._units, acc._finest, acc._max_bins), neg, pos


def _encode_histograms(value: tuple, acc: "BinaryScores") -> tuple:
    binning, neg, pos = value
    levels = acc._aligned()[:2] if neg is acc._neg and pos is acc._pos and len(neg) + len(pos) > SMALL_KEYS else None
    return (None if binning.exact else binning.bins), histograms_to_json([neg, pos], ["neg", "pos"], levels)


def _decode_histograms(raw: tuple, acc: "BinaryScores", loaded: Mapping[str, Any]) -> tuple:
    bpo, hist = raw
    binning: Binning
    if not acc._exact and bpo is not None:
        if type(bpo) is not int or bpo > acc._finest:  # type: ignore[operator]  # _finest is an int unless exact
            raise ValueError(f"bins_per_octave must be an int <= bins, got {describe(bpo)}")
        binning = LogGridBinning(bpo)
    elif bpo is not None:
        raise ValueError("bins_per_octave must be null for an exact BinaryScores")
    else:
        binning = ExactBinning()
    if binning.exact and not acc._exact and isinstance(hist, Mapping):  # before allocating
        n = len(hist.get("scores", ()))
        if n > acc._max_bins:  # type: ignore[operator]  # max_bins is an int unless exact
            raise ValueError(f"an exact state (bins_per_octave null) holds {n} > max_bins scores")
    neg, pos = histograms_from_json(hist, binning, ["neg", "pos"], exact_weights=True)
    if binning.exact and not acc._exact and len(neg) + len(pos) > acc._max_bins:  # type: ignore[operator]  # an int here
        raise ValueError(f"an exact state holds {len(neg) + len(pos)} > max_bins={acc._max_bins} keys")
    if not binning.exact and binning.bins > 1 and len(neg) + len(pos) > acc._max_bins:  # type: ignore[operator]  # max_bins is set on a log grid
        raise ValueError(f"the histograms hold more than max_bins={acc._max_bins} keys")
    events, (wevents, wsum) = loaded["events"], loaded["weights"]
    for c, (h, n) in enumerate(zip((neg, pos), events)):
        if len(h) > n:
            raise ValueError(f"{len(h)} weighted bins cannot come from events[{c}] = {n}")
        w, total = _class_weight_of(n, wevents[c], wsum[c]), h.total()
        if abs(total - w) > 1e-9 * max(1.0, w):
            raise ValueError(f"weights[{c}] = {w!r} differs from the histogram's total {total!r}")
    return binning, neg, pos


def _class_weight_of(events: int, wevents: int, wsum: float | int) -> float:
    """A class's weight: its unit-weight events plus the summed weight of the others
    (``wsum`` a float in float mode, units in units mode), as a float."""
    if wsum.__class__ is int:
        return value_of((events - wevents) * UNIT + wsum)
    return (events - wevents) + wsum


def encode_weights(value: tuple, acc: "BinaryScores") -> tuple:
    wevents, wsum = value
    # weights: the class weights; weighted: their exact parts [wevents0, wevents1, wsum0, wsum1]
    # (each wsum correctly rounded); weighted_residues: the rest of the exact wsum that are not
    # floats exactly (kernels.exact_weights), omitted when there are none
    events = acc._events
    if wsum[0].__class__ is int:  # units mode
        return ([_class_weight_of(events[0], wevents[0], wsum[0]), _class_weight_of(events[1], wevents[1], wsum[1])],
                [*wevents, *values_of(wsum)], encode_residues(wsum))
    return [(events[0] - wevents[0]) + wsum[0], (events[1] - wevents[1]) + wsum[1]], [*wevents, *wsum], None


def _decode_weights(raw: tuple, acc: "BinaryScores", loaded: Mapping[str, Any]) -> tuple:
    weights = decode_list(raw[0], "weight", 2)
    for c, w in enumerate(weights):
        if w > MAX_TOTAL_WEIGHT:
            raise ValueError(f"weights[{c}] exceeds {MAX_TOTAL_WEIGHT:g}")
    events = loaded["events"]
    if raw[1] is None:  # version 1: every loaded event counts as weighted
        if raw[2] is not None:
            raise ValueError("weighted_residues must be null when weighted is")
        return list(events), _weight_mode(weights, None)
    parts = raw[1]
    if not isinstance(parts, list) or len(parts) != 4:
        raise ValueError(f"weighted must be [wevents0, wevents1, wsum0, wsum1], got {describe(parts)}")
    wevents = decode_list(parts[:2], "count", 2)
    wsum = _weight_mode([float(w) for w in decode_list(parts[2:], "weight", 2)],
                        decode_residues(raw[2], [float(w) for w in parts[2:]], "weighted_residues"))
    for c in (0, 1):
        if wevents[c] > events[c]:
            raise ValueError(f"weighted[{c}] = {wevents[c]} exceeds events[{c}] = {events[c]}")
        got = _class_weight_of(events[c], wevents[c], wsum[c])
        if got != weights[c]:
            raise ValueError(f"weighted gives class weight {got!r}, weights[{c}] is {weights[c]!r}")
    return wevents, wsum


def _weight_mode(values: list[float], units: list[int] | None) -> list:
    """Decoded summed weights: units when they have residues or one is not whole (units
    mode), else the floats (float mode)."""
    if units is None and all(is_whole(v) for v in values):
        return values
    return units if units is not None else [units_of(v) for v in values]


def square_units(weight: float) -> int:
    """An event's squared weight ``fl(w * w)`` in units (exact: every float is whole units)."""
    return units_of(weight * weight)


def encode_squares(squares: list | None, acc: "BinaryScores") -> tuple:
    """``(weighted_squares, weighted_squares_residues)``: each class's ``sum w^2`` (unit-weight
    events count 1); ``(None, None)`` without weighted events or with unknown squares."""
    wevents = acc._wevents
    if squares is None or not (wevents[0] or wevents[1]):
        return None, None
    events = acc._events
    units = [(events[c] - wevents[c]) * UNIT + squares[c] for c in (0, 1)]
    return [value_of(u) for u in units], encode_residues(units)


def _decode_squares(raw: tuple, acc: "BinaryScores", loaded: Mapping[str, Any]) -> list | None:
    values, residues = raw
    events, (wevents, wsum) = loaded["events"], loaded["weights"]
    if values is None:
        if residues is not None:
            raise ValueError("weighted_squares_residues given without weighted_squares")
        return [0, 0] if not (wevents[0] or wevents[1]) else None  # (None: written before squares were kept)
    if not (wevents[0] or wevents[1]):
        raise ValueError("weighted_squares given without weighted events")
    floats = decode_list(values, "weight", 2)
    units = decode_residues(residues, floats, "weighted_squares_residues") or [units_of(v) for v in floats]
    out = []
    for c in (0, 1):
        rest = units[c] - (events[c] - wevents[c]) * UNIT
        weight = _class_weight_of(events[c], wevents[c], wsum[c])
        if rest < 0 or floats[c] > weight * weight * (1.0 + 1e-9):
            raise ValueError(f"weighted_squares[{c}] = {floats[c]!r} cannot be the sum of squared weights of "
                             f"{events[c]} event(s) of weight {weight!r}")
        out.append(rest)
    return out


def _merge_squares(mine: list | None, theirs: list | None, acc: Any) -> list | None:
    if mine is None or theirs is None:
        return None
    mine[0] += theirs[0]
    mine[1] += theirs[1]
    return mine


def _merge_sums(mine: ProbabilitySums, theirs: ProbabilitySums, acc: "BinaryScores") -> ProbabilitySums:
    return mine.merge(theirs)  # exact: the state is a function of the multiset of events


def _encode_sums(sums: ProbabilitySums, acc: "BinaryScores") -> tuple:
    # once a score outside [0, 1] was seen the sums are meaningless: stored as 0
    if acc._outside != [None, None]:
        return 0.0, 0.0, None
    # sum_residues: the rest of each exact sum's canonical expansion (kernels.exact_sum), so a
    # restored accumulator continues exactly; null when both sums are floats exactly
    log, log_residue = sums.log.parts()
    brier, brier_residue = sums.brier.parts()
    return log, brier, ([log_residue, brier_residue] if log_residue or brier_residue else None)


def _decode_sums(raw: tuple, acc: "BinaryScores", loaded: Mapping[str, Any]) -> ProbabilitySums:
    ll, brier = decode_list(list(raw[:2]), "weight", 2)
    residues = raw[2]
    if residues is None:
        residues = [[], []]
    if not isinstance(residues, list) or len(residues) != 2:
        raise ValueError(f"sum_residues must be null or [log-loss residue, Brier residue], got {describe(residues)}")
    return ProbabilitySums.from_parts(ExactSum.from_parts(ll, residues[0], "log_loss_sum"),
                                      ExactSum.from_parts(brier, residues[1], "brier_sum"))


def _migrate_v1(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 1 had no ``weighted`` / ``log_product``: every event counts as weighted, and
    the log-loss sum is the folded sum."""
    return {**state, "weighted": None, "log_product": None}


def _migrate_v2(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 2 kept the unit-weight log loss as a running product (``log_product``); version 3
    keeps exact sums: a version-2 ``log_loss_sum`` and ``brier_sum`` are taken as exact."""
    out = {k: v for k, v in state.items() if k != "log_product"}
    out["sum_residues"] = None
    return out


def _merge_outside(mine: list, theirs: list, acc: "BinaryScores") -> list:
    lo, hi = theirs
    if lo is not None and (mine[0] is None or lo < mine[0]):
        mine[0] = lo
    if hi is not None and (mine[1] is None or hi > mine[1]):
        mine[1] = hi
    return mine


def _decode_outside(outside: Any, acc: "BinaryScores", loaded: Mapping[str, Any]) -> list:
    if outside is None:
        return [None, None]
    if not isinstance(outside, list) or len(outside) != 2 or outside == [None, None]:
        raise ValueError(f"must be null or [lowest, highest], got {describe(outside)}")
    out = [None if v is None else check_number(v, f"outside_unit[{i}]") for i, v in enumerate(outside)]
    if (out[0] is not None and out[0] >= 0) or (out[1] is not None and out[1] <= 1):
        raise ValueError(f"must be [lowest score < 0 or null, highest score > 1 or null], got {out!r}")
    return out


def _add_pairs(mine: tuple, theirs: tuple, acc: Any) -> tuple:
    (ne, nw), (te, tw) = mine, theirs
    ne[0] += te[0]
    ne[1] += te[1]
    if nw[0].__class__ is int:  # units mode (_check_merge moved self to units if other is)
        nw[0] += to_units(tw[0])
        nw[1] += to_units(tw[1])
    else:
        nw[0] += tw[0]
        nw[1] += tw[1]
    return mine


_BINARY_STATE = (
    Field("events", lambda acc: [0, 0], "counts", decode=lambda raw, acc, ld: decode_list(raw, "count", 2)),
    # events added with a weight other than 1.0, and their summed weight, per class: the other
    # events have weight 1, so class weight = events - wevents + wsum (written: class weight).
    # wsum: floats while every weight is whole, else exact units (kernels.exact_weights), the
    # residues of the units written under weighted_residues (omitted while there are none)
    Field(("weights", "weighted", "weighted_residues"), lambda acc: ([0, 0], [0.0, 0.0]),
          attrs=("_wevents", "_wsum"), merge=_add_pairs, copy=lambda v: (list(v[0]), list(v[1])),
          encode=encode_weights, decode=_decode_weights, optional=("weighted_residues",)),
    # exact sums of w * -log(p) and w * (y - s)**2 (p: the clipped probability of the true
    # class), buffered per event and folded exactly (kernels.exact_sum): order-independent
    Field(("log_loss_sum", "brier_sum", "sum_residues"), lambda acc: ProbabilitySums(), attrs="_sums",
          merge=_merge_sums, copy=lambda v: v.copy(), encode=_encode_sums, decode=_decode_sums),
    # [lowest score below 0, highest score above 1] seen (None: none), because log loss
    # and Brier score are undefined once either has been seen
    Field("outside_unit", lambda acc: [None, None], attrs="_outside", merge=_merge_outside, copy=list,
          encode=lambda v, acc: None if v == [None, None] else list(v), decode=_decode_outside),
    # the grid in force and the two histograms on it: merged together (grids coarsen)
    Field(("bins_per_octave", "histogram"), _fresh_histograms, attrs=("_binning", "_neg", "_pos"),
          merge=_merge_histograms, copy=lambda v: (v[0], v[1].copy(), v[2].copy()),
          encode=_encode_histograms, decode=_decode_histograms),
    # per class the exact sum (units) of fl(w * w) over the events of weight other than 1 (None:
    # unknown, a weighted state written before they were kept); written only while there are such
    Field(("weighted_squares", "weighted_squares_residues"), lambda acc: [0, 0], attrs="_wsq",
          merge=_merge_squares, copy=lambda v: None if v is None else list(v), encode=encode_squares,
          decode=_decode_squares, optional=("weighted_squares", "weighted_squares_residues")),
)


#: the state keys :meth:`BinaryScores._state` writes directly; another declaration of the state
#: (a field added) switches it back to the generic encoding of the declared fields
DIRECT_STATE = tuple(k for f in _BINARY_STATE for k in f.keys) == (
    "events", "weights", "weighted", "weighted_residues", "log_loss_sum", "brier_sum", "sum_residues",
    "outside_unit", "bins_per_octave", "histogram", "weighted_squares", "weighted_squares_residues")


#: the metrics :meth:`BinaryScores.interval` covers
_SCORE_INTERVALS = ("roc_auc", "log_loss", "brier_score")

# bins per octave -> (half, c, highest c - k, highest k - c) of singleton keys around 1.0,
# or None when the singleton keys are not those two runs (then binning.singleton decides)
_SINGLETON_RUNS: dict[int, tuple[int, int, int, int] | None] = {}


def _singleton_runs(binning: LogGridBinning) -> tuple[int, int, int, int] | None:
    """``LogGridBinning.singleton`` marks 0.0, 1.0 and the bins next to 1.0 narrower than the
    float spacing there: two runs of keys below and above ``c`` (the key of 1.0). Found
    once per resolution by probing every key of the two regions, and checked contiguous."""
    bins = binning.bins
    if bins not in _SINGLETON_RUNS:
        half, c = binning.half_key, binning.one_key
        runs: list[int] = []
        for sign in (-1, 1):
            ups = np.arange(1, c - half, dtype=np.int64)
            mask = binning.singleton(c + sign * ups)
            n = int(np.argmin(mask)) if not mask.all() else len(mask)
            if not mask[:n].all() or mask[n:].any():
                _SINGLETON_RUNS[bins] = None
                break
            runs.append(n)
        else:
            _SINGLETON_RUNS[bins] = (half, c, runs[0], runs[1])
    return _SINGLETON_RUNS[bins]


def _singleton(binning: Any, keys: list) -> list[bool] | None:
    """Per key: does its bin hold a single distinct score? None for exact histograms (all)."""
    if binning.exact:
        return None
    runs = _singleton_runs(binning) if isinstance(binning, LogGridBinning) else None
    if runs is None:
        return binning.singleton(np.asarray(keys, dtype=np.int64)).tolist()
    half, c, below, above = runs
    return [k == 0 or k == c or (half < k < c and c - k <= below) or (k > c and k - c <= above)
            for k in keys]


def _unit_floats(weights: dict) -> dict:
    """``{key: weight}`` of units (units mode) as ``{key: correctly rounded float}``."""
    return dict(zip(weights, values_of(list(weights.values()))))


class BinaryScores(Accumulator):
    """ROC AUC (with guaranteed bounds), curves, average precision, log loss and Brier
    score of a stream of ``(y_true, score, weight)`` events.

    ``y_true`` is 0/1 or bool; ``score`` any finite real (probability or margin, or a
    one-element array of one), higher meaning "more positive". ``pos_label`` (as
    scikit-learn's): ``y_true == pos_label`` is positive, any other label negative, e.g.
    ``pos_label="yes"`` for yes/no labels or ``pos_label=1`` for -1/+1.

    By default (``exact=False``: exact while small, grid beyond) every distinct score is
    kept while the two histograms hold at most ``max_bins`` keys (distinct (class, score)
    pairs) in all - :attr:`exact` is then True and every output equals scikit-learn's; once
    they would hold more, scores are binned on the log-relative grid of
    :class:`~streammetrics.kernels.binning.LogGridBinning`, which needs no configuration for any
    finite score. ``bins`` (a power of two, default 1024) is its finest resolution in
    bins per octave; whenever the two histograms would hold more than ``max_bins``
    (default 4096) keys in all, the grid is coarsened to half as many bins per octave
    (the grids are nested, so bins merge exactly), down to 1 bin per octave. Memory is
    thus bounded, small streams are binned finely, and the resolution in force
    (:attr:`bins_per_octave`) depends only on the events seen, so states built on any
    split of a stream merge into the state of the whole stream.

    ``exact=True`` keeps every distinct score always (``bins`` and ``max_bins`` are then
    ignored; memory grows with the distinct scores) and every ranking output equals
    scikit-learn's.

    >>> small = BinaryScores(max_bins=4).update_many([0, 1, 0, 1], [0.1, 0.2, 0.3, 0.4])
    >>> small.exact, small.bins_per_octave, small.update(1, 0.5).exact
    (True, None, False)

    Where scikit-learn raises on an empty or all-zero-weight input, the scalar metrics
    return nan with an :class:`~streammetrics.core.exceptions.UndefinedMetricWarning` and the
    curves raise ``ValueError``.

    >>> b = BinaryScores().update_many([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    >>> b.roc_auc(), [round(x, 6) for x in b.roc_auc_bounds()], round(b.log_loss(), 4)
    (0.75, [0.75, 0.75], 0.4723)
    """

    type_name = "BinaryScores"
    state_fields = _BINARY_STATE
    #: version 3: exact log-loss and Brier sums (``sum_residues``); versions 1 and 2 still load
    version = 3
    migrations = {1: _migrate_v1, 2: _migrate_v2}

    # the declared state (see _BINARY_STATE)
    _events: list[int]
    _wevents: list[int]
    _wsum: list[float | int]  # floats in float mode, ints of units in units mode
    _wsq: list[int] | None  # per class, units of sum fl(w * w) of the weighted events (None: unknown)
    _sums: ProbabilitySums
    _outside: list[float | None]
    _binning: Binning
    _neg: ScoreHistogram
    _pos: ScoreHistogram
    _xfast: tuple | None

    def __init__(
        self, bins: int | None = 1024, exact: bool = False, max_bins: int | None = 4096, pos_label: Any = None
    ) -> None:
        if pos_label is not None:
            if pos_label.__class__ not in (str, int, bool) and not isinstance(pos_label, np.generic):
                raise TypeError(f"pos_label must be a string, an integer or a bool, got {pos_label!r}")
            pos_label = to_builtin_label(pos_label, "pos_label")
            if pos_label.__class__ is float:
                raise TypeError(f"pos_label must be a string, an integer or a bool, got {pos_label!r}")
        self._pos_label = pos_label
        self._binning: Binning = make_binning(64 if exact else bins, exact)  # type: ignore[arg-type]  # bins is None only with exact=True, which ignores it
        self._finest, self._max_bins = grid_budget(bins, exact, max_bins)
        self._exact = exact
        self.reset()

    # ------------------------------------------------------------------ state
    def _refresh(self) -> None:
        """Cache the containers and constants the per-event path uses in one tuple (one
        attribute lookup per event); called whenever a container is replaced. With a
        ``pos_label``, ``update`` is this instance's :meth:`_update_by_label` (the class's
        ``update``, for 0/1 labels, stays free of the check)."""
        if self._pos_label is not None:
            self.update = self._update_by_label  # type: ignore[method-assign]  # per instance, as EventParser.parse
        self._level_cache = None  # (a container replaced, or the histograms changed: levels rebuilt)
        b = self._binning
        # the weight a default-weight event adds to its bin: 1.0, or UNIT in units mode
        self._inc = inc = UNIT if self._wsum[0].__class__ is int else 1.0
        # histograms holding a batch's arrays (ScoreHistogram.pending): the per-event paths, which
        # write the dicts, wait until _update_general builds them (_settle)
        self._waiting = self._neg.pending or self._pos.pending
        if self._waiting:
            self._fast = self._xfast = None
            return
        self._fast = (
            ((self._neg.weights, self._pos.weights), self._events, self._sums.unit, self._outside,
             b.shift, b.rounding, b.one_key, *bit_views(), inc)
            if isinstance(b, LogGridBinning) else None
        )
        # exact while small (exact=False): the per-event path of default-weight scores in (0, 1)
        self._xfast = (
            ((self._neg.weights, self._pos.weights), self._events, self._sums.unit, self._max_bins, inc)
            if b.exact and self._max_bins is not None else None
        )

    def _settle(self) -> None:
        """The histograms' dicts built (from a batch's arrays) and the per-event paths back."""
        self._neg.weights, self._pos.weights  # noqa: B018  # (reading builds them)
        self._refresh()

    @property
    def _units(self) -> bool:
        """Units mode: the summed weights (``_wsum``, the histograms) are exact ints of units."""
        return self._wsum[0].__class__ is int

    def _to_units(self) -> None:
        """Switch to units mode (exact conversion; the encoded state does not change)."""
        if not self._units:
            self._wsum[:] = [units_of(w) for w in self._wsum]
            histograms_to_units([self._neg, self._pos])
            self._refresh()

    def _check_state(self, loaded: dict[str, Any]) -> None:
        """One mode for the whole accumulator: units if any summed weight decoded as units."""
        wsum = loaded["weights"][1]
        _, neg, pos = loaded["bins_per_octave"]
        if wsum[0].__class__ is int or units_mode([neg, pos]):
            wsum[:] = [to_units(w) for w in wsum]
            histograms_to_units([neg, pos])

    @property
    def count(self) -> int:  # type: ignore[override]  # a read-only property over the declared state
        """Number of events seen (zero-weight events included)."""
        return self._events[0] + self._events[1]

    @property
    def total_weight(self) -> float:  # type: ignore[override]  # a read-only property over the declared state
        """Summed weight of the events seen."""
        return self._class_weight(0) + self._class_weight(1)

    def _class_weight(self, c: int) -> float:
        return _class_weight_of(self._events[c], self._wevents[c], self._wsum[c])

    @property
    def bins(self) -> int | None:
        """Finest resolution of the log grid, in bins per octave (None when ``exact``)."""
        return self._finest

    @property
    def bins_per_octave(self) -> int | None:
        """Resolution in force: ``bins`` halved as often as ``max_bins`` required (None while exact)."""
        return None if self._binning.exact else self._binning.bins  # type: ignore[attr-defined]  # a LogGridBinning (or the same type) here

    @property
    def max_bins(self) -> int | None:
        """Bound on the keys held by the two histograms (None when ``exact``)."""
        return self._max_bins

    @property
    def exact(self) -> bool:
        """True when every distinct score is kept: always with ``exact=True``, and while
        the scores fit ``max_bins`` otherwise (the constructor argument is in the config)."""
        return self._binning.exact

    def _config(self) -> dict[str, Any]:
        config = {"bins": self._finest, "exact": self._exact, "max_bins": self._max_bins}
        if self._pos_label is not None:  # (absent by default: states written before it read the same)
            config["pos_label"] = self._pos_label
        return config

    @property
    def pos_label(self) -> Any:
        """The positive class of ``y_true`` (None: ``y_true`` is 0/1 or bool)."""
        return self._pos_label

    def _binary(self, y_true: Any, name: str) -> int:
        """1 if ``y_true`` is ``pos_label`` else 0 (as scikit-learn's ``pos_label``)."""
        try:
            label = to_builtin_label(y_true, name)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a label (pos_label={self._pos_label!r}), got {y_true!r}") from None
        return 1 if label == self._pos_label else 0

    def _binary_array(self, y_true: Any, name: str) -> np.ndarray:
        """:meth:`_binary` of each label of a batch (validated in full), as uint8."""
        y = as_label_array(y_true, name)
        if y.dtype.kind in "iub" and self._pos_label.__class__ is not str:
            return (y == self._pos_label).astype(np.uint8)
        return np.fromiter((self._binary(v, f"{name}[{i}]") for i, v in enumerate(y)), dtype=np.uint8,
                           count=len(y))

    def _update_by_label(self, y_true: Any, score: float, weight: float = _ONE) -> "BinaryScores":
        """:meth:`update` with ``y_true`` read by ``pos_label``."""
        return BinaryScores.update(self, self._binary(y_true, "y_true"), score, weight)

    def _state(self) -> dict[str, Any]:
        """The declared fields' encoders, called directly (one snapshot per key and window)."""
        if not DIRECT_STATE:
            return super()._state()
        events, wevents, wsum = self._events, self._wevents, self._wsum
        weights, weighted, weighted_residues = encode_weights((wevents, wsum), self)
        ll, brier, residues = _encode_sums(self._sums, self)
        bpo, hist = _encode_histograms((self._binning, self._neg, self._pos), self)
        out: dict[str, Any] = {"events": list(events), "weights": weights, "weighted": weighted}
        if weighted_residues is not None:  # (an optional key: as the declared fields write it)
            out["weighted_residues"] = weighted_residues
        out.update(log_loss_sum=ll, brier_sum=brier, sum_residues=residues,
                   outside_unit=None if self._outside == [None, None] else list(self._outside),
                   bins_per_octave=bpo, histogram=hist)
        if weighted_residues is not None or wevents[0] or wevents[1]:  # (weighted events: their squares)
            squares, square_residues = encode_squares(self._wsq, self)
            if squares is not None:
                out["weighted_squares"] = squares
                if square_residues is not None:
                    out["weighted_squares_residues"] = square_residues
        return out

    def _log_loss_sum(self) -> float:
        """Sum of ``w * -log(p)`` over the events with a score in [0, 1] (exact, rounded once)."""
        return self._sums.log.value

    def _check_merge(self, other: Accumulator) -> None:
        assert isinstance(other, BinaryScores)
        largest = max(self._class_weight(c) + other._class_weight(c) for c in (0, 1))
        if largest > MAX_TOTAL_WEIGHT:
            raise ValueError(f"merged class weight would exceed {MAX_TOTAL_WEIGHT:g}")
        if other._units or largest > _FLOAT_EXACT:  # cannot fail now: to units mode (the state reads the same)
            self._to_units()

    def _collapse(self) -> None:
        """Leave exact scores for the grid, and coarsen it, while the histograms hold more
        than ``max_bins`` keys (see :func:`~streammetrics.kernels.histogram.bound`)."""
        self._binning = bound(self._binning, [self._neg, self._pos], self._finest, self._max_bins)
        self._refresh()

    def _see_outside(self, low: float | None, high: float | None) -> None:
        """Remember a score below 0 (``low``) and/or above 1 (``high``)."""
        out = self._outside
        if low is not None and (out[0] is None or low < out[0]):
            out[0] = low
        if high is not None and (out[1] is None or high > out[1]):
            out[1] = high

    # ------------------------------------------------------------------ updates
    def update(self, y_true: Any, score: float, weight: float = _ONE) -> "BinaryScores":
        """Add one event: ``y_true`` in {0, 1, False, True}, a finite ``score`` and a
        finite ``weight >= 0``. Pure Python (dict counters, ``math.log``); the common case
        (default weight, a float score strictly inside (0, 1), log grid) is inlined."""
        if y_true is True:
            y = 1
        elif y_true is False:
            y = 0
        elif y_true.__class__ is int and (y_true == 0 or y_true == 1):
            y = y_true
        else:
            y = _y_value(y_true, "y_true")
        fast = self._fast
        if fast is None or weight is not _ONE or score.__class__ is not float:
            return self._update_general(y, score, weight)
        self._level_cache = None
        hists, events, unit, outside, shift, rnd, c, as_float, as_int, inc = fast
        if 0.0 < score < 0.5:  # key: see LogGridBinning
            q = 1.0 - score
            as_float[0] = score
            k = (as_int[0] + rnd) >> shift
        elif 0.5 <= score < 1.0:
            q = 1.0 - score
            as_float[0] = q
            k = c - ((as_int[0] + rnd) >> shift)
        elif 1.0 < score < _INF:  # a margin: log loss and Brier score become undefined
            q = None
            as_float[0] = score - 1.0
            k = c + ((as_int[0] + rnd) >> shift)
            if outside[1] is None or score > outside[1]:
                outside[1] = score
        elif -_INF < score < 0.0:
            q = None
            as_float[0] = -score
            k = -((as_int[0] + rnd) >> shift)
            if outside[0] is None or score < outside[0]:
                outside[0] = score
        else:  # exactly 0 or 1 (and -0.0), or not finite
            return self._update_general(y, score, weight)
        h = hists[y]
        try:
            h[k] += inc
        except KeyError:  # a new bin: coarsen the grid if the histograms are now too big
            h[k] = inc
            if len(hists[0]) + len(hists[1]) > self._max_bins:  # type: ignore[operator]  # a log grid: an int
                self._collapse()
        events[y] += 1
        if q is None:
            return self
        unit.append(score if y else -score)  # log-loss and Brier terms: folded exactly per BUFFER
        if len(unit) >= BUFFER:
            self._sums.fold()
        return self

    def _update_general(self, y: int, score: Any, weight: Any) -> "BinaryScores":
        """:meth:`update` for any validated ``y`` and unvalidated score and weight."""
        self._level_cache = None
        if self._waiting:
            self._settle()
        xfast = self._xfast
        if xfast is not None and weight is _ONE and score.__class__ is float and 0.0 < score < 1.0:
            hists, events, unit, max_bins, inc = xfast  # exact while small: the key is the score
            h = hists[y]
            try:
                h[score] += inc
            except KeyError:
                h[score] = inc
                if len(hists[0]) + len(hists[1]) > max_bins:
                    self._collapse()  # onto the grid
            events[y] += 1
            unit.append(score if y else -score)
            if len(unit) >= BUFFER:
                self._sums.fold()
            return self
        if score.__class__ is not float or not -_INF < score < _INF:
            score = check_number(one_element_score(score), "score")
        if weight.__class__ is not float or not 0.0 <= weight < _INF:
            weight = check_weight(weight)
        wsum = self._wsum
        u: float | int
        if wsum[0].__class__ is int:  # units mode: the weight in exact units
            # (the class weight is rounded only when it or the weight could reach the bound)
            if (wsum[y] >= _NEAR_MAX_UNITS or weight >= _NEAR_MAX) and (
                    self._class_weight(y) + weight > MAX_TOTAL_WEIGHT):
                raise ValueError(f"weight {weight!r} would make the class weight exceed {MAX_TOTAL_WEIGHT:g}")
            u = UNIT if weight == 1.0 else units_of(weight)
        else:
            class_weight = (self._events[y] - self._wevents[y]) + wsum[y] + weight
            if class_weight > MAX_TOTAL_WEIGHT:
                raise ValueError(f"weight {weight!r} would make the class weight exceed {MAX_TOTAL_WEIGHT:g}")
            if is_whole(weight) and class_weight <= _FLOAT_EXACT:
                u = weight
            else:  # the first weight that is not whole: every summed weight to units
                self._to_units()
                u = units_of(weight)
        if weight:
            k = self._binning.key(score)
            h = (self._neg.weights, self._pos.weights)[y]
            old = h.get(k)
            h[k] = u if old is None else old + u
        if 0.0 <= score <= 1.0:
            sums = self._sums
            signed = score + 0.0 if y else -(score + 0.0)  # (+ 0.0: a score of -0.0 signs as 0.0)
            if weight == 1.0:  # a unit weight, as the fast path
                sums.unit.append(signed)
            else:
                sums.weighted += (weight, signed)
            if len(sums.unit) + len(sums.weighted) >= BUFFER:
                sums.fold()
        else:  # log loss and Brier score are undefined from now on; remember why
            if score < 0.0:
                self._see_outside(score, None)
            else:
                self._see_outside(None, score)
        self._events[y] += 1
        if weight != 1.0:  # events of weight 1.0 are unit events on every path (canonical state)
            self._wevents[y] += 1
            self._wsum[y] += u
            if self._wsq is not None:
                if weight * weight < _INF:
                    self._wsq[y] += square_units(weight)
                else:  # (a weight above 1e154: its square overflows, the squares become unknown)
                    self._wsq = None
        if weight and old is None and self._max_bins is not None:
            if len(self._neg) + len(self._pos) > self._max_bins:
                self._collapse()
        return self

    def update_many(self, y_true: Any, scores: Any, sample_weight: Any = None) -> "BinaryScores":
        """Add a batch (lists, numpy arrays, pandas Series), validated in full before any
        change: one vectorised key transform and one ``np.bincount`` per batch."""
        if self._pos_label is not None:
            y_true = self._binary_array(y_true, "y_true")
        y = _as_binary_array(y_true, "y_true")
        s = as_float_array(scores, "scores")
        n = check_same_length(y_true=y, scores=s)
        w = as_weight_array(sample_weight, n)
        if n == 0:
            return self
        positives = int(np.count_nonzero(y))
        class_n = (n - positives, positives)
        class_w: tuple[float, float]
        if w is None:
            class_w = class_n
        else:
            positive = y.view(bool)
            # each class summed on its own: total - positives can round to a tiny negative
            class_w = (float(w[~positive].sum()), float(w[positive].sum()))
        largest = max(self._class_weight(c) + float(class_w[c]) for c in (0, 1))
        if largest > MAX_TOTAL_WEIGHT:
            raise ValueError(f"sample_weight would make a class weight exceed {MAX_TOTAL_WEIGHT:g}")
        # units mode (exact sums) if already in it, if some weight of the batch is not whole, or
        # if a float sum could round (a class weight beyond 2**52)
        units = self._units or (w is not None and (largest > _FLOAT_EXACT or not all_whole(w)))
        weighted_n: tuple[int, int] = (0, 0)
        weighted_w: tuple[float | int, float | int] = (0.0, 0.0)
        weighted_sq: tuple[int, int] | None = (0, 0)
        if w is not None:  # weight 1.0 counts as a unit event, as per event: a canonical state
            other = w != 1.0
            positive = y.view(bool)
            weighted_n = (int(np.count_nonzero(other & ~positive)), int(np.count_nonzero(other & positive)))
            w2 = w[other] * w[other]
            if self._wsq is not None and (weighted_n[0] or weighted_n[1]) and np.isfinite(w2).all():
                got_sq = units_by_key(y[other], w2)
                weighted_sq = (got_sq.get(0, 0), got_sq.get(1, 0))
            elif self._wsq is not None and (weighted_n[0] or weighted_n[1]):
                weighted_sq = None  # (a weight above 1e154: its square overflows, the squares become unknown)
            if units:
                got = units_by_key(y[other], w[other])
                weighted_w = (got.get(0, 0), got.get(1, 0))
            else:  # whole weights: float sums are exact
                weighted_w = (float(w[other & ~positive].sum()), float(w[other & positive].sum()))
        binning, keys, table = self._batch_table(s, y, w, units)
        if not binning.exact:  # the batch alone may already need a coarser grid
            while np.count_nonzero(table) > self._max_bins and binning.bins > 1:  # type: ignore[attr-defined,operator]  # a log grid: bins, max_bins ints
                binning, keys, table = coarsen_table(binning, keys, table)  # type: ignore[arg-type]  # a LogGridBinning
        lo, hi = float(s.min()), float(s.max())
        if lo >= 0.0 and hi <= 1.0 and self._outside == [None, None]:
            probabilities = True
            outside = None
        else:  # log loss and Brier score are undefined from now on: no need for their sums
            probabilities = False
            outside = (lo if lo < 0.0 else None, hi if hi > 1.0 else None)
        # ---- nothing below can fail
        fresh = not (len(self._neg) or len(self._pos))
        if units:
            self._to_units()
        if self._binning.exact and not binning.exact:
            self._binning = to_grid([self._neg, self._pos], LogGridBinning(self._finest))  # type: ignore[arg-type]  # an int here
        while self._binning.bins is not None and self._binning.bins > binning.bins:  # type: ignore[attr-defined]  # a LogGridBinning (or the same type) here
            self._binning = coarsen_all([self._neg, self._pos])
        insert_table((self._neg, self._pos), keys, table, arrays=True)
        self._collapse()  # (clears the levels)
        if fresh and not units and self._binning == binning:
            self._seed_levels(keys, table)
        for c in (0, 1):
            self._events[c] += int(class_n[c])
            if w is not None:
                self._wevents[c] += weighted_n[c]
                self._wsum[c] += weighted_w[c]
                if weighted_sq is None:
                    self._wsq = None
                elif self._wsq is not None:
                    self._wsq[c] += weighted_sq[c]
        if probabilities:  # exact sums of the same per-event terms as the per-event path
            self._sums.add_scores(s, y, w)
        if outside is not None:
            self._see_outside(*outside)
        return self

    def _batch_table(
        self, s: np.ndarray, y: np.ndarray, w: np.ndarray | None, units: bool
    ) -> tuple[Binning, np.ndarray, np.ndarray]:
        """``(binning, keys, table)``: a validated batch tabulated (:func:`aggregate`) on the
        accumulator's binning, or on the finest grid when the batch alone holds more than
        ``max_bins`` distinct (class, score) keys while the accumulator is exact while small.

        That is decided without sorting a large batch, cheap facts first: a batch of at most
        ``max_bins`` events is tabulated by its exact scores (a small sort); a larger one is
        keyed on the finest grid (one ``np.bincount``), and more than ``max_bins`` distinct
        (class, grid key) cells mean more distinct (class, score) keys (the grid key is a
        function of the score): the grid table is the answer. A batch with few grid cells may
        still be exact: when each of its grid keys holds one distinct score (a scatter and a
        gather: :func:`_one_score_per_key`), the grid table is its exact table; only otherwise are
        its exact scores sorted."""
        binning = self._binning
        finest, max_bins = self._finest, self._max_bins
        if not binning.exact or finest is None or max_bins is None:
            return (binning, *aggregate(binning.keys(s), y, 2, w, exact=units))
        grid = LogGridBinning(finest)
        if len(s) > max_bins:
            g = grid.keys(s)
            keys, table = aggregate(g, y, 2, w, exact=units)
            if np.count_nonzero(table) > max_bins:
                return grid, keys, table
            scores = _one_score_per_key(g, s, keys)
            if scores is not None:  # each grid key holds one distinct score: the exact table, unsorted
                return binning, scores, table
        keys, table = aggregate(binning.keys(s), y, 2, w, exact=units)
        if np.count_nonzero(table) > max_bins:
            # the batch alone has too many distinct scores: to the finest grid right away
            return table_to_grid(grid, keys, table)
        return binning, keys, table

    # ------------------------------------------------------------------ removal
    def remove(self, y_true: Any, score: float, weight: float = 1.0) -> "BinaryScores":
        """Undo one earlier ``update(y_true, score, weight)``; returns ``self``.

        Not part of the accumulator protocol: it lets sliding windows (e.g. river's
        ``utils.Rolling``) subtract the event that leaves the window. What is removed:

        * the event's weight from its bin (``h[key(score)] -= weight``, exactly; a bin
          that falls to 0, or below after removing a weight at most 1e-9 above what it holds
          (a bin of a state written before exact sums, rounded), is dropped; once only
          unit-weight events of the class remain, its bins are their counts) and from its
          class's event count and weight;
        * its log-loss term ``weight * -log p`` (``p`` the clipped probability of the true
          class) and Brier term ``weight * (y - score)**2``, exactly (the sums are exact).

        Unit-weight histograms hold integral counts, so ``update`` then ``remove`` gives
        the same histograms, counts, log-loss and Brier sums as never adding the event.
        Not undone: the grid's coarsening (a removal never
        refines ``bins_per_octave`` back, except when the accumulator becomes empty, which
        restores a fresh state), and the record of scores outside [0, 1], which keeps
        ``log_loss``/``brier_score`` undefined until the accumulator is empty or reset.

        ``ValueError`` (state unchanged) when the event cannot have been added: no event
        of that class left, (weight > 0) less weight in the score's bin than ``weight``
        (detected per bin: with ``exact=True`` per distinct score), or the class's last
        (weighted) event leaving weight behind. A zero-weight event is otherwise
        indistinguishable from the other events of its class.
        """
        if self._pos_label is not None:
            y = self._binary(y_true, "y_true")
        else:
            y = 1 if y_true is True else 0 if y_true is False else _y_value(y_true, "y_true")
        s = check_number(one_element_score(score), "score")
        w = check_weight(weight)
        if self._waiting:
            self._settle()
        events, wevents, wsum = self._events, self._wevents, self._wsum
        # the checks read floats (summed weights rounded in units mode), the removal is exact
        wsum_y = _value(wsum[y])
        unit = w == 1.0 and events[y] - wevents[y] > 0  # one of the default-weight events
        if events[y] == 0 or (not unit and (wevents[y] == 0 or w > wsum_y * (1.0 + 1e-9))):
            raise ValueError(
                f"cannot remove an event (y_true={y}, score={s!r}, weight={w!r}) that was never "
                f"added: {events[y] - wevents[y]} unit-weight and {wevents[y]} weighted event(s) "
                f"of class {y} (weight {wsum_y!r}) remain"
            )
        h = (self._neg.weights, self._pos.weights)[y]
        k = self._binning.key(s)
        old = h.get(k) if w else 0.0
        if w and (old is None or w > _value(old) * (1.0 + 1e-9)):
            raise ValueError(
                f"cannot remove an event (y_true={y}, score={s!r}, weight={w!r}) that was never "
                f"added: its bin holds weight {_value(old or 0.0)!r} of class {y}"
            )
        # the last event (weighted event) of the class must take all its weight with it
        left = None
        if events[y] == 1:
            left = _value(sum(h.values())) - w
        elif not unit and wevents[y] == 1:
            left = wsum_y - w
        if left is not None and left > 1e-9 * (w + (events[y] - wevents[y]) + wsum_y):
            raise ValueError(
                f"cannot remove an event (y_true={y}, score={s!r}, weight={w!r}) that was never "
                f"added: it would be the last {'weighted ' if events[y] > 1 else ''}event of "
                f"class {y}, but weight {left!r} would remain"
            )
        # ---- nothing below can fail
        if not is_whole(w):
            self._to_units()  # (a no-op in units mode)
        units = self._units
        u: float | int = (UNIT if w == 1.0 else units_of(w)) if units else w
        h = (self._neg.weights, self._pos.weights)[y]
        if w:
            old = h[k]
            new = old - u
            if new <= 0:  # exact sums: only an emptied bin (or one of a rounded older state) goes
                del h[k]
            else:
                h[k] = new
        events[y] -= 1
        if not unit:
            wevents[y] -= 1
            wsum[y] = wsum[y] - u if wevents[y] and wsum[y] > u else (0 if units else 0.0)
            if self._wsq is not None and w * w < _INF:
                self._wsq[y] = max(self._wsq[y] - square_units(w), 0) if wevents[y] else 0
            elif not (wevents[0] or wevents[1]):
                self._wsq = [0, 0]  # only unit-weight events remain: known again
        self._level_cache = None
        if events[0] + events[1] == 0:
            self.reset()  # empty: the state of a new accumulator (finest grid)
            return self
        if events[y] == 0:
            h.clear()  # drop residue of float weights
        elif units and not unit and not wevents[y]:
            # only unit-weight events of the class remain: its bins are their counts (a bin of a
            # state written before exact sums, rounded, may keep a residue: dropped here)
            for key, x in list(h.items()):
                c = (x + (UNIT >> 1)) // UNIT
                if c > 0:
                    h[key] = c * UNIT
                else:
                    del h[key]
        if 0.0 <= s <= 1.0:  # the event's exact terms, negated: the sums are as if never added
            sums = self._sums
            sums.weighted += (-w, s + 0.0 if y else -(s + 0.0))  # (a score of -0.0 signs as 0.0)
            if len(sums.unit) + len(sums.weighted) >= BUFFER:
                sums.fold()
        return self

    # ------------------------------------------------------------------ levels
    #: :func:`~streammetrics.kernels.histogram.aligned` of the two histograms (read-only arrays)
    #: while they are unchanged; None: built on the next reading. Every writer of the histograms
    #: clears it (the update paths, ``remove``, and ``_refresh``, which merges, loads, resets,
    #: copies and regrids call); ``update_many`` into empty histograms sets it from its batch table
    #: (with the ROC AUC read from them, once read: ``{"roc_auc": value}``)
    _level_cache: tuple[np.ndarray, np.ndarray, dict[str, float]] | None = None

    def _aligned(self) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        """``(keys, weights, memo)``: :func:`~streammetrics.kernels.histogram.aligned` of the two
        histograms, built once while they are unchanged (a window's snapshot, intervals and state
        read them: one build), and a dict of values read from them (as long as they live)."""
        cached = self._level_cache
        if cached is None:
            keys, w = aligned(self._neg, self._pos)
            keys.flags.writeable = w.flags.writeable = False  # (shared by every reader)
            cached = self._level_cache = (keys, w, {})
        return cached

    def _seed_levels(self, keys: np.ndarray, table: np.ndarray) -> None:
        """Set the levels from the float table that filled the empty histograms (their exact
        content: :func:`~streammetrics.kernels.histogram.levels_of_table`)."""
        levels = levels_of_table(keys, table, (len(self._neg), len(self._pos)))
        if levels is not None:
            self._level_cache = (*levels, {})

    def _levels(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(keys, neg, pos)``: non-empty levels in ascending score order."""
        keys, w, _ = self._aligned()
        return keys, w[0], w[1]

    def class_table(self) -> tuple[np.ndarray, np.ndarray, Binning]:
        """``(keys, table, binning)``: the levels in ascending score order, ``table[0]`` the
        negatives' and ``table[1]`` the positives' weights, on the binning in force (read-only
        arrays: the levels built once while the histograms are unchanged)."""
        keys, table, _ = self._aligned()
        return keys, table, self._binning

    def _one_class(self) -> bool:
        return not (self._events[0] and self._events[1])

    def has_one_class(self) -> bool:
        """Whether a class has no events (ROC AUC and its bounds are then undefined)."""
        return self._one_class()

    # ------------------------------------------------------------------ small reads (snapshots)
    def small_levels(self, limit: int) -> tuple[list[Any], list[float], list[float], list[bool] | None] | None:
        """``(keys, neg, pos, singleton)`` while the two histograms hold at most ``limit`` keys
        together (None beyond): the union of their keys ascending, each class's weight per key
        (0.0 where absent; whole units read as their correctly rounded floats) and per key whether
        its bin holds a single distinct score (None for exact histograms: every one does). What a
        snapshot's one-pass ranking reads (:func:`streammetrics.kernels.ranking_small.ranking_summary`)."""
        if len(self._neg) + len(self._pos) > limit:
            return None
        neg_w, pos_w = self._neg.weights, self._pos.weights
        if self._units:
            neg_w, pos_w = _unit_floats(neg_w), _unit_floats(pos_w)
        keys, neg, pos = levels(neg_w, pos_w)
        return keys, neg, pos, _singleton(self._binning, keys)

    def whole_weights(self) -> tuple[dict, dict] | None:
        """Each class's ``{key: weight}`` as floats while every weight is whole (None otherwise)."""
        neg, pos = whole_floats(self._neg.weights, self._units), whole_floats(self._pos.weights, self._units)
        return None if neg is None or pos is None else (neg, pos)

    @property
    def class_counts(self) -> tuple[int, int]:
        """Events seen per class ``(negatives, positives)``, zero-weight ones included."""
        return self._events[0], self._events[1]

    def score_sums(self) -> tuple[float, float]:
        """``(sum of w * -log(p), sum of w * (p - y)^2)`` over the events with a score in [0, 1]
        (exact, each rounded once): log loss and Brier score times the labelled weight."""
        return self._log_loss_sum(), self._sums.brier.value

    @property
    def outside_unit(self) -> bool:
        """Whether some score fell outside [0, 1] (log loss and Brier score are then undefined)."""
        return self._outside != [None, None]

    # ------------------------------------------------------------------ ranking
    def roc_auc(self, max_fpr: float | None = None) -> float:
        """ROC AUC (``sklearn.metrics.roc_auc_score``): pairs of tied scores, and with bins
        pairs in one bin, count half. ``max_fpr`` gives the McClish-standardised partial
        AUC. nan with an UndefinedMetricWarning when no event or only one class has been seen."""
        ranking.check_max_fpr(max_fpr)
        if not self.count:
            return undefined("No event: ROC AUC is not defined.", 2)
        if self._one_class():
            return ranking.warn_one_class()
        keys, w, memo = self._aligned()
        if max_fpr is not None:
            return ranking.roc_auc(w[0], w[1], max_fpr)
        auc = memo.get("roc_auc")
        if auc is None:
            auc = ranking.roc_auc(w[0], w[1])
            if not math.isnan(auc):  # (nan warns on each reading)
                memo["roc_auc"] = auc
        return auc

    def roc_auc_bounds(self) -> tuple[float, float]:
        """``(low, high)`` guaranteed to contain the exact ROC AUC of the events seen:
        pairs in one bin count all wrong / all right (exactly half in bins that hold a
        single distinct score, such as the 0.0 and 1.0 bins). ``(auc, auc)`` when
        ``exact``, widened only by the bound on float64 rounding that the binned bounds carry
        too (``(4 L + 32) * eps`` for ``L`` levels); ``(nan, nan)`` where :meth:`roc_auc` is nan."""
        auc = self.roc_auc()
        if math.isnan(auc):
            return auc, auc
        keys, neg, pos = self._levels()
        if self._binning.exact:
            return ranking.rounding_interval(auc, len(keys))
        return ranking.roc_auc_bounds(neg, pos, self._binning.singleton(keys))

    def roc_curve(self, drop_intermediate: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(fpr, tpr, thresholds)`` as ``sklearn.metrics.roc_curve``. With bins a
        threshold is the smallest score of a bin: events at or above it are those in that
        bin or higher ones."""
        keys, neg, pos = self._levels()
        return ranking.roc_curve(neg, pos, self._binning.lowest(keys), drop_intermediate)

    def precision_recall_curve(
        self, drop_intermediate: bool = False
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(precision, recall, thresholds)`` as ``sklearn.metrics.precision_recall_curve``
        (thresholds as in :meth:`roc_curve`)."""
        keys, neg, pos = self._levels()
        return ranking.precision_recall_curve(
            neg, pos, self._binning.lowest(keys), drop_intermediate
        )

    def average_precision(self) -> float:
        """``sklearn.metrics.average_precision_score``: the step sum
        ``sum((R[n] - R[n-1]) * P[n])``, not a trapezoid."""
        _, neg, pos = self._levels()
        return ranking.average_precision(neg, pos)

    def confusion_at(self, threshold: float) -> ConfusionMatrix:
        """ConfusionMatrix (labels [0, 1]) of the predictions ``score >= threshold``.

        Exact when ``exact``, and with bins when ``threshold`` is the smallest score of its
        bin (every threshold of :meth:`roc_curve`, and 0, 0.5, 1); otherwise the events of
        the threshold's bin are all predicted positive. Cells of zero weight are left out.
        """
        from streammetrics.metrics.confusion import ConfusionMatrix

        t = check_number(threshold, "threshold")
        keys, neg, pos = self._levels()
        above = keys >= self._binning.key(t)
        cells: dict[tuple[Hashable, Hashable], float] = {
            (0, 0): float(neg[~above].sum()),
            (0, 1): float(neg[above].sum()),
            (1, 0): float(pos[~above].sum()),
            (1, 1): float(pos[above].sum()),
        }
        cells = {cell: w for cell, w in cells.items() if w > 0}
        return ConfusionMatrix._from_counts([0, 1], cells, self.count)

    # ------------------------------------------------------------------ probabilities
    def _probability_metric(self, name: str, total: float) -> float:
        if self._outside != [None, None]:
            lo, hi = self._outside
            raise ValueError(
                f"{name} is defined for scores in [0, 1] (probabilities), but scores "
                f"outside it were seen (lowest below 0: {lo!r}, highest above 1: {hi!r})"
            )
        if not self.total_weight > 0:
            return undefined(f"No event with a non-zero weight: {name} is not defined.", 3)
        return total / self.total_weight

    def log_loss(self) -> float:
        """``sklearn.metrics.log_loss(y_true, scores, sample_weight=..., labels=[0, 1])``:
        the weighted mean of ``-log(p)``, ``p`` the probability given to the true class
        clipped to ``[eps, 1 - eps]`` (float64 eps, 2.2e-16). ValueError once a score
        outside [0, 1] has been seen."""
        return self._probability_metric("log_loss", self._log_loss_sum())

    def brier_score(self) -> float:
        """``sklearn.metrics.brier_score_loss``: the weighted mean of ``(y - score)**2``.
        ValueError once a score outside [0, 1] has been seen."""
        return self._probability_metric("brier_score", self._sums.brier.value)

    # ------------------------------------------------------------------ operating points
    # (issue 28: the formulas and tie conventions are those of kernels.operating_points)
    def _operating_levels(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """``(neg, pos, thresholds, singleton)`` of the levels (singleton None: exact)."""
        keys, neg, pos = self._levels()
        singleton = None if self._binning.exact else self._binning.singleton(keys)
        return neg, pos, self._binning.lowest(keys), singleton

    def _operating_point(self, kind: str, target: float, name: str) -> tuple[float, float, float]:
        from streammetrics.kernels import operating_points

        t = operating_points.check_target(target, name)
        neg, pos, thresholds, singleton = self._operating_levels()
        found = getattr(operating_points, kind)(neg, pos, thresholds, t, singleton)
        if math.isnan(found[0]):
            warnings.warn(f"{kind} is not defined without both classes (positives for precision and recall).",
                          UndefinedMetricWarning, stacklevel=3)
        return found

    def precision_at_recall(self, min_recall: float) -> tuple[float, float]:
        """``(precision, threshold)``: the highest precision of ``score >= threshold`` over the
        thresholds whose recall is at least ``min_recall`` (torchmetrics'
        ``BinaryPrecisionAtFixedRecall`` on scikit-learn's ``precision_recall_curve``; ties
        go to the higher recall, then the higher threshold; ``(0.0, inf)`` when none
        qualifies). With bins, attained by its threshold and at most the exact value
        (:meth:`precision_at_recall_bounds`). nan without positive weight."""
        value, threshold, _ = self._operating_point("precision_at_recall", min_recall, "min_recall")
        return value, threshold

    def precision_at_recall_bounds(self, min_recall: float) -> tuple[float, float]:
        """``(low, high)`` holding the exact :meth:`precision_at_recall` value of the events
        (``low`` is the binned value; equal when :attr:`exact`)."""
        value, _, high = self._operating_point("precision_at_recall", min_recall, "min_recall")
        return value, high

    def recall_at_precision(self, min_precision: float) -> tuple[float, float]:
        """``(recall, threshold)``: the highest recall over the thresholds whose precision is
        at least ``min_precision`` (torchmetrics' ``BinaryRecallAtFixedPrecision``; ties go to
        the higher precision, then the higher threshold; ``(0.0, inf)`` when none qualifies).
        Bins: see :meth:`recall_at_precision_bounds`."""
        value, threshold, _ = self._operating_point("recall_at_precision", min_precision, "min_precision")
        return value, threshold

    def recall_at_precision_bounds(self, min_precision: float) -> tuple[float, float]:
        """``(low, high)`` holding the exact :meth:`recall_at_precision` value."""
        value, _, high = self._operating_point("recall_at_precision", min_precision, "min_precision")
        return value, high

    def tpr_at_fpr(self, max_fpr: float) -> tuple[float, float]:
        """``(tpr, threshold)``: the highest true-positive rate over the points of
        ``sklearn.metrics.roc_curve`` whose false-positive rate is at most ``max_fpr`` (the
        point (0, 0) at threshold ``inf`` included; torchmetrics'
        ``BinarySensitivityAtSpecificity`` with ``min_specificity = 1 - max_fpr``; ties go to
        the higher threshold). nan unless both classes have weight."""
        value, threshold, _ = self._operating_point("tpr_at_fpr", max_fpr, "max_fpr")
        return value, threshold

    def tpr_at_fpr_bounds(self, max_fpr: float) -> tuple[float, float]:
        """``(low, high)`` holding the exact :meth:`tpr_at_fpr` value."""
        value, _, high = self._operating_point("tpr_at_fpr", max_fpr, "max_fpr")
        return value, high

    def expected_cost(self, cost_fp: float, cost_fn: float, threshold: float) -> float:
        """Cost per event (unit of weight) of predicting ``score >= threshold``:
        ``(cost_fp * FP + cost_fn * FN) / W``. Exact where :meth:`confusion_at` is; otherwise the
        threshold's bin counts as predicted positive (:meth:`expected_cost_bounds`). nan (with
        an UndefinedMetricWarning) when no event has weight."""
        return self.expected_cost_bounds(cost_fp, cost_fn, threshold)[0]

    def expected_cost_bounds(self, cost_fp: float, cost_fn: float, threshold: float) -> tuple[float, float, float]:
        """``(cost, low, high)``: :meth:`expected_cost` and bounds on the events' exact cost
        (a threshold strictly inside a bin of several scores: its events either side)."""
        from streammetrics.kernels import operating_points

        a = operating_points.check_cost(cost_fp, "cost_fp")
        b = operating_points.check_cost(cost_fn, "cost_fn")
        t = check_number(threshold, "threshold")
        keys, neg, pos = self._levels()
        k = self._binning.key(t)
        at = keys >= k
        split = np.zeros(len(keys), dtype=bool)
        if not self._binning.exact:
            inside = (keys == k) & ~self._binning.singleton(keys)
            if inside.any() and t > float(self._binning.lowest(keys[inside])[0]):
                split = inside
        found = operating_points.expected_cost_bounds(neg, pos, at, split, a, b)
        if math.isnan(found[0]):
            warnings.warn("No event with a non-zero weight: expected_cost is not defined.",
                          UndefinedMetricWarning, stacklevel=2)
        return found

    # ------------------------------------------------------------------ intervals (issue 26)
    @property
    def unit_weights(self) -> bool:
        """Every event had weight 1 (the intervals' effective sample size is then the count)."""
        return not (self._wevents[0] or self._wevents[1])

    def interval_levels(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(lo, hi, neg, pos)``: per level (ascending) the score range it holds (``lo == hi``
        for a distinct score; :func:`~streammetrics.kernels.levels.level_bounds` on bins) and
        the weight of each class: the input of the interval kernels."""
        from streammetrics.kernels.levels import level_bounds

        keys, neg, pos = self._levels()
        lo, hi = level_bounds(self._binning, keys)
        return lo, hi, neg, pos

    def class_squares(self) -> tuple[float, float] | None:
        """Per class (negatives, positives) the sum of squared weights ``sum w^2`` (exact,
        correctly rounded; a unit-weight event counts 1), or None for a weighted state loaded
        without them: the intervals' effective sample sizes (Kish)."""
        if self._wsq is None:
            return None
        e, we, sq = self._events, self._wevents, self._wsq
        return value_of((e[0] - we[0]) * UNIT + sq[0]), value_of((e[1] - we[1]) * UNIT + sq[1])

    def interval(self, metric: str, confidence: float = 0.95) -> tuple[float, float] | None:
        """Confidence interval of ``roc_auc``, ``log_loss`` or ``brier_score`` for the population
        the events are drawn from (:mod:`streammetrics.kernels.intervals`: DeLong on the logit
        scale widened by :meth:`roc_auc_bounds`; mean +- z s / sqrt(n) with the second moment
        from the histograms; weighted events on Kish pseudo-counts from :meth:`class_squares`).
        None below the minimum rule, where the metric is undefined, or for a weighted state
        loaded without its squared weights.

        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> y = rng.integers(0, 2, 400)
        >>> b = BinaryScores().update_many(y, np.clip(0.3 * y + rng.random(400) * 0.7, 0, 1))
        >>> low, high = b.interval("roc_auc")
        >>> low < b.roc_auc() < high
        True
        """
        from streammetrics.kernels import intervals as iv

        iv.z_value(confidence)
        if metric not in _SCORE_INTERVALS:
            raise ValueError(f"metric must be 'roc_auc', 'log_loss' or 'brier_score', got {metric!r:.40}")
        return self.intervals(confidence)[metric]

    def intervals(self, confidence: float = 0.95) -> dict[str, tuple[float, float] | None]:
        """:meth:`interval` of ``roc_auc``, ``log_loss`` and ``brier_score``, from one pass."""
        from streammetrics.kernels import intervals as iv

        z = iv.z_value(confidence)
        squares = None if self.unit_weights else self.class_squares()
        if not self.count or not self.total_weight > 0 or (squares is None and not self.unit_weights):
            return dict.fromkeys(_SCORE_INTERVALS)
        lo, hi, neg, pos = self.interval_levels()
        low, high = self.roc_auc_bounds() if not self._one_class() else (math.nan, math.nan)
        probability = self._outside == [None, None] and self.total_weight > 0
        columns = iv.score_interval_columns(
            [0], lo, hi, neg, pos, low, high, self.log_loss() if probability else math.nan,
            self.brier_score() if probability else math.nan, z, squares)
        return {name: iv.as_pair(*columns[name]) for name in _SCORE_INTERVALS}
