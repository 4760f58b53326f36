"""``Monitor.item_texts``: a closed window's texts from its queued items, without the monitor
(``BinaryMonitor``: the vectorised pass over the lists as they are), equal to ``snapshot_texts``
of the monitor ``update_items`` makes; and the window engine's small windows closed as their items
make no monitor at all when their lines are written from texts."""
from __future__ import annotations

import numpy as np

from streammetrics.events.records import Event
from streammetrics.monitors.binary import BinaryMonitor
from streammetrics.monitors.regression import RegressionMonitor
from streammetrics.stream.windows import WindowManager


def _lists() -> list[list]:
    rng = np.random.default_rng(3)
    out = []
    for n in (1, 2, 5, 40, 64):
        s = np.round(rng.random(n), 3).clip(1e-3, 0.999)
        out.append(np.where(rng.random(n) < 0.5, s, -s).tolist())
    return out


def test_item_texts_equal_snapshot_texts_of_the_monitors() -> None:
    template = BinaryMonitor(threshold=0.4)
    template.confidence = 0.9
    lists = _lists()
    monitors = [template.empty().update_items(list(items)) for items in lists]
    assert BinaryMonitor.item_texts(template, lists) == BinaryMonitor.snapshot_texts(monitors)
    assert None not in BinaryMonitor.item_texts(template, lists)


def test_item_texts_none_where_the_small_form_does_not_hold() -> None:
    event = Event(0.0, "m", "", y_true=1, score=1.0)  # (a score of 1.0: not a signed score)
    odd = [[], [0.5, event], [0.5] * 300, [0.5, 1.0], [0.5, 0.0]]
    assert BinaryMonitor.item_texts(BinaryMonitor(), [*odd, [0.25]])[:-1] == [None] * len(odd)
    assert BinaryMonitor.item_texts(BinaryMonitor(exact=True), [[0.25]]) == [None]
    assert RegressionMonitor.item_texts(RegressionMonitor(), [[]]) == [None]


def test_small_windows_closed_as_items_make_no_monitor_when_written_as_lines() -> None:
    made = []
    template = BinaryMonitor()

    def factory() -> BinaryMonitor:
        made.append(1)
        return template.empty()

    wm = WindowManager(factory, 60.0, batch=True, max_future=None)
    wm.add(Event(0.0, "k0", "", y_true=1, score=0.5))
    n = 3000
    ts = np.arange(1, n + 1) * (180.0 / n)
    key_index = np.arange(n) % 500
    keys = [(f"k{i}", "") for i in range(500)]
    items = np.where(np.arange(n) % 2 == 0, 0.25, -0.75)
    made.clear()
    assert wm.add_columns(ts, key_index, keys, items) is not None
    lines = wm.poll_lines() + wm.flush_lines()
    assert len(lines) == 1 + 3 * 500  # (k0's window, and every key's three)
    assert len(made) < 20  # a template per poll that builds windows, none per window (1,500 before)
