"""Label lists: the one validator for every list of class or label names.

A label is an int, str, bool or finite float (numpy scalars become Python ones, integral
floats ints: :func:`~streammetrics.core.validation.to_builtin_label`). ``True == 1`` in
Python, so a list holds labels of one *kind* (:func:`label_kind`: "bool", "number" or
"str") and duplicates are found kind-aware.

>>> check_label_list(["cat", "dog"], "classes", minimum=2)
['cat', 'dog']
>>> check_label_list(3, "labels", allow_count=True)
[0, 1, 2]
"""
from __future__ import annotations

import numbers
from typing import Any, Hashable, Iterable

from streammetrics.core.validation import to_builtin_label

__all__ = ["label_kind", "check_label_list", "LABEL_KINDS"]

#: label class -> kind
LABEL_KINDS = {bool: "bool", int: "number", float: "number", str: "str"}


def label_kind(label: Hashable) -> str:
    """ "bool", "number" or "str" for a built-in label (KeyError for anything else)."""
    return LABEL_KINDS[label.__class__]


def check_label_list(
    labels: Any,
    name: str = "labels",
    *,
    minimum: int = 1,
    allow_count: bool = False,
    one_kind: bool = True,
    distinct: bool = True,
    error: type[Exception] = TypeError,
) -> list:
    """``labels`` as a list of built-in labels, validated: a sequence (not a string) of at
    least ``minimum`` labels, of one kind and distinct (unless ``one_kind`` / ``distinct``
    are False). With ``allow_count``, a positive int ``n`` stands for ``0 .. n-1``.
    ``error`` is the exception for a value that is not a sequence at all (``ValueError``
    when reading a dict); every other problem is a ``ValueError`` naming ``name``."""
    if allow_count and isinstance(labels, numbers.Integral) and not isinstance(labels, bool):
        if labels < max(minimum, 1):
            raise ValueError(f"{name} must be a positive number of labels, got {labels!r}")
        return list(range(int(labels)))
    if isinstance(labels, (str, bytes)) or not isinstance(labels, Iterable):
        what = "an int or a sequence of labels" if allow_count else "a sequence of labels"
        raise error(f"{name} must be {what}, got {labels!r:.80}")
    out = [to_builtin_label(v, f"{name}[{i}]") for i, v in enumerate(labels)]
    if len(out) < minimum:
        some = "one label" if minimum == 1 else f"{minimum} labels"
        raise ValueError(f"{name} must hold at least {some}, got {out!r:.80}")
    if one_kind:
        kinds = {label_kind(v) for v in out}
        if len(kinds) > 1:
            raise ValueError(f"{name} mixes label kinds {sorted(kinds)}: {out!r:.80}; "
                             "use all bool, all numbers or all str")
    if distinct and len({(v.__class__ is bool, v) for v in out}) != len(out):
        raise ValueError(f"{name} has duplicates: {out!r:.80}")
    return out
