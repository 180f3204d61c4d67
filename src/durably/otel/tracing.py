"""Spans for durably's work, after OpenTelemetry's messaging conventions: a producer span
where work is sent (an item enqueued, a workflow started), whose context travels with the
work (the item's payload, the workflow's start record), and a consumer span where a worker
processes it (an item handled, a workflow pass), its parent restored from what travelled.
Steps and ``transact`` are internal spans inside their pass.

Every function here returns at once, doing nothing, when tracing is off (`tracing_on`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from durably.otel.api import otel_context, otel_propagate, otel_trace, tracing_on
from durably.stores.work import WorkItem

TRACER_NAME = "durably"
SYSTEM = "durably"
"""The ``messaging.system`` of every durably span."""

PAYLOAD_PREFIX = "durably."
"""A work item carries its producer's context in its payload under the W3C header names
with this prefix (``durably.traceparent``), apart from the handler's own keys."""

START_FIELD = "trace"
"""The field of a workflow's start record holding its producer's context."""

Span = Any
"""An OpenTelemetry span (typed loosely: the API may be absent)."""


def _tracer() -> Any:
    return otel_trace.get_tracer(TRACER_NAME)


def current_carrier() -> dict[str, str] | None:
    """The current trace context as W3C headers (``traceparent``, ``tracestate``), or None
    when tracing is off or no span is current."""
    if not tracing_on():
        return None
    carrier: dict[str, str] = {}
    otel_propagate.inject(carrier)
    return carrier or None


def _context_of(carrier: Mapping[str, object] | None) -> Any:
    if not carrier:
        return None
    headers = {str(k): str(v) for k, v in carrier.items() if isinstance(v, str)}
    return otel_propagate.extract(headers)


def payload_carrier(payload: Mapping[str, str]) -> dict[str, str]:
    """The producer's headers a work item's payload carries (empty without)."""
    return {
        key[len(PAYLOAD_PREFIX) :]: value
        for key, value in payload.items()
        if key.startswith(PAYLOAD_PREFIX)
    }


@contextmanager
def producing(
    operation: str, destination: str, attributes: Mapping[str, Any]
) -> Iterator[dict[str, str] | None]:
    """A producer span ``"{operation} {destination}"`` around sending work; yields the
    headers to store with the work (None when tracing is off)."""
    if not tracing_on():
        yield None
        return
    with _tracer().start_as_current_span(
        f"{operation} {destination}",
        kind=otel_trace.SpanKind.PRODUCER,
        attributes={
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": operation,
            "messaging.destination.name": destination,
            **attributes,
        },
    ):
        yield current_carrier()


@contextmanager
def enqueuing(item: WorkItem) -> Iterator[WorkItem]:
    """A producer span ``"enqueue {queue}"`` around enqueuing ``item``; yields the item to
    enqueue, its payload carrying the span's context (`PAYLOAD_PREFIX`) so the worker that
    handles it continues the trace. Yields ``item`` itself when tracing is off.

    ``with enqueuing(item) as traced: await queue.enqueue(traced)``
    """
    attributes = {"messaging.message.id": item.id, "durably.tenant": item.tenant}
    with producing("enqueue", item.queue, attributes) as carrier:
        if carrier:
            headers = {PAYLOAD_PREFIX + key: value for key, value in carrier.items()}
            item = item.model_copy(update={"payload": {**item.payload, **headers}})
        yield item


class Consuming:
    """A consumer span ``"process {destination}"``, its parent restored from the headers
    the work carried, made current for the work it runs (`attach`), and ended with its
    outcome (`end`)."""

    __slots__ = ("_span", "outcome")

    def __init__(
        self, destination: str, carrier: Mapping[str, object] | None, attributes: dict[str, Any]
    ) -> None:
        self.outcome = "unknown"
        self._span = _tracer().start_span(
            f"process {destination}",
            context=_context_of(carrier),
            kind=otel_trace.SpanKind.CONSUMER,
            attributes={
                "messaging.system": SYSTEM,
                "messaging.operation.type": "process",
                "messaging.operation.name": "process",
                "messaging.destination.name": destination,
                **attributes,
            },
        )

    def attach(self) -> object:
        """Make the span current in this context; returns the token `detach` takes."""
        return otel_context.attach(otel_trace.set_span_in_context(self._span))

    @staticmethod
    def detach(token: object) -> None:
        """Undo an `attach`."""
        otel_context.detach(token)  # type: ignore[arg-type]

    def set(self, key: str, value: Any) -> None:
        """Set one attribute."""
        self._span.set_attribute(key, value)

    def end(self, error: BaseException | None = None) -> None:
        """End the span with ``outcome`` (``durably.outcome``), marked as an error for
        the failed ones."""
        self._span.set_attribute("durably.outcome", self.outcome)
        if error is not None:
            self._span.record_exception(error)
        if error is not None or self.outcome in _FAILED:
            self._span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR))
        self._span.end()


_FAILED = frozenset({"failed", "dead_lettered", "retrying", "parked", "lease_lost"})


class Stepping:
    """An internal span for one step of a workflow pass: ``"step {name}"`` (or
    ``"transact {key}"``), with the workflow, the step's key (its name and occurrence),
    whether it was replayed from its record or performed, its attempts and its outcome."""

    __slots__ = ("_span", "attempt", "started")

    def __init__(
        self,
        operation: str,
        name: str,
        key: str,
        workflow: str,
        kind: str,
        tenant: str,
        *,
        replayed: bool,
    ) -> None:
        self.started = time.perf_counter()
        self.attempt = 0 if replayed else 1
        self._span = _tracer().start_span(
            f"{operation} {name}",
            attributes={
                "durably.workflow.id": workflow,
                "durably.workflow.kind": kind,
                "durably.tenant": tenant,
                "durably.step.key": key,
                "durably.step.replayed": replayed,
                "durably.step.performed": not replayed,
            },
        )

    def attach(self) -> object:
        """Make the span current (a step's own calls nest in it); `Consuming.detach` undoes."""
        return otel_context.attach(otel_trace.set_span_in_context(self._span))

    def end(self, outcome: str, error: BaseException | None = None) -> None:
        """End the span: ``durably.step.outcome`` and ``durably.step.attempt``."""
        self._span.set_attribute("durably.step.outcome", outcome)
        self._span.set_attribute("durably.step.attempt", self.attempt)
        if error is not None:
            self._span.record_exception(error)
            self._span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR))
        self._span.end()


def annotate(attributes: Mapping[str, Any]) -> None:
    """Set ``attributes`` on the current span (nothing when tracing is off)."""
    if tracing_on():
        otel_trace.get_current_span().set_attributes(dict(attributes))


def trace_ids() -> tuple[str, str] | None:
    """The current span's trace and span ids in hex, for log lines; None without one."""
    if not tracing_on():
        return None
    found = otel_trace.get_current_span().get_span_context()
    if not found.is_valid:
        return None
    return f"{found.trace_id:032x}", f"{found.span_id:016x}"


__all__ = [
    "PAYLOAD_PREFIX",
    "START_FIELD",
    "SYSTEM",
    "TRACER_NAME",
    "Consuming",
    "Stepping",
    "annotate",
    "current_carrier",
    "enqueuing",
    "payload_carrier",
    "producing",
    "trace_ids",
]
