"""Slices, roll-ups, fairness and operating points: the replay/consume flags of contract
section 11 as :class:`~streammetrics.stream.pipeline.PipelineConfig` settings (docs/slices.md)."""
from __future__ import annotations

import argparse
from typing import Any

from streammetrics.monitors.operating_points import OperatingPoints

__all__ = ["slice_settings"]


def slice_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``PipelineConfig`` keyword arguments of the section-11 flags in ``args`` (absent
    flags: nothing, so the default configuration, and output, are unchanged). ValueError
    (one line, naming the flag) when they do not fit together."""
    out: dict[str, Any] = {}
    points = OperatingPoints(
        target_recall=getattr(args, "target_recall", None), target_precision=getattr(args, "target_precision", None),
        target_fpr=getattr(args, "target_fpr", None), cost_fp=getattr(args, "cost_fp", None),
        cost_fn=getattr(args, "cost_fn", None))
    if points.enabled:
        if getattr(args, "task", "binary") != "binary":
            raise ValueError(f"--target-recall, --target-precision, --target-fpr, --cost-fp and --cost-fn apply to "
                             f"--task binary, not --task {args.task}")
        out["operating_points"] = points
    return out
