"""The one place durably imports OpenTelemetry: the API when it is installed, and whether a
provider is configured. Everything else in durably asks this module, so that without the
``otel`` extra, or with it and no provider, instrumentation costs a check and nothing more."""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import propagate as otel_propagate
    from opentelemetry import trace as otel_trace
except ImportError:  # the `otel` extra is not installed: every hook is a no-op
    INSTALLED = False
    otel_context = otel_metrics = otel_propagate = otel_trace = None  # type: ignore[assignment]
else:
    INSTALLED = True

_UNSET_TRACING: tuple[type[Any], ...] = ()
_metrics_module: ModuleType | None = None
_UNSET_METRICS: tuple[type[Any], ...] = ()
if INSTALLED:
    _UNSET_TRACING = (otel_trace.ProxyTracerProvider, otel_trace.NoOpTracerProvider)
    try:
        # The stand-in the API hands out before a provider is set has no public name.
        from opentelemetry.metrics import _internal as _metrics_module
        from opentelemetry.metrics._internal import _ProxyMeterProvider
    except ImportError:  # pragma: no cover - a later API moved it: the no-op one only
        _metrics_module = otel_metrics
        _UNSET_METRICS = (otel_metrics.NoOpMeterProvider,)
    else:
        _UNSET_METRICS = (_ProxyMeterProvider, otel_metrics.NoOpMeterProvider)


# A provider, once set, is never replaced (the API refuses to), so the answer is kept once
# one is set. Until then each check reads the API's global directly: asking the API
# (`get_tracer_provider`) looks up an environment variable each time, which costs a
# claim+complete loop several percent; the variable is looked up once here instead.
_tracing: bool | None = None if INSTALLED else False
_metrics: bool | None = None if INSTALLED else False
_FROM_ENV = INSTALLED and any(
    name in os.environ for name in ("OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER")
)


def tracing_on() -> bool:
    """Whether spans are recorded: the API is installed and a tracer provider is set."""
    global _tracing
    if _tracing is not None:
        return _tracing
    if not _FROM_ENV and getattr(otel_trace, "_TRACER_PROVIDER", True) is None:
        return False  # none set yet
    _tracing = not isinstance(otel_trace.get_tracer_provider(), _UNSET_TRACING)
    return _tracing


def metrics_on() -> bool:
    """Whether measurements are kept: the API is installed and a meter provider is set."""
    global _metrics
    if _metrics is not None:
        return _metrics
    if not _FROM_ENV and getattr(_metrics_module, "_METER_PROVIDER", True) is None:
        return False  # none set yet
    _metrics = not isinstance(otel_metrics.get_meter_provider(), _UNSET_METRICS)
    return _metrics


def watching() -> bool:
    """Whether spans or measurements are kept at all: one check for a hot path."""
    if _tracing or _metrics:
        return True
    if _tracing is False and _metrics is False:
        return False
    return tracing_on() or metrics_on()


__all__ = [
    "INSTALLED",
    "metrics_on",
    "otel_context",
    "otel_metrics",
    "otel_propagate",
    "otel_trace",
    "tracing_on",
    "watching",
]
