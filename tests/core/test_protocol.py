"""One protocol test over every registered accumulator and monitor type (as river's
``test_metrics.py`` and scikit-learn's ``test_common.py``): merges of random splits in
random orders equal the whole stream, copies are independent, reset empties, equality,
JSON and pickle round trips, and hostile dicts raise ``ValueError`` naming the field.
Weights include 0.1, 2.7 and random floats, and merged states equal the whole stream's bit for
bit (JSON text)."""
from __future__ import annotations

import json
import math
import pickle
import random
from typing import Any, Callable

import pytest

import streammetrics as sm
from streammetrics.core import state as state_mod


# ----------------------------------------------------------------------------- examples
def _w(rng: random.Random) -> float:
    # whole and other weights: every sum in a state is exact (kernels.exact_sum, exact_weights)
    return rng.choice([1.0, 1.0, 1.0, 0.5, 2.0, 0.0, 0.1, 2.7, rng.random() * 3])


def _binary(rng):
    y = int(rng.random() < 0.4)
    return (y, rng.choice([rng.random(), 0.0, 1.0, round(rng.random(), 2)]), _w(rng))


def _margins(rng):
    return (int(rng.random() < 0.5), rng.gauss(0.0, 4.0), _w(rng))


def _confusion(rng):
    return (rng.choice("abc"), rng.choice("abc"), _w(rng))


def _row(rng, k):
    raw = [rng.random() for _ in range(k)]
    return [r / sum(raw) for r in raw]


def _multiclass(rng):
    return (rng.choice("abc"), _row(rng, 3), _w(rng))


def _multiclass2(rng):
    return (rng.choice([0, 1]), [rng.choice([0.2, 0.5, 1.5]), rng.random()], _w(rng))


def _multilabel(rng):
    return ([int(rng.random() < 0.5) for _ in range(3)], [rng.random() for _ in range(3)], _w(rng))


def _multilabel_confusion(rng):
    return ([rng.random() < 0.5 for _ in range(3)], [rng.random() < 0.5 for _ in range(3)], _w(rng))


def _regression(rng):
    y = rng.uniform(-2, 10)
    return (y, y + rng.gauss(0, 1), _w(rng))


def _event(**fields):
    return (fields,)


def _binary_event(rng):
    y, s, w = _binary(rng)
    return _event(y_true=y, score=s, weight=w)


def _multiclass_event(rng):
    y, s, w = _multiclass(rng)
    return _event(y_true=y, scores=dict(zip("abc", s)), weight=w)


def _label_event(rng):
    t, p, w = _confusion(rng)
    return _event(y_true=t, y_pred=p, weight=w)


def _regression_event(rng):
    t, p, w = _regression(rng)
    return _event(y_true=t, y_pred=p, weight=w)


#: type name -> [(factory, event generator)]: every registered type needs at least one
EXAMPLES: dict[str, list[tuple[Callable[[], Any], Callable[[random.Random], tuple]]]] = {
    "ConfusionMatrix": [(sm.ConfusionMatrix, _confusion), (lambda: sm.ConfusionMatrix(list("abc")), _confusion)],
    "MultilabelConfusion": [(lambda: sm.MultilabelConfusion(["x", "y", "z"]), _multilabel_confusion)],
    "BinaryScores": [(sm.BinaryScores, _binary), (lambda: sm.BinaryScores(max_bins=24), _binary),
                     (lambda: sm.BinaryScores(max_bins=24), _margins),
                     (lambda: sm.BinaryScores(exact=True), _binary)],
    "MulticlassScores": [(lambda: sm.MulticlassScores(list("abc")), _multiclass),
                         (lambda: sm.MulticlassScores([0, 1], exact=True), _multiclass2)],
    "MultilabelScores": [(lambda: sm.MultilabelScores(3), _multilabel)],
    "Regression": [(sm.Regression, _regression)],
    "ScoreDistribution": [(sm.ScoreDistribution, lambda rng: _binary(rng)[1:]),
                          (lambda: sm.ScoreDistribution(0.3, max_bins=24), lambda rng: _margins(rng)[1:]),
                          (lambda: sm.ScoreDistribution(exact=True), lambda rng: _binary(rng)[1:])],
    "BinaryMonitor": [(sm.BinaryMonitor, _binary_event), (lambda: sm.BinaryMonitor(0.3, exact=True), _binary_event)],
    "MulticlassMonitor": [(lambda: sm.MulticlassMonitor(list("abc")), _multiclass_event)],
    "LabelMonitor": [(sm.LabelMonitor, _label_event)],
    "RegressionMonitor": [(sm.RegressionMonitor, _regression_event)],
}


def _library_types() -> dict[str, type]:
    # types registered by test doubles elsewhere in the session are not the library's
    return {n: c for n, c in sm.registered_types().items() if c.__module__.startswith("streammetrics.")}


CASES = [(name, i) for name in sorted(_library_types()) for i in range(len(EXAMPLES.get(name, [None])))]


def test_every_registered_type_has_an_example_stream():
    missing = sorted(set(_library_types()) - set(EXAMPLES))
    assert not missing, f"registered types without an example stream in EXAMPLES: {missing}"


def _example(name, i):
    if name not in EXAMPLES:
        pytest.fail(f"{name} has no example stream")
    return EXAMPLES[name][i]


def _fill(acc, gen, events):
    for e in events:
        acc.update(*e)
    return acc


def _stream(gen, seed, n=60):
    rng = random.Random(seed)
    return [gen(rng) for _ in range(n)]


def _close(a, b, path="state"):
    """Recursive equality of two to_dict() values, floats within 1e-9 (relative)."""
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, (int, float)) and isinstance(b, (int, float)), (path, a, b)
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (path, a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (path, a, b)
        for k in a:
            _close(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), (path, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    else:
        assert a == b, (path, a, b)


# ----------------------------------------------------------------------------- protocol
@pytest.mark.parametrize("name,i", CASES)
@pytest.mark.parametrize("seed", range(4))
def test_random_splits_merged_in_random_orders_equal_the_whole_stream(name, i, seed):
    factory, gen = _example(name, i)
    events = _stream(gen, seed)
    whole = _fill(factory(), gen, events)
    rng = random.Random(1000 + seed)
    cuts = sorted(rng.sample(range(1, len(events)), rng.randint(1, 6)))
    parts = [_fill(factory(), gen, events[a:b]) for a, b in zip([0, *cuts], [*cuts, len(events)])]
    parts.append(factory())  # an empty part is the identity
    rng.shuffle(parts)
    if seed % 2:
        merged = parts[0].copy()
        for p in parts[1:]:
            merged.merge(p)
    else:  # a tree of ``+``
        while len(parts) > 1:
            j = rng.randrange(len(parts) - 1)
            parts[j : j + 2] = [parts[j] + parts[j + 1]]
        merged = parts[0]
    assert merged.count == whole.count == len(events)
    assert merged.total_weight == whole.total_weight
    # the same state, to the bit: a function of the multiset of events (contract section 1)
    assert json.dumps(merged.to_dict()) == json.dumps(whole.to_dict())


@pytest.mark.parametrize("name,i", CASES)
def test_merging_an_accumulator_into_itself_doubles_it(name, i):
    factory, gen = _example(name, i)
    events = _stream(gen, 7)
    a = _fill(factory(), gen, events)  # (not read before the merge: buffers still unfolded)
    twice = _fill(factory(), gen, events).merge(_fill(factory(), gen, events))
    assert json.dumps(a.merge(a).to_dict()) == json.dumps(twice.to_dict()) and a.count == 120


@pytest.mark.parametrize("name,i", CASES)
def test_copy_is_independent_and_reset_empties(name, i):
    factory, gen = _example(name, i)
    events = _stream(gen, 5)
    a = _fill(factory(), gen, events[:30])
    before = json.dumps(a.to_dict())
    c = a.copy()
    assert c == a and c is not a
    _fill(c, gen, events[30:])
    assert json.dumps(a.to_dict()) == before  # updating the copy leaves the original alone
    _fill(a, gen, events[30:40])
    assert c.count == 60 and a.count == 40
    d = a.copy().merge(c)
    assert json.dumps(c.to_dict()) != before and c.count == 60 and d.count == 100
    a.reset()
    assert a == factory() and a.count == 0 and a.total_weight == 0
    _fill(a, gen, events)
    _close(a.to_dict(), c.to_dict())  # a reset accumulator works as a new one


@pytest.mark.parametrize("name,i", CASES)
def test_equality(name, i):
    factory, gen = _example(name, i)
    events = _stream(gen, 6)
    a = _fill(factory(), gen, events)
    b = _fill(factory(), gen, events)
    assert a == b and not (a != b)
    assert a != _fill(factory(), gen, events[:-1])
    assert factory() == factory()
    assert (a == object()) is False
    with pytest.raises(TypeError):
        hash(a)


@pytest.mark.parametrize("name,i", CASES)
def test_json_round_trip(name, i):
    factory, gen = _example(name, i)
    events = _stream(gen, 7)
    for acc in (factory(), _fill(factory(), gen, events)):
        d = acc.to_dict()
        assert d["type"] == name and type(d["version"]) is int
        text = json.dumps(d, allow_nan=False)
        back = sm.from_dict(json.loads(text))
        assert type(back) is type(acc) and back == acc
        assert json.dumps(back.to_dict(), allow_nan=False) == text
        # the loaded accumulator keeps accumulating like the original
        extra = _stream(gen, 8, 10)
        _close(_fill(back, gen, extra).to_dict(), _fill(acc, gen, extra).to_dict())


@pytest.mark.parametrize("name,i", CASES)
def test_pickle_round_trip(name, i):
    factory, gen = _example(name, i)
    events = _stream(gen, 9)
    for acc in (factory(), _fill(factory(), gen, events)):
        back = pickle.loads(pickle.dumps(acc, protocol=pickle.HIGHEST_PROTOCOL))
        assert type(back) is type(acc) and back == acc
        extra = _stream(gen, 10, 10)
        assert _fill(back, gen, extra).to_dict() == _fill(acc, gen, extra).to_dict()


# ----------------------------------------------------------------------------- hostile dicts
def _deep(depth):
    v: Any = 0
    for _ in range(depth):
        v = [v]
    return v


@pytest.mark.parametrize("name,i", CASES)
def test_hostile_dicts_raise_value_error_naming_the_field(name, i, monkeypatch):
    factory, gen = _example(name, i)
    good = _fill(factory(), gen, _stream(gen, 11)).to_dict()
    monkeypatch.setattr(state_mod, "LIMITS", state_mod.StateLimits(max_entries=200))

    def rejected(d, word):
        with pytest.raises(ValueError) as info:
            sm.from_dict(d)
        assert word in str(info.value) and "\n" not in str(info.value), (word, str(info.value))

    # optional keys (residues of exact sums) read as None when absent: deleting one is valid
    optional = {k for f in type(factory()).state_fields for k in f.optional}
    for key in good["state"]:
        for bad in ("x", _deep(5000), [0] * 201, {"k": 1}):
            d = json.loads(json.dumps(good))
            d["state"][key] = bad
            rejected(d, key)
        if key not in optional:
            d = json.loads(json.dumps(good))
            del d["state"][key]
            rejected(d, key)
    d = json.loads(json.dumps(good))
    d["state"]["extra"] = 1
    rejected(d, "extra")
    for key in good["config"]:
        d = json.loads(json.dumps(good))
        d["config"][key] = _deep(5000)
        rejected(d, "config")
    for bad in (None, [], "x", {**good, "version": "1"}, {**good, "type": "Nope"},
                {k: v for k, v in good.items() if k != "state"}, {**good, "config": []}):
        with pytest.raises(ValueError):
            sm.from_dict(bad)
