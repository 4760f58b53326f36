"""The accumulator protocol shared by every metric state in streammetrics.

An accumulator is a small, mergeable summary of a stream of events:

* ``update(...)`` adds one event (lean pure Python), ``update_many(...)`` a batch
  (vectorised numpy, validated in full before any state changes);
* ``merge(other)`` folds in another accumulator of the same type and configuration,
  so that partial states computed on any split of a stream combine into the state
  of the whole stream (a commutative monoid; ``a + b`` returns a new accumulator);
* ``to_dict()`` / :func:`streammetrics.from_dict` round-trip the state through a
  versioned, JSON-safe dict; pickling goes through the same validated state.

Subclasses declare ``type_name`` (the ``"type"`` key of the dict), their configuration
(``_config``, and ``_from_config`` when the constructor does not take it as is) and their
state once, as ``state_fields`` (:mod:`streammetrics.core.state`). ``merge``, ``copy``,
``reset``, equality, ``to_dict``/``from_dict`` and pickling are implemented here from
those declarations; ``_refresh()`` rebuilds derived caches after each of them. A class
whose dict layout changes bumps ``version`` and adds a reader of the old layout to
``migrations`` (old version -> function returning the next version's state).
"""
from __future__ import annotations

import copy as _copy
from typing import Any, Callable, ClassVar, Mapping, TypeVar

from streammetrics.core import state as _state_mod
from streammetrics.core.state import Field, check_json_shape, describe

__all__ = ["Accumulator", "from_dict", "registered_types"]

A = TypeVar("A", bound="Accumulator")

_REGISTRY: dict[str, type["Accumulator"]] = {}


class Accumulator:
    """Base class: the protocol every streammetrics accumulator follows."""

    #: name written under ``"type"`` by :meth:`to_dict`; set by every concrete subclass
    type_name: ClassVar[str] = ""
    #: version of the dict layout written under ``"version"``
    version: ClassVar[int] = 1
    #: readers of older layouts: ``{old version: f(state, config) -> state of old version + 1}``
    migrations: ClassVar[dict[int, Callable[[Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any]]]] = {}
    #: the declared state (see :mod:`streammetrics.core.state`)
    state_fields: ClassVar[tuple[Field, ...]] = ()

    count: int
    total_weight: float

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("type_name")
        if name:
            if name in _REGISTRY and _REGISTRY[name] is not cls:
                raise TypeError(f"accumulator type name {name!r} is already registered")
            keys = [k for f in cls.state_fields for k in f.keys]
            if len(set(keys)) != len(keys):
                raise TypeError(f"{cls.__name__} declares a state key twice: {keys}")
            _REGISTRY[name] = cls

    @classmethod
    def readable_versions(cls) -> tuple[int, ...]:
        """Dict versions :func:`from_dict` reads for this type."""
        return (*sorted(cls.migrations), cls.version)

    # ------------------------------------------------------------------ protocol
    def update(self: A, *args: Any, **kwargs: Any) -> A:  # pragma: no cover - abstract
        raise NotImplementedError

    def update_many(self: A, *args: Any, **kwargs: Any) -> A:  # pragma: no cover - abstract
        raise NotImplementedError

    def merge(self: A, other: "Accumulator") -> A:
        """Fold ``other`` (same type and configuration) into ``self``; returns ``self``.
        ``a.merge(a)`` doubles ``a``: merged with a copy of itself (a part's merge reads its
        argument while it changes ``self``)."""
        if other is self:
            other = self.copy()
        if type(other) is not type(self):
            raise ValueError(
                f"cannot merge {type(other).__name__} into {type(self).__name__}: "
                "accumulators must be of the same type"
            )
        self._check_mergeable(other)
        self._check_merge(other)
        if not self.state_fields:
            self._merge_state(other)
            return self
        for f in self.state_fields:  # nothing below may fail: _check_merge decided
            f.set(self, f.merge(f.get(self), f.get(other), self))
        self._refresh()
        return self

    def __add__(self: A, other: "Accumulator") -> A:
        if not isinstance(other, Accumulator):
            return NotImplemented
        return self.copy().merge(other)

    def __radd__(self: A, other: Any) -> A:
        """``0 + a`` is a copy of ``a``, so ``sum([a, b, c])`` (which starts from 0) merges them."""
        if other.__class__ is int and other == 0:
            return self.copy()
        return NotImplemented

    def copy(self: A) -> A:
        """An independent accumulator with the same configuration and state."""
        cls = type(self)
        new = cls.__new__(cls)
        if not self.state_fields:
            new.__dict__.update(_copy.deepcopy(self.__dict__))
            return new
        new.__dict__.update(self.__dict__)  # configuration (immutable) and caches
        for f in self.state_fields:
            f.set(new, f.copy(f.get(self)))
        new._refresh()
        return new

    def __deepcopy__(self: A, memo: dict) -> A:
        return self.copy()

    def __copy__(self: A) -> A:
        return self.copy()

    def reset(self: A) -> A:
        """Forget every event; keep the configuration. Returns ``self``."""
        if not self.state_fields:
            self._reset_state()
            return self
        for f in self.state_fields:
            f.set(self, f.default(self))
        self._refresh()
        return self

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe ``{"type", "version", "config", "state"}`` dict; see :func:`from_dict`."""
        return {
            "type": self.type_name,
            "version": self.version,
            "config": self._config(),
            "state": self._state(),
        }

    @classmethod
    def from_dict(cls: type[A], data: Mapping[str, Any]) -> A:
        """Rebuild an accumulator written by :meth:`to_dict`; ``ValueError`` if malformed."""
        obj = from_dict(data)
        if not isinstance(obj, cls):
            raise ValueError(f"dict holds a {type(obj).__name__}, not a {cls.__name__}")
        return obj

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Accumulator)
        return self._config() == other._config() and self._state() == other._state()

    __hash__ = None  # type: ignore[assignment]  # mutable: object.__hash__ must not apply

    def __getstate__(self) -> dict[str, Any]:
        """Pickle through the validated JSON state (no closures, no caches)."""
        return {"config": self._config(), "state": self._state()}

    def __setstate__(self, data: Mapping[str, Any]) -> None:
        fresh = _build(type(self), data["config"], data["state"])
        self.__dict__.update(fresh.__dict__)
        for f in self.state_fields:  # attributes in __slots__ are not in __dict__
            f.set(self, f.get(fresh))
        self._refresh()

    def __repr__(self) -> str:
        cfg = ", ".join(f"{k}={v!r}" for k, v in self._config().items())
        return f"{type(self).__name__}({cfg}) <count={self.count}, total_weight={self.total_weight:g}>"

    # ------------------------------------------------------- subclass interface
    def _config(self) -> dict[str, Any]:
        """JSON-safe constructor arguments; equal configs are mergeable."""
        return {}

    @classmethod
    def _check_config(cls, config: Mapping[str, Any]) -> None:
        """Refuse (ValueError) a configuration from a dict before anything is built: by
        default, label lists longer than ``LIMITS.max_labels``."""
        cap = _state_mod.LIMITS.max_labels
        for key, value in config.items():
            if isinstance(value, list) and len(value) > cap:
                raise ValueError(f"config[{key!r}] has {len(value)} entries, more than max_labels={cap}")

    def _check_mergeable(self, other: "Accumulator") -> None:
        if self._config() != other._config():
            raise ValueError(
                f"cannot merge {type(self).__name__} accumulators with different "
                f"configurations: {self._config()!r} vs {other._config()!r}"
            )

    def _check_merge(self, other: "Accumulator") -> None:
        """Raise ValueError (nothing changed) when the states cannot be merged."""

    # Undeclared state: a subclass without ``state_fields`` (e.g. a test double outside
    # the library) implements _state/_load_state and these two itself.
    def _merge_state(self, other: "Accumulator") -> None:  # pragma: no cover - legacy
        raise NotImplementedError(f"{type(self).__name__} declares no state_fields")

    def _reset_state(self) -> None:  # pragma: no cover - legacy
        raise NotImplementedError(f"{type(self).__name__} declares no state_fields")

    def _refresh(self) -> None:
        """Rebuild derived caches after reset, copy, merge or load."""

    def _state(self) -> dict[str, Any]:
        # Field.to_json, inlined: to_dict runs once per snapshot (issue 12)
        out: dict[str, Any] = {}
        for f in self.state_fields:
            key, value = f.key, f.encode(f.get(self), self)
            if isinstance(key, tuple):
                for k, v in zip(key, value):
                    if v is not None or k not in f.optional:  # (optional keys: omitted while None)
                        out[k] = v
            elif value is not None or key not in f.optional:
                out[key] = value
        return out

    def _check_state(self, loaded: dict[str, Any]) -> None:
        """Cross-field checks of decoded state (``loaded``: key of the first JSON key of each
        field -> decoded value) before it is installed; raise ValueError."""

    def _load_state(self, state: Mapping[str, Any]) -> None:
        """Replace the state by a validated copy of ``state``; raise ValueError if malformed."""
        expected = {k for f in self.state_fields for k in f.keys}
        required = expected - {k for f in self.state_fields for k in f.optional}
        if not required <= set(state) <= expected:
            raise ValueError(f"state keys must be {sorted(required)}"
                             f"{'' if required == expected else f' (optional: {sorted(expected - required)})'}, "
                             f"got {sorted(map(str, state))[:20]}")
        loaded: dict[str, Any] = {}
        for f in self.state_fields:
            loaded[f.keys[0]] = f.from_json(state, self, loaded)
        self._check_state(loaded)
        for f in self.state_fields:
            f.set(self, loaded[f.keys[0]])
        self._refresh()

    @classmethod
    def _from_config(cls: type[A], config: Mapping[str, Any]) -> A:
        """Construct an empty accumulator from :meth:`_config` output."""
        return cls(**config)


def _build(cls: type[A], config: Any, state: Any, version: int | None = None) -> A:
    name = cls.type_name
    if not isinstance(config, Mapping) or not isinstance(state, Mapping):
        raise ValueError(f"{name} dict: 'config' and 'state' must be mappings")
    try:
        check_json_shape(config, "config")
        check_json_shape(state, "state")
        cls._check_config(config)
        if version is not None:
            while version != cls.version:
                state = cls.migrations[version](state, config)
                version += 1
        obj = cls._from_config(config)
        obj._load_state(state)
    except ValueError as exc:
        raise ValueError(f"malformed {name} dict: {exc}") from None
    except (TypeError, KeyError, IndexError, AttributeError, OverflowError, RecursionError) as exc:
        raise ValueError(f"malformed {name} dict: {type(exc).__name__}: {describe(str(exc))}") from None
    return obj


def registered_types() -> dict[str, type[Accumulator]]:
    """Map of ``type`` names to accumulator classes that :func:`from_dict` accepts."""
    return dict(_REGISTRY)


def from_dict(data: Mapping[str, Any]) -> Accumulator:
    """Rebuild any accumulator from its :meth:`Accumulator.to_dict` output.

    Only registered accumulator types are built (nothing is imported or executed by
    name); every malformed, truncated or hostile dict raises ``ValueError``.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"accumulator dict must be a mapping, got {type(data).__name__}")
    missing = [k for k in ("type", "version", "config", "state") if k not in data]
    if missing:
        raise ValueError(f"accumulator dict is missing key(s) {missing}")
    type_name = data["type"]
    if not isinstance(type_name, str) or type_name not in _REGISTRY:
        raise ValueError(
            f"unknown accumulator type {describe(type_name)}; known: {sorted(_REGISTRY)}"
        )
    cls = _REGISTRY[type_name]
    version = data["version"]
    if type(version) is not int or version not in cls.readable_versions():
        raise ValueError(
            f"unsupported {type_name} dict version {describe(version)}; "
            f"this streammetrics reads {list(cls.readable_versions())}"
        )
    return _build(cls, data["config"], data["state"], version)
