"""The pending store: predictions waiting for their delayed label (contract section 5).

A pending prediction keeps only what the label join needs: ``id``, key (``model``,
``segment``), ``ts``, ``score`` or ``scores`` or ``y_pred``, and ``weight`` (an
:class:`~streammetrics.events.parser.Event` with ``y_true=None``). The store answers three
questions, each in a deterministic order that does not depend on where a record lives:

* :meth:`PendingStore.take` ``(id)``: remove and return every pending prediction with that
  id (in arrival order);
* :meth:`PendingStore.expire` ``(before_us)``: remove and return those with event time
  (whole microseconds) ``< before_us``, oldest first (ties in arrival order);
* :meth:`PendingStore.put`: add one; beyond ``max_pending`` the oldest are removed early and
  returned (the join reports them as expired; ``evicted`` counts them).

**Two tiers.** Up to ``memory_budget`` predictions live in a dict (by id) and a heap (by
time). When one more arrives, the whole memory tier moves in one transaction to an embedded
SQLite database in a private temporary directory (``spilled`` and ``spills`` count this), which
then holds most of a large backlog. SQLite fits the job: it ships with Python (no new
dependency), its B-tree indexes give the two access paths the join needs (by ``id`` for
labels, by time for expiry) without holding the data in memory, its page cache is bounded
(``cache_kib``) so the process RSS does not grow with the backlog, and a database can be
copied consistently with its backup API for checkpoints. The spill file is scratch space
(no journal, no fsync): durability comes from :meth:`PendingStore.save` or :meth:`to_dict`.

**Checkpoints.** :meth:`to_dict` / :meth:`load_dict` (JSON-safe, every record; fine up to
a few hundred thousand pending) and :meth:`save` / :meth:`load` (one SQLite file, written
atomically; for large backlogs) restore the store exactly: same records in the same tier,
same arrival numbers and counters, hence the same answers afterwards.

>>> from streammetrics.events.parser import Event
>>> store = PendingStore(memory_budget=2)
>>> for i in range(3):
...     _ = store.put(Event(ts=float(i), model="m", score=0.5, id=f"p{i}"))
>>> len(store), store.spilled   # the third put moved the first two to SQLite
(3, 2)
>>> [e.id for e, _ in store.take("p0")], [e.id for e, _ in store.expire(2_000_000)]
(['p0'], ['p1'])
>>> store.close()
"""
from __future__ import annotations

import heapq
import json
import math
import os
import shutil
import sqlite3
import tempfile
import weakref
from array import array
from collections.abc import Iterable, Mapping
from typing import Any

from streammetrics.events.parser import Event

__all__ = ["DEFAULT_MAX_PENDING", "DEFAULT_MEMORY_BUDGET", "PendingStore", "SpillError", "ts_us"]

#: predictions held in memory before the store spills to SQLite (~300 bytes each in memory)
DEFAULT_MEMORY_BUDGET = 100_000
#: hard bound on pending predictions (memory + disk); beyond it the oldest expire early
DEFAULT_MAX_PENDING = 50_000_000

_floor = math.floor
#: a stored record: (ts_us, seq, prediction, tag)
Record = tuple[int, int, Event, "int | None"]
_COLUMNS = "seq, id, ts, model, segment, score, scores, y_pred, weight, tag"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL, ts_us INTEGER NOT NULL, ts REAL NOT NULL,
    model TEXT NOT NULL, segment TEXT NOT NULL, score REAL, scores BLOB, y_pred TEXT,
    weight REAL NOT NULL, tag INTEGER)
"""


_INSERT = ("INSERT INTO {table} (seq, id, ts_us, ts, model, segment, score, scores, y_pred, weight, tag) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def ts_us(ts: float) -> int:
    """Event time in whole microseconds (nearest), as the window engine computes it."""
    return _floor(ts * 1e6 + 0.5)


def _row(rec: Record) -> tuple[Any, ...]:
    """A record as a SQLite row (ts_us after seq and id, tag last)."""
    t, seq, e, tag = rec
    return (seq, e.id, t, e.ts, e.model, e.segment, e.score,
            None if e.scores is None else array("d", e.scores).tobytes(),
            None if e.y_pred is None else json.dumps(e.y_pred), e.weight, tag)


def _event(row: tuple[Any, ...]) -> Record:
    """A record from a row of ``_COLUMNS``."""
    seq, ident, ts, model, segment, score, scores, y_pred, weight, tag = row
    ev = Event(ts, model, segment, None, score,
               None if scores is None else tuple(array("d", scores)),
               None if y_pred is None else json.loads(y_pred), weight, ident)
    return (ts_us(ts), seq, ev, tag)


def _record_json(rec: Record) -> list[Any]:
    _, seq, e, tag = rec
    return [seq, e.id, e.ts, e.model, e.segment, e.score,
            None if e.scores is None else list(e.scores), e.y_pred, e.weight, tag]


def _record_from_json(item: Any) -> Record:
    if not isinstance(item, list) or len(item) != 10:
        raise ValueError(f"a record must be a list of 10 values, got {item!r:.80}")
    seq, ident, ts, model, segment, score, scores, y_pred, weight, tag = item
    if type(seq) is not int or not isinstance(ident, str) or not isinstance(model, str) \
            or not isinstance(segment, str) or (tag is not None and type(tag) is not int):
        raise ValueError(f"bad record {item!r:.80}")
    for name, v in (("ts", ts), ("weight", weight), ("score", score)):
        if (v is not None or name != "score") and (type(v) not in (int, float) or not math.isfinite(v)):
            raise ValueError(f"record field {name} must be a finite number, got {v!r}")
    if scores is not None:
        if not isinstance(scores, list) or not all(type(v) in (int, float) and math.isfinite(v) for v in scores):
            raise ValueError("record field scores must be a list of finite numbers")
        scores = tuple(float(v) for v in scores)
    ev = Event(float(ts), model, segment, None, None if score is None else float(score), scores, y_pred,
               float(weight), ident)
    return (ts_us(ev.ts), seq, ev, tag)


class SpillError(OSError):
    """The pending store could not write its spill database (disk full, unwritable temporary
    directory, I/O error): an error of the environment, not of the data. ``consistent``: the
    store is unchanged (every record still in memory; retry once the fault clears); False: a
    failed write left the database undefined (no rollback journal), the store refuses every
    further operation and must be rebuilt from a checkpoint."""

    def __init__(self, message: str, *, consistent: bool, errno_: int | None = None) -> None:
        super().__init__(errno_, message) if errno_ is not None else super().__init__(message)
        self.consistent = consistent

    def __str__(self) -> str:
        return self.args[-1] if self.args else ""


def _remove_dir(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


class PendingStore:
    """Pending predictions in memory up to ``memory_budget``, then in SQLite (module docstring).

    ``max_pending`` is the hard bound on the total; ``directory`` is where the spill database
    goes (a private temporary directory inside it; default the system temp dir);
    ``cache_kib`` bounds SQLite's page cache.
    """

    def __init__(self, memory_budget: int = DEFAULT_MEMORY_BUDGET, max_pending: int = DEFAULT_MAX_PENDING,
                 *, directory: str | None = None, cache_kib: int = 32_768) -> None:
        for name, v in (("memory_budget", memory_budget), ("max_pending", max_pending), ("cache_kib", cache_kib)):
            if type(v) is not int or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        self.memory_budget = memory_budget
        self.max_pending = max_pending
        self.directory = directory
        self.cache_kib = cache_kib
        self._mem: dict[str, list[Record]] = {}  # id -> records (arrival order)
        self._heap: list[Record] = []  # by (ts_us, seq); may hold stale entries
        self._mem_count = 0
        self._stale = 0
        self._conn: sqlite3.Connection | None = None
        self._tmpdir: str | None = None
        self._disk_count = 0
        self._disk_min = math.inf  # a lower bound of ts_us on disk (exact after each expiry)
        self._broken: str | None = None  # why the spill database is unusable (see SpillError)
        self.seq = 0  # arrival number of the next record
        #: records moved to SQLite, and how many times the memory tier was spilled
        self.spilled = 0
        self.spills = 0
        #: records removed early because the store was full (``max_pending``)
        self.evicted = 0
        # incremental checkpoints (track_changes): records put since the last delta_dict, by
        # number, and the numbers of older records removed since (None: not tracked)
        self._added: dict[int, Record] | None = None
        self._removed: set[int] = set()

    # ----------------------------------------------------------------- sizes
    def __len__(self) -> int:
        return self._mem_count + self._disk_count

    def __contains__(self, ident: object) -> bool:
        """Whether a prediction with id ``ident`` is pending (either tier)."""
        if ident in self._mem:
            return True
        if not self._disk_count:
            return False
        self._check_usable()
        assert self._conn is not None
        return self._conn.execute("SELECT 1 FROM pending WHERE id = ? LIMIT 1", (ident,)).fetchone() is not None

    @property
    def in_memory(self) -> int:
        return self._mem_count

    @property
    def on_disk(self) -> int:
        return self._disk_count

    # ----------------------------------------------------------------- operations
    def put(self, event: Event, tag: int | None = None) -> list[tuple[Event, int | None]]:
        """Add a pending prediction (``event.id`` must be a string) with an optional integer
        ``tag`` returned with it (the window engine's first window of the prediction). Returns
        the (prediction, tag) pairs removed early to stay within ``max_pending`` (oldest
        first; usually none)."""
        if self._broken is not None:
            self._check_usable()
        ident = event.id
        if ident.__class__ is not str and not isinstance(ident, str):
            raise TypeError(f"a pending prediction needs a string id, got {ident!r}")
        self.put_many((event,), (tag,))
        if self._mem_count + self._disk_count > self.max_pending:
            out = self._pop_oldest(self._mem_count + self._disk_count - self.max_pending)
            self.evicted += len(out)
            return out
        return []

    def put_many(self, events: Iterable[Event], tags: Iterable[int | None]) -> None:
        """:meth:`put` of each of ``events`` (string ids) with its tag, in order, when the store has
        room for them all (``max_pending``: the caller checks; nothing is evicted)."""
        if self._broken is not None:
            self._check_usable()
        mem, heap, added, push = self._mem, self._heap, self._added, heapq.heappush
        for event, tag in zip(events, tags):
            if self._mem_count >= self.memory_budget:
                self._spill()
                mem, heap = self._mem, self._heap
            rec = (ts_us(event.ts), self.seq, event, tag)
            self.seq += 1
            if added is not None:
                added[rec[1]] = rec
            recs = mem.get(event.id)  # type: ignore[arg-type]
            if recs is None:
                mem[event.id] = [rec]  # type: ignore[index]
            else:
                recs.append(rec)
            push(heap, rec)
            self._mem_count += 1

    def held(self, idents: Iterable[str]) -> list[bool]:
        """Whether a prediction with each of ``idents`` is pending (``in``, for many)."""
        mem = self._mem
        if not self._disk_count:
            return [ident in mem for ident in idents]
        return [ident in self for ident in idents]

    def room(self) -> int:
        """Predictions :meth:`put` takes before the memory tier spills (0: the next one spills it)."""
        return max(self.memory_budget - self._mem_count, 0)

    def take(self, ident: str) -> list[tuple[Event, int | None]]:
        """Remove and return every pending (prediction, tag) with id ``ident``, in arrival order."""
        if self._broken is not None:
            self._check_usable()
        recs = self._mem.pop(ident, None)
        if recs is not None:
            self._mem_count -= len(recs)
            self._stale += len(recs)
            if self._stale > self._mem_count + 1024:
                self._compact()
        if self._disk_count:
            self._check_usable()
            assert self._conn is not None
            rows = self._conn.execute(f"DELETE FROM pending WHERE id = ? RETURNING {_COLUMNS}", (ident,)).fetchall()
            if rows:
                self._disk_count -= len(rows)
                disk = [_event(r) for r in rows]
                recs = disk if recs is None else recs + disk
                recs.sort(key=lambda r: r[1])
        if recs is None:
            return []
        if self._added is not None:
            self._forget(recs)
        if len(recs) == 1:
            r = recs[0]
            return [(r[2], r[3])]
        return [(r[2], r[3]) for r in recs]

    def _forget(self, recs: Iterable[Record]) -> None:
        """Removed records, for the next :meth:`delta_dict`."""
        added, removed = self._added, self._removed
        assert added is not None
        for r in recs:
            if added.pop(r[1], None) is None:
                removed.add(r[1])

    def expire(self, before_us: int) -> list[tuple[Event, int | None]]:
        """Remove and return the (prediction, tag) pairs with event time (us) ``< before_us``,
        oldest first."""
        self._check_usable()
        out: list[Record] = []
        heap = self._heap
        while heap and heap[0][0] < before_us:
            rec = heapq.heappop(heap)
            if self._drop_live(rec):
                out.append(rec)
            else:
                self._stale -= 1
        if self._disk_count and self._disk_min < before_us:
            self._check_usable()
            assert self._conn is not None
            rows = self._conn.execute(f"DELETE FROM pending WHERE ts_us < ? RETURNING {_COLUMNS}",
                                      (before_us,)).fetchall()
            self._disk_count -= len(rows)
            out.extend(_event(r) for r in rows)
            self._refresh_disk_min()
        out.sort(key=lambda r: (r[0], r[1]))
        if self._added is not None:
            self._forget(out)
        return [(r[2], r[3]) for r in out]

    def next_deadline_us(self) -> float:
        """A lower bound of the oldest pending event time (us), +inf when empty: nothing
        expires before the expiry threshold passes it."""
        while self._heap and not self._is_live(self._heap[0]):
            heapq.heappop(self._heap)
            self._stale -= 1
        mem = self._heap[0][0] if self._heap else math.inf
        return min(mem, self._disk_min if self._disk_count else math.inf)

    def close(self) -> None:
        """Close the spill database and delete its directory (the store is empty afterwards)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._tmpdir is not None:
            self._finalizer.detach()
            _remove_dir(self._tmpdir)
            self._tmpdir = None
        self._clear_memory()
        self._disk_count = 0
        self._disk_min = math.inf

    # ----------------------------------------------------------------- memory tier
    def _is_live(self, rec: Record) -> bool:
        recs = self._mem.get(rec[2].id)  # type: ignore[arg-type]
        return recs is not None and any(r[1] == rec[1] for r in recs)

    def _drop_live(self, rec: Record) -> bool:
        """Remove ``rec`` (popped from the heap) from the id map; False if it was stale."""
        ident = rec[2].id
        recs = self._mem.get(ident)  # type: ignore[arg-type]
        if recs is None:
            return False
        for i, r in enumerate(recs):
            if r[1] == rec[1]:
                del recs[i]
                if not recs:
                    del self._mem[ident]  # type: ignore[arg-type]
                self._mem_count -= 1
                return True
        return False

    def _compact(self) -> None:
        """Rebuild the heap (:meth:`take` does when stale entries outnumber live ones by 1024:
        amortised O(1) per take)."""
        self._heap = [r for recs in self._mem.values() for r in recs]
        heapq.heapify(self._heap)
        self._stale = 0

    def _clear_memory(self) -> None:
        self._mem = {}
        self._heap = []
        self._mem_count = 0
        self._stale = 0

    def _memory_records(self) -> list[Record]:
        return sorted((r for recs in self._mem.values() for r in recs), key=lambda r: r[1])

    # ----------------------------------------------------------------- disk tier
    def _db(self) -> sqlite3.Connection:
        if self._broken is not None:
            raise SpillError(self._broken, consistent=False)
        if self._conn is None:
            tmpdir = tempfile.mkdtemp(prefix="streammetrics-pending-", dir=self.directory)
            conn = None
            try:
                conn = sqlite3.connect(os.path.join(tmpdir, "pending.sqlite"), isolation_level=None)
                # scratch space: no rollback journal, no fsync, no memory map (it would count as RSS)
                for pragma in ("journal_mode=OFF", "synchronous=OFF", "mmap_size=0", "temp_store=FILE",
                               f"cache_size=-{self.cache_kib}", "locking_mode=EXCLUSIVE"):
                    conn.execute(f"PRAGMA {pragma}")
                self._create(conn, "pending")
            except BaseException:  # (disk full, unwritable directory): no half-made database left behind
                if conn is not None:
                    conn.close()
                _remove_dir(tmpdir)
                raise
            self._tmpdir = tmpdir
            self._finalizer = weakref.finalize(self, _remove_dir, tmpdir)
            self._conn = conn
        return self._conn

    @staticmethod
    def _create(conn: sqlite3.Connection, table: str) -> None:
        conn.execute(_SCHEMA.format(table=table))
        if table == "pending":
            conn.execute("CREATE INDEX IF NOT EXISTS pending_id ON pending(id)")
            conn.execute("CREATE INDEX IF NOT EXISTS pending_ts ON pending(ts_us, seq)")

    def _insert(self, recs: Iterable[Record]) -> int:
        """Write ``recs`` to the spill database in one transaction. :class:`SpillError` (the
        original error as its cause) if that fails: consistent (state unchanged) when the
        database could be opened and every row that got in removed again."""
        rows = sorted((_row(r) for r in recs), key=lambda row: row[1])  # by id: index locality
        if not rows:
            return 0
        where = self.directory or tempfile.gettempdir()
        try:
            conn = self._db()
        except SpillError:
            raise
        except (OSError, sqlite3.Error) as exc:
            raise SpillError(f"pending store: cannot create its spill database under {where} "
                             f"({type(exc).__name__}: {exc})", consistent=True,
                             errno_=getattr(exc, "errno", None)) from exc
        try:
            conn.execute("BEGIN")
            conn.executemany(_INSERT.format(table="pending"), rows)
            conn.execute("COMMIT")
        except (OSError, sqlite3.Error) as exc:  # e.g. disk full: undo (no journal: delete what got in)
            message = (f"pending store: cannot write {len(rows)} predictions to its spill database under {where} "
                       f"({type(exc).__name__}: {exc})")
            consistent = self._undo_insert(conn, rows)
            if not consistent:
                self._broken = message + "; the database is left undefined: rebuild the store from a checkpoint"
                self._drop_database()
            raise SpillError(message, consistent=consistent) from exc
        self._disk_count += len(rows)
        self._disk_min = min(self._disk_min, min(row[2] for row in rows))
        return len(rows)

    def _undo_insert(self, conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> bool:
        """Remove what a failed insert of ``rows`` left; True if the database holds exactly the
        records counted before it (checked), False if that cannot be made sure."""
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # no transaction left open
        try:
            conn.executemany("DELETE FROM pending WHERE seq = ?", [(row[0],) for row in rows])
            (count,) = conn.execute("SELECT COUNT(*) FROM pending").fetchone()
        except sqlite3.Error:
            return False
        return count == self._disk_count

    def _check_usable(self) -> None:
        if self._broken is not None:
            raise SpillError(self._broken, consistent=False)

    def _drop_database(self) -> None:
        """Close and delete the spill database (after :attr:`_broken` is set)."""
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None
        if self._tmpdir is not None:
            self._finalizer.detach()
            _remove_dir(self._tmpdir)
            self._tmpdir = None

    def _spill(self) -> None:
        n = self._insert(r for recs in self._mem.values() for r in recs)
        self._clear_memory()
        self.spilled += n
        self.spills += 1 if n else 0

    def _refresh_disk_min(self) -> None:
        if not self._disk_count:
            self._disk_min = math.inf
            return
        self._check_usable()
        assert self._conn is not None
        (low,) = self._conn.execute("SELECT MIN(ts_us) FROM pending").fetchone()
        self._disk_min = math.inf if low is None else low

    def _pop_oldest(self, n: int) -> list[tuple[Event, int | None]]:
        """Remove the ``n`` oldest records (by time, then arrival) across both tiers."""
        mem: list[Record] = []
        while self._heap and len(mem) < n:
            rec = heapq.heappop(self._heap)
            if self._is_live(rec):
                mem.append(rec)
            else:
                self._stale -= 1
        disk: list[Record] = []
        if self._disk_count:
            self._check_usable()
            assert self._conn is not None
            disk = [_event(r) for r in self._conn.execute(
                f"SELECT {_COLUMNS} FROM pending ORDER BY ts_us, seq LIMIT ?", (n,))]
        chosen = sorted(mem + disk, key=lambda r: (r[0], r[1]))[:n]
        taken = {r[1] for r in chosen}
        for rec in mem:
            if rec[1] in taken:
                self._drop_live(rec)
            else:
                heapq.heappush(self._heap, rec)
        gone = [(r[1],) for r in disk if r[1] in taken]
        if gone:
            self._check_usable()
            assert self._conn is not None
            self._conn.executemany("DELETE FROM pending WHERE seq = ?", gone)
            self._disk_count -= len(gone)
            self._refresh_disk_min()
        if self._added is not None:
            self._forget(chosen)
        return [(r[2], r[3]) for r in chosen]

    def _disk_records(self) -> list[Record]:
        if not self._disk_count:
            return []
        self._check_usable()
        assert self._conn is not None
        return [_event(r) for r in self._conn.execute(f"SELECT {_COLUMNS} FROM pending ORDER BY seq")]

    # ----------------------------------------------------------------- checkpoints
    def _meta(self) -> dict[str, Any]:
        return {"type": "PendingStore", "version": 1, "seq": self.seq, "spilled": self.spilled,
                "spills": self.spills, "evicted": self.evicted}

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe state: counters and every record, by tier, in arrival order."""
        self._check_usable()
        return {**self._meta(),
                "memory": [_record_json(r) for r in self._memory_records()],
                "disk": [_record_json(r) for r in self._disk_records()]}

    def track_changes(self) -> None:
        """Start (or restart) recording what :meth:`delta_dict` writes: call it when the state
        equals the checkpoint just written."""
        self._added, self._removed = {}, set()

    def delta_dict(self) -> dict[str, Any]:
        """The records put and the numbers of those removed since the last call (or
        :meth:`track_changes`): O(changes). :meth:`apply_delta` of the previous :meth:`to_dict`
        and this one holds the same records as :meth:`to_dict` now (tiers aside)."""
        if self._added is None:
            raise ValueError("track_changes() was not called")
        added, removed = self._added, self._removed
        self._added, self._removed = {}, set()
        return {**self._meta(), "type": "PendingStoreDelta", "added": [_record_json(r) for r in added.values()],
                "removed": sorted(removed)}

    @staticmethod
    def apply_delta(full: Mapping[str, Any], *deltas: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`to_dict`'s ``full`` with ``deltas`` applied, as data: records removed from their
        tier, added ones in memory (:meth:`load_dict` validates the result)."""
        try:
            tiers = {name: {item[0]: item for item in full[name]} for name in ("memory", "disk")}
            meta: Mapping[str, Any] = full
            for delta in deltas:
                if not isinstance(delta, Mapping) or delta.get("type") != "PendingStoreDelta" \
                        or delta.get("version") != 1:
                    raise ValueError("not a PendingStore checkpoint delta (type/version)")
                for seq in delta["removed"]:
                    if tiers["memory"].pop(seq, None) is None:
                        tiers["disk"].pop(seq, None)
                for item in delta["added"]:
                    tiers["memory"][item[0]] = item
                meta = delta
        except (KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"malformed PendingStore checkpoint delta: {exc!r:.200}") from None
        counters = {k: meta.get(k) for k in ("seq", "spilled", "spills", "evicted")}
        return {"type": "PendingStore", "version": 1, **counters,
                "memory": sorted(tiers["memory"].values(), key=lambda r: r[0]),
                "disk": sorted(tiers["disk"].values(), key=lambda r: r[0])}

    def _load_meta(self, data: Mapping[str, Any]) -> tuple[int, int, int, int]:
        if not isinstance(data, Mapping) or data.get("type") != "PendingStore" or data.get("version") != 1:
            raise ValueError("not a PendingStore checkpoint (type/version)")
        values = tuple(data.get(k) for k in ("seq", "spilled", "spills", "evicted"))
        if any(type(v) is not int or v < 0 for v in values):
            raise ValueError("malformed PendingStore checkpoint: seq/spilled/spills/evicted must be integers >= 0")
        return values  # type: ignore[return-value]

    def load_dict(self, data: Mapping[str, Any]) -> PendingStore:
        """Replace the state with :meth:`to_dict`'s (ValueError, state unchanged, if malformed)."""
        meta = self._load_meta(data)
        try:
            memory = [_record_from_json(x) for x in data["memory"]]
            disk = [_record_from_json(x) for x in data["disk"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed PendingStore checkpoint: {exc}") from None
        seqs = [r[1] for r in memory + disk]
        if len(set(seqs)) != len(seqs) or any(s >= meta[0] for s in seqs):
            raise ValueError("malformed PendingStore checkpoint: record numbers must be unique and below seq")
        self._reset_to(meta)
        self._insert(disk)
        self._load_memory(memory)
        if self._added is not None:
            self.track_changes()
        return self

    def _reset_to(self, meta: tuple[int, int, int, int]) -> None:
        self._clear_memory()
        self._broken = None  # (a broken database was dropped: the store is rebuilt from the checkpoint)
        if self._conn is not None:
            self._conn.execute("DELETE FROM pending")
        self._disk_count = 0
        self._disk_min = math.inf
        self.seq, self.spilled, self.spills, self.evicted = meta

    def _load_memory(self, memory: list[Record]) -> None:
        for rec in sorted(memory, key=lambda r: r[1]):
            self._mem.setdefault(rec[2].id, []).append(rec)  # type: ignore[arg-type]
            self._heap.append(rec)
        heapq.heapify(self._heap)
        self._mem_count = len(memory)

    def save(self, path: str) -> None:
        """Write the whole store to the SQLite file ``path`` (atomically: a temporary file in
        the same directory, fsynced, then renamed over ``path``)."""
        tmp = f"{path}.tmp-{os.getpid()}"
        if os.path.exists(tmp):
            os.unlink(tmp)
        dest = sqlite3.connect(tmp, isolation_level=None)
        try:
            self._write_snapshot(dest)
        except BaseException:
            dest.close()
            os.unlink(tmp)
            raise
        dest.close()
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def _write_snapshot(self, dest: sqlite3.Connection) -> None:
        if self._disk_count:
            self._db().backup(dest)
        else:
            self._create(dest, "pending")
        self._create(dest, "memory")
        dest.execute("CREATE TABLE meta (json TEXT NOT NULL)")
        dest.execute("BEGIN")
        dest.executemany(_INSERT.format(table="memory"), [_row(r) for r in self._memory_records()])
        dest.execute("INSERT INTO meta VALUES (?)", (json.dumps(self._meta()),))
        dest.execute("COMMIT")

    def load(self, path: str) -> PendingStore:
        """Replace the state with the file :meth:`save` wrote (ValueError if it is not one)."""
        try:
            src = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        except sqlite3.Error as exc:
            raise ValueError(f"cannot open pending store snapshot {path}: {exc}") from None
        try:
            try:
                (text,) = src.execute("SELECT json FROM meta").fetchone()
                meta = self._load_meta(json.loads(text))
                memory = [_event(r) for r in src.execute(f"SELECT {_COLUMNS} FROM memory ORDER BY seq")]
                (disk_count,) = src.execute("SELECT COUNT(*) FROM pending").fetchone()
            except (sqlite3.Error, TypeError, ValueError) as exc:
                raise ValueError(f"not a pending store snapshot: {path}: {exc}") from None
            self._reset_to(meta)
            if disk_count:
                conn = self._db()
                src.backup(conn)
                conn.execute("DROP TABLE IF EXISTS memory")
                conn.execute("DROP TABLE IF EXISTS meta")
                self._disk_count = disk_count
                self._refresh_disk_min()
        finally:
            src.close()
        self._load_memory(memory)
        return self
