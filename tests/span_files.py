"""Spans and metrics of test processes, written to files: each process sets the global
OpenTelemetry providers once (the API keeps the first), so tests that need them run their
scenario in a process of its own, which writes what it recorded for the test to read.

`trace_to(path)` exports every span as it ends, one JSON object a line, so a process
killed with SIGKILL leaves every span it had ended; `read_spans` assembles several files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


def trace_to(path: Path) -> None:
    """Record this process's spans, each appended to ``path`` as it ends."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class JsonLines(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            with path.open("a") as sink:
                for span in spans:
                    sink.write(json.dumps(_plain(span)) + "\n")
                sink.flush()
                os.fsync(sink.fileno())
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLines()))
    trace.set_tracer_provider(provider)


def _plain(span: Any) -> dict[str, Any]:
    context = span.get_span_context()
    parent = span.parent
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_id": None if parent is None else f"{parent.span_id:016x}",
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
        "pid": os.getpid(),
    }


def read_spans(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every span the files hold (a file that was never written holds none)."""
    spans: list[dict[str, Any]] = []
    for path in paths:
        if path.exists():
            spans += [json.loads(line) for line in path.read_text().splitlines() if line]
    return spans
