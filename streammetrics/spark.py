"""``streammetrics.spark``: windowed snapshots on Spark (contract section 8).

The public home of :mod:`streammetrics.integrations.spark` (``pip install 'streammetrics[spark]'``).
"""
from streammetrics.integrations.spark import (
    REJECTION_COLUMNS,
    SNAPSHOT_COLUMNS,
    merge_snapshots,
    window_snapshots,
)

__all__ = ["window_snapshots", "merge_snapshots", "SNAPSHOT_COLUMNS", "REJECTION_COLUMNS"]
