"""Warnings and errors raised by streammetrics.

:class:`UndefinedMetricWarning` mirrors ``sklearn.exceptions.UndefinedMetricWarning``
(also a ``UserWarning``) so that code filtering warnings by the ``UserWarning`` family
treats both libraries alike, without streammetrics importing scikit-learn.
:class:`InvalidEvent` is the ``ValueError`` of an already-parsed event a monitor cannot take.
"""
from __future__ import annotations

import math
import warnings

__all__ = ["InvalidEvent", "UndefinedMetricWarning", "undefined"]


class UndefinedMetricWarning(UserWarning):
    """A metric is ill-defined (e.g. a zero denominator) and was set to a fallback value."""


class InvalidEvent(ValueError):
    """An event whose field ``field`` a monitor cannot take (e.g. a binary ``y_true`` of 0.5 on
    an event built without the parser); raised before anything changes."""

    def __init__(self, reason: str, field: str) -> None:
        super().__init__(reason)
        self.field = field


def undefined(message: str, stacklevel: int = 2) -> float:
    """Warn ``message`` as an :class:`UndefinedMetricWarning` (``stacklevel`` counted from the
    caller, as ``warnings.warn`` would take it there) and return nan."""
    warnings.warn(message, UndefinedMetricWarning, stacklevel=stacklevel + 1)
    return math.nan
