"""The base of the accumulators of one score per column (``MulticlassScores``: one per
class; ``MultilabelScores``: one per label) and the averaging helpers they share.

:class:`ScoreColumns` holds the configuration both have (the column names, the score
binning) and its checks; ``average_scores`` / ``average_intervals`` apply scikit-learn's
``average`` argument (None, macro, weighted) to per-column values and bounds.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar, Mapping

import numpy as np

from streammetrics.core.accumulator import Accumulator
from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.core.validation import labels_to_json
from streammetrics.kernels import ranking
from streammetrics.kernels.binning import Binning, binning_from_config

__all__ = ["ScoreColumns", "average_scores", "average_intervals", "binary_auc", "warn_no_events", "check_average"]

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
    warnings.warn(
        f"No event with a non-zero weight: {name} is not defined.", UndefinedMetricWarning, stacklevel=3
    )
    return math.nan


def check_average(average: Any, options: tuple, what: str) -> None:
    if average not in options:
        raise ValueError(f"average must be one of {options} for {what}, got {average!r}")


# ----------------------------------------------------------------------------- accumulator
class ScoreColumns(Accumulator):
    """Configuration shared by the accumulators of one score per column (class or label):
    the column names (config key :attr:`columns_key`), the binning, and the merge check."""

    #: config key of the column names: "classes" or "labels"
    columns_key: ClassVar[str] = "classes"
    _cols: Any
    _binning: Binning

    @property
    def bins(self) -> int | None:
        """Bins per octave of the log grid (None when ``exact``)."""
        return None if self._binning.exact else self._binning.bins  # type: ignore[attr-defined]  # a LogGridBinning (or the same type) here

    @property
    def exact(self) -> bool:
        """True when every distinct score is kept."""
        return self._binning.exact

    def _config(self) -> dict[str, Any]:
        return {self.columns_key: labels_to_json(self._cols.names), "bins": self.bins, "exact": self.exact}

    @classmethod
    def _from_config(cls, config: Mapping[str, Any]) -> Any:
        key = cls.columns_key
        if set(config) != {key, "bins", "exact"} or not isinstance(config[key], list):
            raise ValueError(f"config must be {{'{key}': [...], 'bins', 'exact'}}, got {dict(config)!r}")
        binning = binning_from_config({"bins": config["bins"], "exact": config["exact"]})
        return cls(config[key], bins=binning.config()["bins"], exact=binning.exact)  # type: ignore[call-arg]  # the subclasses take (columns, bins, exact)

    def _check_mergeable(self, other: Accumulator) -> None:
        super()._check_mergeable(other)
        if self._cols.kind != other._cols.kind:  # type: ignore[attr-defined]  # a LogGridBinning (or the same type) here
            raise ValueError(f"cannot merge {type(self).__name__} over {self.columns_key} of different kinds")


