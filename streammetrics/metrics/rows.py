"""Row parsing shared by the accumulators of one score or indicator per column.

:class:`Columns` holds the column names (classes or labels, one kind) and validates, naming
the first bad element:

* a score row (a sequence aligned with the columns, or a mapping column -> score) and a
  score matrix (:meth:`Columns.row`, :meth:`Columns.matrix`);
* a multilabel indicator row (0/1 or bool per column, or a set of the labels present) and
  an indicator matrix (or a sequence of such sets): :meth:`Columns.indicator_row`,
  :meth:`Columns.indicator_matrix`. ``MultilabelScores`` and ``MultilabelConfusion`` read
  their rows through these two, so the same bad input gets the same error from both.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from streammetrics.core.labels import label_kind as _kind
from streammetrics.core.validation import asarray, check_number, indicator_values, to_builtin_label

__all__ = ["Columns"]

_FAST_CLASS = {"bool": bool, "number": int, "str": str}
_SETS = (set, frozenset)
_INF = float("inf")


class Columns:
    """Label names of score columns: lookups that keep bools and ints apart, and the
    validation of one score row (sequence or mapping) and of a score matrix."""

    __slots__ = ("names", "kind", "fast", "index", "what", "whats")

    def __init__(self, names: list, what: str, whats: str) -> None:
        self.names = names
        self.kind = _kind(names[0])
        self.fast = _FAST_CLASS[self.kind]
        self.index = {v: i for i, v in enumerate(names)}
        self.what, self.whats = what, whats  # "class", "classes": for messages

    def find(self, label: Any, name: str) -> int | None:
        """Column of ``label``, or None (``True`` never finds the int ``1``)."""
        if label.__class__ is self.fast:
            return self.index.get(label)
        label = to_builtin_label(label, name)
        if _kind(label) != self.kind:
            return None
        return self.index.get(label)

    def row(self, scores: Any, name: str) -> list[float]:
        """One validated row of finite floats, in column order."""
        k = len(self.names)
        cls = scores.__class__
        if cls is list or cls is tuple:
            values = scores
        elif isinstance(scores, Mapping):
            return self._mapping_row(scores, name)
        elif isinstance(scores, np.ndarray) or hasattr(scores, "__array__"):  # numpy, pandas
            scores = np.asarray(scores)
            if scores.ndim != 1:
                raise ValueError(f"{name} must be one row of {k} scores, got shape {scores.shape}")
            if scores.dtype.kind == "b":
                raise TypeError(f"{name} must hold real numbers, got booleans")
            values = scores.tolist()
        elif isinstance(scores, (str, bytes)) or not isinstance(scores, Sequence):
            raise TypeError(
                f"{name} must be a sequence of {k} scores or a mapping {self.what} -> score, "
                f"got {type(scores).__name__}"
            )
        else:
            values = list(scores)
        if len(values) != k:
            raise ValueError(
                f"{name} has {len(values)} values, expected {k} (one per {self.what} in {self.names!r})"
            )
        out = list(values)
        for i, v in enumerate(out):
            if v.__class__ is not float or not -_INF < v < _INF:
                out[i] = check_number(v, f"{name}[{i}]")
        return out

    def _mapping_row(self, scores: Mapping, name: str) -> list[float]:
        out: list = [None] * len(self.names)
        for key, v in scores.items():
            try:
                j = self.find(key, f"{name} key")
            except (TypeError, ValueError):
                j = None
            if j is None:
                raise ValueError(f"{name} has unknown {self.what} {key!r}; {self.whats} are {self.names!r}")
            out[j] = check_number(v, f"{name}[{self.names[j]!r}]")
        missing = [self.names[j] for j, v in enumerate(out) if v is None]
        if missing:
            raise ValueError(f"{name} is missing {self.whats} {missing!r} (needs one score per {self.what})")
        return out

    def matrix(self, values: Any, name: str) -> np.ndarray:
        """Validated C-ordered float64 ``(n, K)`` matrix (an empty batch gives ``(0, K)``);
        rows may also be given as a sequence of mappings."""
        k = len(self.names)
        if isinstance(values, (str, bytes)) or isinstance(values, Mapping):
            raise TypeError(f"{name} must be an (n, {k}) array of scores, got {type(values).__name__}")
        if isinstance(values, (list, tuple)) and values and isinstance(values[0], Mapping):
            return np.array([self.row(r, f"{name}[{i}]") for i, r in enumerate(values)],
                            dtype=np.float64).reshape(-1, k)
        try:
            arr = asarray(values)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name} could not be read as an (n, {k}) matrix: {exc}") from None
        if arr.size == 0 and arr.ndim in (1, 2):
            return np.zeros((0, k), dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != k:
            raise ValueError(
                f"{name} must have shape (n, {k}) (one column per {self.what}), got {arr.shape}"
            )
        kind = arr.dtype.kind
        if kind == "b":
            raise TypeError(f"{name} must hold real numbers, got booleans")
        if kind not in "iuf":  # name the first element that is not a real number
            objects = np.asarray(values, dtype=object) if kind != "O" else arr
            if objects.shape == arr.shape:
                for (i, j), v in np.ndenumerate(objects):
                    check_number(v, f"{name}[{i}][{j}]")
            if kind != "O":
                raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
        arr = np.ascontiguousarray(arr, dtype=np.float64)
        bad = ~np.isfinite(arr)
        if bad.any():
            i, j = np.argwhere(bad)[0].tolist()
            raise ValueError(f"{name}[{i}][{j}] must be finite, got {arr[i, j].item()!r}")
        return arr

    def indicator_row(self, row: Any, name: str) -> list[bool]:
        """One truth row as bools in column order (indicator sequence or set of labels)."""
        cols = self
        n = len(cols.names)
        if row.__class__ in _SETS:
            out = [False] * n
            for label in row:
                try:
                    j = cols.find(label, f"{name} element")
                except (TypeError, ValueError):
                    j = None
                if j is None:
                    raise ValueError(f"{name} holds {label!r}, which is not one of labels {cols.names!r}")
                out[j] = True
            return out
        if isinstance(row, np.ndarray):
            if row.ndim != 1:
                raise ValueError(f"{name} must be one row, got an array of shape {row.shape}")
            row = row.tolist()
        elif isinstance(row, (str, bytes)) or not isinstance(row, Sequence):
            raise TypeError(f"{name} must be an indicator sequence or a set of labels, got {type(row).__name__}")
        if len(row) != n:
            raise ValueError(f"{name} has {len(row)} entries, expected {n} (one per label in {cols.names!r})")
        out = []
        for j, v in enumerate(row):
            if v.__class__ is not str and (v == 1 or v == 0):
                out.append(True if v == 1 else False)
            else:
                raise ValueError(f"{name}[{j}] must be 0 or 1, got {v!r}")
        return out

    def indicator_matrix(self, rows: Any, name: str) -> np.ndarray:
        """``(n, L)`` bool matrix from an indicator array-like or a sequence of label sets."""
        n_labels = len(self.names)
        if isinstance(rows, (str, bytes, Mapping)):
            raise TypeError(f"{name} must be an indicator matrix or a sequence of label sets")
        if not hasattr(rows, "__array__"):
            rows = list(rows)
            if rows and any(r.__class__ in _SETS for r in rows):
                return np.array([self.indicator_row(r, f"{name}[{i}]") for i, r in enumerate(rows)],
                                dtype=bool).reshape(-1, n_labels)
        try:
            arr = asarray(rows)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name} could not be read as an indicator matrix: {exc}") from None
        if arr.size == 0 and arr.ndim in (1, 2):
            return np.zeros((0, n_labels), dtype=bool)
        if arr.ndim != 2 or arr.shape[1] != n_labels:
            raise ValueError(f"{name} must have shape (n, {n_labels}), got {arr.shape}")
        return indicator_values(arr, name)
