"""kafka-python client settings of the ``consume`` service, in one place.

The service, the benchmarks' bare loops and the tests' consumers share them, so that a
comparison or a test measures the same client configuration as production.
"""
from __future__ import annotations

from typing import Any

__all__ = ["GROUP_SETTINGS", "FETCH_SETTINGS", "consumer_settings"]

#: Consumer settings for quick group joins. tansu holds the first JoinGroup for about half of
#: ``session_timeout_ms`` (kafka-python's default 45 s gives ~23 s joins; 6 s gives ~3 s).
#: 6000 ms is also the lowest session timeout a default Apache Kafka broker accepts.
GROUP_SETTINGS: dict[str, Any] = {
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 1000,
}


#: Fetch settings of the service's consumer, shared with the bare loop of
#: ``benchmarks/bench_consumer.py``. kafka-python keeps one fetch request in flight per broker,
#: and leaves out of it the partition whose records it is still handing out; when the other
#: partitions have no new data the broker holds that fetch for ``fetch_max_wait_ms`` (long
#: polling) and the busy partition cannot be fetched meanwhile. Reading a backlog, the default
#: 500 ms made the consumer sit idle ~40% of the time (two empty 200 ms polls per 5,000
#: records); 100 ms bounds each stall, and an idle consumer then sends 10 fetches/s per broker.
FETCH_SETTINGS: dict[str, Any] = {"fetch_max_wait_ms": 100}


def consumer_settings(**overrides: Any) -> dict[str, Any]:
    """kafka-python consumer settings the service uses (fast group joins, manual commits, short
    fetch waits; see :data:`FETCH_SETTINGS`)."""
    settings = {
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        **GROUP_SETTINGS,  # ~3 s group joins instead of ~23 s
        **FETCH_SETTINGS,
        "max_poll_interval_ms": 300_000,
        "key_deserializer": None,
        "value_deserializer": None,
    }
    settings.update(overrides)
    return settings
