"""``--reference FILE``: one label-free reference per (model, segment) from a JSONL file.

The file holds labelled prediction events (contract section 2) from a period the model is
trusted on, or snapshots (section 3) whose monitor states are merged, or both; each key's
scores become a :class:`~streammetrics.monitors.reference.Reference` (binary) or a
:class:`~streammetrics.monitors.reference_multiclass.MulticlassReference`, compact state
whatever the size of the file.
"""
from __future__ import annotations

import itertools
import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from streammetrics.events.columns import column_decoder
from streammetrics.events.parser import Event, EventParser
from streammetrics.metrics.binary_scores import BinaryScores
from streammetrics.metrics.multiclass_scores import MulticlassScores
from streammetrics.monitors.reference import (
    DEFAULT_MAX_REFERENCES,
    Reference,
    binary_scores_of,
    check_max_references,
    too_many_references,
)
from streammetrics.monitors.reference_multiclass import MulticlassReference, multiclass_scores_of
from streammetrics.stream.snapshots import SNAPSHOT_SCHEMA

__all__ = ["load_references"]

_BATCH = 1 << 16  # events parsed per batch by load_references


def load_references(
    path: str, *, fields: Mapping[str, str] | None = None, exact: bool = False, task: str = "binary",
    classes: Sequence[Hashable] | None = None, max_references: int = DEFAULT_MAX_REFERENCES, **options: Any
) -> dict[tuple[str, str], Any]:
    """One reference per ``(model, segment)`` key from a JSONL file (contract section 6,
    ``--reference FILE``): labelled prediction events (contract section 2, ``fields``
    remaps names as ``--field``), or snapshots (section 3) whose monitor states are merged,
    or both. ``task="binary"`` gives :class:`Reference` objects, ``task="multiclass"``
    (with ``classes``) :class:`~streammetrics.monitors.reference_multiclass.MulticlassReference`
    objects. Of snapshots, the last one per ``(key, window start)`` counts (a re-emitted
    window replaces the earlier one); a key's cumulative snapshot, when there is one, is
    used instead of its windows. Blank lines are skipped; any other bad line raises
    ``ValueError`` naming the line and the field. Lines are read in chunks of 65,536 (a chunk
    of valid events decoded as columns, any other line by line), so memory is bounded by the
    references' states, not the file's size; a file with more than ``max_references`` keys
    raises ``ValueError`` naming the limit as soon as the key past it is read."""
    check_max_references(max_references)
    if task not in ("binary", "multiclass"):
        raise ValueError(f"--reference supports the binary and multiclass tasks, not {task!r}")
    multiclass = task == "multiclass"
    if multiclass:
        if not classes:
            raise ValueError("a multiclass reference needs classes (--classes)")
        new_acc: Any = lambda: MulticlassScores(classes, exact=exact)  # noqa: E731
        scores_of: Any = multiclass_scores_of
        make: Any = MulticlassReference
    else:
        new_acc = lambda: BinaryScores(exact=exact)  # noqa: E731
        scores_of, make = binary_scores_of, Reference
    parser = EventParser(task, fields=fields, classes=classes if multiclass else None)
    accs: dict[tuple[str, str], Any] = {}
    windows: dict[tuple[str, str], dict[Any, Any]] = {}
    cumulative: dict[tuple[str, str], Any] = {}
    seen: set[tuple[str, str]] = set()
    batch: list[Any] = []

    def see(key: tuple[str, str]) -> None:
        if key not in seen:
            if len(seen) >= max_references:
                raise too_many_references(len(seen), max_references, path)
            seen.add(key)

    def flush() -> None:
        groups: dict[tuple[str, str], list[Any]] = {}
        for e in batch:
            groups.setdefault(e.key, []).append(e)
        for key, events in groups.items():
            acc = accs.get(key)
            if acc is None:
                acc = accs[key] = new_acc()
            w = np.array([e.weight for e in events], dtype=np.float64)
            if multiclass:
                y: Any = [e.y_true for e in events]
                s = np.array([e.scores for e in events], dtype=np.float64)
            else:
                y = np.array([e.y_true for e in events], dtype=np.int64)
                s = np.array([e.score for e in events], dtype=np.float64)
            acc.update_many(y, s, None if (w == 1.0).all() else w)
        batch.clear()

    def by_line(lines: list[str], first: int) -> None:
        for lineno, line in enumerate(lines, first):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{lineno}: not JSON ({exc})") from None
            if isinstance(obj, dict) and "schema" in obj:
                if obj["schema"] != SNAPSHOT_SCHEMA:
                    raise ValueError(f"{path}:{lineno}: unknown snapshot schema {obj['schema']!r}")
                try:
                    key = (str(obj["key"]["model"]), str(obj["key"]["segment"]))
                    scores = scores_of(obj["state"])
                except (KeyError, TypeError, ValueError) as exc:
                    raise ValueError(f"{path}:{lineno}: bad snapshot ({exc})") from None
                if scores is None:
                    raise ValueError(f"{path}:{lineno}: the snapshot's state holds no {task} scores")
                see(key)
                if obj.get("cumulative"):
                    cumulative[key] = scores
                else:
                    windows.setdefault(key, {})[json.dumps(obj.get("window"))] = scores
                continue
            event = parser.parse(obj)
            if not isinstance(event, Event):
                raise ValueError(f"{path}:{lineno}: {event}")
            if event.y_true is None:
                raise ValueError(f"{path}:{lineno}: reference events must be labelled (no 'y_true')")
            see(event.key)
            batch.append(event)
            if len(batch) >= _BATCH:
                flush()

    first = 1  # the line number of a chunk's first line
    decoder = None if multiclass else column_decoder(parser)

    def columnar(lines: list[str]) -> bool:
        """Apply a chunk of lines that are all valid events, as columns (False, nothing done: some
        line is not; the chunk goes line by line). The state is the same (order-free sums)."""
        assert decoder is not None
        cols, odd = decoder.decode([line.encode() for line in lines])
        if odd or cols is None:
            return False
        for key in cols.keys:
            see(key)
        order = np.argsort(cols.key_index, kind="stable")
        starts = np.searchsorted(cols.key_index[order], np.arange(len(cols.keys) + 1))
        for i, key in enumerate(cols.keys):
            rows = order[starts[i]:starts[i + 1]]
            acc = accs.get(key)
            if acc is None:
                acc = accs[key] = new_acc()
            w = None if cols.weight is None else cols.weight[rows]
            acc.update_many(cols.y_true[rows], cols.score[rows], None if w is None or (w == 1.0).all() else w)
        return True

    with open(path, encoding="utf-8") as f:
        while True:
            lines = list(itertools.islice(f, _BATCH))
            if not lines:
                break
            if decoder is None or not columnar(lines):  # (a chunk of valid events as columns)
                by_line(lines, first)
            first += len(lines)
    flush()
    for key, parts in windows.items():
        if key in cumulative:
            continue
        for scores in parts.values():
            _merge_into(accs, key, scores)
    for key, scores in cumulative.items():
        _merge_into(accs, key, scores)
    return {key: make(acc, **options) for key, acc in accs.items() if acc.total_weight > 0}


def _merge_into(accs: dict[tuple[str, str], Any], key: tuple[str, str], scores: Any) -> None:
    acc = accs.get(key)
    if acc is None:
        accs[key] = scores.copy()
    else:
        acc.merge(scores)
