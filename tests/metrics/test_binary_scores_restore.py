"""Checkpoint-restore of BinaryScores is bit-exact: a dict restored mid-stream continues per
event exactly like the live accumulator (the running log-loss product is stored exactly)."""
from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streammetrics as sm
from streammetrics.core.accumulator import from_dict

events = st.lists(
    st.tuples(
        st.booleans(),
        st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 1.0, 1e-300, 1 - 1e-16])),
        st.one_of(st.just(None), st.floats(0.0, 5.0)),  # None: the unit-weight fast path
    ),
    max_size=60,
)


def _feed(acc: sm.BinaryScores, evs: list) -> None:
    for y, s, w in evs:
        if w is None:
            acc.update(y, s)
        else:
            acc.update(y, s, w)


@settings(max_examples=200, deadline=None)
@given(events, events, st.sampled_from([{}, {"exact": True}, {"bins": 64, "max_bins": 6}]))
def test_restore_mid_stream_is_bit_exact(first: list, second: list, config: dict) -> None:
    live = sm.BinaryScores(**config)
    _feed(live, first)
    restored = from_dict(json.loads(json.dumps(live.to_dict())))
    unpickled = pickle.loads(pickle.dumps(live))
    for acc in (live, restored, unpickled):
        _feed(acc, second)  # type: ignore[arg-type]  # a BinaryScores
    want = json.dumps(live.to_dict())
    assert json.dumps(restored.to_dict()) == want
    assert json.dumps(unpickled.to_dict()) == want
    if live.count and live.total_weight > 0:
        assert restored.log_loss() == live.log_loss()  # type: ignore[attr-defined]


def test_long_sum_restored_exactly() -> None:
    """Past many buffer folds the restored exact sums are the live ones (residues written)."""
    live = sm.BinaryScores()
    _feed(live, [(i % 2 == 0, 1e-3 * (i % 97 + 1), None) for i in range(5000)])
    state = live.to_dict()["state"]
    assert state["sum_residues"] is not None and state["sum_residues"][0]
    restored = from_dict(live.to_dict())
    _feed(live, [(True, 0.3, None)] * 7)
    _feed(restored, [(True, 0.3, None)] * 7)  # type: ignore[arg-type]
    assert restored.to_dict() == live.to_dict()


def test_version_1_and_2_dicts_load() -> None:
    acc = sm.BinaryScores().update_many([0, 1, 1], [0.2, 0.7, 0.9])
    acc.update(1, 0.8)
    d = acc.to_dict()
    assert d["version"] == 3 and "sum_residues" in d["state"]
    v2 = {**d, "version": 2, "state": {**{k: v for k, v in d["state"].items() if k != "sum_residues"},
                                       "log_product": [0.0, 0.5, -1]}}
    old = {**d, "version": 1, "state": {k: v for k, v in d["state"].items() if k not in ("sum_residues", "weighted")}}
    for version in (v2, old):
        back = from_dict(version)
        assert back.log_loss() == acc.log_loss()  # type: ignore[attr-defined]  # the float as the exact sum
        assert back.to_dict()["state"]["sum_residues"] is None


@pytest.mark.parametrize("key, bad, words", [
    ("weighted", [0, 5, 0.0, 1.0], "weighted[1]"),
    ("weighted", [0, 1, 0.0, 2.5], "weighted gives"),
    ("weighted", [0, 1], "weighted must"),
    ("sum_residues", "x", "sum_residues"),
    ("sum_residues", [[[1, 0]]], "sum_residues"),
    ("sum_residues", [["x"], []], "log_loss_sum residue must hold"),
    ("sum_residues", [[], [[1.5, 3]]], "brier_sum residue must hold"),
    ("sum_residues", [[[3, -60]], []], "log_loss_sum residue holds a non-canonical pair"),
    ("sum_residues", [[[1 << 52, 0]], []], "log_loss_sum is not the canonical"),
])
def test_malformed_exact_parts_refused(key: str, bad: object, words: str) -> None:
    acc = sm.BinaryScores()
    acc.update(1, 0.8)
    acc.update(0, 0.3)
    d = acc.to_dict()
    d["state"][key] = bad
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        from_dict(d)
