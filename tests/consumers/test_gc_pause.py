"""consume's garbage-collector settings: no collection while a checkpoint's state tree or a window
close's snapshots are built (consumers.gc_tuning.paused_gc), restored afterwards."""
from __future__ import annotations

import gc

import pytest
from kafka_fakes import FakeCluster
from test_service_unit import drain, events_with_closers, fill, make_service

from consumers.gc_tuning import GC_THRESHOLD, paused_gc, tune_gc
from streammetrics.stream.pipeline import Pipeline


def test_paused_gc_restores_the_collector_also_after_an_exception_and_when_nested():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # (the outermost restores)
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with paused_gc():
            raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # (disabled before: left so)
    finally:
        gc.enable()


def test_tune_gc_collects_the_youngest_generation_every_100000_allocations():
    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold()[0] == GC_THRESHOLD == 100_000
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def test_checkpoints_and_window_closes_build_their_trees_without_collections(tmp_path, monkeypatch):
    seen: dict[str, list[bool]] = {"to_dict": [], "delta_dict": [], "poll": []}
    for name in seen:
        original = getattr(Pipeline, name)

        def spy(self, *args, _name=name, _original=original, **kwargs):
            seen[_name].append(gc.isenabled())
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Pipeline, name, spy)
    cluster = FakeCluster()
    fill(cluster, events_with_closers(600))
    service = make_service(cluster, tmp_path)
    drain(service)
    assert service.counts["snapshots"] > 0
    assert seen["to_dict"] and seen["delta_dict"] and seen["poll"]
    assert not any(seen["to_dict"] + seen["delta_dict"] + seen["poll"])
    assert gc.isenabled()
