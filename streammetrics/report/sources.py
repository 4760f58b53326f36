"""Reading snapshots for the report: a JSONL file, standard input or a Kafka topic.

Every source yields :class:`WindowSnapshot` objects (a validated view of one snapshot of the
contract's schema ``streammetrics.snapshot/1``) plus the problems met on the way: malformed
lines or messages are skipped and counted, never fatal. Only an unreadable source (missing
file, unreachable broker, unknown topic) raises :class:`SourceError`.

Validation is strict about everything the report reads (:func:`parse_snapshot`): numbers must be
finite JSON numbers within float range (``Infinity``, ``NaN`` and a 400-digit integer are bad
lines; snapshot writers use ``allow_nan=False``), window times must lie in 1970..9999, counts
must be integers in ``[0, 2**63)``, scalar metrics numbers or null, ``per_class`` an object of
objects of numbers or null. A metric holding another object or an array is not the report's
(ignored, not fatal). Lines longer than ``max_line_bytes`` (default :data:`MAX_LINE_BYTES`) are
skipped without being held in memory.

Cost: a snapshot's monitor state (most of its bytes) is not decoded while loading, only when a
chart needs it (:attr:`WindowSnapshot.state`); with msgspec installed (the ``fast`` extra) the
rest of each line is decoded by msgspec, else by :mod:`json`, and a line msgspec refuses is
handed to :mod:`json`, so both paths accept and reject the same lines. Python's cyclic garbage
collector is paused while loading (the loaded objects hold no cycles; pausing it saves minutes
on 100 MB inputs).

Revisions (delayed labels, contract section 5): a window may be written several times, each
time with a higher ``revision`` as its labels arrive. The report keeps the **latest revision** of
each window (highest ``revision`` whatever the input order; of equal ones the last), and on it
the labelled share of every revision seen (:attr:`WindowSnapshot.revisions`). The fields
``revision``, ``labeled``, ``expired``, ``pending`` come together (integers >= 0 with
``labeled + expired + pending == count``, as the stream writes them) or not at all (snapshots
written before delayed labels: treated as revision 0 and drawn exactly as before); anything else
is a bad line. Input order also gives a *stream clock*: the latest window end written so far
(a window is written once the stream's event time has passed its end, so this is a lower bound
of the stream time when a snapshot was written); :attr:`WindowSnapshot.clock` holds it.
"""
from __future__ import annotations

import json
import math
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import IO, Any, Iterable, Iterator, Mapping, NamedTuple
from urllib.parse import urlsplit

from streammetrics.stream.replay import paused_gc
from streammetrics.stream.slicing import slice_label
from streammetrics.stream.snapshots import SNAPSHOT_SCHEMA

__all__ = [
    "WindowSnapshot", "Revision", "LoadResult", "SourceError", "BadSnapshot", "parse_snapshot", "from_dicts",
    "read_jsonl", "read_source", "read_kafka", "parse_kafka_url", "MAX_LINE_BYTES", "MAX_PROBLEMS", "LABEL_FIELDS",
]

#: problems kept verbatim (the rest are only counted, per reason)
MAX_PROBLEMS = 20
#: longest snapshot line read (bytes); longer lines are skipped and counted. The service's snapshots
#: stay under the producer's ``max_request_size`` (1 MiB by default); this leaves room for files.
MAX_LINE_BYTES = 32 * 1024 * 1024
#: window times accepted: 1970-01-01 to 9999-12-31 (what a date axis and ``datetime`` can show)
MIN_TIME, MAX_TIME = 0.0, 253_402_300_799.0
#: counts accepted: below 2**63 (what int64 state and the summary's formatting hold)
MAX_COUNT = 2 ** 63
#: longest reason text kept for a value quoted in a problem
_QUOTE = 40


class SourceError(Exception):
    """The source cannot be read at all (as opposed to single malformed snapshots)."""


class BadSnapshot(ValueError):
    """One unusable snapshot; ``field`` names what is wrong (``"window.start"``, ``"not JSON"``, ...)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _quote(value: Any) -> str:
    """``repr`` of a bad value, cut to a few dozen characters (a 400-digit number, a long string)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** _QUOTE:
        return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value) if not isinstance(value, (dict, list)) else f"{type(value).__name__} of {len(value)}"
    return text if len(text) <= _QUOTE else text[:_QUOTE - 1] + "…"


class LazyState:
    """A monitor state not decoded yet: the raw JSON of the state value, or of the whole line."""

    __slots__ = ("raw", "whole_line", "kind")

    def __init__(self, raw: bytes | str, whole_line: bool = False, kind: str | None = None) -> None:
        self.raw, self.whole_line, self.kind = raw, whole_line, kind

    def decode(self) -> Any:
        value = json.loads(self.raw)
        return value.get("state") if self.whole_line else value


@dataclass(frozen=True)
class WindowSnapshot:
    """One snapshot: a window of one stream key, its metrics and (optionally) monitor state.

    ``state_source`` is the decoded state (a dict), a :class:`LazyState` or None; :attr:`state`
    decodes it on first use (None if it is not a JSON object). ``state_type`` is the monitor
    type named by the state, when known without decoding it."""

    model: str
    segment: str
    start: float
    end: float
    count: int
    late: int
    metrics: Mapping[str, Any]
    state_source: Any = field(default=None, repr=False, compare=False)
    cumulative: bool = False
    state_type: str | None = None
    #: delayed labels: revision number and prediction counts (None: snapshot without these fields)
    revision: int = 0
    labeled: int | None = None
    expired: int | None = None
    pending: int | None = None
    #: set by the loader: the stream clock (latest window end written so far, input order) and, for
    #: snapshots with label counts, every revision of the window seen as :class:`Revision`, in order
    clock: float = field(default=0.0, compare=False)
    revisions: tuple["Revision", ...] = field(default=(), repr=False, compare=False)
    #: contract section 9: ``{metric: (low, high)}`` of the snapshot's intervals (well-formed
    #: pairs only) and ``{metric: change}`` of its changes (``significant`` a bool)
    intervals: Mapping[str, tuple[float, float]] = field(default_factory=dict, repr=False, compare=False)
    changes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, repr=False, compare=False)
    intervals_confidence: float | None = field(default=None, repr=False, compare=False)
    #: a roll-up's worst slices (contract section 11), each ``(label, metric, value, gap,
    #: significant)``, worst first; () for other snapshots
    slices: tuple[tuple[str, str, Any, Any, Any], ...] = field(default=(), repr=False, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        """The stream key ``(model, segment)``."""
        return (self.model, self.segment)

    @property
    def identity(self) -> tuple[str, str, float, float, bool]:
        """What makes two snapshots the same window (re-emitted windows share it)."""
        return (self.model, self.segment, self.start, self.end, self.cumulative)

    @property
    def has_state(self) -> bool:
        return self.state_source is not None

    @property
    def labeled_share(self) -> float | None:
        """Share of the window's predictions that have their label (None without label counts or events)."""
        if self.labeled is None or self.count <= 0:
            return None
        return self.labeled / self.count

    @property
    def awaits_labels(self) -> bool:
        """Written with delayed labels in play: not every prediction labelled, or a later revision."""
        return self.labeled is not None and (self.labeled < self.count or self.revision > 0)

    @cached_property
    def state(self) -> Mapping[str, Any] | None:
        """The monitor state, decoded on first use; None when absent or not a JSON object."""
        src = self.state_source
        if isinstance(src, LazyState):
            try:
                src = src.decode()
            except (ValueError, RecursionError):
                return None
        return src if isinstance(src, dict) else None


class Revision(NamedTuple):
    """One revision of a window as seen in the input: its number, label counts and the stream clock
    when it was written (see the module docstring)."""

    revision: int
    labeled: int
    expired: int
    pending: int
    predictions: int  # the snapshot's count (``count`` is a tuple method)
    clock: float

    @property
    def labeled_share(self) -> float | None:
        return self.labeled / self.predictions if self.predictions > 0 else None


@dataclass
class LoadResult:
    """Snapshots read from a source, with the number of skipped items and why.

    ``problems`` keeps the first :data:`MAX_PROBLEMS` as ``"line 12: reason"``; ``reasons``
    counts every skipped item by the field at fault."""

    snapshots: list[WindowSnapshot] = field(default_factory=list)
    skipped: int = 0
    problems: list[str] = field(default_factory=list)
    duplicates: int = 0
    #: snapshots dropped because a higher revision of their window was read (delayed labels)
    superseded: int = 0
    reasons: Counter = field(default_factory=Counter)

    def skip(self, where: str, reason: str, field: str = "other") -> None:
        """Count one unusable line/message; keep the first reasons for the warning."""
        self.skipped += 1
        self.reasons[field] += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(f"{where}: {reason}")

    def reasons_text(self) -> str:
        """``"3 window.start, 1 not JSON"``: skipped items per field at fault, most frequent first."""
        return ", ".join(f"{n} {name}" for name, n in self.reasons.most_common())


def _number(value: Any, name: str, field: str | None = None) -> float:
    """A finite float; ``BadSnapshot`` naming ``name`` (counted under ``field``, default ``name``)."""
    number = math.nan
    if not isinstance(value, bool) and isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond float range
            pass
    if not math.isfinite(number):
        raise BadSnapshot(field or name, f"{name} must be a finite number, got {_quote(value)}")
    return number


def _time(value: Any, name: str) -> float:
    t = _number(value, name)
    if not MIN_TIME <= t <= MAX_TIME:
        raise BadSnapshot(name, f"{name} must be an epoch time in seconds between 1970 and 9999, got {_quote(value)}")
    return t


def _count(value: Any, name: str) -> int:
    ok = not isinstance(value, bool) and isinstance(value, (int, float))
    if ok and isinstance(value, float):
        ok = math.isfinite(value) and value.is_integer()
    if not ok or not 0 <= value < MAX_COUNT:
        raise BadSnapshot(name, f"{name} must be a non-negative integer below 2**63, got {_quote(value)}")
    return int(value)


def _metric(value: Any, name: str, field: str = "metrics") -> float | None:
    """A scalar metric: null or a finite number (returned as float)."""
    if value is None:
        return None
    return _number(value, name if len(name) <= 2 * _QUOTE else name[:2 * _QUOTE] + "…", field)


def _metrics(raw: dict) -> dict[str, Any]:
    """Validated metrics: scalars as float/None, ``per_class`` as {label: {metric: float/None}};
    other objects and arrays are not the report's and are left out."""
    out: dict[str, Any] = {}
    for name, value in raw.items():
        if (type(value) is float and value - value == 0.0 or value is None) and name != "per_class":
            out[name] = value  # the common case, fast: a finite float or null
        elif name == "per_class":
            if not isinstance(value, dict):
                raise BadSnapshot("metrics.per_class", f"metrics.per_class must be an object, got {_quote(value)}")
            table: dict[str, dict[str, float | None]] = {}
            for label, row in value.items():
                if not isinstance(row, dict):
                    raise BadSnapshot("metrics.per_class",
                                      f"metrics.per_class[{_quote(label)}] must be an object, got {_quote(row)}")
                table[label] = {m: _metric(v, f"metrics.per_class.{m}", "metrics.per_class") for m, v in row.items()
                                if not isinstance(v, (dict, list))}
            out[name] = table
        elif isinstance(value, (dict, list)):
            continue
        else:
            out[name] = _metric(value, f"metrics.{name}")
    return out


_STATE_TYPE = re.compile(rb'\A\s*\{\s*"type"\s*:\s*"([A-Za-z0-9_]{1,64})"')


def _state(value: Any) -> tuple[Any, str | None]:
    """(state source, monitor type if known) of a snapshot's ``state`` field (decoded or raw)."""
    if isinstance(value, LazyState) and value.whole_line:  # decoded once already: an object
        return value, value.kind
    if isinstance(value, LazyState):
        raw = value.raw if isinstance(value.raw, bytes) else value.raw.encode()
        head = raw[:200].lstrip()
        if head.startswith(b"null"):
            return None, None
        if not head.startswith(b"{"):
            raise BadSnapshot("state", "state must be an object")
        m = _STATE_TYPE.match(raw[:200])
        return value, m.group(1).decode() if m else None
    if value is None:
        return None, None
    if not isinstance(value, dict):
        raise BadSnapshot("state", "state must be an object")
    kind = value.get("type")
    return value, kind if isinstance(kind, str) else None


def parse_snapshot(obj: Any) -> WindowSnapshot:
    """Validate one decoded snapshot; :class:`BadSnapshot` (a ``ValueError``) names what is wrong."""
    if not isinstance(obj, dict):
        raise BadSnapshot("not an object", f"expected a snapshot object, got {type(obj).__name__}")
    schema = obj.get("schema")
    if schema != SNAPSHOT_SCHEMA:
        raise BadSnapshot("schema", f"not a snapshot (schema {_quote(schema)}, expected {SNAPSHOT_SCHEMA!r})")
    key, window, metrics = obj.get("key"), obj.get("window"), obj.get("metrics")
    if not isinstance(key, dict) or not isinstance(key.get("model"), str):
        raise BadSnapshot("key", "key must be an object with a string 'model'")
    segment = key.get("segment", "")
    if not isinstance(segment, str):
        raise BadSnapshot("key", f"key.segment must be a string, got {_quote(segment)}")
    segment = slice_label(obj, key, segment)  # (contract section 11: slices and roll-ups kept apart)
    if not isinstance(window, dict):
        raise BadSnapshot("window", "window must be an object with 'start' and 'end'")
    start, end = _time(window.get("start"), "window.start"), _time(window.get("end"), "window.end")
    if end <= start:
        raise BadSnapshot("window", f"window end {end:g} is not after its start {start:g}")
    if not isinstance(metrics, dict):
        raise BadSnapshot("metrics", "metrics must be an object")
    cumulative = obj.get("cumulative", False)
    if not isinstance(cumulative, bool):
        raise BadSnapshot("cumulative", f"cumulative must be true or false, got {_quote(cumulative)}")
    count = _count(obj["count"] if "count" in obj else metrics.get("count", 0), "count")
    state, state_type = _state(obj.get("state"))
    revision, labeled, expired, pending = _label_counts(obj, count)
    return WindowSnapshot(
        model=key["model"], segment=segment, start=start, end=end,
        count=count, late=_count(obj.get("late", 0), "late"),
        metrics=_metrics(metrics), state_source=state, cumulative=cumulative, state_type=state_type,
        revision=revision, labeled=labeled, expired=expired, pending=pending, slices=_slices(obj.get("slices")),
        intervals=_intervals(obj.get("intervals")), changes=_changes(obj.get("changes")),
        intervals_confidence=_confidence(obj.get("intervals")),
    )


def _slices(rows: Any) -> tuple[tuple[str, str, Any, Any, Any], ...]:
    """A roll-up's ``"slices"`` as ``(label, metric, value, gap, significant)`` rows (rows that are
    not of that shape are left out: the ranking is informative, never a reason to refuse)."""
    if not isinstance(rows, list):
        return ()
    out = []
    for row in rows[:100]:
        if not isinstance(row, dict) or not isinstance(row.get("key"), dict):
            continue
        metric = next((k for k in row if k not in ("key", "gap", "gap_low", "gap_high", "significant", "count")), "")
        label = " / ".join(f"{k}={v}" for k, v in row["key"].items() if k != "model" and v != "")
        value, gap = row.get(metric), row.get("gap")
        out.append((label or "(all)", str(metric), value if isinstance(value, (int, float)) else None,
                    gap if isinstance(gap, (int, float)) else None, row.get("significant")))
    return tuple(out)


def _finite(value: Any) -> bool:
    """A JSON number that is a finite float (an integer too large for a float is not)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond the float range (JSON allows any number of digits)
        return False


def _intervals(raw: Any) -> dict[str, tuple[float, float]]:
    """The well-formed ``[low, high]`` pairs of a snapshot's ``intervals`` (others: left out; the
    report draws what it can read)."""
    if not isinstance(raw, dict):
        return {}
    return {k: (float(v[0]), float(v[1])) for k, v in raw.items()
            if isinstance(v, list) and len(v) == 2 and _finite(v[0]) and _finite(v[1]) and v[0] <= v[1]}


def _confidence(raw: Any) -> float | None:
    """The ``confidence`` of a snapshot's ``intervals`` (None: absent or not in (0, 1))."""
    c = raw.get("confidence") if isinstance(raw, dict) else None
    return float(c) if isinstance(c, (int, float)) and not isinstance(c, bool) and 0.0 < c < 1.0 else None


def _changes(raw: Any) -> dict[str, Mapping[str, Any]]:
    """The entries of a snapshot's ``changes`` with a boolean ``significant``."""
    if not isinstance(raw, dict):
        return {}
    return {k: v for k, v in raw.items() if isinstance(v, dict) and isinstance(v.get("significant"), bool)}


#: the delayed-label fields of a snapshot: all of them or none
LABEL_FIELDS = ("revision", "labeled", "expired", "pending")


def _label_counts(obj: dict, count: int) -> tuple[int, int | None, int | None, int | None]:
    """``(revision, labeled, expired, pending)`` validated: all absent (an older snapshot:
    ``(0, None, None, None)``) or all integers >= 0 with ``labeled + expired + pending == count``."""
    present = [name for name in LABEL_FIELDS if name in obj]
    if not present:
        return 0, None, None, None
    revision, labeled, expired, pending = (obj.get(name) for name in LABEL_FIELDS)
    if (type(revision) is int and type(labeled) is int and type(expired) is int and type(pending) is int
            and revision >= 0 and labeled >= 0 and expired >= 0 and pending >= 0
            and labeled + expired + pending == count):  # the common case, fast (count < 2**63 already)
        return revision, labeled, expired, pending
    missing = [name for name in LABEL_FIELDS if name not in obj]
    if missing:
        raise BadSnapshot(missing[0], f"{missing[0]} is missing (a snapshot with {present[0]} has "
                                      f"{', '.join(LABEL_FIELDS)})")
    out = {name: _count(obj[name], name) for name in LABEL_FIELDS}
    total = out["labeled"] + out["expired"] + out["pending"]
    if total != count:
        raise BadSnapshot("labeled", f"labeled + expired + pending ({out['labeled']} + {out['expired']} + "
                                     f"{out['pending']}) must equal count ({count})")
    return out["revision"], out["labeled"], out["expired"], out["pending"]


def _deduplicate(result: LoadResult) -> LoadResult:
    """Keep the latest revision of each window: the highest ``revision``, of equal ones the last read
    (re-published windows are identical). Sets each snapshot's ``clock`` and the kept snapshots'
    ``revisions``. Dropped snapshots count as ``superseded`` (their window has a higher revision)
    or ``duplicates`` (another copy of the kept revision)."""
    latest: dict[tuple, WindowSnapshot] = {}
    copies: dict[tuple, int] = {}  # snapshots read of the kept revision
    seen: dict[tuple, dict[int, Revision]] = {}  # windows with label counts: revision -> latest read
    clock = -math.inf
    superseded = 0
    set_field = object.__setattr__  # the loader completes its own frozen snapshots
    for snap in result.snapshots:
        if not snap.cumulative and snap.end > clock:
            clock = snap.end
        set_field(snap, "clock", max(clock, snap.end))
        ident = snap.identity
        kept = latest.get(ident)
        if kept is None or snap.revision >= kept.revision:
            if kept is None or snap.revision > kept.revision:
                superseded += copies.get(ident, 0)
                copies[ident] = 1
            else:
                copies[ident] += 1
            if kept is not None:
                latest.pop(ident)  # re-insert: order of last occurrence
            latest[ident] = snap
        else:
            superseded += 1
        if snap.labeled is not None:
            assert snap.expired is not None and snap.pending is not None  # set together (_label_counts)
            seen.setdefault(ident, {})[snap.revision] = Revision(snap.revision, snap.labeled, snap.expired,
                                                                 snap.pending, snap.count, snap.clock)
    for ident, revisions in seen.items():
        set_field(latest[ident], "revisions", tuple(revisions[r] for r in sorted(revisions)))
    result.superseded += superseded
    result.duplicates += len(result.snapshots) - len(latest) - superseded
    result.snapshots = list(latest.values())
    return result


def from_dicts(snapshots: Iterable[Any]) -> LoadResult:
    """Validate already-decoded snapshots (e.g. the demo's); malformed ones are skipped."""
    result = LoadResult()
    for i, obj in enumerate(snapshots):
        try:
            result.snapshots.append(parse_snapshot(obj))
        except BadSnapshot as exc:
            result.skip(f"snapshot {i}", str(exc), exc.field)
    return _deduplicate(result)


def _fast_decoder() -> Any | None:
    """A msgspec decoder of a snapshot's top-level fields that leaves ``state`` undecoded, if installed."""
    try:
        import msgspec
    except ImportError:
        return None
    return msgspec.json.Decoder(dict[str, msgspec.Raw])


class _Decoder:
    """Decode one line (bytes or text) into a snapshot dict whose ``state`` is a :class:`LazyState`."""

    def __init__(self, fast: bool = True) -> None:
        self.fast = _fast_decoder() if fast else None

    def __call__(self, line: bytes | str) -> Any:
        if self.fast is not None:
            try:
                top = self.fast.decode(line)
            except Exception:  # noqa: BLE001 - msgspec refused the line: json decides (same verdicts)
                pass
            else:
                import msgspec
                obj = {k: msgspec.json.decode(v) for k, v in top.items() if k != "state"}
                if "state" in top:
                    obj["state"] = LazyState(bytes(top["state"]))
                return obj
        text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        obj = json.loads(text)
        state = obj.get("state") if isinstance(obj, dict) else None
        if isinstance(state, dict):
            kind = state.get("type")
            kind = kind if isinstance(kind, str) else None
            obj["state"] = LazyState(text, whole_line=True, kind=kind)  # decoded again from the line if charted
        return obj


def _lines(stream: Iterable[Any], max_bytes: int) -> Iterator[tuple[int, Any, bool]]:
    """(line number, line, too long) of a text or binary stream; a line over ``max_bytes`` is
    read in pieces and dropped (only its number is yielded)."""
    readline = getattr(stream, "readline", None)
    if readline is None:  # a list of lines
        for lineno, line in enumerate(stream, 1):
            yield lineno, line, len(line) > max_bytes
        return
    lineno = 0
    while True:
        line = readline(max_bytes + 1)
        if not line:
            return
        lineno += 1
        newline = "\n" if isinstance(line, str) else b"\n"
        if len(line) > max_bytes and not line.endswith(newline):
            while line and not line.endswith(newline):  # skip the rest of the line, a piece at a time
                line = readline(1 << 20)
            yield lineno, "", True
        else:
            yield lineno, line, False


def read_jsonl(stream: Iterable[Any], result: LoadResult | None = None, *, max_line_bytes: int = MAX_LINE_BYTES,
               fast: bool = True) -> LoadResult:
    """Snapshots from JSONL lines (text or bytes, a list or a file); blank lines are ignored,
    malformed ones and lines over ``max_line_bytes`` skipped. ``fast=False`` uses :mod:`json` only."""
    result = result if result is not None else LoadResult()
    decode = _Decoder(fast)
    with paused_gc():
        for lineno, line, too_long in _lines(stream, max_line_bytes):
            if too_long:
                result.skip(f"line {lineno}", f"longer than {max_line_bytes:,} bytes", "line too long")
                continue
            if not line.strip():
                continue
            try:
                obj = decode(line)
            except (ValueError, RecursionError) as exc:  # RecursionError: thousands of nested arrays
                result.skip(f"line {lineno}", f"not JSON ({str(exc)[:200]})", "not JSON")
                continue
            try:
                result.snapshots.append(parse_snapshot(obj))
            except BadSnapshot as exc:
                result.skip(f"line {lineno}", str(exc), exc.field)
        return _deduplicate(result)


def read_source(source: str, *, stdin: IO[str] | None = None, kafka_timeout: float = 60.0) -> LoadResult:
    """Snapshots from ``source``: a JSONL path, ``-`` (standard input) or ``kafka://HOST:PORT/TOPIC``."""
    if source.startswith("kafka://"):
        servers, topic = parse_kafka_url(source)
        return read_kafka(servers, topic, timeout=kafka_timeout)
    if source == "-":
        stream: Any = stdin if stdin is not None else sys.stdin
        return read_jsonl(getattr(stream, "buffer", stream))  # bytes when it has them (invalid UTF-8 replaced)
    try:
        with open(source, "rb") as fh:
            return read_jsonl(fh)
    except OSError as exc:
        raise SourceError(f"cannot read {source}: {exc.strerror or exc}") from None


def parse_kafka_url(url: str) -> tuple[str, str]:
    """``kafka://HOST:PORT[,HOST:PORT]/TOPIC`` -> (bootstrap servers, topic); ``ValueError`` if malformed."""
    parts = urlsplit(url)
    topic = parts.path[1:] if parts.path.startswith("/") else ""
    if parts.scheme != "kafka" or not parts.netloc or not topic or "/" in topic or parts.query:
        raise ValueError(f"bad Kafka source {url!r}: expected kafka://HOST:PORT/TOPIC")
    return parts.netloc, topic


def read_kafka(bootstrap_servers: str, topic: str, *, timeout: float = 60.0) -> LoadResult:
    """Read every partition of ``topic`` from the beginning to its high watermark.

    The high watermark is taken from the first fetch response of each partition
    (``consumer.highwater``): ``end_offsets`` is unreliable on tansu (consumers/NOTES.md).
    Records are de-duplicated by Kafka key, keeping the last value, as compaction would.
    """
    try:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.errors import KafkaError
    except ImportError:
        raise SourceError("reading from Kafka needs kafka-python: pip install 'streammetrics[kafka]'") from None
    settings: dict[str, Any] = {"group_id": None, "enable_auto_commit": False, "auto_offset_reset": "earliest"}
    if "bootstrap_timeout_ms" in KafkaConsumer.DEFAULT_CONFIG:  # kafka-python 3.0.12 has it (default 30 s)
        settings["bootstrap_timeout_ms"] = int(min(timeout, 10.0) * 1000)
    try:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers.split(","), **settings)
    except KafkaError as exc:
        raise SourceError(f"cannot connect to Kafka at {bootstrap_servers}: {exc}") from None
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise SourceError(f"topic {topic!r} does not exist on {bootstrap_servers}")
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        values, replaced = _read_to_end(consumer, tps, timeout, f"kafka://{bootstrap_servers}/{topic}")
    except KafkaError as exc:
        raise SourceError(f"error reading {topic!r} from {bootstrap_servers}: {exc}") from None
    finally:
        consumer.close()
    result = LoadResult(duplicates=replaced)
    decode = _Decoder()
    with paused_gc():
        for where, value in values:
            if len(value) > MAX_LINE_BYTES:
                result.skip(where, f"longer than {MAX_LINE_BYTES:,} bytes", "line too long")
                continue
            try:
                obj = decode(value)
            except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                result.skip(where, f"not JSON ({str(exc)[:200]})", "not JSON")
                continue
            try:
                result.snapshots.append(parse_snapshot(obj))
            except BadSnapshot as exc:
                result.skip(where, str(exc), exc.field)
        return _deduplicate(result)


def _read_to_end(consumer: Any, tps: list, timeout: float, name: str) -> tuple[list[tuple[str, bytes]], int]:
    """Poll ``tps`` from the beginning until each reaches the high watermark seen at first fetch.

    Returns ``(where, value)`` of the last record per key (plus every unkeyed record) and the
    number of records replaced by a later one with the same key."""
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    by_key: dict[Any, tuple[str, bytes]] = {}
    replaced = 0
    ends: dict[Any, int] = {}
    pending = set(tps)
    deadline = time.monotonic() + timeout
    while pending:
        if time.monotonic() > deadline:
            raise SourceError(f"timed out after {timeout:g}s reading {name} "
                              f"(partitions {sorted(tp.partition for tp in pending)} not read to their end)")
        for tp, records in consumer.poll(timeout_ms=500).items():
            for rec in records:
                where = f"partition {tp.partition} offset {rec.offset}"
                slot = rec.key if rec.key is not None else ("unkeyed", tp.partition, rec.offset)
                replaced += by_key.pop(slot, None) is not None
                if rec.value is not None:  # a null value (tombstone) deletes the key
                    by_key[slot] = (where, rec.value)
        for tp in list(pending):
            if tp not in ends and consumer.highwater(tp) is not None:
                ends[tp] = consumer.highwater(tp)
            if tp in ends and consumer.position(tp) >= ends[tp]:
                pending.discard(tp)
    return list(by_key.values()), replaced
