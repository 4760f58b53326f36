"""Declared state: each accumulator lists its state fields once, and the protocol is generic.

In the spirit of torchmetrics' ``add_state(name, default, dist_reduce_fx)``, an accumulator
class declares ``state_fields``: a tuple of :class:`Field`, each naming

* ``key``: the key (or keys) of the field in the ``"state"`` of ``to_dict()``;
* ``attrs``: the instance attribute(s) holding it (one value, or a tuple of values for a
  field that spans several attributes, such as a grid and the histograms on it);
* ``kind``: a :data:`KINDS` entry giving default ``merge``, ``copy``, ``encode`` and
  ``decode`` rules (``"count"``, ``"weight"``, ``"number"``, ``"counts"``, ``"weights"``,
  ``"flag_all"``, ``"accumulator"``), or ``"custom"`` with all four given;
* ``default(acc)``: a factory for the value of an empty accumulator (it may read the
  configuration);
* ``merge(mine, theirs, acc)``: the merged value (may mutate and return ``mine``). Merges
  that are not per-field independent (a histogram grid that coarsens) are one field
  spanning the attributes concerned;
* ``encode(value, acc)`` / ``decode(raw, acc, loaded)``: the JSON form and its validation
  (``loaded`` holds the fields decoded before this one, in declaration order; decode
  raises ``ValueError`` and must check sizes before it allocates anything);
* ``optional``: keys (of ``key``) left out of the JSON while their encoded value is None and
  read as None when absent (e.g. the residues of exact weight sums, needed only for weights
  that are not whole numbers: states of other streams keep their bytes).

:class:`~streammetrics.core.accumulator.Accumulator` then implements ``merge``, ``copy``,
``reset``, ``__eq__``, ``to_dict``/``from_dict`` and pickling once, for every type, and
calls the class's ``_refresh()`` hook after each of them to rebuild derived caches (the
per-event fast-path tuples). Per-event ``update`` and batch ``update_many`` stay
hand-written for speed and never go through this layer.

Hostile dicts: before a dict is decoded, :func:`check_json_shape` walks it iteratively and
refuses anything that is not plain JSON, nested deeper than ``LIMITS.max_depth`` or holding
a list or mapping longer than ``LIMITS.max_entries``; classes refuse configurations whose
state would be much larger than the dict (``LIMITS.max_labels`` labels or classes,
``LIMITS.max_histograms`` score histograms) before constructing anything. The defaults are
below; change them process-wide with :func:`set_limits`.
"""
from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import math
import threading
from typing import Any, Callable, Iterator, Mapping

import numpy as np

__all__ = ["Field", "KINDS", "StateLimits", "LIMITS", "MAX_EVENTS", "check_event_count", "set_limits",
           "state_limits", "limits_covering",
           "check_json_shape", "describe",
           "pack_uints", "unpack_uints", "zigzag", "unzigzag", "pack_floats", "unpack_floats",
           "to_base64", "from_base64"]


@dataclasses.dataclass
class StateLimits:
    """Size caps applied by ``from_dict`` (and unpickling) before anything is allocated."""

    #: labels or classes in a configuration (ConfusionMatrix, Multi* accumulators, monitors)
    max_labels: int = 10_000
    #: score histograms a configuration implies (MulticlassScores: classes ** 2)
    max_histograms: int = 65_536
    #: entries in any one list or mapping of a dict (cells, histogram keys, samples)
    max_entries: int = 1_000_000
    #: nesting depth of a dict (accumulators nest a few levels, monitors one more)
    max_depth: int = 16


#: the caps in force (module-wide); see :func:`set_limits`
LIMITS = StateLimits()


def set_limits(**changes: int) -> StateLimits:
    """Change the caps in force (e.g. ``set_limits(max_labels=50_000)``); returns the old ones."""
    global LIMITS
    old = LIMITS
    for name, value in changes.items():
        if not hasattr(old, name):
            raise TypeError(f"unknown limit {name!r}; known: {[f.name for f in dataclasses.fields(old)]}")
        if type(value) is not int or value < 1:
            raise ValueError(f"limit {name} must be a positive int, got {value!r}")
    LIMITS = dataclasses.replace(old, **changes)
    return old


def state_limits() -> StateLimits:
    """The caps in force now (:data:`LIMITS`, as :func:`set_limits` or :func:`limits_covering` left them)."""
    return LIMITS


_COVERING = threading.RLock()


@contextlib.contextmanager
def limits_covering(**needs: int) -> Iterator[StateLimits]:
    """Within the block, each named cap is at least ``needs[name]`` (never lowered): what a
    trusted configuration implies (``--classes``, ``--label-set``, ``--max-labels``), so a
    process reads back every state its configuration lets it write. Restored on exit; one block at a time (a lock).

    >>> with limits_covering(max_labels=20_000) as lim:
    ...     lim.max_labels
    20000
    >>> state_limits().max_labels
    10000
    """
    global LIMITS
    with _COVERING:  # one block at a time: threads loading states do not undo each other's caps
        old = LIMITS
        raised = {name: value for name, value in needs.items() if value > getattr(old, name)}
        if raised:
            set_limits(**raised)
        try:
            yield LIMITS
        finally:
            LIMITS = old


def describe(value: Any, width: int = 80) -> str:
    """A bounded ``repr`` (safe on deeply nested or huge values)."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxdict, r.maxstring, r.maxother = 3, 8, 8, width, width
    text = r.repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


_SCALARS = (str, int, float, bool, type(None))


def check_json_shape(value: Any, name: str, limits: StateLimits | None = None) -> None:
    """Raise ``ValueError`` naming the path unless ``value`` is plain JSON (dict with str
    keys, list, str, int, float, bool, None) within the depth and length limits.
    Iterative: a deeply nested value cannot exhaust the stack."""
    lim = limits or LIMITS
    stack: list[tuple[Any, str, int]] = [(value, name, 0)]
    while stack:
        v, path, depth = stack.pop()
        cls = v.__class__
        if cls in _SCALARS:
            continue
        if depth >= lim.max_depth:
            raise ValueError(f"{path} is nested deeper than {lim.max_depth} levels")
        if cls is list:
            if len(v) > lim.max_entries:
                raise ValueError(f"{path} has {len(v)} entries, more than max_entries={lim.max_entries}")
            for i, x in enumerate(v):
                if x.__class__ not in _SCALARS:
                    stack.append((x, f"{path}[{i}]", depth + 1))
        elif cls is dict:
            if len(v) > lim.max_entries:
                raise ValueError(f"{path} has {len(v)} keys, more than max_entries={lim.max_entries}")
            for k, x in v.items():
                if k.__class__ is not str:
                    raise ValueError(f"{path} has a non-string key {describe(k)}")
                if x.__class__ not in _SCALARS:
                    stack.append((x, f"{path}[{k!r}]", depth + 1))
        else:
            raise ValueError(f"{path} must be JSON (dict, list, str, number, bool, null), got {cls.__name__}")


# ----------------------------------------------------------------------------- kinds
#: most events any state may count: 2**63 - 1 (an int64, as Kafka offsets); a count beyond
#: cannot come from a stream, and ``from_dict`` refuses it
MAX_EVENTS = 2**63 - 1


def check_event_count(raw: Any, name: str = "count") -> int:
    """``raw`` if it is an int from 0 to :data:`MAX_EVENTS`, else ``ValueError`` naming ``name``."""
    if type(raw) is not int or raw < 0:
        raise ValueError(f"{name} must be a non-negative int, got {describe(raw)}")
    if raw > MAX_EVENTS:
        raise ValueError(f"{name} = {describe(raw)} is more events than any stream holds (at most 2**63 - 1)")
    return raw


def _count(raw: Any, acc: Any, loaded: Mapping[str, Any]) -> int:
    if type(raw) is not int or raw < 0:
        raise ValueError(f"must be a non-negative int, got {describe(raw)}")
    if raw > MAX_EVENTS:
        raise ValueError(f"{describe(raw)} is more events than any stream holds (at most 2**63 - 1)")
    return raw


def _weight(raw: Any, acc: Any, loaded: Mapping[str, Any]) -> float:
    if type(raw) not in (int, float) or not (0.0 <= raw < math.inf):
        raise ValueError(f"must be a finite non-negative number, got {describe(raw)}")
    return float(raw)


def _number(raw: Any, acc: Any, loaded: Mapping[str, Any]) -> float:
    if type(raw) not in (int, float) or not math.isfinite(raw):
        raise ValueError(f"must be a finite number, got {describe(raw)}")
    return float(raw)


def _flag(raw: Any, acc: Any, loaded: Mapping[str, Any]) -> bool:
    if type(raw) is not bool:
        raise ValueError(f"must be a bool, got {describe(raw)}")
    return raw


def _list_of(item: Callable[[Any, Any, Mapping[str, Any]], Any]) -> Callable[..., list]:
    def decode(raw: Any, acc: Any, loaded: Mapping[str, Any], n: int | None = None) -> list:
        if not isinstance(raw, list) or (n is not None and len(raw) != n):
            size = "" if n is None else f" of {n}"
            raise ValueError(f"must be a list{size}, got {describe(raw)}")
        out = []
        for i, v in enumerate(raw):
            try:
                out.append(item(v, acc, loaded))
            except ValueError as exc:
                raise ValueError(f"[{i}] {exc}") from None
        return out

    return decode


def _add(mine: Any, theirs: Any, acc: Any) -> Any:
    return mine + theirs


def _add_lists(mine: list, theirs: list, acc: Any) -> list:
    for i, v in enumerate(theirs):
        mine[i] += v
    return mine


def _same(value: Any, acc: Any = None) -> Any:
    return value


@dataclasses.dataclass(frozen=True)
class Kind:
    """Default rules of a field kind."""

    merge: Callable[[Any, Any, Any], Any] | None
    copy: Callable[[Any], Any] | None
    encode: Callable[[Any, Any], Any] | None
    decode: Callable[..., Any] | None


KINDS: dict[str, Kind] = {
    # a non-negative int summed by merge (event counts)
    "count": Kind(_add, _same, _same, _count),
    # a finite non-negative float summed by merge (weights, sums of squares)
    "weight": Kind(_add, _same, _same, _weight),
    # a finite float summed by merge
    "number": Kind(_add, _same, _same, _number),
    # a bool that stays True only while both sides are True
    "flag_all": Kind(lambda a, b, acc: a and b, _same, _same, _flag),
    # fixed-length lists added element-wise (length given by the default)
    "counts": Kind(_add_lists, list, lambda v, acc: list(v), _list_of(_count)),
    "weights": Kind(_add_lists, list, lambda v, acc: list(v), _list_of(_weight)),
    # a nested accumulator: merged, copied and (de)serialised by its own protocol
    "accumulator": Kind(lambda a, b, acc: a.merge(b), lambda v: v.copy(), lambda v, acc: v.to_dict(), None),
    "custom": Kind(None, None, None, None),
}


class Field:
    """One declared state field (see the module docstring)."""

    __slots__ = ("key", "attrs", "kind", "default", "merge", "copy", "encode", "decode", "_multi", "_keys",
                 "_attrs", "optional")

    merge: Callable[[Any, Any, Any], Any]
    copy: Callable[[Any], Any]
    encode: Callable[[Any, Any], Any]
    decode: Callable[..., Any]

    def __init__(
        self,
        key: str | tuple[str, ...],
        default: Callable[[Any], Any],
        kind: str = "custom",
        *,
        attrs: str | tuple[str, ...] | None = None,
        merge: Callable[[Any, Any, Any], Any] | None = None,
        copy: Callable[[Any], Any] | None = None,
        encode: Callable[[Any, Any], Any] | None = None,
        decode: Callable[..., Any] | None = None,
        optional: tuple[str, ...] = (),
    ) -> None:
        if kind not in KINDS:
            raise TypeError(f"unknown state field kind {kind!r}; known: {sorted(KINDS)}")
        k = KINDS[kind]
        self.key = key
        self._keys = key if isinstance(key, tuple) else (key,)
        if not set(optional) <= set(self._keys):
            raise TypeError(f"optional keys {optional!r} are not keys of the field {key!r}")
        #: keys omitted from the JSON while None (and read as None when absent)
        self.optional = frozenset(optional)
        if attrs is None:
            if isinstance(key, tuple):
                raise TypeError("a field with several keys needs attrs")
            attrs = "_" + key
        self.attrs = attrs
        self._multi = isinstance(attrs, tuple)
        self._attrs: tuple[str, ...] = attrs if isinstance(attrs, tuple) else (attrs,)
        self.kind = kind
        self.default = default
        rules = {"merge": merge or k.merge, "copy": copy or k.copy, "encode": encode or k.encode,
                 "decode": decode or k.decode}
        missing = [n for n, rule in rules.items() if rule is None]
        if missing:
            raise TypeError(f"state field {key!r} of kind {kind!r} needs {missing}")
        for name, rule in rules.items():
            setattr(self, name, rule)

    @property
    def keys(self) -> tuple[str, ...]:
        """The JSON keys this field writes."""
        return self._keys

    def get(self, acc: Any) -> Any:
        if self._multi:
            return tuple(getattr(acc, a) for a in self._attrs)
        return getattr(acc, self._attrs[0])

    def set(self, acc: Any, value: Any) -> None:
        if self._multi:
            for a, v in zip(self._attrs, value):
                setattr(acc, a, v)
        else:
            setattr(acc, self._attrs[0], value)

    def to_json(self, acc: Any) -> Iterator[tuple[str, Any]]:
        """``(key, JSON value)`` pairs of this field."""
        out = self.encode(self.get(acc), acc)
        pairs = zip(self._keys, out) if isinstance(self.key, tuple) else [(self.key, out)]
        for k, v in pairs:
            if v is not None or k not in self.optional:
                yield k, v

    def from_json(self, state: Mapping[str, Any], acc: Any, loaded: Mapping[str, Any]) -> Any:
        """The decoded value; ``ValueError`` naming the key on anything malformed."""
        get = state.get if self.optional else state.__getitem__
        raw = tuple(get(k) for k in self._keys) if isinstance(self.key, tuple) else get(self.key)
        try:
            return self.decode(raw, acc, loaded)
        except ValueError as exc:
            text = str(exc)
        except (TypeError, KeyError, IndexError, AttributeError, OverflowError) as exc:
            text = f"{type(exc).__name__}: {exc}"
        name = "/".join(self._keys)
        text = text if len(text) <= 300 else text[:297] + "..."
        raise ValueError(f"state[{name!r}]{'' if text.startswith('[') else ': '}{text}")

    def __repr__(self) -> str:
        return f"Field({self.key!r}, kind={self.kind!r}, attrs={self.attrs!r})"


def decode_list(raw: Any, item: str, n: int | None = None) -> list:
    """A list of ``n`` (any number if None) values of kind ``item`` (``"count"``,
    ``"weight"``, ``"number"`` or ``"flag_all"``), validated; ValueError naming the index."""
    decode = KINDS[item].decode
    if decode is None:
        raise TypeError(f"kind {item!r} has no JSON decoder")
    return _list_of(decode)(raw, None, {}, n)


# ----------------------------------------------------------------------------- packed arrays
# Large integer and float arrays travel inside the JSON-safe dicts as base64 text of a packed
# form (issue 12, "small on the wire"): unsigned ints as LEB128 varints (7 bits a byte, high
# bit set on every byte but the last: 1 byte below 128, at most 10 for 64 bits), signed ints
# zig-zag mapped first (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...), floats as little-endian float64.
# Decoders take the number of values expected and check the text's length against it
# before decoding anything, so a hostile dict cannot make them allocate more than a small
# multiple of the expected size.

_VARINT_MAX = 10  # bytes of a 64-bit varint


def pack_uints(values: Any) -> bytes:
    """LEB128 varints of non-negative ints (vectorised). ``pack_uints([1, 300]) == b'\\x01\\xac\\x02'``."""
    v = np.asarray(values, dtype=np.uint64).reshape(-1)
    if not len(v):
        return b""
    n = np.ones(len(v), dtype=np.int64)
    for j in range(1, _VARINT_MAX):
        n += v >= np.uint64(1 << (7 * j))
    ends = np.cumsum(n)
    starts = ends - n
    out = np.empty(int(ends[-1]), dtype=np.uint8)
    for j in range(int(n.max())):
        rows = np.flatnonzero(n > j)
        byte = (v[rows] >> np.uint64(7 * j)) & np.uint64(0x7F)
        more = (n[rows] > j + 1).astype(np.uint64) << np.uint64(7)
        out[starts[rows] + j] = (byte | more).astype(np.uint8)
    return out.tobytes()


def unpack_uints(data: bytes, count: int, name: str = "values") -> np.ndarray:
    """Inverse of :func:`pack_uints`: exactly ``count`` canonical varints (no padding
    bytes, none longer than needed, each below 2**64) as uint64, else ``ValueError``."""
    if len(data) > count * _VARINT_MAX or len(data) < count:
        raise ValueError(f"{name}: {len(data)} bytes cannot hold {count} varints")
    b = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(b < 0x80)
    if len(ends) != count or (count and ends[-1] != len(b) - 1):
        raise ValueError(f"{name}: expected {count} varints, found {len(ends)} (or a truncated one)")
    out = np.zeros(count, dtype=np.uint64)
    if not count:
        return out
    starts = np.empty(count, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    n = ends - starts + 1
    if n.max() > _VARINT_MAX or ((n > 1) & (b[ends] == 0)).any():
        raise ValueError(f"{name}: a varint is longer than needed or than 10 bytes")
    if ((n == _VARINT_MAX) & (b[ends] > 1)).any():
        raise ValueError(f"{name}: a varint exceeds 64 bits")
    for j in range(int(n.max())):
        rows = np.flatnonzero(n > j)
        out[rows] |= (b[starts[rows] + j].astype(np.uint64) & np.uint64(0x7F)) << np.uint64(7 * j)
    return out


def zigzag(values: Any) -> np.ndarray:
    """Signed int64 -> uint64, small magnitudes to small codes: ``(v << 1) ^ (v >> 63)``."""
    v = np.asarray(values, dtype=np.int64)
    return ((v << np.int64(1)) ^ (v >> np.int64(63))).view(np.uint64)


def unzigzag(codes: np.ndarray) -> np.ndarray:
    """Inverse of :func:`zigzag` (uint64 -> int64)."""
    u = np.asarray(codes, dtype=np.uint64)
    return (u >> np.uint64(1)).view(np.int64) ^ -(u & np.uint64(1)).view(np.int64)


def pack_floats(values: Any) -> bytes:
    """Little-endian float64 bytes."""
    return np.asarray(values, dtype="<f8").tobytes()


def unpack_floats(data: bytes, count: int, name: str = "values") -> np.ndarray:
    """Inverse of :func:`pack_floats`: ``count`` finite floats, else ``ValueError``."""
    if len(data) != 8 * count:
        raise ValueError(f"{name}: {len(data)} bytes are not {count} float64 values")
    out = np.frombuffer(data, dtype="<f8").astype(np.float64)
    if not np.isfinite(out).all():
        raise ValueError(f"{name}: holds a value that is not finite")
    return out


def to_base64(data: bytes) -> str:
    """Standard base64 text (with padding) of ``data``."""
    return base64.b64encode(data).decode("ascii")


def from_base64(text: Any, max_bytes: int, name: str = "values") -> bytes:
    """The bytes of base64 ``text``; ``ValueError`` unless it is a str of valid base64
    decoding to at most ``max_bytes`` bytes (the length is checked before decoding)."""
    if not isinstance(text, str):
        raise ValueError(f"{name} must be a base64 string, got {describe(text)}")
    if len(text) > 4 * ((max_bytes + 2) // 3):
        raise ValueError(f"{name}: {len(text)} base64 characters exceed the {max_bytes} bytes expected at most")
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ValueError(f"{name} is not valid base64") from None
