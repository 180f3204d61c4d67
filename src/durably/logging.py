"""Log formats for durably's log lines: one JSON object a line (`JsonFormatter`, or
``durably worker --log-format json``), and the text format the CLI writes
(`FieldsFormatter`), both with times in UTC.

durably logs with ``extra=`` fields (``worker``, ``queue``, ``item``, ``tenant``,
``workflow``, ``kind``, ``attempt``, ``due``, ``retry_at``) beside the message text, which
names the same ids and times, so a line reads alone and a log pipeline can filter on them.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from typing import Any

from durably.otel.tracing import trace_ids

_STANDARD = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None)).keys()
    | {"message", "asctime", "taskName"}
)


def utc_time(created: float) -> str:
    """``created`` (seconds since the epoch) as UTC ISO 8601 with milliseconds and a Z."""
    moment = datetime.fromtimestamp(created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra=`` fields a log call added to ``record``."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    """Formats each record as one JSON object on one line.

    Keys: ``time`` (UTC ISO 8601), ``level``, ``logger``, ``message`` (the formatted text),
    every ``extra=`` field of the call, ``trace_id`` and ``span_id`` when a span is
    current (with OpenTelemetry tracing on), and ``exception`` with the traceback when
    there is one. A value JSON cannot hold is written as its ``str``.

    ``handler.setFormatter(durably.logging.JsonFormatter())``
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        line: dict[str, Any] = {
            "time": utc_time(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in fields_of(record).items():
            line.setdefault(key, value)
        ids = trace_ids()
        if ids is not None:
            line["trace_id"], line["span_id"] = ids
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class FieldsFormatter(logging.Formatter):
    """Text lines with UTC times, then durably's ``extra=`` fields as ``key=value``."""

    FIELDS = (
        "worker",
        "kind",
        "workflow",
        "queue",
        "item",
        "tenant",
        "attempt",
        "due",
        "retry_at",
    )
    converter = time.gmtime  # type: ignore[assignment]  # (typeshed: an overload)
    default_time_format = "%Y-%m-%dT%H:%M:%S"
    default_msec_format = "%s.%03dZ"

    def format(self, record: logging.LogRecord) -> str:
        """The line, then its fields in brackets."""
        line = super().format(record)
        fields = [f"{k}={getattr(record, k)!r}" for k in self.FIELDS if hasattr(record, k)]
        return f"{line} [{' '.join(fields)}]" if fields else line


__all__ = ["FieldsFormatter", "JsonFormatter", "fields_of", "utc_time"]
