"""durably's metrics, through the OpenTelemetry metrics API: counters of what workers do,
a histogram of step durations, and gauges of what the stores hold (published by workers
that sample them, `publish`).

Labels come from a bounded set: a process keeps at most `TENANT_LABELS` tenant names (and
`STEP_LABELS` step names); every one seen after those is counted under ``"other"``, so a
fleet with many tenants cannot grow a metric without end. Every function here returns at
once when no meter provider is set (`metrics_on`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from durably.otel.api import metrics_on, otel_metrics

METER_NAME = "durably"
OTHER = "other"
"""The label of every tenant (or step name) past the bounded set."""

TENANT_LABELS = 100
"""How many tenant names one process labels metrics with; later ones are ``"other"``."""

STEP_LABELS = 200
"""How many step names one process labels step durations with; later ones are ``"other"``."""

ITEM_EVENTS = ("claimed", "completed", "failed", "retried", "dead_lettered")
"""What the counters ``durably.items.<event>`` count, per queue and tenant."""


class BoundedLabels:
    """The first ``limit`` distinct values keep their name; the rest read ``"other"``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        if value in self._known:
            return value
        with self._lock:
            if len(self._known) < self.limit:
                self._known.add(value)
                return value
        return OTHER

    def reset(self, limit: int | None = None) -> None:
        """Forget the names kept so far (and set a new ``limit``)."""
        with self._lock:
            self._known.clear()
            if limit is not None:
                self.limit = limit


tenants = BoundedLabels(TENANT_LABELS)
steps = BoundedLabels(STEP_LABELS)


@dataclass(frozen=True)
class QueueGauges:
    """One queue as a store reported it."""

    queue: str
    depth: int
    claimed: int
    dead_lettered: int
    oldest_due_age_seconds: float


@dataclass(frozen=True)
class Gauges:
    """What one worker last read from its stores and its own slots (`durably.otel.read_gauges`)."""

    queues: tuple[QueueGauges, ...] = ()
    workflows_by_status: dict[str, int] = field(default_factory=dict)
    """Workflows per status, counted up to a bound per status (`read_gauges`)."""
    running_items: dict[str, int] = field(default_factory=dict)
    """Items this worker's handlers run now, per queue."""
    running_passes: dict[str, int] = field(default_factory=dict)
    """Passes this worker runs now, per workflow kind."""


_published: dict[str, Gauges] = {}
_lock = threading.Lock()


def publish(worker: str, gauges: Gauges | None) -> None:
    """Make ``gauges`` what the gauges of ``worker`` report (None: withdraw them)."""
    with _lock:
        if gauges is None:
            _published.pop(worker, None)
        else:
            _published[worker] = gauges
    if gauges is not None:
        ensure_instruments()  # gauges report only once their instruments exist


def _snapshots() -> list[Gauges]:
    with _lock:
        return list(_published.values())


class _Instruments:
    def __init__(self) -> None:
        meter = otel_metrics.get_meter(METER_NAME)
        self.items = {
            event: meter.create_counter(
                f"durably.items.{event}", unit="{item}", description=f"work items {event}"
            )
            for event in ITEM_EVENTS
        }
        self.leases_lost = meter.create_counter(
            "durably.leases.lost",
            unit="{lease}",
            description="item leases and workflow claims lost while their work ran",
        )
        self.passes = meter.create_counter(
            "durably.workflow.passes", unit="{pass}", description="workflow passes by outcome"
        )
        self.step_duration = meter.create_histogram(
            "durably.step.duration", unit="s", description="time a performed step took"
        )
        for name, unit, description, read in _GAUGES:
            meter.create_observable_gauge(
                name, callbacks=[_observer(read)], unit=unit, description=description
            )


def _observer(read: Any) -> Any:
    def observe(options: Any) -> Iterable[Any]:
        return [
            otel_metrics.Observation(value, attributes)
            for gauges in _snapshots()
            for value, attributes in read(gauges)
        ]

    return observe


_GAUGES: list[tuple[str, str, str, Any]] = [
    (
        "durably.queue.depth",
        "{item}",
        "items waiting in a queue (due or delayed)",
        lambda g: [(q.depth, {"queue": q.queue}) for q in g.queues],
    ),
    (
        "durably.queue.oldest_due_age",
        "s",
        "how long the oldest due item of a queue has waited",
        lambda g: [(q.oldest_due_age_seconds, {"queue": q.queue}) for q in g.queues],
    ),
    (
        "durably.queue.claimed",
        "{item}",
        "items of a queue held by workers now",
        lambda g: [(q.claimed, {"queue": q.queue}) for q in g.queues],
    ),
    (
        "durably.queue.dead_lettered",
        "{item}",
        "dead letters kept for a queue",
        lambda g: [(q.dead_lettered, {"queue": q.queue}) for q in g.queues],
    ),
    (
        "durably.items.running",
        "{item}",
        "items this worker's handlers run now",
        lambda g: [(n, {"queue": q}) for q, n in g.running_items.items()],
    ),
    (
        "durably.workflow.running",
        "{pass}",
        "workflow passes this worker runs now",
        lambda g: [(n, {"kind": k}) for k, n in g.running_passes.items()],
    ),
    (
        "durably.workflows",
        "{workflow}",
        "workflows by status (each counted up to a bound)",
        lambda g: [(n, {"status": s}) for s, n in g.workflows_by_status.items()],
    ),
]

_instruments: _Instruments | None = None


def _made() -> _Instruments:
    global _instruments
    if _instruments is None:
        with _lock:
            if _instruments is None:
                _instruments = _Instruments()
    return _instruments


def item_event(event: str, queue: str, tenant: str) -> None:
    """Count one ``event`` (`ITEM_EVENTS`) of an item of ``queue`` for ``tenant``."""
    if metrics_on():
        _made().items[event].add(1, {"queue": queue, "tenant": tenants(tenant)})


def lease_lost(tenant: str, *, queue: str | None = None, kind: str | None = None) -> None:
    """Count a lease (an item's, by ``queue``) or a claim (a pass's, by ``kind``) lost."""
    if metrics_on():
        where = {"queue": queue} if queue is not None else {"kind": str(kind)}
        _made().leases_lost.add(1, {**where, "tenant": tenants(tenant)})


def pass_ended(kind: str, tenant: str, outcome: str) -> None:
    """Count one workflow pass of ``kind`` for ``tenant`` ending with ``outcome``."""
    if metrics_on():
        _made().passes.add(1, {"kind": kind, "tenant": tenants(tenant), "outcome": outcome})


def step_timed(kind: str, step: str, tenant: str, outcome: str, seconds: float) -> None:
    """Record how long a performed step took."""
    if metrics_on():
        _made().step_duration.record(
            seconds,
            {"kind": kind, "step": steps(step), "tenant": tenants(tenant), "outcome": outcome},
        )


def ensure_instruments() -> None:
    """Create the instruments now (gauges report only once created), if metrics are on."""
    if metrics_on():
        _made()


__all__ = [
    "ITEM_EVENTS",
    "METER_NAME",
    "OTHER",
    "STEP_LABELS",
    "TENANT_LABELS",
    "BoundedLabels",
    "Gauges",
    "QueueGauges",
    "ensure_instruments",
    "item_event",
    "lease_lost",
    "pass_ended",
    "publish",
    "step_timed",
    "steps",
    "tenants",
]
