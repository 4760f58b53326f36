"""Exact weight sums under hostile use (review of the exact-weights change): malformed
residues in dicts, mode edges (merge, reset, copy, remove) and extreme weights."""
from __future__ import annotations

import json

import pytest

import streammetrics as sm


def state_bytes(acc) -> str:
    return json.dumps(acc.to_dict(), sort_keys=True)


# ----------------------------------------------------------------------------- remove()
@pytest.mark.parametrize("big,small", [(2.7, 1e-300), (2.7, 5e-324), (2.0**31, 2.0), (1000.0, 1e-7)])
@pytest.mark.parametrize("make", [sm.BinaryScores, lambda: sm.BinaryScores(max_bins=4)])
def test_binary_scores_remove_keeps_a_small_weight_sharing_the_bin(make, big, small):
    # exact sums: removing the big event leaves exactly the small one in the bin (was: dropped
    # as "rounding residue" below 1e-9 of the bin, so removing the small one then failed)
    base = make().update(1, 0.5, 1.0).update(0, 0.5, small)
    acc = base.copy().update(0, 0.5, big).remove(0, 0.5, big)
    assert state_bytes(acc) == state_bytes(base)
    acc.remove(0, 0.5, small)
    assert state_bytes(acc) == state_bytes(make().update(1, 0.5, 1.0))


@pytest.mark.parametrize("make", [sm.BinaryScores, lambda: sm.BinaryScores(max_bins=4)])
def test_binary_scores_remove_from_a_rounded_older_state_leaves_the_unit_counts(make):
    # a state written before exact sums (no residue keys: its sums rounded) loads in units mode;
    # once its weighted events are removed, the bins are the unit-weight events' counts again
    # (was: a residue of 2**-55 stayed in the bin shared with a unit-weight event)
    a = make().update(0, 0.5, 1.0).update(0, 0.7, 1.0).update(0, 0.5, 0.1).update(0, 0.5, 0.2).update(1, 0.5, 1.0)
    d = a.to_dict()
    d["state"].pop("weighted_residues", None)
    d["state"]["histogram"].pop("residues")
    b = sm.from_dict(d).remove(0, 0.5, 0.1).remove(0, 0.5, 0.2)
    assert state_bytes(b) == state_bytes(make().update(0, 0.5, 1.0).update(0, 0.7, 1.0).update(1, 0.5, 1.0))
