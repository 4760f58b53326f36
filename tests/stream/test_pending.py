"""The pending store against a list-based reference: same answers in memory, spilled to
SQLite, or restored from a checkpoint (dict or file) at any point."""
from __future__ import annotations

import json
import os
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streammetrics.events.parser import Event
from streammetrics.stream.pending import PendingStore, SpillError, ts_us


def pred(i: int, ts: float, ident: str, kind: int = 0) -> Event:
    """A pending prediction of one of the four task shapes (kind 0..3)."""
    if kind == 0:
        return Event(ts, "m", "s", None, 0.25 + i * 1e-3, None, None, 1.0 + i % 3, ident)
    if kind == 1:
        return Event(ts, "m", "", None, None, (0.1, 0.2 + i, 1e-300), None, 0.5, ident)
    if kind == 2:
        return Event(ts, "m2", "x", None, None, None, ["a", 1, True, 2.5][i % 4], 1.0, ident)
    return Event(ts, "m", "s", None, None, None, float(i) / 7, 2.0, ident)


class Reference:
    """Brute force: a list of (ts_us, seq, event)."""

    def __init__(self, max_pending: int) -> None:
        self.items: list[tuple[int, int, Event, int]] = []
        self.seq = 0
        self.max_pending = max_pending
        self.evicted = 0

    def put(self, e: Event, tag: int) -> list:
        self.items.append((ts_us(e.ts), self.seq, e, tag))
        self.seq += 1
        out = []
        while len(self.items) > self.max_pending:
            oldest = min(self.items, key=lambda r: (r[0], r[1]))
            self.items.remove(oldest)
            out.append((oldest[2], oldest[3]))
            self.evicted += 1
        return out

    def take(self, ident: str) -> list:
        out = [r for r in self.items if r[2].id == ident]
        self.items = [r for r in self.items if r[2].id != ident]
        return [(r[2], r[3]) for r in sorted(out, key=lambda r: r[1])]

    def expire(self, before: int) -> list:
        out = sorted((r for r in self.items if r[0] < before), key=lambda r: (r[0], r[1]))
        self.items = [r for r in self.items if r[0] >= before]
        return [(r[2], r[3]) for r in out]


ops = st.lists(st.one_of(
    st.tuples(st.just("put"), st.integers(0, 40), st.integers(0, 8), st.integers(0, 3)),
    st.tuples(st.just("take"), st.integers(0, 8)),
    st.tuples(st.just("expire"), st.integers(0, 45)),
    st.tuples(st.just("checkpoint"), st.sampled_from(["dict", "file"])),
), max_size=60)


@settings(max_examples=120)
@given(ops=ops, budget=st.sampled_from([1, 2, 5, 1000]), max_pending=st.sampled_from([3, 7, 10_000]))
def test_store_matches_reference_across_tiers_and_checkpoints(tmp_path_factory, ops, budget, max_pending):
    path = str(tmp_path_factory.mktemp("ckpt") / "pending.sqlite")
    ref = Reference(max_pending)
    store = PendingStore(memory_budget=budget, max_pending=max_pending)
    try:
        for i, op in enumerate(ops):
            if op[0] == "put":
                e = pred(i, op[1] / 4, f"id{op[2]}", op[3])
                tag = None if i % 3 else i - 5
                assert store.put(e, tag) == ref.put(e, tag)
            elif op[0] == "take":
                assert store.take(f"id{op[1]}") == ref.take(f"id{op[1]}")
            elif op[0] == "expire":
                assert store.expire(op[1] * 250_000) == ref.expire(op[1] * 250_000)
            else:
                before = store.to_dict()
                fresh = PendingStore(memory_budget=budget, max_pending=max_pending)
                if op[1] == "dict":
                    fresh.load_dict(json.loads(json.dumps(before)))
                else:
                    store.save(path)
                    fresh.load(path)
                assert fresh.to_dict() == before  # same records, tiers and counters
                store.close()
                store = fresh
            assert len(store) == len(ref.items)
            assert store.in_memory <= budget
            assert store.evicted == ref.evicted
    finally:
        store.close()


def test_spill_counts_and_memory_budget():
    store = PendingStore(memory_budget=3)
    for i in range(10):
        store.put(pred(i, float(i), f"p{i}"))
    assert (len(store), store.in_memory, store.on_disk) == (10, 1, 9)
    assert (store.spilled, store.spills) == (9, 3)
    assert [e.id for e, _ in store.expire(ts_us(4.0))] == ["p0", "p1", "p2", "p3"]
    assert [e.id for e, _ in store.take("p9")] == ["p9"]
    assert store.next_deadline_us() == ts_us(4.0)
    store.close()


def test_hard_bound_evicts_oldest_and_counts():
    store = PendingStore(memory_budget=2, max_pending=3)
    assert store.put(pred(0, 5.0, "a")) == []
    store.put(pred(1, 1.0, "b"))
    store.put(pred(2, 9.0, "c"))
    out = store.put(pred(3, 3.0, "d"))  # 4 > 3: the oldest (ts 1, on disk) goes
    assert [e.id for e, _ in out] == ["b"] and store.evicted == 1
    out = store.put(pred(4, 0.5, "e"))  # the new one is itself the oldest
    assert [e.id for e, _ in out] == ["e"] and store.evicted == 2
    assert len(store) == 3
    store.close()


def test_records_round_trip_exactly():
    store = PendingStore(memory_budget=1)
    events = [pred(i, 1700000000.123456 + i, f"id{i}", i % 4) for i in range(8)]
    for i, e in enumerate(events):
        store.put(e, i - 3 if i % 2 else None)
    assert store.on_disk == 7
    got = [store.take(f"id{i}")[0] for i in range(8)]
    assert got == [(e, i - 3 if i % 2 else None) for i, e in enumerate(events)]
    got = [e for e, _ in got]
    assert all(type(a.y_pred) is type(b.y_pred) for a, b in zip(got, events))
    store.close()


def test_malformed_checkpoints_are_rejected_without_change(tmp_path):
    store = PendingStore(memory_budget=2)
    for i in range(5):
        store.put(pred(i, float(i), f"p{i}"))
    good = store.to_dict()
    bad_cases = [
        {"type": "Other"},
        {**good, "seq": -1},
        {**good, "memory": [[0, "x", "not a number", "m", "", 0.5, None, None, 1.0, None]]},
        {**good, "memory": good["memory"] + good["memory"]},  # duplicate record numbers
        {**good, "disk": [[99, "x", 1.0, "m", "", 0.5, None, None, 1.0, None]]},  # seq beyond the counter
        {key: value for key, value in good.items() if key != "disk"},
    ]
    for bad in bad_cases:
        with pytest.raises(ValueError):
            store.load_dict(bad)
        assert store.to_dict() == good
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(ValueError):
        store.load(str(junk))
    assert store.to_dict() == good
    store.close()


def test_close_removes_the_spill_directory():
    store = PendingStore(memory_budget=1)
    store.put(pred(0, 0.0, "a"))
    store.put(pred(1, 1.0, "b"))
    directory = store._tmpdir
    assert directory is not None and os.path.isdir(directory)
    store.close()
    assert not os.path.exists(directory) and len(store) == 0


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bounds_are_validated(bad):
    with pytest.raises(ValueError, match="memory_budget"):
        PendingStore(memory_budget=bad)
    with pytest.raises(ValueError, match="max_pending"):
        PendingStore(max_pending=bad)


def test_put_needs_an_id():
    with pytest.raises(TypeError, match="id"):
        PendingStore().put(Event(0.0, "m", score=0.5))


class FailingConnection:
    """A sqlite3 connection whose next ``executemany`` inserting rows fails after inserting the
    first of them (a disk filling up mid-batch)."""

    def __init__(self, conn) -> None:
        self.conn = conn
        self.armed = True

    def executemany(self, sql, rows):
        rows = list(rows)
        if self.armed and sql.startswith("INSERT"):
            self.armed = False
            self.conn.execute(sql, rows[0])
            raise sqlite3.OperationalError("database or disk is full")
        return self.conn.executemany(sql, rows)

    def __getattr__(self, name):
        return getattr(self.conn, name)


def test_a_failed_spill_changes_nothing_and_loses_nothing():
    ref = Reference(10_000)
    store = PendingStore(memory_budget=3)
    events = [pred(i, float(i % 7), f"id{i % 5}") for i in range(12)]
    for e in events[:6]:  # the fourth put spills (creating the database); three more in memory
        store.put(e)
        ref.put(e, None)
    assert (store.on_disk, store.in_memory) == (3, 3)
    before = store.to_dict()
    store._conn = FailingConnection(store._conn)
    with pytest.raises(SpillError, match="disk is full") as info:
        store.put(events[6])  # needs a spill, which fails half way
    assert info.value.consistent and isinstance(info.value.__cause__, sqlite3.OperationalError)
    assert store.to_dict() == before
    for e in events[6:]:
        store.put(e)
        ref.put(e, None)
    for i in range(5):
        assert store.take(f"id{i}") == ref.take(f"id{i}")
    assert len(store) == 0
    store.close()


class BrokenUndoConnection(FailingConnection):
    """The insert fails half way and so does every later statement (the disk is gone)."""

    def execute(self, sql, *args):
        if not self.armed:
            raise sqlite3.DatabaseError("database disk image is malformed")
        return self.conn.execute(sql, *args)


def test_a_spill_that_cannot_be_undone_makes_the_store_refuse_until_reloaded():
    store = PendingStore(memory_budget=3)
    events = [pred(i, float(i % 7), f"id{i % 5}") for i in range(12)]
    for e in events[:6]:
        store.put(e)
    checkpoint = store.to_dict()
    store._conn = BrokenUndoConnection(store._conn)
    with pytest.raises(SpillError, match="disk is full") as info:  # the cause, not the undo's "malformed"
        store.put(events[6])
    assert not info.value.consistent
    for operation in (lambda: store.take("id0"), lambda: store.expire(10**9), lambda: store.put(events[7]),
                      store.to_dict):
        with pytest.raises(SpillError, match="rebuild the store from a checkpoint"):
            operation()
    store.load_dict(checkpoint)  # rebuilt: exactly the checkpoint's records
    assert store.to_dict() == checkpoint
    store.close()


def test_an_unwritable_temp_dir_is_a_consistent_spill_error_and_the_retry_works(tmp_path, monkeypatch):
    import errno
    import tempfile

    full = tmp_path / "full"
    full.mkdir()
    store = PendingStore(memory_budget=2, directory=str(full))
    store.put(pred(0, 0.0, "a"))
    store.put(pred(1, 1.0, "b"))
    real = tempfile.mkdtemp

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "mkdtemp", no_space)
    with pytest.raises(SpillError, match="cannot create its spill database") as info:
        store.put(pred(2, 2.0, "c"))
    assert info.value.consistent and info.value.errno == errno.ENOSPC
    assert (store.in_memory, store.on_disk, len(store)) == (2, 0, 2) and list(full.iterdir()) == []
    # the database is made but cannot be written: removed again, nothing left behind
    monkeypatch.setattr(tempfile, "mkdtemp", real)
    connect = sqlite3.connect

    def full_disk(*args, **kwargs):
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(sqlite3, "connect", full_disk)
    with pytest.raises(SpillError, match="unable to open"):
        store.put(pred(2, 2.0, "c"))
    assert list(full.iterdir()) == []
    monkeypatch.setattr(sqlite3, "connect", connect)  # the fault clears: the same put succeeds
    store.put(pred(2, 2.0, "c"))
    assert (store.in_memory, store.on_disk) == (1, 2)
    assert [e.id for e, _ in store.expire(10**9)] == ["a", "b", "c"]
    store.close()


def test_a_failed_save_leaves_no_file(tmp_path, monkeypatch):
    store = PendingStore(memory_budget=2)
    for i in range(5):
        store.put(pred(i, float(i), f"p{i}"))
    monkeypatch.setattr(PendingStore, "_meta", lambda self: {"not": {"json", "serialisable"}})
    with pytest.raises(TypeError):
        store.save(str(tmp_path / "s.sqlite"))
    assert list(tmp_path.iterdir()) == []
    store.close()
