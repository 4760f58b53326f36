"""Input checks shared by every accumulator.

Two families:

* per-event checks (``check_weight``, ``check_number``, ``to_builtin_label``) are plain
  Python with a fast path for the common built-in types: no numpy work per event;
* batch checks (``as_*_array``) convert array-likes once and validate the whole batch
  before the caller mutates anything, naming the argument and the first bad element.

Errors are ``ValueError`` (bad value) or ``TypeError`` (wrong kind of object).
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import Any, Hashable, Sequence

import numpy as np

__all__ = [
    "asarray",
    "check_weight",
    "check_number",
    "as_label_array",
    "as_float_array",
    "as_weight_array",
    "indicator_values",
    "check_same_length",
    "to_builtin_label",
    "labels_to_json",
    "labels_from_json",
]

_INF = math.inf


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# ----------------------------------------------------------------------------- events
def check_weight(weight: Any, name: str = "weight") -> float:
    """Return ``weight`` as a float; it must be a finite, non-negative real number."""
    cls = weight.__class__
    if cls is float:
        if 0.0 <= weight < _INF:  # NaN fails both comparisons
            return weight
    elif cls is int:
        if weight >= 0:
            return float(weight)
    elif cls is not bool and isinstance(weight, numbers.Real):
        w = float(weight)
        if 0.0 <= w < _INF:
            return w
    else:
        raise TypeError(f"{name} must be a real number, got {_describe(weight)}")
    raise ValueError(f"{name} must be finite and non-negative, got {_describe(weight)}")


def check_number(value: Any, name: str) -> float:
    """Return ``value`` as a finite float (bools are rejected: they are not numbers here)."""
    cls = value.__class__
    if cls is float:
        if -_INF < value < _INF:
            return value
    elif cls is int:
        return float(value)
    elif cls is not bool and isinstance(value, numbers.Real):
        v = float(value)
        if -_INF < v < _INF:
            return v
    else:
        raise TypeError(f"{name} must be a real number, got {_describe(value)}")
    raise ValueError(f"{name} must be finite, got {_describe(value)}")


_LABEL_TYPES = (int, str, bool)


def to_builtin_label(label: Any, name: str = "label") -> Hashable:
    """Normalise a label to a JSON-representable built-in (int, str, bool or finite float).

    numpy scalars become their Python equivalents so that ``np.int64(3)`` and ``3`` are
    the same label in per-event and batch updates alike.
    """
    cls = label.__class__
    if cls in _LABEL_TYPES:
        return label
    if isinstance(label, np.generic):
        label = label.item()
        cls = label.__class__
        if cls in _LABEL_TYPES:
            return label
    if cls is float:
        if math.isfinite(label):
            return int(label) if label.is_integer() else label
        raise ValueError(f"{name} must not be NaN or infinite, got {_describe(label)}")
    if isinstance(label, str):
        return str(label)
    if isinstance(label, bool):
        return bool(label)
    if isinstance(label, numbers.Integral):
        return int(label)
    if isinstance(label, numbers.Real):
        return to_builtin_label(float(label), name)
    try:
        hash(label)
    except TypeError:
        raise TypeError(f"{name} must be hashable, got {_describe(label)}") from None
    raise TypeError(
        f"{name} must be an int, str, bool or finite float, got {type(label).__name__} {_describe(label)}"
    )


# ----------------------------------------------------------------------------- batches
# numpy < 1.24 turns ragged nested sequences into object arrays with this warning, where
# later versions raise ValueError: make every version raise
_RAGGED = getattr(getattr(np, "exceptions", np), "VisibleDeprecationWarning", DeprecationWarning)


def asarray(values: Any, dtype: Any = None) -> np.ndarray:
    """``np.asarray`` that raises ``ValueError`` on ragged nested sequences on every numpy."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", _RAGGED)
        try:
            return np.asarray(values, dtype=dtype)
        except _RAGGED as exc:
            raise ValueError(f"ragged nested sequences: {exc}") from None


def _as_1d(values: Any, name: str, dtype: Any = None) -> np.ndarray:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__") and not hasattr(values, "__array__"):
        if not hasattr(values, "__iter__") or isinstance(values, (str, bytes)):
            raise TypeError(f"{name} must be a sequence or array, got {type(values).__name__}")
        values = list(values)
    try:
        arr = asarray(values, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} could not be read as an array: {exc}") from None
    if arr.ndim != 1:
        if arr.ndim == 2 and 1 in arr.shape:
            arr = arr.reshape(-1)
        else:
            raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def check_same_length(**arrays: Any) -> int:
    """All given arrays (None skipped) have one length; return it or raise naming them."""
    lengths = {k: len(v) for k, v in arrays.items() if v is not None}
    if len(set(lengths.values())) > 1:
        desc = ", ".join(f"{k} has {n}" for k, n in lengths.items())
        raise ValueError(f"inconsistent batch lengths: {desc}")
    return next(iter(lengths.values()), 0)


def as_float_array(values: Any, name: str, *, finite: bool = True) -> np.ndarray:
    """1-D float64 array; bools and non-numbers raise TypeError, NaN/inf raise ValueError."""
    arr = _as_1d(values, name)
    if arr.dtype.kind == "b":
        raise TypeError(f"{name} must hold real numbers, got booleans")
    if arr.dtype.kind not in "iuf":
        if arr.dtype.kind == "O" and len(arr):
            for i, v in enumerate(arr):
                try:
                    check_number(v, f"{name}[{i}]")
                except (TypeError, ValueError):
                    raise
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}") from None
    else:
        arr = arr.astype(np.float64, copy=False)
    if finite and len(arr):
        bad = ~np.isfinite(arr)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{name}[{i}] must be finite, got {arr[i].item()!r}")
    return arr


def as_weight_array(sample_weight: Any, n: int, name: str = "sample_weight") -> np.ndarray | None:
    """Validated float64 weights of length ``n`` (finite, >= 0), or None for unit weights."""
    if sample_weight is None:
        return None
    arr = as_float_array(sample_weight, name)
    if len(arr) != n:
        raise ValueError(f"inconsistent batch lengths: {name} has {len(arr)}, expected {n}")
    if len(arr):
        neg = arr < 0
        if neg.any():
            i = int(np.argmax(neg))
            raise ValueError(f"{name}[{i}] must be non-negative, got {arr[i].item()!r}")
    return arr


def as_label_array(values: Any, name: str) -> np.ndarray:
    """1-D array of labels. Numeric labels stay numeric; anything else becomes object dtype
    holding built-in Python labels (validated: hashable, no NaN)."""
    arr = _as_1d(values, name)
    kind = arr.dtype.kind
    if kind in "iub":
        return arr
    if kind == "f":
        if len(arr) and not np.isfinite(arr).all():
            i = int(np.argmax(~np.isfinite(arr)))
            raise ValueError(f"{name}[{i}] must not be NaN or infinite, got {arr[i].item()!r}")
        if len(arr) and np.all(arr == np.round(arr)) and np.all(np.abs(arr) < 2**53):
            return arr.astype(np.int64)
        return arr
    if kind == "U":
        return arr
    # object or anything else: validate element-wise
    out = np.empty(len(arr), dtype=object)
    for i, v in enumerate(arr):
        out[i] = to_builtin_label(v, f"{name}[{i}]")
    return out


def indicator_values(arr: np.ndarray, name: str) -> np.ndarray:
    """A validated 2-D indicator array (entries 0/1, bool, or 0.0/1.0) as a contiguous bool
    matrix; ValueError naming the first other entry as ``name[i][j]``."""
    if arr.dtype.kind == "b":
        return np.ascontiguousarray(arr)
    if arr.dtype.kind in "iuf":
        ones = arr == 1
        bad = ~(ones | (arr == 0))
    else:
        ones = np.zeros(arr.shape, dtype=bool)
        bad = np.ones(arr.shape, dtype=bool)
        for (i, j), v in np.ndenumerate(arr):
            if v.__class__ is not str and (v == 1 or v == 0):
                bad[i, j] = False
                ones[i, j] = v == 1
    if bad.any():
        i, j = np.argwhere(bad)[0].tolist()
        value = arr[i, j]
        value = value.item() if isinstance(value, np.generic) else value
        raise ValueError(f"{name}[{i}][{j}] must be 0 or 1, got {value!r}")
    return ones


# ----------------------------------------------------------------------------- JSON
def labels_to_json(labels: Sequence[Hashable]) -> list:
    """Labels as a JSON list (ints, strs, bools, floats survive JSON unchanged)."""
    return [to_builtin_label(x) for x in labels]


def labels_from_json(values: Any, name: str = "labels") -> list:
    """A JSON list of distinct labels (kinds may mix), validated by
    :func:`streammetrics.core.labels.check_label_list`."""
    from streammetrics.core.labels import check_label_list  # core.labels imports this module

    if not isinstance(values, list):
        raise ValueError(f"{name} must be a list, got {type(values).__name__}")
    return check_label_list(values, name, minimum=0, one_kind=False)

