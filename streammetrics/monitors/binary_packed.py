"""The packed form of a binary event: what a window engine queues for a ``BinaryMonitor``.

A batch window queues its events until the window closes (issue 12: at 10,000 keys ~100,000
open windows' events). The common binary event (weight 1, ``y_true`` the int 0 or 1 or a bool,
a float score strictly inside (0, 1)) is queued as one float, its signed score ``s`` if the
label is 1 else ``-s``: both come back (``y_true = v > 0``, ``score = |v|``), and the parsed
event is freed at once. Any other event is queued as itself, checked first by
:func:`checked_pack` (an event built without the parser that a ``BinaryMonitor`` cannot take is
refused before it is queued, naming the field).

>>> from streammetrics.events.records import Event
>>> pack_binary_event(Event(0.0, "m", y_true=0, score=0.25)), pack_binary_event(Event(0.0, "m", y_true=True, score=0.5))
(-0.25, 0.5)
>>> checked_pack(Event(0.0, "m", y_true=0.5, score=0.25))
Traceback (most recent call last):
...
streammetrics.core.exceptions.InvalidEvent: field 'y_true' must be 0 or 1, got 0.5
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import numpy as np

from streammetrics.core.exceptions import InvalidEvent

__all__ = ["batch_labels", "binary_label", "checked_pack", "pack_binary_event", "ZERO_INT", "ONE_INT"]

#: the labels the parser gives, compared by identity on the per-event paths (CPython's cached small
#: ints; any other 0/1 takes a slower path to the same result)
ZERO_INT, ONE_INT = 0, 1


def binary_label(y: Any) -> int:
    """A binary label given as anything equal to 0 or 1 (an int, a bool, 1.0, a numpy scalar)
    as that int; :class:`~streammetrics.core.exceptions.InvalidEvent` naming ``y_true`` otherwise."""
    try:
        if y == 1:
            return 1
        if y == 0:
            return 0
    except (TypeError, ValueError):  # (an array's truth value, an object refusing ==)
        pass
    raise InvalidEvent(f"field 'y_true' must be 0 or 1, got {y!r:.40}", "y_true")


def batch_labels(events: Sequence[Any]) -> np.ndarray:
    """The events' labels as an int64 array of 0 and 1 (each equal to 0 or 1, of any type);
    :class:`~streammetrics.core.exceptions.InvalidEvent` naming ``y_true`` otherwise (a batch
    is checked before anything changes: a cast alone would make 0.5 a 0)."""
    labels = [e.y_true for e in events]
    y = np.full(len(events), np.nan)
    if all(issubclass(t, numbers.Real) for t in set(map(type, labels))):  # (not a str float() reads)
        y = np.fromiter(labels, dtype=np.float64, count=len(events))
    bad = ~((y == 0.0) | (y == 1.0))
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise InvalidEvent(f"field 'y_true' must be 0 or 1, got {events[j].y_true!r:.40} (event {j})", "y_true")
    return y.astype(np.int64)


def _finite_real(x: Any) -> bool:
    return x.__class__ is not bool and isinstance(x, numbers.Real) and math.isfinite(x)


def checked_pack(event: Any) -> Any:
    """:func:`pack_binary_event`, and for an event it does not pack a check that a
    ``BinaryMonitor`` can take it: ``y_true`` equal to 0 or 1, a finite ``score``, a finite
    ``weight`` >= 0 (:class:`~streammetrics.core.exceptions.InvalidEvent` naming the field;
    the parser's events always pass: it checks the same, and more)."""
    s = event.score
    y = event.y_true
    if s.__class__ is float and 0.0 < s < 1.0 and event.weight == 1.0 and (
            y is ONE_INT or y is ZERO_INT or y is True or y is False):
        return s if y else -s
    binary_label(y)
    if not _finite_real(s):
        raise InvalidEvent(f"field 'score' must be a finite number, got {s!r:.40}", "score")
    if not (_finite_real(event.weight) and event.weight >= 0):
        raise InvalidEvent(f"field 'weight' must be a finite number >= 0, got {event.weight!r:.40}", "weight")
    return event


def pack_binary_event(event: Any) -> Any:
    """The common binary event (weight 1, ``y_true`` the int 0 or 1 or a bool, a float score
    strictly inside (0, 1)) as its signed score, ``score`` if ``y_true`` else ``-score``: one
    float, from which both come back (``y_true = v > 0``, ``score = |v|``); any other event as
    itself, unchecked (:func:`checked_pack`, which the window engine calls, refuses those a
    monitor cannot take). The form a window engine queues binary events in
    (:meth:`~streammetrics.monitors.binary.BinaryMonitor.pack_event`)."""
    try:
        return checked_pack(event)
    except InvalidEvent:
        return event
