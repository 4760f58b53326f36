"""Test doubles of the window engine's tests: an event with an id, and a monitor that keeps
the ids it saw (so a test can check exactly which events each window holds)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streammetrics.core.accumulator import Accumulator


@dataclass(frozen=True)
class Ev:
    ts: float
    model: str
    segment: str
    id: int


class IdsMonitor(Accumulator):
    """Test monitor remembering which events it saw."""

    type_name = "tests.IdsMonitor"

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.count = 0
        self.total_weight = 0.0

    def update_event(self, ev: Ev) -> IdsMonitor:
        self.ids.append(ev.id)
        self.count += 1
        self.total_weight += 1.0
        return self

    def update_events(self, evs: list[Ev]) -> IdsMonitor:
        for ev in evs:
            self.update_event(ev)
        return self

    def snapshot(self) -> dict[str, Any]:
        return {"ids": sorted(self.ids)}

    def _state(self) -> dict[str, Any]:
        return {"ids": self.ids, "count": self.count}

    def _load_state(self, state: dict[str, Any]) -> None:
        self.ids = [int(i) for i in state["ids"]]
        self.count = int(state["count"])
        self.total_weight = float(self.count)

    def _merge_state(self, other: IdsMonitor) -> None:
        self.ids = self.ids + other.ids
        self.count += other.count
        self.total_weight += other.total_weight

    def _reset_state(self) -> None:
        self.__init__()  # type: ignore[misc]  # re-initialise in place, as the protocol's reset expects
