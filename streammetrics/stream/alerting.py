"""Alert rules over snapshots, and alert events with a lifecycle (contract section 10).

A rule is ``EXPR OP BOUND`` with ``OP`` one of ``<``, ``<=``, ``>``, ``>=``; ``EXPR`` a metric
(``roc_auc``), a per-class metric (``recall[cat]``), an interval end (``roc_auc.low``,
``roc_auc.high``), a significant change (``roc_auc.change``) or a Page-Hinkley statistic over the
key's windows (``roc_auc.drop``, ``roc_auc.rise``; Page's CUSUM anchored at the reference's mean
with one); ``BOUND`` a number or ``band(K)``, the reference's mean of the metric minus (``<``) or
plus (``>``) ``K`` standard deviations (NannyML's ``StandardDeviationThreshold``, ``ddof=0``).
The table of what each reads: ``docs/alerts.md``. A null value never fires.

:class:`AlertEngine` follows each (rule, key): an alert event ``"firing"`` when a rule first
holds, ``"resolved"`` when it stops holding, and a new ``"firing"`` only once ``cooldown``
seconds of event time have passed since the last one (holds within it are counted as
suppressed). Events carry a stable id (the same for a firing and its resolution, and the same
when a run is repeated), so a consumer of the alert topic can de-duplicate re-published ones.

>>> engine = AlertEngine(parse_rules(["roc_auc<0.8"]))
>>> snap = {"key": {"model": "m", "segment": ""}, "window": {"start": 0, "end": 60}, "final": True,
...         "metrics": {"roc_auc": 0.7}}
>>> [(e["state"], e["value"], e["bound"]) for e in engine.observe(snap)]
[('firing', 0.7, 0.8)]
>>> snap = dict(snap, window={"start": 60, "end": 120}, metrics={"roc_auc": 0.9})
>>> [e["state"] for e in engine.observe(snap)]
['resolved']
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from streammetrics.stream.windows import parse_duration

__all__ = [
    "ALERT_SCHEMA", "DEFAULT_MAX_ALERT_KEYS", "MAX_RULES", "PH_DELTA", "PH_WARMUP", "AlertEngine", "AlertRule",
    "AlertSpec", "PageHinkley", "alert_key", "alert_line", "check_rule_metrics", "load_rules_file", "parse_rule",
    "parse_rules", "reference_bands", "reference_snapshots", "rule_value", "spec_from_options",
]

ALERT_SCHEMA = "streammetrics.alert/1"
#: rules one engine takes (``--alert`` and ``--alerts`` together)
MAX_RULES = 100
#: (rule, key) pairs an engine follows; past it the least recently seen pair is forgotten (counted)
DEFAULT_MAX_ALERT_KEYS = 100_000
#: Page-Hinkley's tolerance per window (river's ``PageHinkley`` default ``delta``)
PH_DELTA = 0.005
#: windows a Page-Hinkley statistic waits before it may fire
PH_WARMUP = 5

_FIELDS = ("low", "high", "change", "drop", "rise")
_RULE = re.compile(
    r"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\[(?P<cls>[^\[\]]+)\])?"
    r"(?:\.(?P<field>[a-z]+))?"
    r"\s*(?P<op><=|>=|<|>)\s*"
    r"(?:(?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|band\(\s*(?P<k>\d+\.?\d*|\.\d+)\s*\))\s*$")
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


@dataclass(frozen=True)
class AlertRule:
    """``EXPR OP BOUND``: ``metric`` (with ``cls`` for ``METRIC[CLASS]``), the interval, change or
    sequential ``field``, the comparison, and a number ``threshold`` or a band of ``band_k``
    standard deviations."""

    metric: str
    op: str
    threshold: float | None
    text: str
    cls: str | None = None
    field: str | None = None
    band_k: float | None = None

    @property
    def expr(self) -> str:
        """The rule's left-hand side as written (``roc_auc.low``, ``drift_ks[cat]``)."""
        name = self.metric if self.cls is None else f"{self.metric}[{self.cls}]"
        return name if self.field is None else f"{name}.{self.field}"

    @property
    def metric_name(self) -> str:
        """The metric as the report and Prometheus name it (``drift_ks[cat]`` for a class's)."""
        return self.metric if self.cls is None else f"{self.metric}[{self.cls}]"

    def fires(self, value: float | None, bound: float | None = None) -> bool:
        """True if ``value`` crosses the bound (``threshold``, or ``bound`` for a band rule); an
        undefined value or bound (None, NaN) never fires."""
        bound = self.threshold if bound is None else bound
        if (value is None or bound is None or isinstance(value, bool) or not math.isfinite(value)
                or not math.isfinite(bound)):
            return False
        return _OPS[self.op](value, bound)

    def __str__(self) -> str:
        return self.text


def parse_rule(text: str) -> AlertRule:
    """``"roc_auc<0.8"`` -> :class:`AlertRule`; ``ValueError`` naming the rule if malformed."""
    m = _RULE.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"bad --alert rule {text!r}: expected METRIC<VALUE or METRIC>VALUE (also <=, >=), "
                         "e.g. 'roc_auc<0.8', 'roc_auc.high<0.8', 'roc_auc.change<0', 'roc_auc.drop>0.05' "
                         "or 'roc_auc<band(3)'")
    name, cls, field, op, number, k = m.group("name", "cls", "field", "op", "number", "k")
    if field is not None and field not in _FIELDS:
        raise ValueError(f"bad --alert rule {text!r}: unknown .{field} (expected one of "
                         f"{', '.join('.' + f for f in _FIELDS)})")
    if k is not None and field is not None:
        raise ValueError(f"bad --alert rule {text!r}: band(K) bounds a metric itself, not its .{field}")
    expr = (name if cls is None else f"{name}[{cls}]") + ("" if field is None else f".{field}")
    bound = number if number is not None else f"band({k})"
    return AlertRule(metric=name, op=op, threshold=None if number is None else float(number),
                     text=f"{expr}{op}{bound}", cls=cls, field=field,
                     band_k=None if k is None else float(k))


def parse_rules(texts: Iterable[str], limit: int = MAX_RULES) -> list[AlertRule]:
    """Parse every rule (the first malformed one raises); more than ``limit`` rules, or one rule
    given twice, raise ``ValueError``."""
    rules = [parse_rule(t) for t in texts]
    if len(rules) > limit:
        raise ValueError(f"{len(rules)} alert rules: at most {limit} are allowed")
    seen: set[str] = set()
    for r in rules:
        if r.text in seen:
            raise ValueError(f"alert rule {r.text!r} is given twice")
        seen.add(r.text)
    return rules


def load_rules_file(path: str) -> tuple[list[str], float | None]:
    """Rules (and an optional ``cooldown`` in seconds or as ``"10m"``) from a JSON or YAML file.

    JSON: a list of rule strings, or ``{"rules": [...], "cooldown": "10m"}``. YAML: the same
    shapes; read with PyYAML where installed, else the subset ``rules:`` / ``cooldown:`` keys
    and ``- RULE`` list items (quotes optional). ``ValueError`` naming the file otherwise."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ValueError(f"--alerts {path}: {exc.strerror or exc}") from None
    data: Any
    try:
        data = json.loads(text)
    except ValueError:
        data = _yaml(text, path)
    if isinstance(data, list):
        rules, cooldown = data, None
    elif isinstance(data, dict) and set(data) <= {"rules", "cooldown"} and isinstance(data.get("rules"), list):
        rules, cooldown = data["rules"], data.get("cooldown")
    else:
        raise ValueError(f"--alerts {path}: expected a list of rules or {{rules: [...], cooldown: ...}}")
    if not all(isinstance(r, str) for r in rules):
        raise ValueError(f"--alerts {path}: every rule must be a string such as 'roc_auc<0.8'")
    return list(rules), None if cooldown is None else _seconds(cooldown, f"--alerts {path}: cooldown")


def _yaml(text: str, path: str) -> Any:
    try:
        import yaml
    except ImportError:
        yaml = None
    if yaml is not None:
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"--alerts {path}: not JSON or YAML ({str(exc).splitlines()[0]})") from None
    rules: list[str] = []
    cooldown: str | None = None
    keyed = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        key, colon, value = line.partition(":")
        if line.startswith("- "):
            rules.append(_unquote(line[2:].strip()))
        elif colon and key.strip() == "rules" and not value.strip():
            keyed = True
        elif colon and key.strip() == "cooldown" and value.strip():
            keyed, cooldown = True, _unquote(value.strip())
        else:
            raise ValueError(f"--alerts {path}:{lineno}: unexpected {line!r} (install PyYAML for full YAML)")
    if not keyed:
        return rules
    return {"rules": rules} if cooldown is None else {"rules": rules, "cooldown": cooldown}


def _unquote(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def _seconds(value: Any, what: str) -> float:
    """:func:`~streammetrics.stream.windows.parse_duration` (the flags' durations), every failure
    a ``ValueError`` naming ``what``."""
    try:
        return parse_duration(value, what)
    except TypeError as exc:
        raise ValueError(str(exc)) from None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _metric(metrics: Mapping[str, Any] | None, name: str, cls: str | None) -> float | None:
    if not isinstance(metrics, Mapping):
        return None
    if cls is None:
        return _number(metrics.get(name))
    rows = metrics.get("per_class")
    row = rows.get(cls) if isinstance(rows, Mapping) else None
    return _number(row.get(name)) if isinstance(row, Mapping) else None


def rule_value(rule: AlertRule, snapshot: Mapping[str, Any]) -> float | None:
    """The value ``rule`` compares from a snapshot dict (contract sections 3 and 9); None when it
    is undefined. Sequential fields (``.drop``, ``.rise``) live in an engine, not a snapshot."""
    if rule.field in (None, "drop", "rise"):
        return _metric(snapshot.get("metrics"), rule.metric, rule.cls)
    if rule.cls is not None:
        return None
    if rule.field in ("low", "high"):
        intervals = snapshot.get("intervals")
        pair = intervals.get(rule.metric) if isinstance(intervals, Mapping) else None
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            return None
        return _number(pair[0 if rule.field == "low" else 1])
    changes = snapshot.get("changes")
    change = changes.get(rule.metric) if isinstance(changes, Mapping) else None
    if not isinstance(change, Mapping) or change.get("significant") is not True:
        return None
    return _number(change.get("difference"))


def reference_bands(snapshots: Iterable[Mapping[str, Any]], rules: Sequence[AlertRule]
                    ) -> dict[tuple[str, str], tuple[float, float, int]]:
    """``{(key_json, metric_name): (mean, std, windows)}`` of each band rule's metric over the
    reference's windows (the latest revision of each), per key; ``std`` is ``numpy.std``'s
    (``ddof=0``), as NannyML's ``StandardDeviationThreshold``."""
    wanted = {(r.metric, r.cls) for r in rules if r.band_k is not None or r.field in ("drop", "rise")}
    latest: dict[tuple[str, Any], Mapping[str, Any]] = {}  # (key, window start) -> revision, metrics
    for snap in snapshots:
        ident = (_key_json(snap.get("key")), (snap.get("window") or {}).get("start"))
        old = latest.get(ident)
        if old is None or (snap.get("revision") or 0) >= (old.get("revision") or 0):
            latest[ident] = {"revision": snap.get("revision"), "metrics": snap.get("metrics")}
    values: dict[tuple[str, str], list[float]] = {}
    for (key, _), snap in sorted(latest.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        for metric, cls in wanted:
            v = _metric(snap.get("metrics"), metric, cls)
            if v is not None:
                values.setdefault((key, metric if cls is None else f"{metric}[{cls}]"), []).append(v)
    out = {}
    for ident, vs in values.items():
        mean = math.fsum(vs) / len(vs)
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in vs) / len(vs))
        out[ident] = (mean, std, len(vs))
    return out


def _key_json(key: Any) -> str:
    return json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class PageHinkley:
    """One-sided Page-Hinkley test over a series (Page 1954; Hinkley 1971): with ``x̄_t`` the
    running mean, ``m_t = Σ_{i<=t} (x̄_i - x_i - δ)`` for a decrease (``x_i - x̄_i - δ`` for an
    increase), the statistic is ``m_t - min_{i<=t} m_i``; it reads 0 during the first ``warmup``
    values and restarts after it has fired (:meth:`reset`). The same statistic as river's
    ``PageHinkley(min_instances=warmup, delta=δ, alpha=1, mode="down"/"up")``. With a ``target``
    (the reference's mean of the metric) ``x̄`` is that constant: Page's CUSUM anchored at the
    healthy level, which a slow drift cannot drag along as it drags a running mean."""

    __slots__ = ("count", "delta", "direction", "mean", "minimum", "target", "total", "warmup")

    def __init__(self, direction: str = "drop", delta: float = PH_DELTA, warmup: int = PH_WARMUP,
                 target: float | None = None) -> None:
        if direction not in ("drop", "rise"):
            raise ValueError(f"direction must be 'drop' or 'rise', got {direction!r}")
        self.direction, self.delta, self.warmup, self.target = direction, float(delta), int(warmup), target
        self.reset()

    def reset(self) -> None:
        """Forget the series (after a detection, as river does)."""
        self.count, self.mean, self.total, self.minimum = 0, 0.0, 0.0, math.inf

    def update(self, x: float) -> float:
        """Add one value; return the statistic."""
        self.count += 1
        self.mean = self.target if self.target is not None else self.mean + (x - self.mean) / self.count
        step = (self.mean - x) if self.direction == "drop" else (x - self.mean)
        self.total += step - self.delta
        self.minimum = min(self.minimum, self.total)
        return self.value

    @property
    def value(self) -> float:
        """``m_t - min m``, or 0 while fewer than ``warmup`` values were seen."""
        return self.total - self.minimum if self.count >= self.warmup else 0.0

    def to_dict(self) -> dict[str, Any]:
        if self.count == 0:
            return {"count": 0}
        return {"count": self.count, "mean": self.mean, "total": self.total, "minimum": self.minimum}

    def load(self, state: Mapping[str, Any]) -> "PageHinkley":
        count = state.get("count")
        if count == 0 and set(state) == {"count"}:
            self.reset()
            return self
        nums = [state.get(k) for k in ("mean", "total", "minimum")]
        if (isinstance(count, bool) or not isinstance(count, int) or count < 0
                or any(_number(v) is None for v in nums)):
            raise ValueError("alert state: a Page-Hinkley detector needs an int count >= 0 and finite mean, "
                             "total and minimum")
        self.count = count
        self.mean, self.total, self.minimum = (float(v) for v in nums)  # type: ignore[arg-type]
        return self


class _Track:
    """What the engine remembers of one (rule, key)."""

    __slots__ = ("detector", "episode", "firing", "last_fired", "window")

    def __init__(self) -> None:
        self.firing = False
        self.episode: str | None = None  # id of the open alert (firing)
        self.last_fired: float | None = None  # window end of the last firing event
        self.window: float | None = None  # start of the last final window fed to the detector
        self.detector: PageHinkley | None = None


class AlertEngine:
    """Rules applied to a stream of snapshots, one lifecycle per (rule, key).

    ``cooldown``: seconds of event time (window ends) after a firing before the same (rule, key)
    may fire again. ``bands``: :func:`reference_bands` for ``band(K)`` rules (and the anchors
    of sequential rules). At most
    ``max_keys`` (rule, key) pairs are followed; past it the least recently seen is forgotten
    (``dropped`` counts them). ``observe`` returns the alert events a snapshot causes;
    ``to_dict``/``from_dict`` checkpoint the whole engine."""

    def __init__(self, rules: Sequence[AlertRule], *, cooldown: float = 0.0,
                 bands: Mapping[tuple[str, str], tuple[float, float, int]] | None = None,
                 max_keys: int = DEFAULT_MAX_ALERT_KEYS) -> None:
        if not (isinstance(cooldown, (int, float)) and math.isfinite(cooldown) and cooldown >= 0):
            raise ValueError(f"alert cooldown must be a non-negative number of seconds, got {cooldown!r}")
        if isinstance(max_keys, bool) or not isinstance(max_keys, int) or max_keys < 1:
            raise ValueError(f"max_keys must be a positive int, got {max_keys!r}")
        self.rules = tuple(rules)
        self.cooldown = float(cooldown)
        self.bands = dict(bands or {})
        self.max_keys = max_keys
        self._tracks: dict[tuple[int, str], _Track] = {}
        self.fired = self.resolved = self.suppressed = self.dropped = 0

    def bound(self, rule: AlertRule, key_json: str) -> float | None:
        """The rule's bound for a key: its number, or the reference band (None without one)."""
        if rule.band_k is None:
            return rule.threshold
        band = self.bands.get((key_json, rule.metric_name))
        if band is None or band[2] < 2:
            return None
        mean, std, _ = band
        return mean - rule.band_k * std if rule.op in ("<", "<=") else mean + rule.band_k * std

    def _track(self, index: int, key_json: str) -> _Track:
        ident = (index, key_json)
        track = self._tracks.pop(ident, None)
        if track is None:
            track = _Track()
            if len(self._tracks) >= self.max_keys:
                del self._tracks[next(iter(self._tracks))]  # least recently seen
                self.dropped += 1
        self._tracks[ident] = track  # most recently seen last
        return track

    def evaluate(self, snapshot: Mapping[str, Any]) -> list[tuple[AlertRule, float | None, float | None, bool]]:
        """Each rule's ``(rule, value, bound, holds)`` on one snapshot, without the lifecycle (the
        report marks the windows where a rule holds); sequential statistics advance as in
        :meth:`observe`."""
        return [(rule, value, bound, holds) for _, rule, value, bound, holds in self._evaluate(snapshot)]

    def _evaluate(self, snapshot: Mapping[str, Any]) -> list[tuple[_Track, AlertRule, Any, Any, bool]]:
        window = snapshot.get("window") or {}
        start = _number(window.get("start"))
        if start is None or _number(window.get("end")) is None:
            return []
        key_json = _key_json(snapshot.get("key"))
        final = snapshot.get("final", True) is not False
        out = []
        for index, rule in enumerate(self.rules):
            track = self._track(index, key_json)
            value = rule_value(rule, snapshot)
            if rule.field in ("drop", "rise"):
                value = self._sequential(track, rule, key_json, value, start, final)
            bound = self.bound(rule, key_json)
            holds = rule.fires(value, bound)
            if holds and track.detector is not None:
                track.detector.reset()  # a detection restarts the test, as river's detectors do
            out.append((track, rule, value, bound, holds))
        return out

    def observe(self, snapshot: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The alert events (``firing``/``resolved``) one snapshot causes, in rule order."""
        key = snapshot.get("key")
        window = snapshot.get("window") or {}
        key_json = _key_json(key)
        events = []
        for track, rule, value, bound, holds in self._evaluate(snapshot):
            if holds and not track.firing:
                end = float(window["end"])
                if track.last_fired is not None and end - track.last_fired < self.cooldown:
                    self.suppressed += 1
                    continue
                track.firing, track.last_fired = True, end
                track.episode = _alert_id(rule, key_json, float(window["start"]))
                self.fired += 1
                events.append(self._event("firing", track.episode, rule, key, window, snapshot, value, bound))
            elif not holds and track.firing:
                track.firing = False
                self.resolved += 1
                events.append(self._event("resolved", track.episode or "", rule, key, window, snapshot, value, bound))
        return events

    def _sequential(self, track: _Track, rule: AlertRule, key_json: str, value: float | None, start: float,
                    final: bool) -> float | None:
        if track.detector is None:
            band = self.bands.get((key_json, rule.metric_name))
            track.detector = PageHinkley(rule.field or "drop", target=None if band is None else band[0])
        # one value per window: its final snapshot, once (a re-published window adds nothing)
        if value is not None and final and (track.window is None or start > track.window):
            track.window = start
            return track.detector.update(value)
        return track.detector.value

    @staticmethod
    def _event(state: str, ident: str, rule: AlertRule, key: Any, window: Mapping[str, Any],
               snapshot: Mapping[str, Any], value: float | None, bound: float | None) -> dict[str, Any]:
        intervals = snapshot.get("intervals")
        interval = intervals.get(rule.metric) if isinstance(intervals, Mapping) and rule.cls is None else None
        return {"schema": ALERT_SCHEMA, "id": ident, "state": state, "rule": rule.text, "key": key,
                "window": {"start": window.get("start"), "end": window.get("end")},
                "revision": snapshot.get("revision", 0), "metric": rule.expr, "value": value, "bound": bound,
                "interval": list(interval) if isinstance(interval, (list, tuple)) else None}

    def firing(self) -> list[tuple[AlertRule, Any]]:
        """(rule, key) pairs whose alert is firing now (for the Prometheus gauge)."""
        return [(self.rules[i], json.loads(k)) for (i, k), t in self._tracks.items() if t.firing]

    def summary(self) -> str:
        """One line: what fired, resolved, was suppressed or forgotten."""
        forgotten = f", {self.dropped} (rule, key) pairs forgotten" if self.dropped else ""
        return (f"alerts: {self.fired} firing, {self.resolved} resolved, {self.suppressed} suppressed by the "
                f"cooldown, {sum(t.firing for t in self._tracks.values())} still firing "
                f"({len(self.rules)} rules){forgotten}")

    def to_dict(self) -> dict[str, Any]:
        """The engine's state (rules by their text) for a checkpoint."""
        return {"type": "AlertEngine", "version": 1, "rules": [r.text for r in self.rules],
                "cooldown": self.cooldown,
                "counts": [self.fired, self.resolved, self.suppressed, self.dropped],
                "tracks": [[i, k, t.firing, t.episode, t.last_fired, t.window,
                            None if t.detector is None else t.detector.to_dict()]
                           for (i, k), t in self._tracks.items()]}

    def load(self, state: Mapping[str, Any]) -> "AlertEngine":
        """Restore :meth:`to_dict`'s state into this engine (same rules); ``ValueError`` naming the
        field when it does not fit, before anything changes."""
        if not isinstance(state, Mapping) or state.get("type") != "AlertEngine" or state.get("version") != 1:
            raise ValueError("alert state: expected {'type': 'AlertEngine', 'version': 1, ...}")
        if state.get("rules") != [r.text for r in self.rules]:
            raise ValueError("alert state: its rules differ from the configured ones")
        counts, rows = state.get("counts"), state.get("tracks")
        if not (isinstance(counts, list) and len(counts) == 4 and all(
                isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts)):
            raise ValueError("alert state: 'counts' must be four ints >= 0")
        if not isinstance(rows, list) or len(rows) > self.max_keys:
            raise ValueError(f"alert state: 'tracks' must be a list of at most {self.max_keys} entries")
        tracks: dict[tuple[int, str], _Track] = {}
        for row in rows:
            if not (isinstance(row, list) and len(row) == 7 and isinstance(row[0], int)
                    and 0 <= row[0] < len(self.rules) and isinstance(row[1], str) and isinstance(row[2], bool)
                    and (row[3] is None or isinstance(row[3], str))
                    and all(v is None or _number(v) is not None for v in row[4:6])
                    and (row[6] is None or isinstance(row[6], Mapping))):
                raise ValueError(f"alert state: malformed track {row!r:.80}")
            t = _Track()
            t.firing, t.episode, t.last_fired, t.window = row[2], row[3], row[4], row[5]
            if row[6] is not None:
                rule = self.rules[row[0]]
                band = self.bands.get((row[1], rule.metric_name))
                t.detector = PageHinkley(rule.field if rule.field in ("drop", "rise") else "drop",
                                         target=None if band is None else band[0]).load(row[6])
            tracks[(row[0], row[1])] = t
        self._tracks = tracks
        self.fired, self.resolved, self.suppressed, self.dropped = counts
        return self


def _alert_id(rule: AlertRule, key_json: str, start: float) -> str:
    """Stable id of an alert episode: the rule, the key and the window it first fired on."""
    text = f"{rule.text}\x00{key_json}\x00{start!r}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def reference_snapshots(path: str, config: Any) -> Iterator[dict[str, Any]]:
    """The reference's windows as snapshot dicts, read line by line (memory: the open windows),
    for ``band(K)`` and sequential rules: a snapshots JSONL file is read as it is; a file of
    labelled events is windowed like the stream (``config``: the stream's
    :class:`~streammetrics.stream.pipeline.PipelineConfig`, without references or state)."""
    import dataclasses

    from streammetrics.stream.pipeline import Pipeline

    with open(path, "rb") as fh:
        lines = (line for line in fh if line.strip())
        first_line = next(lines, None)
        if first_line is None:
            return
        try:
            first = json.loads(first_line)
        except ValueError:
            first = None
        if isinstance(first, dict) and str(first.get("schema", "")).startswith("streammetrics.snapshot/"):
            for lineno, line in enumerate(itertools.chain([first_line], lines), 1):
                try:
                    snap = json.loads(line)
                except ValueError:
                    raise ValueError(f"--reference {path}:{lineno}: not a JSON snapshot") from None
                if isinstance(snap, dict):
                    yield snap
            return
        pipeline = Pipeline(dataclasses.replace(config, references=None, include_state=False))
        try:
            for line in itertools.chain([first_line], lines):
                pipeline.process(line)
                yield from pipeline.poll(revisions=True)
            yield from pipeline.flush()
        finally:
            pipeline.close()


def alert_key(event: Mapping[str, Any]) -> bytes:
    """The Kafka message key of an alert event: ``rule|model|segment`` (contract section 10)."""
    key = event.get("key") or {}
    return f"{event.get('rule')}|{key.get('model', '')}|{key.get('segment', '')}".encode()


def alert_line(event: Mapping[str, Any]) -> str:
    """An alert event as one JSON line (no newline): compact, non-ASCII kept, no NaN."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@dataclass(frozen=True)
class AlertSpec:
    """What a pipeline needs to run alert rules (``PipelineConfig.alerts``): the rules, the
    cooldown, the reference bands and the bound on (rule, key) pairs."""

    rules: tuple[AlertRule, ...]
    cooldown: float = 0.0
    bands: Mapping[tuple[str, str], tuple[float, float, int]] | None = None
    max_keys: int = DEFAULT_MAX_ALERT_KEYS

    def engine(self) -> AlertEngine:
        """A new engine for these rules."""
        return AlertEngine(self.rules, cooldown=self.cooldown, bands=self.bands, max_keys=self.max_keys)


def spec_from_options(alert: Sequence[str] = (), alerts_file: str | None = None, cooldown: float | None = None,
                      reference: str | None = None, config: Any = None,
                      max_keys: int = DEFAULT_MAX_ALERT_KEYS) -> AlertSpec | None:
    """The alerts of ``--alert RULE`` (repeatable), ``--alerts FILE``, ``--alert-cooldown`` and,
    for ``band(K)`` and sequential rules, ``--reference FILE`` windowed with ``config``; None
    without rules. ``ValueError`` (one line, naming the flag) when they do not fit together."""
    texts = list(alert)
    file_cooldown = None
    if alerts_file:
        more, file_cooldown = load_rules_file(alerts_file)
        texts += more
    if not texts:
        if cooldown:
            raise ValueError("--alert-cooldown needs rules (--alert or --alerts)")
        return None
    rules = parse_rules(texts)
    if config is not None:
        check_rule_metrics(rules, config)
    bands = None
    if any(r.band_k is not None for r in rules) and not reference:
        raise ValueError("band(K) alert rules need --reference FILE (the band is the reference's spread)")
    if reference and any(r.band_k is not None or r.field in ("drop", "rise") for r in rules):
        bands = reference_bands(reference_snapshots(reference, config), rules)
    spec = AlertSpec(tuple(rules), cooldown=cooldown if cooldown is not None else (file_cooldown or 0.0),
                     bands=bands, max_keys=max_keys)
    spec.engine()  # checks the cooldown and bound now
    return spec


def check_rule_metrics(rules: Sequence[AlertRule], config: Any) -> None:
    """``ValueError`` listing the known names when a rule names a metric the task's snapshots
    never carry (``config``: a :class:`~streammetrics.stream.pipeline.PipelineConfig`)."""
    monitor = config.monitor_factory()()
    names = dict(monitor.snapshot())
    hook = config.extra_metrics()
    if hook is not None:
        hook(("", ""), monitor, names)
    for rule in rules:
        if rule.cls is None and rule.metric not in names:
            known = sorted(k for k, v in names.items() if not isinstance(v, (dict, list)))
            raise ValueError(f"unknown metric {rule.metric!r} in alert rule {rule.text!r}; known metrics: "
                             f"{', '.join(known)} (and per-class METRIC[CLASS])")
        if rule.cls is not None and "per_class" not in names:
            raise ValueError(f"alert rule {rule.text!r}: the {config.task} task has no per-class metrics")
