"""Hostile dicts: ``sm.from_dict`` validates sizes before it allocates, and every malformed
dict is a one-line ``ValueError`` naming the field (issue 10 point 5)."""
import copy
import json
import tracemalloc

import pytest

import streammetrics as sm
from streammetrics.core import state as state_mod

#: every rejection below must stay under this allocation peak (bytes): far below the
#: hundreds of MB a classes x classes state would take
PEAK = 8 << 20


def rejection(d) -> tuple[str, int]:
    """``sm.from_dict(d)``'s one-line ValueError message and the allocation peak on the way."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as info:
            sm.from_dict(d)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    text = str(info.value)
    assert "\n" not in text
    return text, peak


def _rejected(d, *words):
    text, peak = rejection(d)
    for w in words:
        assert w in text, (w, text)
    assert peak < PEAK, peak
    return text


def test_huge_class_list_is_refused_before_building_histograms():
    # 27 KB of JSON that main turned into 3000**2 histograms (1.1 GB, 20 s)
    d = sm.MulticlassScores(["a", "b"]).to_dict()
    d["config"]["classes"] = [f"c{i}" for i in range(3000)]
    assert len(json.dumps(d)) < 40_000
    _rejected(d, "classes", "max_histograms")


@pytest.mark.parametrize("factory,key", [
    (lambda: sm.MultilabelScores(2), "labels"),
    (lambda: sm.MultilabelConfusion(2), "labels"),
    (lambda: sm.ConfusionMatrix([0, 1]), "labels"),
    (lambda: sm.MulticlassMonitor(["a", "b"]), "classes"),
])
def test_label_lists_beyond_max_labels_are_refused(factory, key):
    d = factory().to_dict()
    d["config"][key] = list(range(state_mod.LIMITS.max_labels + 1))
    _rejected(d, key, "max_labels")


def test_limits_are_configurable():
    d = sm.MulticlassScores(["a", "b"]).to_dict()
    d["config"]["classes"] = list(range(20))
    old = state_mod.set_limits(max_histograms=100)
    try:
        _rejected(d, "max_histograms")
    finally:
        state_mod.set_limits(max_histograms=old.max_histograms)
    with pytest.raises(ValueError, match="state"):  # within the limit: refused for its state, not its size
        sm.from_dict(d)
    with pytest.raises(TypeError):
        state_mod.set_limits(max_nothing=3)
    with pytest.raises(ValueError):
        state_mod.set_limits(max_labels=0)


def _binary():
    b = sm.BinaryScores(max_bins=40)  # 50 distinct scores > max_bins: on the grid (key_deltas)
    for i in range(50):
        b.update(i % 2, i / 50)
    return b.to_dict()


@pytest.mark.parametrize("mutate,words", [
    (lambda s: s["histogram"].__setitem__("key_deltas", [10**30] + s["histogram"]["key_deltas"][1:]), ["histogram"]),
    (lambda s: s["histogram"].__setitem__("key_deltas", [-(1 << 39)] + s["histogram"]["key_deltas"][1:]),
     ["histogram"]),
    (lambda s: s["histogram"].__setitem__("key_deltas", [float("nan")] + s["histogram"]["key_deltas"][1:]),
     ["key_deltas"]),
    (lambda s: s["histogram"].__setitem__("neg", s["histogram"]["neg"][:-1]), ["neg"]),
    (lambda s: s["histogram"].__setitem__("pos", [float("nan")] * len(s["histogram"]["pos"])), ["pos"]),
    (lambda s: s.__setitem__("events", [1, 2, 3]), ["events"]),
    (lambda s: s.__setitem__("events", "many"), ["events"]),
    (lambda s: s.__setitem__("weights", [1.0, -2.0]), ["weights"]),
    (lambda s: s.__setitem__("bins_per_octave", 2**40), ["bins_per_octave"]),
    (lambda s: s.__setitem__("bins_per_octave", -4), ["bins_per_octave"]),
    (lambda s: s.__setitem__("log_loss_sum", float("nan")), ["log_loss_sum"]),
    (lambda s: s.__setitem__("outside_unit", {"a": 1}), ["outside_unit"]),
])
def test_hostile_binary_states(mutate, words):
    d = _binary()
    mutate(d["state"])
    _rejected(d, "BinaryScores", *words)


def test_huge_histograms_are_refused_by_length_before_decoding():
    d = _binary()
    n = state_mod.LIMITS.max_entries + 1
    d["state"]["histogram"]["key_deltas"] = [1] * n
    _rejected(d, "key_deltas", "max_entries")


def _deep(depth):
    v = 0
    for _ in range(depth):
        v = [v]
    return v


@pytest.mark.parametrize("where", ["state", "config"])
def test_deep_nesting_is_refused_without_recursion(where):
    d = sm.ConfusionMatrix().to_dict()
    d[where]["cells" if where == "state" else "labels"] = _deep(100_000)
    _rejected(d, where, "nested deeper")


@pytest.mark.parametrize("d,words", [
    ({"type": "ConfusionMatrix", "version": 1, "config": {"labels": None},
      "state": {"count": 2, "total_weight": 2.0, "unit_weights": True, "cells": [[0, 0, 1.0], [0, "a", 1.0]]}},
     ["cells", "kinds"]),
    ({"type": "ConfusionMatrix", "version": 1, "config": {"labels": None},
      "state": {"count": 1, "total_weight": 1.0, "unit_weights": True, "cells": [[[0], 0, 1.0]]}},
     ["cells[0][0]"]),
    ({"type": "Regression", "version": 1, "config": {}, "state": {"count": "x"}}, ["state keys"]),
    ({"type": "BinaryScores", "version": 99, "config": {}, "state": {}}, ["version"]),
    ({"type": "x" * 10_000, "version": 1, "config": {}, "state": {}}, ["unknown accumulator type"]),
    ({"type": "Regression", "version": 1, "config": {}, "state": {"count": 0, 1: 2}}, ["non-string key"]),
])
def test_hostile_shapes_name_the_field(d, words):
    text = _rejected(d, *words)
    assert len(text) < 600


def test_multiclass_mismatched_lengths_and_types():
    m = sm.MulticlassScores(["a", "b", "c"])
    m.update("a", [0.5, 0.3, 0.2])
    good = m.to_dict()
    for key, value in [("events", [1, 0]), ("weights", ["1", 0, 0]), ("ranks", None),
                       ("cells", [[0, 5, 1.0]]), ("histograms", [{}] * 3), ("binary_top1", [0, 0, True])]:
        d = copy.deepcopy(good)
        d["state"][key] = value
        _rejected(d, key)


def test_monitor_with_a_foreign_part_is_refused():
    d = sm.BinaryMonitor().to_dict()
    d["state"]["scores"] = sm.Regression().to_dict()
    _rejected(d, "scores")
