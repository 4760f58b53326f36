"""The accumulator protocol shared by every metric state in streammetrics.

An accumulator is a small, mergeable summary of a stream of events:

* ``update(...)`` adds one event (lean pure Python), ``update_many(...)`` a batch
  (vectorised numpy, validated in full before any state changes);
* ``merge(other)`` folds in another accumulator of the same type and configuration,
  so that partial states computed on any split of a stream combine into the state
  of the whole stream (a commutative monoid; ``a + b`` returns a new accumulator);
* ``to_dict()`` / :func:`streammetrics.from_dict` round-trip the state through a
  versioned, JSON-safe dict (never pickle).

Subclasses declare ``type_name`` (the ``"type"`` key of the dict) and implement
``_config`` / ``_state`` / ``_load_state`` / ``_merge_state`` / ``_reset_state``.
"""
from __future__ import annotations

import copy as _copy
from typing import Any, ClassVar, Mapping, TypeVar

__all__ = ["Accumulator", "from_dict", "registered_types"]

A = TypeVar("A", bound="Accumulator")

_REGISTRY: dict[str, type["Accumulator"]] = {}


class Accumulator:
    """Base class: the protocol every streammetrics accumulator follows."""

    #: name written under ``"type"`` by :meth:`to_dict`; set by every concrete subclass
    type_name: ClassVar[str] = ""
    #: version of the dict layout written under ``"version"``
    version: ClassVar[int] = 1
    #: versions :meth:`from_dict` can still read
    readable_versions: ClassVar[tuple[int, ...]] = (1,)

    count: int
    total_weight: float

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("type_name")
        if name:
            if name in _REGISTRY and _REGISTRY[name] is not cls:
                raise TypeError(f"accumulator type name {name!r} is already registered")
            _REGISTRY[name] = cls

    # ------------------------------------------------------------------ protocol
    def update(self: A, *args: Any, **kwargs: Any) -> A:  # pragma: no cover - abstract
        raise NotImplementedError

    def update_many(self: A, *args: Any, **kwargs: Any) -> A:  # pragma: no cover - abstract
        raise NotImplementedError

    def merge(self: A, other: "Accumulator") -> A:
        """Fold ``other`` (same type and configuration) into ``self``; returns ``self``."""
        if type(other) is not type(self):
            raise ValueError(
                f"cannot merge {type(other).__name__} into {type(self).__name__}: "
                "accumulators must be of the same type"
            )
        self._check_mergeable(other)
        self._merge_state(other)
        return self

    def __add__(self: A, other: "Accumulator") -> A:
        if not isinstance(other, Accumulator):
            return NotImplemented
        return self.copy().merge(other)

    def copy(self: A) -> A:
        """An independent accumulator with the same configuration and state."""
        return _copy.deepcopy(self)

    def reset(self: A) -> A:
        """Forget every event; keep the configuration. Returns ``self``."""
        self._reset_state()
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
        return self.to_dict() == other.to_dict()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        cfg = ", ".join(f"{k}={v!r}" for k, v in self._config().items())
        return f"{type(self).__name__}({cfg}) <count={self.count}, total_weight={self.total_weight:g}>"

    # ------------------------------------------------------- subclass interface
    def _config(self) -> dict[str, Any]:
        """JSON-safe constructor arguments; equal configs are mergeable."""
        return {}

    def _check_mergeable(self, other: "Accumulator") -> None:
        if self._config() != other._config():
            raise ValueError(
                f"cannot merge {type(self).__name__} accumulators with different "
                f"configurations: {self._config()!r} vs {other._config()!r}"
            )

    def _state(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _load_state(self, state: Mapping[str, Any]) -> None:  # pragma: no cover - abstract
        """Replace the state by a validated copy of ``state``; raise ValueError if malformed."""
        raise NotImplementedError

    def _merge_state(self, other: "Accumulator") -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _reset_state(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def _from_config(cls: type[A], config: Mapping[str, Any]) -> A:
        """Construct an empty accumulator from :meth:`_config` output."""
        return cls(**config)  # type: ignore[call-arg]


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
            f"unknown accumulator type {type_name!r}; known: {sorted(_REGISTRY)}"
        )
    cls = _REGISTRY[type_name]
    version = data["version"]
    if type(version) is not int or version not in cls.readable_versions:
        raise ValueError(
            f"unsupported {type_name} dict version {version!r}; "
            f"this streammetrics reads {list(cls.readable_versions)}"
        )
    config, state = data["config"], data["state"]
    if not isinstance(config, Mapping) or not isinstance(state, Mapping):
        raise ValueError(f"{type_name} dict: 'config' and 'state' must be mappings")
    try:
        obj = cls._from_config(config)
        obj._load_state(state)
    except ValueError as exc:
        raise ValueError(f"malformed {type_name} dict: {exc}") from None
    except (TypeError, KeyError, IndexError, AttributeError, OverflowError) as exc:
        raise ValueError(f"malformed {type_name} dict: {type(exc).__name__}: {exc}") from None
    return obj
