"""The base of the accumulators of one score per column (``MulticlassScores``: one per
class; ``MultilabelScores``: one per label) and the averaging helpers they share.

:class:`ScoreColumns` holds the configuration both have (the column names, the score
binning, the histogram budget ``max_bins`` / ``max_exact``), its checks, and the logic of
the budget shared by all their histograms (exact while small, then one log grid coarsened
for all of them together); ``average_scores`` / ``average_intervals`` apply scikit-learn's
``average`` argument (None, macro, weighted) to per-column values and bounds.
"""
from __future__ import annotations

import math
from typing import Any, Callable, ClassVar, Mapping, TypeVar, overload

import numpy as np

from streammetrics.core import state as _state_mod
from streammetrics.core.accumulator import Accumulator
from streammetrics.core.exceptions import undefined
from streammetrics.core.state import describe
from streammetrics.core.validation import labels_to_json
from streammetrics.kernels import ranking
from streammetrics.kernels.binning import MAX_OCTAVES, Binning, ExactBinning, LogGridBinning, binning_from_config
from streammetrics.kernels.exact_weights import FLOAT_EXACT, grouped_units
from streammetrics.kernels.histogram import (
    ScoreHistogram,
    add_flat,
    aggregate,
    coarser_of,
    fit,
    fit_flat,
    flatten,
    rebuild,
    regrid_flat,
)
from streammetrics.kernels.histogram_json import pack_dicts, unpack_flat

__all__ = ["ScoreColumns", "average_scores", "average_intervals", "binary_auc", "warn_no_events", "check_average",
           "DEFAULT_MAX_BINS", "DEFAULT_MAX_EXACT"]

_EPS = float(np.finfo(np.float64).eps)


# ----------------------------------------------------------------------------- helpers
def average_scores(scores: np.ndarray, average: str | None, weights: np.ndarray | None) -> Any:
    """The averaging of scikit-learn's ``_average_binary_score``: per-item ``scores`` as an
    array (``average=None``), their mean, or their ``weights``-weighted mean where items of
    weight 0 count as 0 (so that their nan does not spread)."""
    if average is None:
        return scores
    if weights is None:
        return float(np.mean(scores))
    return float(np.average(np.where(weights == 0, 0.0, scores), weights=weights))


def average_intervals(
    lows: np.ndarray, highs: np.ndarray, average: str | None, weights: np.ndarray | None
) -> tuple[Any, Any]:
    """Average per-item bounds as :func:`average_scores` averages values (non-negative
    weights keep the containment), widened by a bound on the float rounding of the mean."""
    low = average_scores(lows, average, weights)
    high = average_scores(highs, average, weights)
    if average is None:
        return low, high
    if math.isnan(low) or math.isnan(high):
        return math.nan, math.nan
    slack = 4 * (len(lows) + 2) * _EPS
    return max(0.0, low - slack), min(1.0, high + slack)


def binary_auc(
    binning: Binning, keys: np.ndarray, neg: np.ndarray, pos: np.ndarray, bounds: bool
) -> tuple[float, float, float]:
    """``(auc, low, high)`` of one binary ranking problem on aligned levels; the bounds are
    ``(auc, auc)`` when ``bounds`` is false, the binning exact, or the AUC nan."""
    auc = ranking.roc_auc(neg, pos)
    if not bounds or binning.exact or math.isnan(auc):
        return auc, auc, auc
    low, high = ranking.roc_auc_bounds(neg, pos, binning.singleton(keys))
    return auc, low, high


def warn_no_events(name: str) -> float:
    return undefined(f"No event with a non-zero weight: {name} is not defined.", 3)


def check_average(average: Any, options: tuple, what: str) -> None:
    if average not in options:
        raise ValueError(f"average must be one of {options} for {what}, got {average!r}")


# ----------------------------------------------------------------------------- accumulator
#: default bound on the histogram entries (histogram, key) of one accumulator, all together
DEFAULT_MAX_BINS = 1 << 16
#: default bound on the exact-score entries kept while the state is exact ("exact while small")
DEFAULT_MAX_EXACT = 1 << 13


def _budget(value: Any, name: str) -> int:
    if type(value) is not int:
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value!r}")
    return value


Flat = tuple[np.ndarray, np.ndarray, np.ndarray]


_S = TypeVar("_S", bound="ScoreColumns")


class ScoreColumns(Accumulator):
    """Configuration and histogram budget shared by the accumulators of one score per
    column (class or label): the column names (config key :attr:`columns_key`), the score
    binning, and one budget for all their histograms together.

    Exact while small: with ``exact=False`` every distinct score is kept while the
    histograms hold at most ``max_exact`` entries (an entry: one key of one histogram) in
    all; beyond, every histogram moves to the log grid with ``bins`` bins per octave, which
    is coarsened for all of them together (half as many bins per octave, and below 1 bin
    per octave bins 2, 4, ... 1024 octaves wide) while they hold more than ``max_bins``
    entries. The coarsest grid has at most 8 keys per histogram (0, (0, 0.5), [0.5, 1), 1
    and two each below 0 and above 1), so the entries are at most
    ``max(max_bins, 8 * histograms)``, and at most ``columns * count`` (an event adds at
    most one entry per column). Each step happens exactly when the events seen need it,
    so the state depends only on the multiset of events. ``exact=True``: always exact,
    unbounded. The ROC AUC bounds account for every bin, however wide."""

    #: config key of the column names: "classes" or "labels"
    columns_key: ClassVar[str] = "classes"
    #: summed weights in units (kernels.exact_weights) rather than whole floats
    _units: bool

    def _to_units(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _whole_total(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def merge(self: _S, other: Accumulator) -> _S:
        """Fold ``other`` in (see :class:`~streammetrics.core.accumulator.Accumulator`). Exact
        weight sums: both sides go to units mode when either is in it, or when their float
        totals together would pass :data:`~streammetrics.kernels.exact_weights.FLOAT_EXACT`;
        ``other`` itself is never changed (a copy of it is)."""
        if isinstance(other, type(self)):
            if not self._units and not other._units and self._whole_total() + other._whole_total() > FLOAT_EXACT:
                self._to_units()  # float sums could round
            if other._units != self._units:
                if self._units:
                    other = other.copy()
                    other._to_units()
                else:
                    self._to_units()  # the same state, in units
        return super().merge(other)
    _cols: Any
    _binning: Binning
    _entries: int

    def setup_budget(self, bins: int | None, exact: bool, max_bins: int | None, max_exact: int | None) -> None:
        if type(exact) is not bool:
            raise TypeError(f"exact must be a bool, got {exact!r}")
        self._exact = exact
        if exact:
            self._finest = self._max_bins = self._max_exact = None
        else:
            LogGridBinning(bins)  # type: ignore[arg-type]  # validates bins (TypeError / ValueError)
            self._finest = bins
            self._max_bins = _budget(DEFAULT_MAX_BINS if max_bins is None else max_bins, "max_bins")
            self._max_exact = _budget(DEFAULT_MAX_EXACT if max_exact is None else max_exact, "max_exact")

    # ------------------------------------------------------------------ configuration
    @property
    def bins(self) -> int | None:
        """Finest resolution of the log grid, in bins per octave (None when ``exact=True``)."""
        return self._finest

    @property
    def bins_per_octave(self) -> int | float | None:
        """Resolution in force: None while exact, else bins per octave (a fraction
        ``1 / 2**j`` once a bin spans ``2**j`` octaves)."""
        return None if self._binning.exact else self._binning.per_octave  # type: ignore[attr-defined]  # a log grid

    @property
    def binning(self) -> Binning:
        """The binning in force: exact scores while exact, else the log grid."""
        return self._binning

    @property
    def exact_config(self) -> bool:
        """The constructor's ``exact``: every score kept, unbounded (the config key ``exact``)."""
        return self._exact

    @property
    def max_bins(self) -> int | None:
        """Bound on the histogram entries on a grid (None when ``exact=True``)."""
        return self._max_bins

    @property
    def max_exact(self) -> int | None:
        """Bound on the exact-score entries while exact (None when ``exact=True``)."""
        return self._max_exact

    @property
    def exact(self) -> bool:
        """True when every distinct score is kept: always with ``exact=True``, and while
        the entries fit ``max_exact`` otherwise (the constructor argument is in the config)."""
        return self._binning.exact

    def _config(self) -> dict[str, Any]:
        return {self.columns_key: labels_to_json(self._cols.names), "bins": self._finest, "exact": self._exact,
                "max_bins": self._max_bins, "max_exact": self._max_exact}

    @classmethod
    def _from_config(cls, config: Mapping[str, Any]) -> Any:
        key = cls.columns_key
        keys = set(config)
        if not ({key, "bins", "exact"} <= keys <= {key, "bins", "exact", "max_bins", "max_exact"}) \
                or not isinstance(config[key], list):
            raise ValueError(f"config must be {{'{key}': [...], 'bins', 'exact', 'max_bins', 'max_exact'}}, "
                             f"got {describe(dict(config))}")
        binning = binning_from_config({"bins": config["bins"], "exact": config["exact"]})
        budgets = {k: config.get(k) for k in ("max_bins", "max_exact")}
        if binning.exact and any(v is not None for v in budgets.values()):
            raise ValueError("an exact configuration has max_bins and max_exact null")
        try:
            return cls(config[key], bins=binning.config()["bins"], exact=binning.exact, **budgets)  # type: ignore[call-arg]  # the subclasses take (columns, bins, exact, max_bins, max_exact)
        except TypeError as exc:
            raise ValueError(str(exc)) from None

    def _check_mergeable(self, other: Accumulator) -> None:
        super()._check_mergeable(other)
        if self._cols.kind != other._cols.kind:  # type: ignore[attr-defined]  # a LogGridBinning (or the same type) here
            raise ValueError(f"cannot merge {type(self).__name__} over {self.columns_key} of different kinds")

    # ------------------------------------------------------------------ histogram budget
    def _hist_list(self) -> list[ScoreHistogram]:  # pragma: no cover - interface
        """Every histogram, in the order of their ids in the packed state."""
        raise NotImplementedError

    def _hist_list_of(self, value: Any) -> list[ScoreHistogram]:  # pragma: no cover - interface
        """:meth:`_hist_list` of a value of the histograms state field."""
        raise NotImplementedError

    def entry_limit_of(self, b: Binning) -> float:
        """Entries above which a set on binning ``b`` must be fitted (inf: never)."""
        if self._finest is None or (not b.exact and b.coarsest):  # type: ignore[attr-defined]  # a log grid
            return math.inf
        return self._max_exact if b.exact else self._max_bins  # type: ignore[return-value]  # ints unless exact=True

    def entry_limit(self) -> float:
        """Entries above which :meth:`fit_budget` must act (inf: never)."""
        return self.entry_limit_of(self._binning)

    def fit_set(self, hists: list[ScoreHistogram], binning: Binning, entries: int) -> tuple[Binning, int]:
        """Bring a histogram set within the budget (see the class docstring)."""
        return fit(hists, binning, entries, self._finest, self._max_exact, self._max_bins)

    def fit_budget(self) -> None:
        """Bring the histograms within the budget (see the class docstring)."""
        self._binning, self._entries = self.fit_set(self._hist_list(), self._binning, self._entries)
        self._refresh()

    def batch_flat(
        self, S: np.ndarray, groups_of: Callable[[int], np.ndarray], n_groups: int, stride: int,
        offsets: list[int], w: np.ndarray | None, state: Binning | None = None, units: bool = False,
    ) -> tuple[Flat, Binning]:
        """The histogram entries a validated batch adds, flat (see
        :func:`~streammetrics.kernels.histogram.flatten`), and their binning: column ``c``'s
        score of row ``i`` goes to histogram ``groups_of(c)[i] * stride + offsets[c]``
        (groups in ``[0, n_groups)``). Exact while the batch alone fits ``max_exact`` and
        the set (binning ``state``, default the main one) is exact, else on the set's grid
        (or the finest), coarsened as the batch alone needs. Zero weights add nothing.
        ``units``: the weights of the entries are exact sums in units (an object array of
        ints, for a set in units mode; see :mod:`~streammetrics.kernels.exact_weights`)."""
        if w is not None and not w.all():
            keep = w > 0
            S, w = S[keep], w[keep]
            groups_all = groups_of
            groups_of = lambda c: groups_all(c)[keep]  # noqa: E731
        binning = self._binning if state is None else state
        if binning.exact and self._finest is not None:
            limit: int = self._max_exact  # type: ignore[assignment]  # an int here
            # exact only if the batch's exact entries fit (then so do its grid entries, never more
            # than its exact ones); a batch of at most m rows is tried exact at once, a longer one
            # first on the grid and on a first block of rows, that alone settles it when it does
            # not fit, without sorting the whole batch
            m = 2 * limit + 1
            if len(S) <= m:
                exact = _columns_flat(S, groups_of, n_groups, stride, offsets, w, binning, limit, units)
                if exact is not None:
                    return exact, binning
            grid = LogGridBinning(self._finest)  # (made only when the batch may leave exact scores)
            flat = _columns_flat(S, groups_of, n_groups, stride, offsets, w, grid)
            if len(S) > m and len(flat[0]) <= limit and (_columns_flat(
                    S[:m], lambda c: groups_of(c)[:m], n_groups, stride, offsets, None if w is None else w[:m],
                    binning, limit) is not None):
                exact = _columns_flat(S, groups_of, n_groups, stride, offsets, w, binning, limit, units)
                if exact is not None:
                    return exact, binning
            binning = grid
            if units:  # the same entries (positive sums), with exact sums
                flat = _columns_flat(S, groups_of, n_groups, stride, offsets, w, grid, units=True)
        else:
            flat = _columns_flat(S, groups_of, n_groups, stride, offsets, w, binning, units=units)
        if self._finest is None:
            return flat, binning
        return fit_flat(flat, binning, self._finest, self._max_exact, self._max_bins)  # type: ignore[arg-type]  # ints here

    def add_set(
        self, hists: list[ScoreHistogram], state: Binning, entries: int, flat: Flat, binning: Binning
    ) -> tuple[Binning, int]:
        """Add :meth:`batch_flat` output to a set on binning ``state`` holding ``entries``:
        both sides to the coarser binning, add, fit; returns the set's binning and entries."""
        target = coarser_of(state, binning)
        if state != target:
            rebuild(hists, target, regrid_flat(flatten(hists, state), state, target))
            entries = sum(len(h) for h in hists)
        if binning != target:
            flat = regrid_flat(flat, binning, target)
        entries += add_flat(hists, flat)
        return self.fit_set(hists, target, entries)

    def add_batch(self, flat: Flat, binning: Binning) -> None:
        """Commit :meth:`batch_flat` output to the main set."""
        self._binning, self._entries = self.add_set(self._hist_list(), self._binning, self._entries, flat, binning)
        self._refresh()

    # ------------------------------------------------------------------ state field helpers
    def merge_sets(self, mine_b: Binning, hists: list, theirs_b: Binning, others: list) -> Binning:
        """Merge a histogram set into another: both to the coarser binning, add, fit."""
        target = coarser_of(mine_b, theirs_b)
        if mine_b != target:
            rebuild(hists, target, regrid_flat(flatten(hists, mine_b), mine_b, target))
        if theirs_b == target:
            for h, o in zip(hists, others):
                if o.weights:
                    h.merge_weights(o.weights)
        else:
            add_flat(hists, regrid_flat(flatten(others, theirs_b), theirs_b, target))
        return self.fit_set(hists, target, sum(len(h) for h in hists))[0]

    @staticmethod
    def merge_hists(mine: tuple, theirs: tuple, acc: Any) -> tuple:
        """Merge of the main (binning, histograms) field."""
        binning = acc.merge_sets(mine[0], acc._hist_list_of(mine[1]), theirs[0], acc._hist_list_of(theirs[1]))
        return binning, mine[1]

    @staticmethod
    def encode_set(binning: Binning, hists: list[ScoreHistogram]) -> tuple:
        per_octave = None if binning.exact else binning.per_octave  # type: ignore[attr-defined]  # a log grid
        return per_octave, pack_dicts([h.weights for h in hists], binning.exact)

    def encode_hists(self, value: tuple) -> tuple:
        return self.encode_set(value[0], self._hist_list_of(value[1]))

    def decode_hists(
        self, raw: tuple, n_hists: int, max_keys: int, exact_weights: bool = False
    ) -> tuple[Binning, Flat]:
        """``(binning, flat)`` of the (bins_per_octave, histograms) field; ``ValueError`` on
        anything malformed. ``max_keys``: the entries the events can have made (columns x
        events); the budget caps it further before anything is decoded. ``exact_weights``:
        residues accepted, weights in units when the set is in units mode (see
        :func:`~streammetrics.kernels.histogram_json.unpack_flat`)."""
        per_octave, data = raw
        binning = self._level(per_octave)
        if self._finest is None:
            cap = _state_mod.LIMITS.max_entries
        elif binning.exact:
            cap = self._max_exact  # type: ignore[assignment]  # an int here
        elif binning.coarsest:  # type: ignore[attr-defined]  # a log grid
            cap = max(int(self._max_bins or 0), 8 * n_hists)
        else:
            cap = self._max_bins  # type: ignore[assignment]  # an int here
        flat = unpack_flat(data, n_hists, binning.exact, min(cap, max_keys), exact_weights=exact_weights)
        binning.check_keys(flat[1], "histogram keys")
        return binning, flat

    def _level(self, per_octave: Any) -> Binning:
        """The binning of a ``bins_per_octave`` state value (validated against the config)."""
        if per_octave is None:
            return ExactBinning()
        if self._finest is None:
            raise ValueError("bins_per_octave must be null for an exact configuration")
        if type(per_octave) is int and 1 <= per_octave <= self._finest and not per_octave & (per_octave - 1):
            return LogGridBinning(per_octave)
        if type(per_octave) is float and 0.0 < per_octave < 1.0:
            octaves = 1.0 / per_octave
            if octaves.is_integer() and int(octaves) <= MAX_OCTAVES and not int(octaves) & (int(octaves) - 1):
                return LogGridBinning(1, int(octaves))
        raise ValueError(f"bins_per_octave must be null, a power of two <= bins={self._finest} or 1/2**j "
                         f"(j <= {MAX_OCTAVES.bit_length() - 1}), got {describe(per_octave)}")


@overload
def _columns_flat(
    S: np.ndarray, groups_of: Callable[[int], np.ndarray], n_groups: int, stride: int, offsets: list[int],
    w: np.ndarray | None, binning: Binning, *, units: bool = False,
) -> Flat: ...


@overload
def _columns_flat(
    S: np.ndarray, groups_of: Callable[[int], np.ndarray], n_groups: int, stride: int, offsets: list[int],
    w: np.ndarray | None, binning: Binning, limit: int, units: bool = False,
) -> Flat | None: ...


def _columns_flat(
    S: np.ndarray, groups_of: Callable[[int], np.ndarray], n_groups: int, stride: int, offsets: list[int],
    w: np.ndarray | None, binning: Binning, limit: int | None = None, units: bool = False,
) -> Flat | None:
    """Flat entries of every column of ``S`` keyed on ``binning`` (see ``batch_flat``);
    None as soon as they exceed ``limit`` (columns left undone). ``units``: weights as
    exact sums in units (object arrays, :func:`~streammetrics.kernels.exact_weights.grouped_units`)."""
    if binning.exact and len(offsets):
        return _exact_columns_flat(S, groups_of, stride, offsets, w, binning, limit, units)
    parts = []
    found = 0
    for c, offset in enumerate(offsets):
        keys = binning.keys(np.ascontiguousarray(S[:, c]))
        col_groups = groups_of(c)
        if binning.exact:  # distinct (group, score) pairs by sorting: no dense table
            order = np.lexsort((keys, col_groups))
            g, k = col_groups[order], keys[order]
            ww = np.ones(len(k)) if w is None else w[order]
            new = np.empty(len(g), dtype=bool)
            if len(g):
                new[0] = True
                new[1:] = (g[1:] != g[:-1]) | (k[1:] != k[:-1])
            if units:  # exact sums per run of equal (group, score)
                seg = np.cumsum(new) - 1
                starts = np.flatnonzero(new)
                g, k, ww = g[starts], k[starts], _objects(grouped_units(seg, ww)[1])
            elif len(g) > 1:
                starts = np.flatnonzero(new)
                g, k, ww = g[starts], k[starts], np.add.reduceat(ww, starts)
        else:
            uniq, table = aggregate(keys, col_groups, n_groups, w, exact=units)
            rows, g = np.nonzero(table)
            k, ww = uniq[rows], table[rows, g]
        parts.append((g.astype(np.int64) * stride + offset, k, ww if units else ww.astype(np.float64)))
        found += len(k)
        if limit is not None and found > limit:
            return None
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0, dtype=object if units else np.float64)
    ids = np.concatenate([p[0] for p in parts])
    keys = np.concatenate([p[1] for p in parts])
    weights = np.concatenate([p[2] for p in parts])
    order = np.lexsort((keys, ids))
    return ids[order], keys[order], weights[order]


def _exact_columns_flat(
    S: np.ndarray, groups_of: Callable[[int], np.ndarray], stride: int, offsets: list[int],
    w: np.ndarray | None, binning: Binning, limit: int | None, units: bool,
) -> Flat | None:
    """:func:`_columns_flat` on an exact binning, every column in one pass: each row's score of
    column ``c`` is an entry of histogram ``groups_of(c) * stride + offsets[c]`` at its exact key,
    the entries of one (histogram, key) summed (whole float weights in any order, or exact units)."""
    n, cols = len(S), len(offsets)
    ids = (np.stack([groups_of(c) for c in range(cols)], axis=1).astype(np.int64) * stride
           + np.asarray(offsets, dtype=np.int64)).ravel()
    keys = binning.keys(np.ascontiguousarray(S[:, :cols])).ravel()
    order = np.lexsort((keys, ids))
    ids, keys = ids[order], keys[order]
    ww = np.ones(n * cols) if w is None else np.repeat(w, cols)[order]
    new = np.empty(len(ids), dtype=bool)
    if len(ids):
        new[0] = True
        new[1:] = (ids[1:] != ids[:-1]) | (keys[1:] != keys[:-1])
    starts = np.flatnonzero(new)
    if limit is not None and len(starts) > limit:
        return None
    if units:  # exact sums per run of equal (histogram, key)
        return ids[starts], keys[starts], _objects(grouped_units(np.cumsum(new) - 1, ww)[1])
    if len(starts) == len(ids):
        return ids, keys, ww
    return ids[starts], keys[starts], np.add.reduceat(ww, starts)


def _objects(values: list) -> np.ndarray:
    """An object array of the Python ints ``values`` (exact sums in units)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def rounded_exact_bounds(value: Any, levels: int) -> tuple[Any, Any]:
    """Bounds of an AUC computed on exact histograms: the value widened by
    :func:`~streammetrics.kernels.ranking.rounding_slack` (weights summed in another order
    can move the float value by a few ulps), clipped to [0, 1]; nan stays nan; arrays
    elementwise.

    >>> rounded_exact_bounds(0.5, 10)
    (0.499999999999984, 0.500000000000016)
    """
    slack = ranking.rounding_slack(levels)
    if isinstance(value, np.ndarray):
        return np.clip(value - slack, 0.0, 1.0), np.clip(value + slack, 0.0, 1.0)
    if math.isnan(value):
        return value, value
    return max(0.0, value - slack), min(1.0, value + slack)

