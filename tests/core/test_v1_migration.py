"""Dicts written by main before declared state (version 1 layouts) still load, and give the
values main computed from them (fixtures: tests/core/fixtures/make_v1_fixtures.py)."""
import json
import math
import os
import warnings

import numpy as np
import pytest

import streammetrics as sm
from streammetrics.monitors import make_monitor
from streammetrics.stream.windows import WindowManager

with open(os.path.join(os.path.dirname(__file__), "fixtures", "v1_states.json")) as fh:
    FIXTURES = json.load(fh)


def _num(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _value(acc, spec):
    name, _, kw = spec.partition(":")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            v = getattr(acc, name)(**(json.loads(kw) if kw else {}))
        except (ValueError, ZeroDivisionError):
            return None
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_num(x) for x in np.ravel(v)]
    return _num(v)


def _close(a, b):
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if a is None or b is None:
        return a is b
    return a == pytest.approx(b, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("case", FIXTURES["accumulators"], ids=lambda c: c["name"])
def test_v1_accumulator_dicts_load_with_their_values(case):
    d = case["dict"]
    assert d["version"] == 1
    acc = sm.from_dict(d)
    assert acc.count == case["count"]
    assert acc.total_weight == pytest.approx(case["total_weight"], rel=1e-12)
    for spec, want in case["metrics"].items():
        assert _close(_value(acc, spec), want), spec
    again = sm.from_dict(json.loads(json.dumps(acc.to_dict())))
    assert again == acc


@pytest.mark.parametrize("case", FIXTURES["monitors"], ids=lambda c: c["name"])
def test_v1_monitor_dicts_load_with_their_snapshot(case):
    mon = sm.from_dict(case["dict"])
    assert mon.count == case["count"]
    snap = mon.snapshot()
    for key, want in case["snapshot"].items():
        assert key in snap
        if key == "per_class":
            assert snap[key].keys() == want.keys()
            for label, row in want.items():
                for k, v in row.items():
                    assert _close(snap[key][label][k], v), (key, label, k)
        else:
            assert _close(snap[key], want), key


def test_v1_states_embedded_in_snapshots_and_checkpoints_load():
    emb = FIXTURES["embedded"]
    assert emb["snapshots"]
    for snap in emb["snapshots"]:
        mon = sm.from_dict(snap["state"])
        assert mon.count == snap["count"]
        for key, want in snap["metrics"].items():
            assert _close(mon.snapshot()[key], want), key
    wm = WindowManager(lambda: make_monitor("binary"), window=60, slide=60)
    wm.load_dict(emb["checkpoint"])
    rest = wm.flush()  # the windows still open at the checkpoint: the last snapshots written
    assert rest and [s["metrics"] for s in rest] == [s["metrics"] for s in emb["snapshots"][-len(rest):]]
