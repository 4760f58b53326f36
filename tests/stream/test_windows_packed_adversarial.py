"""Adversarial equivalence of the small forms of binary windows and the lines written from JSON
texts (window engine; from the review of that change): keys with quotes, backslashes, control and
non-ASCII characters, ``},{`` and ``],[``; scores at 5e-324, 1e-4 and its neighbours, 0 and 1;
labels as bools; weights 0, 0.5, 1 (int), 2.

Twin managers given the same events must write the same bytes whether their snapshots come
from ``poll_lines``/``flush_lines`` (texts) or ``snapshot_line`` of ``poll``/``flush`` (dicts),
with and without msgspec, and across a JSON checkpoint of the windows' small forms."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streammetrics.events.records import EVENT_CODEC, Event
from streammetrics.monitors import fleet_snapshot
from streammetrics.monitors.binary import BinaryMonitor
from streammetrics.stream.snapshots import snapshot_line
from streammetrics.stream.windows import WindowManager

NAMES = ['m', 'a"b', 'b\\s', 'caf\u00e9', '},{', '],[', '{"x":1}', 't\tx', 'd\x7fx', '\u2603', '\U0001F600', '',
         '\ud800', 'q"},{"r', '1e16', '0.0000']
SCORES = [5e-324, 1 - 2**-53, 1e-4, 9.999999999999999e-05, 0.00010000000000000002, 0.5, 1e-5, 1e-300, 1e-16,
          0.99999, 1 / 3, 2**-1022, 0.0, 1.0]
scores = st.one_of(st.sampled_from(SCORES), st.floats(0.0, 1.0), st.floats(1e-12, 1e-3))
events = st.lists(st.tuples(st.integers(0, 12), st.sampled_from(NAMES), st.sampled_from(NAMES[:4]),
                            st.sampled_from([0, 1, 0, 1, 2, 3]), scores,
                            st.sampled_from([1.0, 1.0, 1.0, 1, 2.0, 0.0, 0.5])),
                  min_size=1, max_size=120)
configs = st.fixed_dictionaries({
    "window": st.sampled_from([1.0, 1.5, 2.0]), "grace": st.sampled_from([0.0, 1.0]),
    "max_pending": st.sampled_from([1, 3, 4096]), "threshold": st.sampled_from([0.5, 1e-5, 0.9999]),
})


def _manager(cfg: dict) -> WindowManager:
    threshold = cfg["threshold"]
    return WindowManager(lambda: BinaryMonitor(threshold=threshold), cfg["window"], None, cfg["grace"],
                         batch=True, max_pending=cfg["max_pending"], event_codec=EVENT_CODEC, max_future=None)


def _event(step: int, t: int, model: str, segment: str, y: int, s: float, w: float) -> Event:
    y = bool(y - 2) if y >= 2 else y  # y 2, 3: the labels 0, 1 as bools
    return Event(1.7e9 + step * 0.25 + t * 0.1, model, segment, y_true=y, score=s, weight=w)


def _run(cfg: dict, evs: list, lines: bool, checkpoint_at: int | None = None) -> list[str]:
    wm = _manager(cfg)
    out: list[str] = []
    for i, (t, model, segment, y, s, w) in enumerate(evs):
        if i == checkpoint_at:
            out += wm.poll_lines() if lines else [snapshot_line(x) for x in wm.poll()]
            text = json.dumps(wm.to_dict(), allow_nan=False)
            wm = _manager(cfg).load_dict(json.loads(text))
        wm.add(_event(i, t, model, segment, y, s, w))
        if i % 7 == 3:
            collect = i % 2 == 1
            out += wm.poll_lines(collect=collect) if lines else [snapshot_line(x) for x in wm.poll(collect=collect)]
    out += wm.poll_lines() if lines else [snapshot_line(x) for x in wm.poll()]
    out += wm.flush_lines() if lines else [snapshot_line(x) for x in wm.flush()]
    return out


@settings(max_examples=400, deadline=None)
@given(configs, events, st.data())
def test_lines_from_texts_equal_lines_of_dicts(cfg, evs, data):
    expected = _run(cfg, evs, lines=False)
    assert _run(cfg, evs, lines=True) == expected
    # a JSON checkpoint of the small forms, anywhere, changes no byte (nor the order of the
    # keys' closes: (end, key), from the state alone)
    cut = data.draw(st.integers(0, len(evs) - 1))
    assert _run(cfg, evs, lines=True, checkpoint_at=cut) == expected


@settings(max_examples=150, deadline=None)
@given(configs, events)
def test_lines_without_msgspec_are_the_same(cfg, evs):
    expected = _run(cfg, evs, lines=True)
    saved = fleet_snapshot._encode
    fleet_snapshot._encode = None
    try:
        assert _run(cfg, evs, lines=True) == expected
    finally:
        fleet_snapshot._encode = saved


@pytest.mark.parametrize("bad", [-0.0, 0.0, 1.0, -1.0, 0, 1, 1e308, float("nan"), float("inf")])
def test_checkpoint_with_a_bad_packed_event_is_refused(bad):
    wm = _manager({"window": 60.0, "grace": 0.0, "max_pending": 4096, "threshold": 0.5})
    wm.add(Event(0.0, "m", y_true=1, score=0.25))
    data = json.loads(json.dumps(wm.to_dict()))
    assert data["keys"][0]["pending"] == [] and data["keys"][0]["panes"][0][1]["state"]["score"] == [0.25]
    # the version-2 layout (packed events queued as numbers), one of them no signed score
    data["version"] = 2
    data["keys"][0]["panes"] = []
    data["keys"][0]["pending"] = [[0, [0.25, bad]]]
    with pytest.raises(ValueError, match="packed"):
        _manager({"window": 60.0, "grace": 0.0, "max_pending": 4096, "threshold": 0.5}).load_dict(data)
