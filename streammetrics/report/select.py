"""Which keys get charts: every key is in the summary table, charts go to the keys that matter.

Charts cost most of a report's time (about 0.05-0.1 s each), so a report draws at most
``max_charts`` of them (``--max-charts``, default :data:`DEFAULT_MAX_CHARTS`). When every key's
charts fit, every key is charted. Otherwise keys are taken in turn from three ranked lists, one
key from each list per round, skipping keys already taken, until the next key's charts would
not fit:

1. **alerted**: keys where an ``--alert`` rule fired, most alerted windows first;
2. **worst**: the lowest latest value of the task's headline metric (:data:`HEADLINE`: ROC AUC
   for binary, accuracy for multiclass and hard labels, R² for regression), the tasks' lists
   interleaved so each task has its worst keys shown;
3. **largest**: the most events over the whole period.

A key counts for as many charts as its task draws at most (:func:`~.charts.max_charts_of`),
so the total never exceeds the budget. The page says which keys were charted and why.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from streammetrics.report.history import KeyHistory

__all__ = ["Selection", "choose_charted", "DEFAULT_MAX_CHARTS", "HEADLINE", "HOW_CHOSEN"]

#: default chart budget: about 20 binary keys' sections, some seconds of drawing
DEFAULT_MAX_CHARTS = 120
#: the metric that ranks keys of a task as "worst" (lowest latest value first; all higher-is-better)
HEADLINE = {"binary": "roc_auc", "multiclass": "accuracy", "labels": "accuracy", "regression": "r2"}
HOW_CHOSEN = ("keys with alerts (most alerted windows first), the lowest latest headline metric per task "
              "(ROC AUC for binary, accuracy for multiclass and hard labels, R² for regression) and the most "
              "events over the period, one key from each list in turn")


@dataclass
class Selection:
    """The charted keys (by ``id`` of their history) with why, and the budget used."""

    reasons: dict[int, list[str]]
    max_charts: int
    all_keys: bool  # every key fitted in the budget

    def charted(self, history: KeyHistory) -> bool:
        return id(history) in self.reasons

    def why(self, history: KeyHistory) -> list[str]:
        return self.reasons.get(id(history), [])


def _alerted(histories: Sequence[KeyHistory]) -> Iterator[tuple[KeyHistory, str]]:
    ranked = sorted((h for h in histories if h.alerts), key=lambda h: -len(h.alerted()))
    for h in ranked:
        n = len(h.alerted())
        yield h, f"alerts fired in {n} window{'s' if n != 1 else ''}"


def _worst(histories: Sequence[KeyHistory]) -> Iterator[tuple[KeyHistory, str]]:
    per_task: list[Iterator[tuple[KeyHistory, str]]] = []
    for task, metric in HEADLINE.items():
        scored = []
        for h in histories:
            if h.task == task:
                value = h.change(metric).value
                if value is not None and not math.isnan(value):
                    scored.append((value, h))
        scored.sort(key=lambda item: item[0])
        per_task.append(iter([(h, f"#{rank} lowest latest {metric} ({value:.3g})")
                              for rank, (value, h) in enumerate(scored, 1)]))
    for group in itertools.zip_longest(*per_task):
        yield from (item for item in group if item is not None)


def _largest(histories: Sequence[KeyHistory]) -> Iterator[tuple[KeyHistory, str]]:
    totals = sorted(((h.total_events(), h) for h in histories), key=lambda item: -item[0])
    for rank, (total, h) in enumerate(totals, 1):
        yield h, f"#{rank} most events ({total:,})"


def choose_charted(histories: Sequence[KeyHistory], max_charts: int,
                   charts_of: Callable[[KeyHistory], int]) -> Selection:
    """The keys to chart within ``max_charts`` charts (``charts_of(h)``: the most a key draws).

    ``histories`` need their ``alerts`` evaluated. ``ValueError`` if ``max_charts`` < 0."""
    if max_charts < 0:
        raise ValueError(f"--max-charts must be 0 or more, got {max_charts}")
    if sum(charts_of(h) for h in histories) <= max_charts:
        return Selection({id(h): [] for h in histories}, max_charts, all_keys=True)
    reasons: dict[int, list[str]] = {}
    budget = max_charts
    lists = [_alerted(histories), _worst(histories), _largest(histories)]
    while lists and budget > 0:
        for ranked in list(lists):
            for h, why in ranked:  # the next key of this list not taken yet
                if id(h) in reasons:
                    continue
                if charts_of(h) > budget:
                    budget = 0  # the next key does not fit: stop
                else:
                    reasons[id(h)] = [why]
                    budget -= charts_of(h)
                break
            else:
                lists.remove(ranked)  # exhausted
            if budget <= 0:
                break
    for h in histories:  # say it when a key picked for one reason also has alerts
        if id(h) in reasons and h.alerts and not reasons[id(h)][0].startswith("alerts"):
            n = len(h.alerted())
            reasons[id(h)].append(f"alerts fired in {n} window{'s' if n != 1 else ''}")
    return Selection(reasons, max_charts, all_keys=False)
