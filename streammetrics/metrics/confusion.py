"""``ConfusionMatrix``: a weighted confusion matrix of hard predictions, and every metric
scikit-learn derives from one (accuracy, balanced accuracy, precision, recall, F-beta,
Jaccard, specificity, Matthews correlation, Cohen's kappa, classification report).

State: per cell ``(true label, predicted label)`` the number of unit-weight events (an
exact int) and the summed weight of the other events, plus the number of those. A
default-weight event is then one dict update, and unit-weight streams are exact integer
counts; ``count`` and ``total_weight`` are derived. An event with weight 0 still creates
its cell, so its labels count as seen, as they do for scikit-learn's ``unique_labels``.
``to_dict`` writes each cell's total weight.

Summed weights are exact (:mod:`streammetrics.kernels.exact_weights`): the state depends only
on the multiset of events, whatever the order of updates and merges. The weighted sums are
whole floats while every weight other than 1 is a whole number up to ``2**32`` and every cell's
weighted sum at most ``2**52`` (so float sums are exact), else ints of units of ``2**-1074``
(at most ~2,100 bits each). Cells and ``total_weight`` are written correctly rounded;
``cells_residues`` (only when some cell's float is not its exact sum) lists ``[index in cells,
residue]``.
Metrics read the correctly rounded sums.

Squared weights (issue 26: the intervals' effective sample size, Kish ``(sum w)^2 / sum w^2``):
per cell the exact sum of ``fl(w * w)`` over the events of weight other than 1, in units (an
exact, order-free sum of the rounded squares). Written only once some weight is not 1, as
``cells_squares`` (each cell's whole ``sum w^2``, in the order of ``cells``, correctly rounded)
and ``cells_squares_residues``; a weighted state written before them loads with the squares
unknown (None: its weighted intervals are None).

Labels are int, str or bool (numpy scalars become Python ones, integral floats become
ints, other finite floats are kept). One accumulator holds labels of a single kind: all
bool, all numbers or all str. ``True == 1`` in Python, so bools and ints mixed in one
dict would collide; mixing kinds raises ``ValueError`` instead (scikit-learn would
coerce bools to ints, or raise for str/number mixes).

Empty input: scikit-learn raises on empty input or all-zero weights. Here every
metric of an accumulator whose ``total_weight`` is 0 returns NaN (an array of NaN for
``average=None``) with an :class:`~streammetrics.core.exceptions.UndefinedMetricWarning`,
except ``accuracy(normalize=False)`` (0.0, a well-defined sum), ``matrix()`` (zeros)
and ``classification_report`` (raises ``ValueError``).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Hashable, Mapping, Sequence

import numpy as np

from streammetrics.core.accumulator import Accumulator
from streammetrics.core.labels import LABEL_KINDS, check_label_list, label_kind
from streammetrics.core.state import Field, check_event_count, describe, state_limits
from streammetrics.core.validation import (
    as_label_array,
    as_weight_array,
    check_same_length,
    check_weight,
    to_builtin_label,
)
from streammetrics.kernels import classification as _cls
from streammetrics.kernels import sparse_confusion as _sparse
from streammetrics.kernels.exact_weights import (
    FLOAT_EXACT,
    UNIT,
    WHOLE_MAX,
    all_whole,
    decode_residues,
    encode_residues,
    grouped_units,
    is_whole,
    to_units,
    units_of,
    value_of,
)
from streammetrics.kernels.report_text import classification_report_of

__all__ = ["ConfusionMatrix"]

_INF = math.inf
_ONE = 1.0  # the default weight object: `weight is _ONE` skips validation per event
_KINDS = LABEL_KINDS
_FAST_CLASS = {"bool": bool, "number": int, "str": str}
_DTYPE_KINDS = {"b": "bool", "i": "number", "u": "number", "f": "number", "U": "str"}
# small non-negative int labels are counted with one bincount on a combined code
_DIRECT_MAX_LABEL = 1024
# whole weights are summed as floats (a batch in float64, bincount) while a cell stays at most this
_FLOAT_EXACT = FLOAT_EXACT


_kind = label_kind


def _normalise(values: list) -> list:
    """Python labels from ``ndarray.tolist()`` output (integral floats become ints)."""
    return [int(v) if v.__class__ is float and v.is_integer() else v for v in values]


def array_kind(arr: np.ndarray, name: str) -> str | None:
    kind = _DTYPE_KINDS.get(arr.dtype.kind)
    if kind is not None or len(arr) == 0:
        return kind
    # object array of validated built-in labels: one kind throughout
    first = _kind(arr[0])
    for i, v in enumerate(arr):
        if _KINDS[v.__class__] != first:
            raise ValueError(
                f"{name}[{i}] is {v!r}, a {_KINDS[v.__class__]} label, but {name}[0] is "
                f"{arr[0]!r}, a {first} label; labels must be all bool, all numbers or all str"
            )
    return first


# ----------------------------------------------------------------------------- declared state
def _is_units(sums: Mapping) -> bool:
    """True if summed weights are held in units (every value an int), not whole floats."""
    return next(iter(sums.values()), 0.0).__class__ is int


def _as_units(sums: dict) -> dict:
    """``sums`` in units: itself if already (or empty), else a converted copy."""
    return sums if not sums or _is_units(sums) else {key: units_of(x) for key, x in sums.items()}


def _normal_form(sums: dict) -> dict:
    """Summed weights (floats or units) in the form a decoded state holds them: whole
    floats while every sum is whole (:func:`is_whole`), else units."""
    if _is_units(sums):
        if all(not u % UNIT and is_whole(value_of(u)) for u in sums.values()):
            return {key: value_of(u) for key, u in sums.items()}
        return sums
    return sums if all(is_whole(x) for x in sums.values()) else _as_units(sums)


def _merge_cells(mine: tuple, theirs: tuple, acc: Any) -> tuple:
    n, w, n_weighted = mine
    for key, v in theirs[0].items():
        n[key] = n.get(key, 0) + v
    tw = theirs[1]
    if tw:
        zero: float | int = 0.0
        if (_is_units(w) or _is_units(tw)  # a side in units, or float sums that could round: both in units
                or max(w.values(), default=0.0) + max(tw.values(), default=0.0) > _FLOAT_EXACT):
            w, tw, zero = _as_units(w), _as_units(tw), 0
        for key, x in tw.items():
            w[key] = w.get(key, zero) + x
    return n, w, n_weighted + theirs[2]


def _cell_totals(n: Mapping[tuple, int], w: Mapping[tuple, Any]) -> dict[tuple, Any]:
    """Cell -> total weight: whole floats, or units (ints) when ``w`` is in units."""
    if w and _is_units(w):
        units: dict[tuple, Any] = {key: c * UNIT for key, c in n.items()}
        for key, u in w.items():
            units[key] = units.get(key, 0) + u
        return units
    cells = {key: float(c) for key, c in n.items()}
    for key, x in w.items():
        cells[key] = cells.get(key, 0.0) + x
    return cells


def _encode_cells(value: tuple, acc: Any) -> tuple:
    n, w, n_weighted = value
    count = sum(n.values()) + n_weighted
    if not w or not _is_units(w):  # whole weights: float sums are exact
        cells = {key: float(c) for key, c in n.items()}
        for key, x in w.items():
            cells[key] = cells.get(key, 0.0) + x
        total = float(sum(n.values())) + math.fsum(w.values())
        return count, total, [[t, p, float(x)] for (t, p), x in sorted(cells.items())], None
    items = sorted(_cell_totals(n, w).items())
    sums = [u for _, u in items]
    return (count, value_of(sum(sums)), [[t, p, value_of(u)] for (t, p), u in items],
            encode_residues(sums))


def _square_units(weight: float) -> int:
    """An event's squared weight ``fl(w * w)`` in units (exact: every float is whole units)."""
    return units_of(weight * weight)


def _merge_squares(mine: dict | None, theirs: dict | None, acc: Any) -> dict | None:
    if mine is None or theirs is None:
        return None
    for key, u in theirs.items():
        mine[key] = mine.get(key, 0) + u
    return mine


def _encode_squares(squares: dict | None, acc: "ConfusionMatrix") -> tuple:
    """``(cells_squares, cells_squares_residues)``: each cell's ``sum w^2`` (unit-weight events
    count 1) in the order of ``cells``; ``(None, None)`` for unit weights or unknown squares."""
    if acc._unit or squares is None:
        return None, None
    n = acc._n
    units = [n.get(key, 0) * UNIT + squares.get(key, 0) for key in sorted(_cell_totals(n, acc._w))]
    return [value_of(u) for u in units], encode_residues(units)


def _decode_squares(raw: tuple, acc: "ConfusionMatrix", loaded: Mapping[str, Any]) -> dict | None:
    values, residues = raw
    n, w, _ = loaded["count"]
    if values is None:
        if residues is not None:
            raise ValueError("cells_squares_residues given without cells_squares")
        return {} if not w else None  # unit weights: known; a weighted state written before: unknown
    if not w:
        raise ValueError("cells_squares given for a state of unit weights")
    keys = sorted(w)
    if not isinstance(values, list) or len(values) != len(keys):
        raise ValueError(f"cells_squares must be a list of {len(keys)} numbers (one per cell), got {describe(values)}")
    floats = [check_weight(v, f"cells_squares[{i}]") for i, v in enumerate(values)]
    units = decode_residues(residues, floats, "cells_squares_residues") or [units_of(v) for v in floats]
    for i, key in enumerate(keys):
        cell = value_of(to_units(w[key]))
        if value_of(units[i]) > cell * cell * (1.0 + 1e-9) and value_of(units[i]) > 0.0:
            raise ValueError(f"cells_squares[{i}] = {floats[i]!r} exceeds the square of its cell's weight {cell!r}")
    return dict(zip(keys, units))


def _decode_cells(raw: tuple, acc: "ConfusionMatrix", loaded: Mapping[str, Any]) -> tuple:
    count, total, cells, residues = raw
    check_event_count(count)
    total = check_weight(total, "total_weight")
    if not isinstance(cells, list):
        raise ValueError(f"cells must be a list of [true, pred, weight], got {type(cells).__name__}")
    if len(cells) > count:
        raise ValueError(f"{len(cells)} cells cannot come from count={count} events")
    parsed: dict[tuple, Any] = {}
    seen: set = set()
    cap = state_limits().max_labels
    for i, cell in enumerate(cells):
        if not isinstance(cell, list) or len(cell) != 3:
            raise ValueError(f"cells[{i}] must be a [true, pred, weight] list, got {describe(cell)}")
        t = to_builtin_label(cell[0], f"cells[{i}][0]")
        p = to_builtin_label(cell[1], f"cells[{i}][1]")
        if acc._fixed is None:  # discovered labels: bounded as a configured list is
            seen.add((t.__class__ is bool, t))
            seen.add((p.__class__ is bool, p))
            if len(seen) > cap:
                raise ValueError(f"cells[{i}]: cells hold more than max_labels={cap} distinct labels")
        w = check_weight(cell[2], f"cells[{i}][2]")
        key = (t, p)
        if key in parsed or (t, p) != (cell[0], cell[1]):
            raise ValueError(f"cells[{i}] repeats or mis-encodes the cell {key!r}")
        parsed[key] = w
    units = decode_residues(residues, list(parsed.values()), "cells_residues")
    if units is not None:  # residues: exact sums of weights that are not whole numbers
        parsed = dict(zip(parsed, units))
        if total != value_of(sum(units)):  # written with the residues: exactly the rounded sum
            raise ValueError(f"total_weight={total!r} is not the correctly rounded sum of the cells "
                             f"{value_of(sum(units))!r}")
    return acc._check_cells(_normal_form(parsed), count, total, loaded["unit_weights"])


_CONFUSION_STATE = (
    Field("unit_weights", lambda acc: True, "flag_all", attrs="_unit"),
    # unit-weight counts and weighted sums per (true, pred) cell, and the number of
    # weighted events; written as the cells' total weights (correctly rounded) with count and
    # total_weight, and the residues of the cells whose float is not their exact sum
    Field(("count", "total_weight", "cells", "cells_residues"), lambda acc: ({}, {}, 0),
          attrs=("_n", "_w", "_n_weighted"), merge=_merge_cells, copy=lambda v: (dict(v[0]), dict(v[1]), v[2]),
          encode=_encode_cells, decode=_decode_cells, optional=("cells_residues",)),
    # per cell the exact sum of the squared weights of the events in _w (units), None when a
    # loaded weighted state did not carry them; written only for weights other than 1
    Field(("cells_squares", "cells_squares_residues"), lambda acc: {}, attrs="_w2", merge=_merge_squares,
          copy=lambda v: None if v is None else dict(v), encode=_encode_squares, decode=_decode_squares,
          optional=("cells_squares", "cells_squares_residues")),
)


#: the state keys :meth:`ConfusionMatrix._state` writes directly (another declaration: generic)
_DIRECT_STATE = tuple(k for f in _CONFUSION_STATE for k in f.keys) == (
    "unit_weights", "count", "total_weight", "cells", "cells_residues", "cells_squares", "cells_squares_residues")


class ConfusionMatrix(Accumulator):
    """Weighted confusion matrix of hard predictions with scikit-learn's metrics.

    ``labels=None`` discovers labels as they arrive; metrics then use the sorted labels
    seen. With a list, events with other labels raise ``ValueError`` and metrics use that
    list (in its order) wherever scikit-learn takes a ``labels`` argument.

    >>> cm = ConfusionMatrix().update_many(["cat", "dog", "cat", "bird"], ["cat", "dog", "dog", "bird"])
    >>> cm.accuracy(), round(cm.f1(average="macro"), 4), cm.labels
    (0.75, 0.7778, ['bird', 'cat', 'dog'])
    """

    type_name = "ConfusionMatrix"
    state_fields = _CONFUSION_STATE

    def __init__(self, labels: Sequence[Hashable] | None = None) -> None:
        if labels is None:
            self._fixed: list | None = None
            self._allowed: frozenset | None = None
            self._fixed_kind: str | None = None
        else:
            fixed = check_label_list(labels, "labels")
            self._fixed = fixed
            self._allowed = frozenset(fixed)
            self._fixed_kind = _kind(fixed[0])
        self.reset()

    # ------------------------------------------------------------------ state
    _n: dict[tuple, int]  # cell -> number of events of weight exactly 1
    #: cell -> summed weight of the other events: whole floats while every such weight is a
    #: whole number (:func:`~streammetrics.kernels.exact_weights.is_whole`), else ints of units
    #: (``UNIT`` per 1.0) in every cell ("units mode", :attr:`_exact`)
    _w: dict[tuple, Any]
    _n_weighted: int  # number of events in self._w
    #: cell -> exact sum (units) of ``fl(w * w)`` over the events in ``self._w``; None: unknown
    #: (a weighted state loaded without them)
    _w2: dict[tuple, int] | None
    _unit: bool  # every weight so far was exactly 1 (report prints int supports)
    _exact: bool  # self._w holds units (derived from its values)

    def _refresh(self) -> None:
        """The label kind (derived: every label seen has a cell) and its fast-path class, and
        the mode of the weighted sums."""
        cell = next(iter(self._n or self._w), None)
        self._set_kind(self._fixed_kind if cell is None else _kind(cell[0]))
        self._exact = _is_units(self._w)

    def _to_units(self) -> dict[tuple, int]:
        """Switch the weighted sums to units (exactly); returns them."""
        if not self._exact:
            self._w = _as_units(self._w)
            self._exact = True
        return self._w

    def _check_merge(self, other: Accumulator) -> None:
        assert isinstance(other, ConfusionMatrix)
        if self._kind is not None and other._kind is not None and self._kind != other._kind:
            raise ValueError(
                f"cannot merge a ConfusionMatrix of {other._kind} labels into one of {self._kind} labels"
            )

    def _set_kind(self, kind: str | None) -> None:
        self._kind = kind
        self._fast = _FAST_CLASS[kind] if kind is not None else None

    @property
    def count(self) -> int:  # type: ignore[override]  # a read-only property over the declared state
        return sum(self._n.values()) + self._n_weighted

    @property
    def total_weight(self) -> float:  # type: ignore[override]  # a read-only property over the declared state
        if self._exact:
            return value_of(sum(self._n.values()) * UNIT + sum(self._w.values()))
        return float(sum(self._n.values())) + math.fsum(self._w.values())

    @property
    def _cells(self) -> dict[tuple, float]:
        """Total weight per cell (correctly rounded)."""
        if self._exact:
            return {key: value_of(u) for key, u in _cell_totals(self._n, self._w).items()}
        cells = {key: float(n) for key, n in self._n.items()}
        for key, w in self._w.items():
            cells[key] = cells.get(key, 0.0) + w
        return cells

    def _config(self) -> dict[str, Any]:
        return {"labels": None if self._fixed is None else list(self._fixed)}

    def _state(self) -> dict[str, Any]:
        """The declared fields' encoders, called directly (one snapshot per key and window)."""
        if not _DIRECT_STATE:
            return super()._state()
        count, total, cells, residues = _encode_cells((self._n, self._w, self._n_weighted), self)
        out = {"unit_weights": self._unit, "count": count, "total_weight": total, "cells": cells}
        if residues is not None:
            out["cells_residues"] = residues
        if not self._unit:
            squares, square_residues = _encode_squares(self._w2, self)
            if squares is not None:
                out["cells_squares"] = squares
                if square_residues is not None:
                    out["cells_squares_residues"] = square_residues
        return out

    def _check_cells(
        self, cells: dict[tuple, Any], count: int, total: float, unit: bool
    ) -> tuple[dict, dict, int]:
        """Validate a complete state, cells' total weights as whole floats or all in units
        (:func:`_normal_form`); ``(unit counts, weights, weighted events)`` to install."""
        labels = {x for key in cells for x in key}
        kinds = {_kind(x) for x in labels}
        if self._fixed_kind is not None:
            kinds.add(self._fixed_kind)
        if len(kinds) > 1:
            raise ValueError(f"cells mix label kinds {sorted(kinds)}")
        if self._allowed is not None:
            extra = [x for x in labels if x not in self._allowed or _kind(x) != self._fixed_kind]
            if extra:
                raise ValueError(f"cells hold labels {extra!r} outside labels {self._fixed!r}")
        if len(cells) > count:
            raise ValueError(f"{len(cells)} cells cannot come from count={count} events")
        exact = _is_units(cells)
        cell_total = value_of(sum(cells.values())) if exact else math.fsum(cells.values())
        if abs(cell_total - total) > 1e-9 * max(1.0, total):  # (states written before exact sums: rounded)
            raise ValueError(f"total_weight={total!r} differs from the sum of the cells {cell_total!r}")
        if unit and (exact or cell_total != count or any(w < 1 or not w.is_integer() for w in cells.values())):
            raise ValueError("unit_weights=True but the cells are not counts of unit-weight events")
        if unit:  # unit-weight events only: the cells are their counts
            return {k: int(w) for k, w in cells.items()}, {}, 0
        return {}, dict(cells), count

    @classmethod
    def _from_counts(
        cls,
        labels: Sequence[Hashable] | None,
        counts: Mapping[tuple[Hashable, Hashable], float | int],
        count: int,
        units: bool = False,
    ) -> "ConfusionMatrix":
        """A ConfusionMatrix holding ``counts`` {(true, pred): weight} of ``count`` events.

        ``labels`` is the constructor argument (None: discovered). Every cell present,
        even with weight 0, marks its labels as seen. Supports print as ints in the text
        report when the cells are whole numbers summing to ``count``. ``units``: the weights
        are exact sums in units of ``2**-1074`` (non-negative ints,
        :mod:`streammetrics.kernels.exact_weights`) instead of floats.
        """
        cm = cls(labels)
        cells: dict[tuple, Any] = {}
        for (t, p), w in counts.items():
            key = (to_builtin_label(t, "counts key"), to_builtin_label(p, "counts key"))
            if units:
                if w.__class__ is not int or w < 0:
                    raise ValueError(f"counts[{key!r}] must be a non-negative int of units, got {describe(w)}")
            else:
                w = units_of(check_weight(w, f"counts[{key!r}]"))
            cells[key] = cells.get(key, 0) + w  # (exact: keys that normalise alike are summed)
        cells = _normal_form(cells)
        exact = _is_units(cells)
        total = value_of(sum(cells.values())) if exact else math.fsum(cells.values())
        unit = not exact and total == count and all(w >= 1 and w.is_integer() for w in cells.values())
        cm._n, cm._w, cm._n_weighted = cm._check_cells(cells, count, total, unit)
        cm._unit = unit
        cm._w2 = {} if unit else None  # (weighted cells given without their squared weights)
        cm._refresh()
        return cm

    # ---------------------------------------------------------------- updates
    def update(self, y_true: Hashable, y_pred: Hashable, weight: float = _ONE) -> "ConfusionMatrix":
        """Add one event (true label, predicted label, weight=1.0); returns ``self``."""
        allowed = self._allowed
        if (
            weight is _ONE
            and y_true.__class__ is self._fast is y_pred.__class__
            and (allowed is None or (y_true in allowed and y_pred in allowed))
        ):  # hot path: known label kind, default weight
            key = (y_true, y_pred)
            n = self._n
            n[key] = n.get(key, 0) + 1
            return self
        if weight.__class__ is not float or not 0.0 <= weight < _INF:
            weight = check_weight(weight)
        fast = self._fast
        if (
            y_true.__class__ is not fast
            or y_pred.__class__ is not fast
            or (allowed is not None and (y_true not in allowed or y_pred not in allowed))
        ):
            y_true, y_pred = self._admit(y_true, y_pred)
        key = (y_true, y_pred)
        if weight == 1.0:
            self._n[key] = self._n.get(key, 0) + 1
            return self
        self._unit = False
        self._n_weighted += 1
        squares = self._w2
        if squares is not None:
            if weight * weight < _INF:
                squares[key] = squares.get(key, 0) + _square_units(weight)
            else:  # (a weight above 1e154: its square overflows, the squares become unknown)
                self._w2 = None
        if not self._exact and weight.is_integer() and weight <= WHOLE_MAX:  # exact as a float sum
            x = self._w.get(key, 0.0) + weight
            if x <= _FLOAT_EXACT:  # (beyond, a float sum would round: units)
                self._w[key] = x
                return self
        w = self._to_units()
        w[key] = w.get(key, 0) + units_of(weight)
        return self

    def _admit(self, y_true: Any, y_pred: Any) -> tuple[Hashable, Hashable]:
        """Slow path of :meth:`update`: normalise and check both labels (may set the kind)."""
        t = to_builtin_label(y_true, "y_true")
        p = to_builtin_label(y_pred, "y_pred")
        kt, kp = _kind(t), _kind(p)
        if kt != kp:
            raise ValueError(
                f"y_true={t!r} is a {kt} label but y_pred={p!r} is a {kp} label; "
                "labels must be all bool, all numbers or all str"
            )
        if self._kind is not None and kt != self._kind:
            raise ValueError(
                f"y_true={t!r} and y_pred={p!r} are {kt} labels but this ConfusionMatrix "
                f"holds {self._kind} labels"
            )
        if self._allowed is not None:
            for name, v in (("y_true", t), ("y_pred", p)):
                if v not in self._allowed:
                    raise ValueError(f"{name}={v!r} is not one of labels {self._fixed!r}")
        if self._kind is None:
            self._set_kind(kt)
        return t, p

    def update_many(
        self, y_true: Any, y_pred: Any, sample_weight: Any = None
    ) -> "ConfusionMatrix":
        """Add a batch (lists, numpy arrays, pandas Series); validated before any change."""
        if (sample_weight is None and y_true.__class__ is list and y_pred.__class__ is list
                and len(y_true) == len(y_pred) <= SMALL_BATCH and self._allowed is None
                and self._kind in (None, "str") and _plain_strings(y_true, y_pred)):
            # a small unweighted batch of str labels (a window's few events): the cells counted
            # directly, the same state as below (cells are read in label order, never arrival order)
            cells = self._n
            for key in zip(y_true, y_pred):
                cells[key] = cells.get(key, 0) + 1
            if self._kind is None and cells:
                self._set_kind("str")
            return self
        t = as_label_array(y_true, "y_true")
        p = as_label_array(y_pred, "y_pred")
        n = check_same_length(y_true=t, y_pred=p)
        w = as_weight_array(sample_weight, n)
        kt, kp = array_kind(t, "y_true"), array_kind(p, "y_pred")
        if n == 0:
            return self
        if kt != kp:
            raise ValueError(
                f"y_true holds {kt} labels but y_pred holds {kp} labels; "
                "labels must be all bool, all numbers or all str"
            )
        if self._kind is not None and kt != self._kind:
            raise ValueError(
                f"y_true and y_pred hold {kt} labels but this ConfusionMatrix holds {self._kind} labels"
            )
        labels, ct, cp = _codes(t, p)
        k = len(labels)
        code = ct * k + cp
        exact = False  # the other events' sums in units (else whole floats)
        other_cells: tuple[np.ndarray, Any] = (np.empty(0, dtype=np.intp), [])
        square_cells: tuple[np.ndarray, Any] = (np.empty(0, dtype=np.intp), [])  # (None: squares overflow)
        if w is None:
            unit_cells = _cell_sums(code, k, None)
            n_other = 0
        else:
            is_unit = w == 1.0
            n_other = int(n - np.count_nonzero(is_unit))
            unit_cells = _cell_sums(code[is_unit], k, None)
            if n_other:
                wo = w[~is_unit]
                if (not self._exact and all_whole(wo)
                        and float(wo.sum()) + max(self._w.values(), default=0.0) <= _FLOAT_EXACT):
                    other_cells = _cell_sums(code[~is_unit], k, wo)  # whole: float sums are exact
                else:
                    exact = True
                    other_cells = grouped_units(code[~is_unit], wo)
                wo2 = wo * wo
                if self._w2 is not None and np.isfinite(wo2).all():
                    square_cells = grouped_units(code[~is_unit], wo2)
                elif self._w2 is not None:  # (a weight above 1e154: its square overflows)
                    square_cells = (np.empty(0, dtype=np.intp), None)
        if self._allowed is not None:
            used = set()
            for pair_codes, _ in (unit_cells, other_cells):
                used.update((pair_codes // k).tolist())
                used.update((pair_codes % k).tolist())
            for c in sorted(used):
                if labels[c] not in self._allowed:
                    for name, codes in (("y_true", ct), ("y_pred", cp)):
                        hits = np.flatnonzero(codes == c)
                        if len(hits):
                            i = int(hits[0])
                            raise ValueError(
                                f"{name}[{i}]={labels[c]!r} is not one of labels {self._fixed!r}"
                            )
        # ---- commit: nothing below can fail
        other = self._to_units() if exact else self._w
        for store, zero, (pair_codes, sums) in ((self._n, 0, unit_cells), (other, 0 if exact else 0.0, other_cells)):
            if isinstance(sums, np.ndarray):
                sums = sums.tolist()
            for r, c, v in zip((pair_codes // k).tolist(), (pair_codes % k).tolist(), sums):
                key = (labels[r], labels[c])
                store[key] = store.get(key, zero) + v
        if square_cells[1] is None:
            self._w2 = None
        squares = self._w2
        if squares is not None:
            for r, c, u in zip((square_cells[0] // k).tolist(), (square_cells[0] % k).tolist(), square_cells[1]):
                key = (labels[r], labels[c])
                squares[key] = squares.get(key, 0) + u
        self._n_weighted += n_other
        if n_other:
            self._unit = False
        if self._kind is None:
            self._set_kind(kt)
        return self

    # ---------------------------------------------------------------- removal
    def remove(self, y_true: Hashable, y_pred: Hashable, weight: float = 1.0) -> "ConfusionMatrix":
        """Undo one earlier ``update(y_true, y_pred, weight)``; returns ``self``.

        Not part of the accumulator protocol: it lets sliding windows (e.g. river's
        ``utils.Rolling``) subtract the event that leaves the window, ``cell -= weight``.
        Unit-weight events are exact integer counts, so ``update`` then ``remove`` leaves
        the state exactly as if the event had never been added (a cell that empties
        disappears, and with ``labels=None`` so do labels no other event uses). Weighted
        events are exact sums too: a cell whose weight falls to 0 is dropped (a zero-weight
        event's cell too); a weight at most 1e-9 above what its cell holds (a cell of a state
        written before exact sums, rounded) empties it; once no weighted event remains, the
        weighted sums are cleared.

        ``ValueError`` (state unchanged) when the event cannot have been added: a label
        of another kind, no event in the cell ``(y_true, y_pred)``, a weight larger than
        the cell holds, or the last weighted event leaving weight behind.
        """
        w = check_weight(weight)
        t = to_builtin_label(y_true, "y_true")
        p = to_builtin_label(y_pred, "y_pred")
        for name, v in (("y_true", t), ("y_pred", p)):
            if self._kind is not None and _kind(v) != self._kind:
                raise ValueError(
                    f"cannot remove {name}={v!r}, a {_kind(v)} label: this ConfusionMatrix "
                    f"holds {self._kind} labels"
                )
        key = (t, p)
        n = self._n.get(key, 0)
        if w == 1.0 and n:  # a unit-weight event: exact integer count
            if n == 1:
                del self._n[key]
            else:
                self._n[key] = n - 1
        else:
            old = self._w.get(key)
            old_units = 0 if old is None else old if old.__class__ is int else units_of(old)
            if old is None or self._n_weighted == 0 or w > value_of(old_units) * (1.0 + 1e-9):
                held = value_of(n * UNIT + old_units)
                raise ValueError(
                    f"cannot remove an event (y_true={t!r}, y_pred={p!r}, weight={w!r}) that was "
                    f"never added: the cell holds weight {held!r}"
                )
            w_units = units_of(w)
            if self._n_weighted == 1:  # the last weighted event takes all their weight
                left = value_of(max(sum(x if x.__class__ is int else units_of(x) for x in self._w.values())
                                    - w_units, 0))
                if left > 1e-9 * (left + w):
                    raise ValueError(
                        f"cannot remove an event (y_true={t!r}, y_pred={p!r}, weight={w!r}) that "
                        f"was never added: it would be the last weighted event, but weight "
                        f"{left!r} would remain"
                    )
            if self._exact or not is_whole(w):
                new: float | int = max(old_units - w_units, 0)
                self._to_units()
            else:
                new = max(old - w, 0.0)
            if new:
                self._w[key] = new
            else:
                del self._w[key]
            squares = self._w2
            if squares is not None and w * w < _INF:
                left_sq = squares.get(key, 0) - _square_units(w)
                if new and left_sq > 0:
                    squares[key] = left_sq
                else:
                    squares.pop(key, None)
            self._n_weighted -= 1
            if self._n_weighted == 0:  # only unit-weight events remain
                self._w.clear()
                self._w2 = {}
                self._exact = False
                self._unit = True
        if not self._n and not self._w:
            self.reset()  # empty: forget the label kind too, as a new accumulator
        return self

    # ------------------------------------------------------------ accessors
    @property
    def labels(self) -> list:
        """Labels the metrics use by default: the constructor list, else the sorted labels seen."""
        return list(self._fixed) if self._fixed is not None else self._seen()

    def _seen(self) -> list:
        """Sorted labels seen in y_true or y_pred (scikit-learn's ``unique_labels``)."""
        seen = set()
        for t, p in self._cells:
            seen.add(t)
            seen.add(p)
        return sorted(seen)

    def counts(self) -> dict[tuple[Hashable, Hashable], float]:
        """A copy of the cells ``{(true, pred): summed weight}``."""
        return dict(self._cells)

    def fold_labels(self, keep: Any, other: Hashable, mismatch: Hashable) -> "ConfusionMatrix":
        """A new matrix of discovered labels where a true label outside ``keep`` becomes
        ``other``, and a predicted one ``other`` when it equals its true label, else
        ``mismatch`` (labels of the matrix's kind): right predictions stay on the diagonal,
        wrong ones off it, so accuracy and the kept labels' per-class sums are unchanged. Cells
        that coincide are summed exactly; ``count``, ``total_weight`` and the unit-weight flag
        are unchanged. Bounds label cardinality (``LabelMonitor(max_labels=...)``)."""
        if self._fixed is not None:
            raise ValueError("fold_labels needs a matrix of discovered labels (labels=None)")
        other, mismatch = to_builtin_label(other, "other"), to_builtin_label(mismatch, "mismatch")
        for name, x in (("other", other), ("mismatch", mismatch)):
            if self._kind is not None and _kind(x) != self._kind:
                raise ValueError(f"{name}={x!r} is a {_kind(x)} label but this ConfusionMatrix holds "
                                 f"{self._kind} labels")
        if other == mismatch:
            raise ValueError(f"other and mismatch must differ, got {other!r} twice")
        kept = frozenset(keep) - {other, mismatch}

        def fold(t: Any, p: Any) -> tuple:
            return (t if t in kept else other,
                    p if p in kept else other if t == p or p == other else mismatch)

        n: dict[tuple, int] = {}
        for (t, p), c in self._n.items():
            key = fold(t, p)
            n[key] = n.get(key, 0) + c
        units: dict[tuple, int] = {}
        for (t, p), u in _as_units(self._w).items():  # exact sums, back to whole floats if they are
            key = fold(t, p)
            units[key] = units.get(key, 0) + u
        squares: dict[tuple, int] | None = None
        if self._w2 is not None:
            squares = {}
            for (t, p), u in self._w2.items():
                key = fold(t, p)
                squares[key] = squares.get(key, 0) + u
        new = ConfusionMatrix()
        new._n, new._w, new._n_weighted, new._unit = n, _normal_form(units), self._n_weighted, self._unit
        new._w2 = squares
        new._refresh()
        return new

    def support(self, labels: Sequence[Hashable] | None = None) -> np.ndarray:
        """True weight per label (the row sums of :meth:`matrix`, exact then correctly rounded)
        in the order of ``labels`` (default :attr:`labels`), in O(cells + K)."""
        labels = self.labels if labels is None else self._check_labels_arg(labels)
        return self._class_sums(labels)[2]

    def matrix(self, labels: Sequence[Hashable] | None = None) -> np.ndarray:
        """Weights as a float64 array, rows true and columns predicted labels, in the
        order of ``labels`` (default :attr:`labels`), like ``sklearn.metrics.confusion_matrix``."""
        labels = self.labels if labels is None else self._check_labels_arg(labels)
        _warn_single_label(len(labels))
        return self._matrix(labels)

    def _matrix(self, labels: Sequence[Hashable]) -> np.ndarray:
        index = {label: i for i, label in enumerate(labels)}
        cm = np.zeros((len(labels), len(labels)), dtype=np.float64)
        for (t, p), w in self._cells.items():
            i = index.get(t)
            j = index.get(p)
            if i is not None and j is not None:
                cm[i, j] += w
        return cm

    @staticmethod
    def _check_labels_arg(labels: Any) -> list:
        # scikit-learn's ``labels`` argument: any labels, repeats allowed
        return check_label_list(labels, "labels", one_kind=False, distinct=False)

    def _class_sums(self, labels: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-label (tp, predicted, true) weight sums in the order of ``labels``: exact sums
        (whole floats, or units), correctly rounded."""
        tp: dict = {}
        pred: dict = {}
        true: dict = {}
        zero: float | int = 0 if self._exact else 0.0
        for (t, p), w in _cell_totals(self._n, self._w).items():
            true[t] = true.get(t, zero) + w
            pred[p] = pred.get(p, zero) + w
            if t == p:
                tp[t] = tp.get(t, zero) + w
        read: Any = value_of if self._exact else float
        return (
            np.array([read(tp.get(x, zero)) for x in labels], dtype=np.float64),
            np.array([read(pred.get(x, zero)) for x in labels], dtype=np.float64),
            np.array([read(true.get(x, zero)) for x in labels], dtype=np.float64),
        )

    def _negative_sums(self, labels: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
        """Per-label (tn, fp) weight sums from the cells, exact then correctly rounded (tn as
        ``total - tp - fp - fn`` in floats loses a tn that is small next to the total)."""
        zero: float | int = 0 if self._exact else 0.0
        tp: dict = {}
        pred: dict = {}
        true: dict = {}
        total = zero
        for (t, p), w in _cell_totals(self._n, self._w).items():  # exact: units, or whole floats
            total += w
            true[t] = true.get(t, zero) + w
            pred[p] = pred.get(p, zero) + w
            if t == p:
                tp[t] = tp.get(t, zero) + w
        fp = [pred.get(x, zero) - tp.get(x, zero) for x in labels]
        tn = [total - true.get(x, zero) - f for x, f in zip(labels, fp)]
        read: Any = value_of if self._exact else float
        return (np.array([read(v) for v in tn], dtype=np.float64),
                np.array([read(v) for v in fp], dtype=np.float64))

    # ------------------------------------------------------------- metrics
    def _undefined(self) -> bool:
        return self.total_weight == 0.0

    def _setwise_labels(self, labels: Any, pos_label: Any, average: Any) -> list:
        """scikit-learn's ``_check_set_wise_labels``: the labels a set-wise metric scores."""
        _cls.check_average(average)
        present = self._seen()
        if average == "binary":
            if len(present) <= 2:
                if pos_label not in present and len(present) >= 2:
                    raise ValueError(
                        f"pos_label={pos_label!r} is not a valid label. It should be one of {present!r}"
                    )
                return [pos_label]
            raise ValueError(
                "Target is multiclass but average='binary'. Please choose another average "
                "setting, one of [None, 'micro', 'macro', 'weighted']."
            )
        if pos_label not in (None, 1):
            warnings.warn(
                f"Note that pos_label (set to {pos_label!r}) is ignored when average != 'binary' "
                f"(got {average!r}). You may use labels=[pos_label] to specify a single positive class.",
                UserWarning,
                stacklevel=3,
            )
        if average == "samples":
            raise ValueError(
                "Samplewise metrics are not available outside of multilabel classification."
            )
        return self.labels if labels is None else self._check_labels_arg(labels)

    def _nan_result(self, what: str, average: Any, labels: list) -> Any:
        _cls.warn_undefined_state(what)
        return np.full(len(labels), np.nan) if average is None else math.nan

    def _prf(self, which: int, what: str, beta: float, labels: Any, pos_label: Any,
             average: Any, zero_division: Any, warn_for: tuple[str, ...]) -> Any:
        _cls.check_zero_division(zero_division)
        labels = self._setwise_labels(labels, pos_label, average)
        if self._undefined():
            return self._nan_result(what, average, labels)
        tp, pred, true = self._class_sums(labels)
        return _cls.prf(
            tp, pred, true, beta=beta, average=average, warn_for=warn_for, zero_division=zero_division
        )[which]

    def precision_recall_f1(self, labels: Sequence[Hashable] | None = None, pos_label: Hashable = 1,
                            average: str | None = "binary", zero_division: Any = "warn") -> tuple[Any, Any, Any]:
        """``(precision, recall, f1)`` from one pass over the cells: each equal to its own method
        (``sklearn.metrics.precision_recall_fscore_support(...)[:3]``)."""
        _cls.check_zero_division(zero_division)
        labels = self._setwise_labels(labels, pos_label, average)
        if self._undefined():
            nan = self._nan_result("precision, recall and f1", average, labels)
            return nan, nan, nan
        tp, pred, true = self._class_sums(labels)
        return _cls.prf(tp, pred, true, beta=1.0, average=average, zero_division=zero_division)[:3]

    def precision(self, labels: Sequence[Hashable] | None = None, pos_label: Hashable = 1,
                  average: str | None = "binary", zero_division: Any = "warn") -> Any:
        """tp / (tp + fp), as ``sklearn.metrics.precision_score``."""
        return self._prf(0, "precision", 1.0, labels, pos_label, average, zero_division, ("precision",))

    def recall(self, labels: Sequence[Hashable] | None = None, pos_label: Hashable = 1,
               average: str | None = "binary", zero_division: Any = "warn") -> Any:
        """tp / (tp + fn), as ``sklearn.metrics.recall_score``."""
        return self._prf(1, "recall", 1.0, labels, pos_label, average, zero_division, ("recall",))

    def f1(self, labels: Sequence[Hashable] | None = None, pos_label: Hashable = 1,
           average: str | None = "binary", zero_division: Any = "warn") -> Any:
        """2 tp / (2 tp + fp + fn), as ``sklearn.metrics.f1_score``."""
        return self._prf(2, "f1", 1.0, labels, pos_label, average, zero_division, ("f-score",))

    def fbeta(self, beta: float, labels: Sequence[Hashable] | None = None, pos_label: Hashable = 1,
              average: str | None = "binary", zero_division: Any = "warn") -> Any:
        """(1 + b^2) tp / ((1 + b^2) tp + b^2 fn + fp), as ``sklearn.metrics.fbeta_score``."""
        beta = _cls.check_beta(beta)
        return self._prf(2, "fbeta", beta, labels, pos_label, average, zero_division, ("f-score",))

    def jaccard(self, labels: Sequence[Hashable] | None = None, pos_label: Hashable = 1,
                average: str | None = "binary", zero_division: Any = "warn") -> Any:
        """tp / (tp + fp + fn), as ``sklearn.metrics.jaccard_score`` (zero_division: "warn", 0, 1)."""
        _cls.check_zero_division(zero_division, allow_nan=False)
        labels = self._setwise_labels(labels, pos_label, average)
        if self._undefined():
            return self._nan_result("jaccard", average, labels)
        tp, pred, true = self._class_sums(labels)
        return _cls.jaccard(tp, pred, true, average=average, zero_division=zero_division)

    def specificity(self, labels: Sequence[Hashable] | None = None, pos_label: Hashable = 1,
                    average: str | None = "binary", zero_division: Any = "warn") -> Any:
        """tn / (tn + fp) per class (true negative rate), averaged like recall.

        For binary data, ``specificity(pos_label=a)`` equals ``recall(pos_label=b)``,
        the recall of the other label.
        """
        _cls.check_zero_division(zero_division)
        labels = self._setwise_labels(labels, pos_label, average)
        if self._undefined():
            return self._nan_result("specificity", average, labels)
        tp, pred, true = self._class_sums(labels)
        total = self.total_weight
        return _cls.specificity(tp, pred, true, total, average=average, zero_division=zero_division,
                                tn_fp=self._negative_sums(labels))

    def accuracy(self, normalize: bool = True) -> float:
        """Weighted fraction (``normalize=False``: weighted count) of events with
        y_true == y_pred, as ``sklearn.metrics.accuracy_score``."""
        diagonal = [w for (t, p), w in _cell_totals(self._n, self._w).items() if t == p]
        correct = value_of(sum(diagonal)) if self._exact else math.fsum(diagonal)
        if not normalize:
            return float(correct)
        if self._undefined():
            _cls.warn_undefined_state("accuracy")
            return math.nan
        return correct / self.total_weight

    def balanced_accuracy(self, adjusted: bool = False) -> float:
        """Mean per-class recall over classes present in y_true, as
        ``sklearn.metrics.balanced_accuracy_score``; ``adjusted`` maps chance level to 0.
        O(cells + K) (:mod:`streammetrics.kernels.sparse_confusion`)."""
        if self._undefined():
            _cls.warn_undefined_state("balanced_accuracy")
            return math.nan
        seen = self._seen()
        _warn_single_label(len(seen))
        tp, _, true = self._class_sums(seen)
        return _sparse.balanced_accuracy(tp, true, adjusted)

    def matthews_corrcoef(self) -> float:
        """Multiclass Matthews correlation (R_K statistic) of the matrix, as
        ``sklearn.metrics.matthews_corrcoef``; 0.0 when undefined. O(cells + K)."""
        if self._undefined():
            _cls.warn_undefined_state("matthews_corrcoef")
            return math.nan
        seen = self._seen()
        _warn_single_label(len(seen))
        tp, pred, true = self._class_sums(seen)
        return _sparse.matthews(true, pred, float(np.sum(tp)))

    def _sparse_cells(self, labels: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row index, column index, weight) of the cells whose labels are both in ``labels``
        (a repeated label: its last position, as :meth:`matrix`)."""
        index = {label: i for i, label in enumerate(labels)}
        rows, cols, weights = [], [], []
        for (t, p), w in self._cells.items():
            i = index.get(t)
            j = index.get(p)
            if i is not None and j is not None:
                rows.append(i)
                cols.append(j)
                weights.append(w)
        return (np.array(rows, dtype=np.intp), np.array(cols, dtype=np.intp),
                np.array(weights, dtype=np.float64))

    def cohen_kappa(self, weights: str | None = None,
                    labels: Sequence[Hashable] | None = None) -> float:
        """Cohen's kappa (p_o - p_e) / (1 - p_e), as ``sklearn.metrics.cohen_kappa_score``;
        ``weights`` None, "linear" or "quadratic" (by position in ``labels``, default
        :attr:`labels`); NaN with a warning when undefined. O(cells + K) for many labels
        (:func:`streammetrics.kernels.sparse_confusion.cohen_kappa`)."""
        if weights not in (None, "linear", "quadratic"):
            raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")
        if labels is not None:
            labels = self._check_labels_arg(labels)
        if self._undefined():
            _cls.warn_undefined_state("cohen_kappa")
            return math.nan
        if labels is None:
            labels = self.labels
        elif not any(t in wanted for wanted in [set(labels)] for t, _ in self._cells):
            raise ValueError(
                "At least one label in `labels` must be present in `y1` (even though "
                "`cohen_kappa_score` is otherwise agnostic to the order of `y1` and `y2`)."
            )
        _warn_single_label(len(labels))
        rows, cols, w = self._sparse_cells(labels)
        return _sparse.cohen_kappa(rows, cols, w, len(labels), weights)

    def classification_report(
        self,
        output_dict: bool = False,
        digits: int = 2,
        zero_division: Any = "warn",
        labels: Sequence[Hashable] | None = None,
        target_names: Sequence[str] | None = None,
    ) -> str | dict:
        """Per-class precision/recall/F1/support plus averages: the same text (or dict) as
        ``sklearn.metrics.classification_report`` on the events seen."""
        _cls.check_zero_division(zero_division)
        if isinstance(digits, bool) or not isinstance(digits, int) or digits < 0:
            raise ValueError(f"digits must be a non-negative int, got {digits!r}")
        if self._undefined():
            raise ValueError(
                "classification_report needs at least one event with non-zero weight"
            )
        present = self._seen()
        if labels is not None:
            labels = self._check_labels_arg(labels)
        elif self._fixed is not None:
            labels = list(self._fixed)
        labels_given = labels is not None
        if labels is None:
            labels = present
        micro_is_accuracy = not labels_given or set(labels) >= set(present)
        if target_names is not None and len(labels) != len(target_names):
            if labels_given:
                warnings.warn(
                    f"labels size, {len(labels)}, does not match size of target_names, "
                    f"{len(target_names)}",
                    UserWarning,
                    stacklevel=2,
                )
            else:
                raise ValueError(
                    f"Number of classes, {len(labels)}, does not match size of target_names, "
                    f"{len(target_names)}. Try specifying the labels parameter"
                )
        if target_names is None:
            target_names = ["%s" % label for label in labels]

        tp, pred, true = self._class_sums(labels)
        # scikit-learn prints supports as ints only without sample weights and when some
        # event is predicted right (else its tp sums start as float zeros)
        int_support = self._unit and any(t == p for t, p in self._cells)
        return classification_report_of(
            list(target_names), tp, pred, true, int_support=int_support, micro_is_accuracy=micro_is_accuracy,
            output_dict=output_dict, digits=digits, zero_division=zero_division,
        )

    # ------------------------------------------------------------------ intervals (issue 26)
    @property
    def unit_weights(self) -> bool:
        """Every event had weight 1 (the intervals' effective sample size is then the count)."""
        return bool(self._unit)

    def squares(self) -> dict[tuple[Hashable, Hashable], float] | None:
        """Per cell the sum of squared weights ``sum w^2`` (exact, correctly rounded; a unit-weight
        event counts 1), or None for a weighted state loaded without them (written before they
        were kept): the intervals' effective sample sizes (Kish)."""
        if self._w2 is None:
            return None
        w2 = self._w2
        return {key: value_of(c * UNIT + w2.get(key, 0)) for key, c in
                ((key, self._n.get(key, 0)) for key in _cell_totals(self._n, self._w))}

    def interval(self, metric: str, confidence: float = 0.95, pos_label: Hashable = 1,
                 labels: Sequence[Hashable] | None = None) -> tuple[float, float] | None:
        """Confidence interval of ``accuracy``, ``macro_f1`` (over ``labels``, default
        :attr:`labels`), or of ``precision``, ``recall``, ``f1``, ``specificity`` of
        ``pos_label`` against the rest, or ``balanced_accuracy`` / ``matthews_corrcoef`` of a
        two-label matrix (:mod:`streammetrics.kernels.intervals`: continuity-corrected Wilson,
        F1 through its binomial ``tp / (tp + fp + fn)``, MOVER, delta method), or of
        ``macro_precision``, ``macro_recall``, ``weighted_f1``, ``cohen_kappa`` and (more than two
        labels) ``balanced_accuracy`` / ``matthews_corrcoef`` by the delta method on the ``K x K``
        cell shares (:func:`~streammetrics.kernels.intervals.matrix_interval`). Weighted events:
        on Kish pseudo-counts from :meth:`squares`. None below the minimum rule, or for a
        weighted state loaded without its squared weights.

        >>> cm = ConfusionMatrix().update_many([0] * 30 + [1] * 30, [0] * 25 + [1] * 35)
        >>> [round(x, 3) for x in cm.interval("accuracy")]
        [0.809, 0.969]
        """
        return self.intervals_of((metric,), confidence, pos_label, labels)[metric]

    def intervals_of(self, metrics: Sequence[str], confidence: float = 0.95, pos_label: Hashable = 1,
                     labels: Sequence[Hashable] | None = None) -> dict[str, tuple[float, float] | None]:
        """:meth:`interval` of each of ``metrics``, in order (the matrix, its squared weights and
        the labels read once for all of them)."""
        from streammetrics.kernels import intervals as iv

        z = iv.z_value(confidence)
        binary = ("precision", "recall", "f1", "specificity", "balanced_accuracy", "matthews_corrcoef")
        known = ("accuracy", "macro_f1") + binary + iv.MATRIX_INTERVALS
        for metric in metrics:
            if metric not in known:
                raise ValueError(f"metric must be one of {', '.join(dict.fromkeys(known))}; got {metric!r:.40}")
        names = self.labels if labels is None else self._check_labels_arg(labels)
        out: dict[str, tuple[float, float] | None] = {}
        read: dict[str, Any] = {}  # (the squares and the matrix, read at the first metric that needs them)
        for metric in metrics:
            on_matrix = metric in iv.MATRIX_INTERVALS and (len(names) != 2 or metric not in binary)
            if (on_matrix or metric == "macro_f1") and self._unit and self.count < iv.MIN_MEAN_EVENTS:
                out[metric] = None  # (the minimum rule of matrix_interval / macro_f1_interval: fewer events)
                continue
            if not read:
                read["squares"] = None if self._unit else self.squares()
                read["c"] = self._matrix(names)
            squares, c = read["squares"], read["c"]
            if not self._unit and squares is None:
                out[metric] = None
                continue
            out[metric] = self._interval_of(metric, names, c, squares, z, confidence, pos_label, on_matrix)
        return out

    def _interval_of(self, metric: str, names: list, c: np.ndarray, squares: Mapping[tuple, float] | None, z: float,
                     confidence: float, pos_label: Hashable, on_matrix: bool) -> tuple[float, float] | None:
        """One metric of :meth:`intervals_of`, given the matrix ``c`` of ``names`` and the squares."""
        from streammetrics.kernels import intervals as iv

        if on_matrix:
            if metric in ("matthews_corrcoef", "cohen_kappa") and len(self._seen()) < 2:
                return None  # one class: a variance product (Matthews) or 1 - p_e (kappa) is 0, undefined
            if squares is not None:
                c = c * float(iv.kish_factor(math.fsum(self._cells.values()), math.fsum(squares.values()))[0])
            return iv.matrix_interval(c, metric, confidence)
        if metric == "accuracy":
            cells = self._cells
            correct = math.fsum(w for (t, p), w in cells.items() if t == p)
            total = math.fsum(cells.values())
            if squares is None:
                return iv.as_pair(*iv.wilson_many(correct, total, z))
            f = iv.kish_factor(total, math.fsum(squares.values()))
            return iv.as_pair(*iv.wilson_many(correct * f, total * f, z))
        if metric == "macro_f1":
            if squares is not None:
                c = c * float(iv.kish_factor(math.fsum(self._cells.values()), math.fsum(squares.values()))[0])
            return iv.macro_f1_interval(c, confidence)
        if pos_label not in names:
            raise ValueError(f"pos_label={pos_label!r} is not a label ({names!r:.80})")
        i = names.index(pos_label)
        tp = c[i, i]
        fn, fp = c[i].sum() - tp, c[:, i].sum() - tp
        tn = c.sum() - tp - fn - fp
        if squares is None:
            return iv.as_pair(*iv.confusion_intervals(tn, fp, fn, tp, z)[metric])
        q = self._square_matrix(names, squares)
        qtp = q[i, i]
        qfn, qfp = q[i].sum() - qtp, q[:, i].sum() - qtp
        qtn = q.sum() - qtp - qfn - qfp
        return iv.as_pair(*iv.confusion_intervals(tn, fp, fn, tp, z, [qtn, qfp, qfn, qtp])[metric])

    @staticmethod
    def _square_matrix(labels: Sequence[Hashable], squares: Mapping[tuple, float]) -> np.ndarray:
        """:meth:`squares` as a matrix in the order of ``labels`` (as :meth:`_matrix`)."""
        index = {label: i for i, label in enumerate(labels)}
        out = np.zeros((len(labels), len(labels)), dtype=np.float64)
        for (t, p), x in squares.items():
            i, j = index.get(t), index.get(p)
            if i is not None and j is not None:
                out[i, j] += x
        return out


def _warn_single_label(k: int) -> None:
    """scikit-learn's ``confusion_matrix`` warning on a 1 x 1 matrix (the metrics built on it
    warn so too)."""
    if k == 1:
        warnings.warn(
            "A single label was found in 'y_true' and 'y_pred'. For the confusion "
            "matrix to have the correct shape, use the 'labels' parameter to pass "
            "all known labels.",
            UserWarning,
            stacklevel=3,
        )


#: most events :meth:`ConfusionMatrix.update_many` counts without numpy (unweighted str labels)
SMALL_BATCH = 256


def _plain_strings(y_true: list, y_pred: list) -> bool:
    """Every label a ``str`` (not a subclass) that numpy's ``U`` arrays keep as it is (no
    trailing NUL, which they strip): the labels ``as_label_array`` would give back unchanged."""
    try:
        labels = set(y_true)
        labels.update(y_pred)
    except TypeError:  # an unhashable label: the general path says which
        return False
    return all(x.__class__ is str and not x.endswith("\x00") for x in labels)


def _cell_sums(code: np.ndarray, k: int, w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(occupied pair codes, their event counts if ``w`` is None else summed weights)."""
    if len(code) == 0:
        return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.int64 if w is None else np.float64)
    if k * k <= 4 * len(code) + 65536:
        occupied = np.bincount(code, minlength=k * k)
        pair_codes = np.flatnonzero(occupied)
        if w is None:
            return pair_codes, occupied[pair_codes]
        return pair_codes, np.bincount(code, weights=w, minlength=k * k)[pair_codes]
    pair_codes, inverse = np.unique(code, return_inverse=True)
    inverse = inverse.reshape(-1)
    if w is None:
        return pair_codes, np.bincount(inverse, minlength=len(pair_codes))
    return pair_codes, np.bincount(inverse, weights=w, minlength=len(pair_codes))


def _codes(t: np.ndarray, p: np.ndarray) -> tuple[list, np.ndarray, np.ndarray]:
    """(labels, codes of t, codes of p): labels[codes] are the Python labels."""
    n = len(t)
    if t.dtype.kind == "b" and p.dtype.kind == "b":
        return [False, True], t.astype(np.intp), p.astype(np.intp)
    if t.dtype.kind in "iu" and p.dtype.kind in "iu":
        lo = min(int(t.min()), int(p.min()))
        hi = max(int(t.max()), int(p.max()))
        if lo >= 0 and hi < _DIRECT_MAX_LABEL and (hi + 1) ** 2 <= 4 * n + 65536:
            return list(range(hi + 1)), t.astype(np.intp, copy=False), p.astype(np.intp, copy=False)
    both = np.concatenate([t, p])
    uniq, inverse = np.unique(both, return_inverse=True)
    inverse = inverse.reshape(-1)
    return _normalise(uniq.tolist()), inverse[:n], inverse[n:]
