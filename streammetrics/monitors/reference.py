"""``Reference``: a labelled period the model is trusted on, kept as compact state, and the
label-free metrics of a window against it (contract section 6).

The state is one :class:`~streammetrics.metrics.binary_scores.BinaryScores` (negative and
positive score histograms; bounded by its ``max_bins``, or exact with ``exact=True``),
built from arrays (:meth:`Reference.from_arrays`) or merged from saved states
(:meth:`Reference.from_states`: ``BinaryScores`` / ``BinaryMonitor`` objects or their
``to_dict()``). From it the reference keeps its levels and the isotonic calibration map;
windows are compared through their score histogram only.

The metrics (``drift_ks``, ``drift_wasserstein``, ``drift_psi``, ``drift_js`` with their
bounds, NannyML's CBPE ``estimated_*``, torchmetrics' ``ece``) and their definitions:
``docs/guide/label-free.md``; the kernels are :mod:`~streammetrics.kernels.drift`,
:mod:`~streammetrics.kernels.cbpe` and :mod:`~streammetrics.kernels.calibration`.

A window is a ``BinaryScores`` or ``BinaryMonitor`` (labelled: every metric), a
``ScoreDistribution`` (anything with ``histogram()`` and ``bins_per_octave``), a
:class:`~streammetrics.kernels.histogram.ScoreHistogram`, or a tuple
``(keys or scores, weights, binning)``. Reference and window may differ in binning: both
exact stay exact, otherwise drift is computed on the coarser of their log grids.
:meth:`Reference.metrics` returns a JSON-safe dict with None where a metric is undefined
(an empty window, a label-free window's ``ece``); the per-family methods return nan with an
:class:`~streammetrics.core.exceptions.UndefinedMetricWarning` instead.

In snapshots (``--reference FILE``): :func:`streammetrics.stream.references.load_references`
reads one reference per ``(model, segment)`` (at most ``max_references``, default 10,000; more
is a ``ValueError``) and :func:`snapshot_metrics` adds :meth:`Reference.metrics` of each
window's monitor to its ``metrics`` (the same names as null for keys without a reference).
Each reference is compact state (a bounded ``BinaryScores`` and its isotonic fit), whatever
the size of its file.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> s = rng.random(1000)
>>> ref = Reference.from_arrays(rng.random(1000) < s, s, exact=True)
>>> window = BinaryScores(exact=True).update_many(np.zeros(500, int), rng.random(500) ** 2)
>>> m = ref.metrics(window)
>>> m["drift_ks"] > 0.2, 0.4 < m["estimated_roc_auc"] < 0.9
(True, True)
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from streammetrics.core.accumulator import Accumulator, from_dict
from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.core.validation import check_number
from streammetrics.kernels import calibration, cbpe, drift
from streammetrics.kernels.binning import Binning, ExactBinning, LogGridBinning
from streammetrics.kernels.histogram import ScoreHistogram
from streammetrics.kernels.levels import (
    clamp_bounds,
    common_binning,
    histogram_arrays,
    level_bounds,
    raw_bounds,
    representative,
    to_binning,
)
from streammetrics.metrics.binary_scores import BinaryScores
from streammetrics.monitors.base import json_number

__all__ = [
    "DEFAULT_MAX_REFERENCES", "METRICS", "Reference", "reliability", "snapshot_metrics",
    "window_histogram",
]

#: most (model, segment) references ``load_references`` and a pipeline hold (``--max-references``)
DEFAULT_MAX_REFERENCES = 10_000
#: most levels (windows x the reference's and a window's levels) one vectorised pass of
#: :meth:`Reference.metrics_and_intervals_many` lays out; more windows go in several passes
#: (~8 MB per array of the pass)
ROWS_MAX_LEVELS = 1 << 20

#: the keys of :meth:`Reference.metrics`
METRICS = (
    "drift_ks", "drift_ks_low", "drift_ks_high",
    "drift_wasserstein", "drift_wasserstein_low", "drift_wasserstein_high",
    "drift_psi", "drift_js",
    "estimated_roc_auc", "estimated_accuracy", "estimated_precision", "estimated_recall",
    "estimated_f1",
    "ece", "ece_low", "ece_high",
)

Histogram = tuple[np.ndarray, np.ndarray, Binning]


def scores_of(obj: Any, cls: type) -> Any:
    """The ``cls`` accumulator of a labelled window / saved state (None if it has none)."""
    if isinstance(obj, Mapping):
        obj = from_dict(obj)
    scores = obj if isinstance(obj, cls) else getattr(obj, "scores", None)
    return scores if isinstance(scores, cls) else None


def binary_scores_of(obj: Any) -> BinaryScores | None:
    return scores_of(obj, BinaryScores)


class _SmallWindow:
    """A monitor in its small form, read once as ``columns``: ``(scores, negatives, positives)``
    (:meth:`~streammetrics.monitors.binary.BinaryMonitor.small_columns`: unit weights, every
    event labelled, exact), so that the window's parts are never built."""

    __slots__ = ("columns",)

    def __init__(self, columns: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        self.columns = columns


def _small(window: Any) -> Any:
    """``window`` as a :class:`_SmallWindow` when it is a monitor in its small form, else itself."""
    if window.__class__ is _SmallWindow:
        return window
    read = getattr(window, "small_columns", None)
    columns = read() if callable(read) else None
    return window if columns is None else _SmallWindow(columns)


def distribution_of(obj: Any) -> Histogram | None:
    """``(keys, weights, binning)`` of a ScoreDistribution-like object: ``histogram()``
    giving ``(smallest score per bin, weights)`` and ``bins_per_octave`` (None: exact)."""
    hist = getattr(obj, "histogram", None)
    if not callable(hist) or not hasattr(obj, "bins_per_octave"):
        return None
    bpo = obj.bins_per_octave
    binning: Binning = ExactBinning() if bpo is None else LogGridBinning(bpo)
    thresholds, weights = hist()
    keys = binning.keys(np.asarray(thresholds, dtype=np.float64))
    return keys, np.asarray(weights, dtype=np.float64), binning


def window_histogram(window: Any) -> Histogram:
    """``(keys, weights, binning)`` (ascending keys) of the score distribution of a window
    (see the module docstring for what a window may be). A monitor's label-free
    ``predictions`` (a ScoreDistribution: every prediction, labelled or not) is preferred
    to its labelled ``scores``."""
    if isinstance(window, Mapping):
        window = from_dict(window)
    window = _small(window)
    if window.__class__ is _SmallWindow:
        keys, neg, pos = window.columns
        return keys, neg + pos, ExactBinning()
    for obj in (getattr(window, "predictions", None), window):
        found = distribution_of(obj) if obj is not None else None
        if found is not None:
            return found
    scores = binary_scores_of(window) if isinstance(window, Accumulator) else None
    if scores is not None:
        keys, table, binning = scores.class_table()
        return keys, table[0] + table[1], binning
    if isinstance(window, ScoreHistogram):
        return (*histogram_arrays(window.weights, window.binning), window.binning)
    if isinstance(window, tuple) and len(window) == 3 and isinstance(window[2], Binning):
        keys, weights, binning = window
        keys = np.asarray(keys, dtype=np.float64 if binning.exact else np.int64)
        weights = np.asarray(weights, dtype=np.float64)
        if keys.shape != weights.shape or keys.ndim != 1:
            raise ValueError("window keys and weights must be 1-d arrays of one length")
        if len(weights) and (not np.isfinite(weights).all() or weights.min() < 0):
            raise ValueError("window weights must be finite and >= 0")
        binning.check_keys(keys, "window keys")
        order = np.argsort(keys, kind="stable")
        keys, weights = keys[order], weights[order]
        if len(keys) > 1 and not (np.diff(keys) > 0).all():
            raise ValueError("window keys must be distinct")
        return keys, weights, binning
    raise TypeError(
        "window must be a BinaryScores, BinaryMonitor, ScoreDistribution, ScoreHistogram or a "
        f"(keys, weights, binning) tuple, got {type(window).__name__}"
    )


def _window_squares(window: Any) -> float | bool | None:
    """The ``sum w^2`` of the distribution :func:`window_histogram` reads (True: unit weights,
    or a histogram read as counts; None: a weighted state without its squared weights)."""
    if isinstance(window, Mapping):
        window = from_dict(window)
    window = _small(window)
    if window.__class__ is _SmallWindow:
        return True
    for obj in (getattr(window, "predictions", None), window):
        if obj is not None and callable(getattr(obj, "histogram", None)) and hasattr(obj, "bins_per_octave"):
            if getattr(obj, "unit_weights", False):  # (the object distribution_of reads)
                return True
            squares = getattr(obj, "weight_squares", None)
            return squares if isinstance(squares, float) else None
    scores = binary_scores_of(window) if isinstance(window, Accumulator) else None
    if scores is not None:
        if scores.unit_weights:
            return True
        pair = scores.class_squares()
        return None if pair is None else pair[0] + pair[1]
    return True


class ReferenceLevels:
    """A reference score histogram ``(keys, weights, binning)`` and the drift of window
    histograms against it (kept per binning the windows came on)."""

    def __init__(self, hist: Histogram) -> None:
        self.hist = hist
        # the reference's (keys, weights, raw lo, raw hi) per binning windows came on
        self._on: dict[Binning, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        # the quantile groups' cuts and the reference's mass per group, per (binning, groups)
        self._cuts: dict[tuple[Binning, int], tuple[np.ndarray, np.ndarray]] = {}
        self._counted = self.counts()

    def _reference_on(self, binning: Binning) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        cached = self._on.get(binning)
        if cached is None:
            keys, w = to_binning(self.hist[0], self.hist[1], self.hist[2], binning)
            cached = (keys, w, *raw_bounds(binning, keys))
            if len(self._on) >= 8:  # a handful of grids at most: bins halve from 1024 to 1
                self._on.clear()
            self._on[binning] = cached
        return cached

    def aligned(self, window: Histogram) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, Binning]:
        """``(keys, a, b, lo, hi, binning)``: window and reference on the union of their
        levels over the common binning, with the levels' score intervals."""
        wk, ww, wb = window
        binning = common_binning(wb, self.hist[2])
        wk, ww = to_binning(wk, ww, wb, binning)
        rk, rw, rlo, rhi = self._reference_on(binning)
        # the union of the two ascending key sets (np.union1d's), the window's new keys inserted
        at = np.searchsorted(rk, wk)
        new = rk[np.minimum(at, len(rk) - 1)] != wk
        new |= at >= len(rk)
        before = np.cumsum(new) - new  # (the window's new keys below each of its keys)
        ia = at + before
        ib = np.arange(len(rk)) + np.searchsorted(at[new], np.arange(len(rk)), side="right")
        keys = np.empty(len(rk) + int(np.count_nonzero(new)), dtype=rk.dtype)
        keys[ib] = rk
        keys[ia] = wk
        a = np.zeros(len(keys))
        b = np.zeros(len(keys))
        a[ia] = ww
        b[ib] = rw
        if binning.exact:  # (distinct scores: each level's interval is its score)
            lo = np.asarray(keys, dtype=np.float64)
            return keys, a, b, lo, lo.copy(), binning
        lo = np.empty(len(keys))
        hi = np.empty(len(keys))
        lo[ia], hi[ia] = raw_bounds(binning, wk)
        lo[ib], hi[ib] = rlo, rhi
        lo, hi = clamp_bounds(lo, hi)
        return keys, a, b, lo, hi, binning

    def _cuts_on(self, binning: Binning, psi_groups: int) -> tuple[np.ndarray, np.ndarray]:
        """``(cuts, masses)``: :func:`~streammetrics.kernels.drift.quantile_groups`' cuts as indices
        of the reference's levels on ``binning`` (on a window's union of levels they fall on the same
        reference levels: a window's own levels add no reference weight) and the reference's mass
        per group (the groups past a cut at its last level excluded)."""
        key = (binning, psi_groups)
        cached = self._cuts.get(key)
        if cached is None:
            rw = self._reference_on(binning)[1]
            cuts = drift.quantile_cuts(rw, psi_groups)
            groups = np.searchsorted(cuts, np.arange(len(rw)), side="left")
            cached = (cuts, np.bincount(groups, weights=rw))
            if len(self._cuts) >= 8:
                self._cuts.clear()
            self._cuts[key] = cached
        return cached

    def counts(self) -> bool:
        """Whether every reference weight is an integer (events counted): its sums are then exact in
        any order, which :meth:`drift_many` needs."""
        return drift.integral(self.hist[1]) and float(self.hist[1].sum()) < 2.0 ** 52

    def drift_many(self, windows: list[Histogram], psi_groups: int) -> list[dict[str, float]]:
        """:meth:`drift` of many window histograms of **count** weights on one binning, bit for bit,
        in one vectorised pass (:func:`~streammetrics.kernels.drift.rows_drift`, each window's levels
        aligned with the reference's in a row); the reference's weights must be counts too
        (:meth:`counts`)."""
        wb = windows[0][2]
        binning = common_binning(wb, self.hist[2])
        rk, rw, rlo, rhi = self._reference_on(binning)
        r, w = len(rk), len(windows)
        lengths = np.array([len(h[0]) for h in windows])
        keys = np.concatenate([h[0] for h in windows])
        weights = np.concatenate([h[1] for h in windows])
        row = np.repeat(np.arange(w), lengths)
        if wb != binning:  # (to_binning of each window: ascending keys, so a key's events are one run)
            keys = binning.keys(np.asarray(keys, dtype=np.float64))
            first = np.ones(len(keys), dtype=bool)
            first[1:] = (keys[1:] != keys[:-1]) | (row[1:] != row[:-1])
            at = np.flatnonzero(first)
            keys, weights, row = keys[at], np.add.reduceat(weights, at), row[at]
        at = np.searchsorted(rk, keys)
        new = (at >= r) | (rk[np.minimum(at, r - 1)] != keys)
        added = np.bincount(row[new], minlength=w)
        n = r + added
        # before reference level i of row j: the row's new levels inserted at or below i
        shift = np.cumsum(np.bincount(row[new] * (r + 1) + at[new], minlength=w * (r + 1)).reshape(w, r + 1),
                          axis=1)[:, :r]
        ref_at = np.arange(r) + shift
        counted = np.cumsum(new)
        starts = np.searchsorted(row, np.arange(w))
        rank = counted - 1 - np.concatenate(([0], counted))[starts][row]
        pos = np.where(new, at + rank, np.minimum(at, r - 1) + shift[row, np.minimum(at, r - 1)])
        width = int(n.max())
        ref_rows = np.repeat(np.arange(w), r)
        flat_ref = ref_at.ravel()
        k = np.zeros((w, width), dtype=rk.dtype)
        a, b = np.zeros((w, width)), np.zeros((w, width))
        k[ref_rows, flat_ref] = np.tile(rk, w)
        b[ref_rows, flat_ref] = np.tile(rw, w)
        k[row, pos] = keys
        a[row, pos] = weights
        lo = hi = singleton = None
        if binning.exact:  # (distinct scores: each level's interval is its score)
            values = k.astype(np.float64)
        else:
            lo, hi = np.full((w, width), np.inf), np.full((w, width), np.inf)
            lo[ref_rows, flat_ref] = np.tile(rlo, w)
            hi[ref_rows, flat_ref] = np.tile(rhi, w)
            lo[row[new], pos[new]], hi[row[new], pos[new]] = raw_bounds(binning, keys[new])
            lo, hi = clamp_bounds(lo, hi)
            singleton = binning.singleton(k.ravel()).reshape(w, width)
            with np.errstate(over="ignore", invalid="ignore"):
                values = representative(lo, hi)
        cuts, ref_mass = self._cuts_on(binning, psi_groups)
        # a cut at the last reference level counts when the row has a level past it
        last = len(cuts) > 0 and int(cuts[-1]) == r - 1
        groups = np.full(w, len(cuts) + 1) - (last & (shift[:, r - 1] == added) if r else 0)
        group = np.searchsorted(rk[cuts], keys, side="left")
        columns = len(cuts) + 1
        a_mass = np.bincount(row * columns + group, weights=weights, minlength=w * columns).reshape(w, columns)
        b_mass = np.zeros((w, columns))
        b_mass[:, :len(ref_mass)] = ref_mass
        return drift.rows_drift(values, lo, hi, a, b, singleton, n, a_mass, b_mass, groups)

    def drift(self, window: Histogram, psi_groups: int) -> dict[str, float]:
        """The ``drift_*`` metrics of a window histogram (see the module docstring)."""
        keys, a, b, lo, hi, binning = self.aligned(window)
        cdfs = drift.ecdfs(a, b)  # (once for the four statistics)
        ks_low, ks_high = drift.ks_bounds(a, b, binning.singleton(keys), cdfs)
        w_low, w_high = drift.wasserstein_bounds(lo, hi, a, b, cdfs)
        if self._counted:  # (the cuts fall on the reference's levels: cached, see _cuts_on)
            cuts = self._cuts_on(binning, psi_groups)[0]
            groups = np.searchsorted(self._reference_on(binning)[0][cuts], keys, side="left")
        else:
            groups = drift.quantile_groups(b, psi_groups)
        ma, mb = drift.group_masses(a, groups), drift.group_masses(b, groups)
        return {
            "drift_ks": drift.ks(a, b, cdfs),
            "drift_ks_low": ks_low,
            "drift_ks_high": ks_high,
            "drift_wasserstein": drift.wasserstein(keys if binning.exact else representative(lo, hi), a, b, cdfs),
            "drift_wasserstein_low": w_low,
            "drift_wasserstein_high": w_high,
            "drift_psi": drift.psi(ma, mb),
            "drift_js": drift.js(ma, mb),
        }


class Reference:
    """Labelled reference state and the label-free metrics of windows against it
    (see the module docstring). ``threshold``: predictions are ``score >= threshold``."""

    def __init__(
        self,
        scores: BinaryScores,
        *,
        threshold: float = 0.5,
        psi_groups: int = 10,
        ece_bins: int = 15,
        ece_norm: str = "l1",
    ) -> None:
        if not isinstance(scores, BinaryScores):
            raise TypeError(f"scores must be a BinaryScores, got {type(scores).__name__}")
        if not scores.total_weight > 0:
            raise ValueError("the reference holds no event with a non-zero weight")
        if type(psi_groups) is not int or psi_groups < 1:
            raise ValueError(f"psi_groups must be a positive int, got {psi_groups!r}")
        calibration.check_bins(ece_bins, ece_norm)
        self.scores = scores.copy()
        self.threshold = check_number(threshold, "threshold")
        self.psi_groups = psi_groups
        self.ece_bins = ece_bins
        self.ece_norm = ece_norm
        keys, table, binning = self.scores.class_table()
        self._hist: Histogram = (keys, table[0] + table[1], binning)
        lo, hi = level_bounds(binning, keys)
        if binning.exact:
            self._fit = cbpe.isotonic_fit(keys.astype(np.float64), table[0], table[1])
        else:
            self._fit = cbpe.isotonic_fit_bins(lo, hi, table[0], table[1])
        self._levels = ReferenceLevels(self._hist)
        self._counts = self._levels.counts()
        # the isotonic blocks of the reference's levels (estimate intervals): the lowest score of each
        # block's first level and the block's variance (two numbers per block, not per level)
        x = keys.astype(np.float64) if binning.exact else representative(lo, hi)
        block, block_var = cbpe.calibration_blocks(self.calibrated(x), table[0] + table[1], self._square_ratio())
        first = np.flatnonzero(np.diff(np.concatenate(([-1], block)))) if len(block) else np.zeros(0, dtype=np.int64)
        self._blocks = (np.asarray(lo, dtype=np.float64)[first], block_var)

    # ------------------------------------------------------------------ building
    @classmethod
    def from_arrays(
        cls,
        y_true: Any,
        scores: Any,
        sample_weight: Any = None,
        *,
        exact: bool = False,
        bins: int = 1024,
        max_bins: int = 4096,
        **options: Any,
    ) -> Reference:
        """Reference of labelled events (validated as ``BinaryScores.update_many``)."""
        acc = BinaryScores(bins=bins, exact=exact, max_bins=max_bins)
        acc.update_many(y_true, scores, sample_weight)
        return cls(acc, **options)

    @classmethod
    def from_states(cls, states: Iterable[Any], **options: Any) -> Reference:
        """Reference of merged saved states: ``BinaryScores`` / ``BinaryMonitor`` objects or
        their ``to_dict()`` (e.g. snapshot states of a trusted period)."""
        return cls(merged_states(states, binary_scores_of, "BinaryScores"), **options)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe ``{"type": "Reference", "version", "config", "scores"}``."""
        return {
            "type": "Reference",
            "version": 1,
            "config": {"threshold": self.threshold, "psi_groups": self.psi_groups,
                       "ece_bins": self.ece_bins, "ece_norm": self.ece_norm},
            "scores": self.scores.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reference:
        """Inverse of :meth:`to_dict`; ``ValueError`` if malformed."""
        if not isinstance(data, Mapping) or data.get("type") != "Reference" or data.get("version") != 1:
            raise ValueError("not a version-1 Reference dict")
        config = data.get("config")
        if not isinstance(config, Mapping) or set(config) != {"threshold", "psi_groups", "ece_bins", "ece_norm"}:
            raise ValueError(f"Reference config must hold threshold, psi_groups, ece_bins, ece_norm, got {config!r}")
        return cls(BinaryScores.from_dict(data["scores"]), **config)

    @property
    def count(self) -> int:
        return self.scores.count

    # ------------------------------------------------------------------ metrics
    def drift(self, window: Any) -> dict[str, float]:
        """``drift_ks`` (+ ``_low``/``_high``), ``drift_wasserstein`` (+ bounds),
        ``drift_psi``, ``drift_js`` of the window's scores against the reference's."""
        return self._levels.drift(window_histogram(window), self.psi_groups)

    def calibrated(self, scores: np.ndarray) -> np.ndarray:
        """The reference's isotonic calibration of ``scores``."""
        return cbpe.calibrate(np.asarray(scores, dtype=np.float64), *self._fit)

    def estimate(self, window: Any) -> dict[str, float]:
        """CBPE estimates ``estimated_roc_auc``, ``estimated_accuracy``, ``estimated_precision``,
        ``estimated_recall``, ``estimated_f1`` of the window (its labels are not used)."""
        return self._estimate(window_histogram(window))

    def _calibrated_levels(self, hist: Histogram) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(c, w, predicted)`` per level of the window: calibrated probability, weight, and
        ``score >= threshold``."""
        keys, w, binning = hist
        x = keys.astype(np.float64) if binning.exact else representative(*level_bounds(binning, keys))
        return self.calibrated(x), w, keys >= binning.key(self.threshold)

    def expected_confusion(self, window: Any) -> dict[str, float]:
        """CBPE's expected ``tp``, ``fp``, ``fn``, ``tn`` weights of the window's predictions
        ``score >= threshold`` (:func:`~streammetrics.kernels.cbpe.expected_confusion`; its
        labels are not used) and its ``weight``."""
        c, w, predicted = self._calibrated_levels(window_histogram(window))
        return {**cbpe.expected_confusion(c, w, predicted), "weight": float(np.sum(w))}

    def estimate_intervals(self, window: Any, confidence: float = 0.95) -> dict[str, tuple[float, float] | None]:
        """Intervals of the CBPE estimates (``estimated_roc_auc``, ``estimated_accuracy``,
        ``estimated_precision``, ``estimated_recall``, ``estimated_f1``) for the value the window's
        metrics will take once its labels arrive (:func:`~streammetrics.kernels.cbpe.estimated_intervals`:
        the labels as independent Bernoulli draws of the calibrated probabilities, Poisson-binomial
        variances, the delta method for ratios and ROC AUC, widened for the reference's size). A
        window's weights count by their effective sample size (its ``sum w^2``; a histogram or
        ``(keys, weights, binning)`` tuple is read as counts). None where the minimum rule leaves
        none, or for a weighted window loaded without its squared weights."""
        from streammetrics.kernels.intervals import check_confidence, z_value

        z = z_value(check_confidence(confidence))
        window = _small(window)  # (a monitor's small form read once)
        return self._estimate_intervals(window, window_histogram(window), z)

    def metrics_and_intervals(
        self, window: Any, confidence: float = 0.95
    ) -> tuple[dict[str, float | None], dict[str, tuple[float, float] | None]]:
        """``(metrics(window), estimate_intervals(window, confidence))``, the window read once."""
        from streammetrics.kernels.intervals import check_confidence, z_value

        z = z_value(check_confidence(confidence))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            window = _small(window)
            hist = window_histogram(window)
            levels = self._calibrated_levels(hist)  # (once for the estimates and their intervals)
            found = self._metrics(window, hist, levels=levels)
            return found, self._estimate_intervals(window, hist, z, levels, found["estimated_roc_auc"])

    def metrics_and_intervals_many(
        self, windows: list[Any], confidence: float = 0.95
    ) -> list[tuple[dict[str, float | None], dict[str, tuple[float, float] | None]]]:
        """:meth:`metrics_and_intervals` of each window, bit for bit; the windows in a monitor's small
        form computed together when the reference's weights are counts (:meth:`_small_many`, in
        passes of at most :data:`ROWS_MAX_LEVELS` levels)."""
        from streammetrics.kernels.intervals import check_confidence, z_value

        z = z_value(check_confidence(confidence))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            read = [_small(window) for window in windows]
            hists = [window_histogram(window) for window in read]
            small = [i for i, window in enumerate(read) if window.__class__ is _SmallWindow] if self._counts else []
            done: dict[int, Any] = {}
            if small:  # (in passes of at most ROWS_MAX_LEVELS levels: memory bounded whatever the batch)
                width = len(self._hist[0]) + max(len(hists[i][0]) for i in small)
                step = max(1, ROWS_MAX_LEVELS // width)
                for at in range(0, len(small), step):
                    part = small[at:at + step]
                    found = self._small_many([read[i].columns for i in part], [hists[i] for i in part], z)
                    done.update(zip(part, found))
            return [done.get(i) or (self._metrics(window, hist), self._estimate_intervals(window, hist, z))
                    for i, (window, hist) in enumerate(zip(read, hists))]

    def _small_many(self, columns: list[tuple[np.ndarray, np.ndarray, np.ndarray]], hists: list[Histogram],
                    z: float) -> list[tuple[dict[str, float | None], dict[str, tuple[float, float] | None]]]:
        """``(metrics, intervals)`` of windows in a monitor's small form (``columns``: scores, negatives,
        positives; unit weights, exact) against a reference of counts, as :meth:`_metrics` and
        :meth:`_estimate_intervals` give them, bit for bit: each family's vectorised twin over the
        windows' levels as rows (:meth:`ReferenceLevels.drift_many`, :func:`cbpe.estimated_rows`,
        :func:`calibration.calibration_error_rows`)."""
        drifts = self._levels.drift_many(hists, self.psi_groups)
        n = np.array([len(c[0]) for c in columns])
        rows, width = len(columns), int(n.max())
        at = (np.repeat(np.arange(rows), n), np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n))
        x, neg, pos = np.zeros((rows, width)), np.zeros((rows, width)), np.zeros((rows, width))
        x[at] = np.concatenate([c[0] for c in columns])
        neg[at] = np.concatenate([c[1] for c in columns])
        pos[at] = np.concatenate([c[2] for c in columns])
        w = neg + pos
        starts, block_var = self._blocks
        block = np.clip(np.searchsorted(starts, x, side="right") - 1, 0, max(len(starts) - 1, 0))
        estimated = cbpe.estimated_rows(self.calibrated(x), w, x >= ExactBinning().key(self.threshold), n, z, block,
                                        block_var, self.scores.total_weight / self._square_ratio())
        ece = calibration.calibration_error_rows(x, neg, pos, n, self.ece_bins, self.ece_norm).tolist()
        out = []
        for i, (estimates, intervals) in enumerate(estimated):
            found: dict[str, float] = {**drifts[i], **estimates, "ece": ece[i], "ece_low": ece[i], "ece_high": ece[i]}
            out.append(({k: json_number(float(found[k])) for k in METRICS}, intervals))
        return out

    def _estimate_intervals(self, window: Any, hist: Histogram, z: float, levels: Any = None,
                            auc: float | None = None) -> dict[str, tuple[float, float] | None]:
        """:meth:`estimate_intervals` of ``window`` with its histogram (``levels``: its
        :meth:`_calibrated_levels` and ``auc`` its estimated ROC AUC, when computed already)."""
        c, w, predicted = self._calibrated_levels(hist) if levels is None else levels
        total = float(np.sum(w))
        squares = _window_squares(window)
        ratio = 1.0 if squares is True else (squares / total if squares is not None and total > 0 else math.nan)
        if not ratio > 0:
            return dict.fromkeys(cbpe.ESTIMATED)
        keys, _, binning = hist
        x = keys.astype(np.float64) if binning.exact else level_bounds(binning, keys)[0]
        starts, block_var = self._blocks  # (each window level: the block of the reference level at or below it)
        block = np.clip(np.searchsorted(starts, x, side="right") - 1, 0, max(len(starts) - 1, 0))
        return cbpe.estimated_intervals(c, w, predicted, z, ratio, block, block_var,
                                        self.scores.total_weight / self._square_ratio(), auc)

    def _square_ratio(self) -> float:
        """The reference's ``sum w^2 / sum w`` (1 for unit weights, or when its squared weights
        are not kept: its events then count as they are)."""
        squares = self.scores.class_squares()
        total = self.scores.total_weight
        if self.scores.unit_weights or squares is None or not sum(squares) > 0:
            return 1.0
        return (squares[0] + squares[1]) / total

    def _estimate(self, hist: Histogram, levels: Any = None) -> dict[str, float]:
        c, w, predicted = self._calibrated_levels(hist) if levels is None else levels
        est = cbpe.estimated_metrics(c, w, predicted)
        out = {"estimated_roc_auc": cbpe.estimated_roc_auc(c, w)}
        out.update({f"estimated_{k}": v for k, v in est.items()})
        return out

    def ece(self, window: Any) -> tuple[float, float, float]:
        """``(ece, low, high)`` of a labelled window (``BinaryScores`` / ``BinaryMonitor``):
        torchmetrics' binary calibration error with ``ece_bins`` / ``ece_norm``."""
        window = _small(window)
        if window.__class__ is _SmallWindow:
            binning: Binning = ExactBinning()
            keys, table = window.columns[0], np.array(window.columns[1:])
        else:
            scores = binary_scores_of(window)
            if scores is None:
                raise TypeError("the calibration error needs a labelled window (BinaryScores or BinaryMonitor)")
            keys, table, binning = scores.class_table()
        if binning.exact:  # (each level one score)
            value = calibration.calibration_error(keys.astype(np.float64), table[0], table[1], self.ece_bins,
                                                  self.ece_norm)
            return value, value, value
        lo, hi = level_bounds(binning, keys)
        value = calibration.calibration_error(representative(lo, hi), table[0], table[1], self.ece_bins, self.ece_norm)
        if math.isnan(value):
            return value, value, value
        low, high = calibration.calibration_error_bounds(lo, hi, table[0], table[1], self.ece_bins, self.ece_norm)
        return value, low, high

    def reliability(self, window: Any, n_bins: int = 10, strategy: str = "uniform") -> dict[str, Any]:
        """:func:`reliability` of a labelled window (the reference is not used)."""
        return reliability(window, n_bins, strategy)

    def metrics(self, window: Any) -> dict[str, float | None]:
        """Every key of :data:`METRICS` for the window, JSON-safe (None where undefined:
        an empty window, or ``ece*`` of a window without labels); no warnings."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            window = _small(window)  # (a monitor's small form read once)
            return self._metrics(window, window_histogram(window))

    def _metrics(self, window: Any, hist: Histogram, drifts: dict[str, float] | None = None,
                 levels: Any = None) -> dict[str, float | None]:
        """:meth:`metrics` of ``window`` (read by :func:`_small`) with its histogram ``hist`` (and its
        drift metrics, its :meth:`_calibrated_levels`, when computed already)."""
        if drifts is None:
            drifts = self._levels.drift(hist, self.psi_groups)
        out: dict[str, float] = {**drifts, **self._estimate(hist, levels)}
        labelled = window.__class__ is _SmallWindow or binary_scores_of(window) is not None
        try:
            e = self.ece(window) if labelled else (math.nan,) * 3
        except ValueError:  # scores outside [0, 1]: no calibration error
            e = (math.nan,) * 3
        out.update(ece=e[0], ece_low=e[1], ece_high=e[2])
        return {k: json_number(float(out[k])) for k in METRICS}

    def __repr__(self) -> str:
        return (f"Reference(count={self.count}, threshold={self.threshold}, "
                f"psi_groups={self.psi_groups}, ece_bins={self.ece_bins}, ece_norm={self.ece_norm!r})")



def reliability(window: Any, n_bins: int = 10, strategy: str = "uniform") -> dict[str, Any]:
    """Reliability diagram of a labelled window (``BinaryScores`` / ``BinaryMonitor`` or its
    dict): ``prob_true``/``prob_pred`` as ``sklearn.calibration.calibration_curve`` (exact
    states; on bins with every event at its bin's midpoint) and, on bins (``uniform`` only),
    per-bin ``bounds`` from :func:`~streammetrics.kernels.calibration.reliability_curve_bounds`
    (None when exact). ``TypeError`` for a window without labels, ``ValueError`` for scores
    outside [0, 1]."""
    scores = binary_scores_of(window)
    if scores is None:
        raise TypeError("the reliability curve needs a labelled window (BinaryScores or BinaryMonitor)")
    keys, table, binning = scores.class_table()
    lo, hi = level_bounds(binning, keys)
    x = keys.astype(np.float64) if binning.exact else representative(lo, hi)
    prob_true, prob_pred = calibration.reliability_curve(x, table[0], table[1], n_bins, strategy)
    bounds = None
    if not binning.exact and strategy == "uniform":
        bounds = {k: v.tolist() for k, v in
                  calibration.reliability_curve_bounds(lo, hi, table[0], table[1], n_bins).items()}
    return {"prob_true": prob_true.tolist(), "prob_pred": prob_pred.tolist(), "bounds": bounds}


def merged_states(states: Iterable[Any], scores_of: Any, kind: str) -> Any:
    """The merge of ``scores_of(state)`` over ``states`` (a reference's ``from_states``);
    ValueError naming the first state that holds no ``kind``, or for no state."""
    merged = None
    for i, state in enumerate(states):
        acc = scores_of(state)
        if acc is None:
            raise ValueError(f"states[{i}] holds no {kind} (got {type(state).__name__})")
        merged = acc.copy() if merged is None else merged.merge(acc)
    if merged is None:
        raise ValueError("states is empty")
    return merged


def check_max_references(max_references: int) -> None:
    if isinstance(max_references, bool) or not isinstance(max_references, int) or max_references < 1:
        raise ValueError(f"max_references must be a positive integer, got {max_references!r}")


def too_many_references(n: int, max_references: int, where: str) -> ValueError:
    return ValueError(f"{where} holds references for more than {max_references:,} (model, segment) keys "
                      f"(--max-references {max_references}); raise the limit or split the file")


def snapshot_metrics(
    references: Mapping[tuple[str, str], Any], task: str = "binary", *,
    max_references: int = DEFAULT_MAX_REFERENCES,
) -> Any:
    """The snapshot hook of ``--reference`` (``WindowManager(extra_metrics=...)``):
    ``hook(key, monitor, metrics)`` adds the label-free metrics of the window's monitor
    against the key's reference to ``metrics`` (binary: :data:`METRICS`; multiclass:
    ``MULTICLASS_METRICS`` and per-class drift in ``per_class``), or the same names as
    None for a key without a reference. More than ``max_references`` references:
    ``ValueError`` naming the limit. The binary hook's ``metrics_text(key)`` gives, for a key
    without a reference, those nulls as JSON members (``,"drift_ks":null,...``), so that the
    window engine writes such windows from their texts (None for a key with a reference)."""
    check_max_references(max_references)
    if len(references) > max_references:
        raise too_many_references(len(references), max_references, "the reference mapping")
    refs = dict(references)
    if task == "multiclass":
        from streammetrics.monitors.reference_multiclass import MULTICLASS_METRICS, MulticlassReference

        for key, ref in refs.items():
            if not isinstance(ref, MulticlassReference):
                raise TypeError(f"the reference of {key!r} is a {type(ref).__name__}, not a MulticlassReference")
        nulls = dict.fromkeys(MULTICLASS_METRICS)

        def multiclass_hook(key: tuple[str, str], monitor: Any, metrics: dict[str, Any]) -> None:
            ref = refs.get(key)
            if ref is None:
                metrics.update(nulls)
                return
            found = ref.metrics(monitor)
            per_class = found.pop("per_class")
            metrics.update(found)
            rows = metrics.get("per_class")
            if isinstance(rows, dict):
                for name, row in per_class.items():
                    rows.setdefault(name, {}).update(row)

        multiclass_hook.intervals = _estimate_intervals(refs, MulticlassReference.monitor_intervals)  # type: ignore[attr-defined]
        return multiclass_hook
    if task != "binary":
        raise ValueError(f"--reference supports the binary and multiclass tasks, not {task!r}")
    for key, ref in refs.items():
        if not isinstance(ref, Reference):
            raise TypeError(f"the reference of {key!r} is a {type(ref).__name__}, not a Reference")
    binary_nulls = dict.fromkeys(METRICS)

    # the intervals of the window whose metrics the hook just added (the snapshot reads them next:
    # the window is read once for both), as [monitor, its count, confidence, intervals]
    read: list[Any] = []

    # the metrics and intervals of windows prepared together (prepare): id(monitor) -> [monitor, its
    # count, confidence, metrics, intervals]; emptied by each prepare (at most one batch held)
    prepared: dict[int, list[Any]] = {}

    def prepare(windows: list[tuple[tuple[str, str], Any]]) -> None:
        """Compute the hook's metrics and intervals of the ``(key, monitor)`` windows about to be
        built, per reference together (:meth:`Reference.metrics_and_intervals_many`); the hook and
        its ``intervals`` then take them (the same values: each window read once)."""
        prepared.clear()
        by_ref: dict[tuple[str, str], list[Any]] = {}
        for key, monitor in windows:
            if key in refs and monitor.count:
                by_ref.setdefault(key, []).append(monitor)
        for key, monitors in by_ref.items():
            for confidence in {getattr(m, "confidence", 0.95) for m in monitors}:
                chosen = [m for m in monitors if getattr(m, "confidence", 0.95) == confidence]
                for m, (found, pairs) in zip(chosen, refs[key].metrics_and_intervals_many(chosen, confidence)):
                    prepared[id(m)] = [m, m.count, confidence, found, pairs]

    def hook(key: tuple[str, str], monitor: Any, metrics: dict[str, Any]) -> None:
        ref = refs.get(key)
        read.clear()
        if ref is None:
            metrics.update(binary_nulls)
            return
        held = prepared.pop(id(monitor), None) if prepared else None
        if held is not None and held[0] is monitor and held[1] == monitor.count:
            metrics.update(held[3])
            read.extend((monitor, held[1], held[2], held[4]))
        elif not monitor.count:
            metrics.update(ref.metrics(monitor))
        else:
            confidence = getattr(monitor, "confidence", 0.95)
            found, pairs = ref.metrics_and_intervals(monitor, confidence)
            metrics.update(found)
            read.extend((monitor, monitor.count, confidence, pairs))

    hook.prepare = prepare  # type: ignore[attr-defined]
    hook.intervals = _estimate_intervals(refs, Reference.estimate_intervals, read)  # type: ignore[attr-defined]
    nulls_text = "".join(f',"{name}":null' for name in METRICS)

    def metrics_text(key: tuple[str, str]) -> str | None:
        """The JSON members the hook appends to the metrics of any window of ``key`` whose
        window it need not read (a key without a reference: every name null, no intervals),
        None for a key with a reference (the hook reads the window)."""
        return nulls_text if key not in refs else None

    hook.metrics_text = metrics_text  # type: ignore[attr-defined]
    return hook


def _estimate_intervals(refs: Mapping[tuple[str, str], Any], read: Any, last: list[Any] | None = None) -> Any:
    """The reference hook's ``intervals(key, monitor, confidence)``, which ``stream.snapshots`` adds to
    the record: ``read(reference, monitor, confidence)`` (the CBPE estimates' intervals), empty for a
    key without a reference or a window without predictions. ``last``: ``[monitor, count, confidence,
    intervals]`` the hook computed with the window's metrics (taken when they are this call's)."""

    def intervals(key: tuple[str, str], monitor: Any, confidence: float) -> dict[str, tuple[float, float] | None]:
        ref = refs.get(key)
        if ref is None or not monitor.count:
            return {}
        if last:
            held, count, at, pairs = last
            last.clear()
            if held is monitor and count == monitor.count and at == confidence:
                result: dict[str, tuple[float, float] | None] = pairs
                return result
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            result = read(ref, monitor, confidence)
            return result

    return intervals
