"""Warnings and errors raised by streammetrics.

:class:`UndefinedMetricWarning` mirrors ``sklearn.exceptions.UndefinedMetricWarning``
(also a ``UserWarning``) so that code filtering warnings by the ``UserWarning`` family
treats both libraries alike, without streammetrics importing scikit-learn.
"""
from __future__ import annotations

__all__ = ["UndefinedMetricWarning"]


class UndefinedMetricWarning(UserWarning):
    """A metric is ill-defined (e.g. a zero denominator) and was set to a fallback value."""
