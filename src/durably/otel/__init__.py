"""durably.otel: traces and metrics through OpenTelemetry, and a Prometheus endpoint.

With the ``otel`` extra installed and a tracer or meter provider set, durably's workers
record spans (an item enqueued and handled, each workflow pass, each step and
``transact``) and metrics (items claimed, completed, failed, retried, dead-lettered,
leases lost, pass outcomes, step durations, queue depth and lag, workflows by status).
Without the extra, or without a provider, every hook is a no-op. This package is the only
place durably imports OpenTelemetry.
"""

from durably.otel.api import INSTALLED, metrics_on, tracing_on
from durably.otel.instruments import OTHER, STEP_LABELS, TENANT_LABELS, Gauges, QueueGauges
from durably.otel.instruments import tenants as tenant_labels
from durably.otel.prometheus import serve_prometheus
from durably.otel.readers import (
    STATUS_BOUND,
    read_gauges,
    read_queues,
    read_workflows_by_status,
)
from durably.otel.tracing import enqueuing, trace_ids

__all__ = [
    "INSTALLED",
    "OTHER",
    "STATUS_BOUND",
    "STEP_LABELS",
    "TENANT_LABELS",
    "Gauges",
    "QueueGauges",
    "enqueuing",
    "metrics_on",
    "read_gauges",
    "read_queues",
    "read_workflows_by_status",
    "serve_prometheus",
    "tenant_labels",
    "trace_ids",
    "tracing_on",
]
