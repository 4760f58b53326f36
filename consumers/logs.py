"""Structured logging of the ``consume`` service: one JSON object per line on stderr."""
from __future__ import annotations

import json
import logging

__all__ = ["JsonLogFormatter", "configure_logging"]


class JsonLogFormatter(logging.Formatter):
    """One JSON object per log line: ts, level, logger, msg (and exc when there is one).

    >>> record = logging.LogRecord("streammetrics.consume", logging.INFO, __file__, 1, "hi %s", ("x",), None)
    >>> json.loads(JsonLogFormatter().format(record))["msg"]
    'hi x'
    """

    def format(self, record: logging.LogRecord) -> str:
        entry = {"ts": round(record.created, 3), "level": record.levelname, "logger": record.name,
                 "msg": record.getMessage()}
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(level_name: str) -> None:
    """Structured logs on stderr at ``level_name``; kafka-python's own loggers stay quiet (errors
    only) unless DEBUG is asked for, since it logs every broker hiccup at WARNING or more
    (218 lines for a 14 s broker outage, see consumers/NOTES.md). ValueError for an unknown level."""
    level = getattr(logging, str(level_name).upper(), None)
    if not isinstance(level, int):
        raise ValueError(f"--log-level must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {level_name!r}")
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLogFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("kafka").setLevel(logging.DEBUG if level <= logging.DEBUG else logging.CRITICAL)
