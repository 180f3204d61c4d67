"""A Prometheus endpoint for durably's metrics (``durably worker --metrics-port``): an
OpenTelemetry meter provider whose reader is the OpenTelemetry Prometheus exporter, served
over HTTP by ``prometheus-client``. Needs the ``prometheus`` extra."""

from __future__ import annotations

from typing import Any

from durably.errors import ConfigurationError
from durably.otel import api
from durably.otel.instruments import ensure_instruments
from durably.validation import identifier

DEFAULT_HOST = "127.0.0.1"


def serve_prometheus(port: int, host: str = DEFAULT_HOST) -> Any:
    """Serve durably's metrics for Prometheus at ``http://host:port/metrics`` from a thread
    of this process, and set the global meter provider that feeds it.

    Binds ``127.0.0.1`` unless told otherwise. Returns the HTTP server (``shutdown()``
    stops it).

    Raises:
        InvalidInputError: A ``port`` outside 0-65535 or an empty ``host``.
        ConfigurationError: The ``prometheus`` extra is not installed, or a meter
            provider was set already (the API keeps the first one).
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        from durably.errors import InvalidInputError

        raise InvalidInputError(f"port must be an int from 0 to 65535, got {port!r}")
    identifier(host, "host")
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider
        from prometheus_client import start_http_server
    except ImportError as exc:
        raise ConfigurationError(
            f"metrics for Prometheus need the prometheus extra (pip install "
            f"'durably[prometheus]'): {exc}"
        ) from None
    if api.metrics_on():
        raise ConfigurationError(
            "a meter provider is set already: add a PrometheusMetricReader to it instead"
        )
    server, _thread = start_http_server(port, addr=host)
    api.otel_metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader()]))
    ensure_instruments()
    return server


__all__ = ["DEFAULT_HOST", "serve_prometheus"]
