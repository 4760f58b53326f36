"""Targets of the benchmarks: what each promises, what a run measured, met or MISSED.

Each benchmark module that has targets exposes ``targets(quick: bool) -> list[Target]``: it runs
its measurement (``quick``: the smoke size) and returns one :class:`Target` per promise.
``python -m benchmarks`` runs them all in one process and prints the table; a benchmark run as a
script prints its own lines with :func:`print_targets`.

A target is a ratio (or a rate) with a direction: ``at_least`` (the default: speed-ups, rates,
shares of another tool's speed) or ``at_most`` (costs against a default path). A *gross* miss
is a ratio on the wrong side of a third of its target (``at_least``: below ``target / 3``;
``at_most``: above ``3 * target``) - or, for a target not reached yet, of the level recorded
when it was set (``known``, e.g. the issue's "today" figure): what ``python -m benchmarks
--check`` fails on, since a smoke-size run on a loaded machine is noisy but not by a factor of
three. An absolute rate (events per second, ``absolute=True``) has no reference in its run to
cancel the machine's load, so ``--check`` never fails on it: the ratio beside it (the same
batches against scikit-learn) is the regression signal.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Target", "print_targets", "GROSS"]

#: a measured ratio this far on the wrong side of its target is a gross regression
GROSS = 3.0


@dataclass(frozen=True)
class Target:
    benchmark: str
    name: str
    target: float
    measured: float
    at_most: bool = False  # True: a cost (lower is better); False: a speed (higher is better)
    note: str = ""
    known: float | None = None  # the level recorded when the target was set (an open target)
    #: an absolute rate (events/s), not a ratio of two measurements of the same run: on a loaded
    #: machine it moves with the load, so ``--check`` reports it but never fails on it
    absolute: bool = False

    @property
    def met(self) -> bool:
        return self.measured <= self.target if self.at_most else self.measured >= self.target

    @property
    def checked(self) -> float:
        """What a gross miss is measured against: the target, or while it is not met the level
        recorded when it was set (``known``), so that open targets do not fail every check."""
        return self.target if self.met or self.known is None else self.known

    @property
    def gross(self) -> bool:
        """On the wrong side of :attr:`checked` by more than a factor of :data:`GROSS` (a nan
        measurement is gross)."""
        if self.absolute:
            return False
        if self.measured != self.measured:
            return True
        if self.at_most:
            return self.measured > self.checked * GROSS
        return self.measured < self.checked / GROSS

    @property
    def status(self) -> str:
        return "met" if self.met else "MISSED"

    def line(self) -> str:
        sign = "<=" if self.at_most else ">="
        note = f" ({self.note})" if self.note else ""
        return f"target {self.name} {sign} {self.target:g}: {self.status} ({self.measured:.3g}){note}"


def print_targets(targets: list[Target]) -> None:
    for t in targets:
        print(t.line())
