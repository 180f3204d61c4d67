"""What one workflow pass tells traces and metrics: a consumer span ``"process {kind}"``
whose parent is the context stored with the workflow's start, and a count of the pass's
outcome per kind and tenant."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from durably.otel import instruments
from durably.otel.api import tracing_on, watching
from durably.otel.tracing import Consuming

Describe = Callable[[Mapping[str, object]], tuple[str | None, Mapping[str, object] | None]]
"""Reads a workflow's records (loaded for its pass) and returns its tenant and the trace
context its start stored (either None when unknown)."""

UNKNOWN_TENANT = "unknown"
"""The tenant label of a pass whose records do not name one (served without an App)."""


class PassProbe:
    """Follows one pass from its records' load (`begin`) to its end (`end`)."""

    __slots__ = ("_token", "_trace", "kind", "outcome", "tenant", "worker", "workflow")

    def __init__(self, kind: str, workflow: str, worker: str) -> None:
        self.kind = kind
        self.workflow = workflow
        self.worker = worker
        self.tenant = UNKNOWN_TENANT
        self.outcome = "unknown"
        self._trace: Consuming | None = None
        self._token: object | None = None

    @staticmethod
    def wanted() -> bool:
        """Whether passes are traced or measured at all."""
        return watching()

    def begin(self, records: Mapping[str, object], describe: Describe | None) -> None:
        """Start the pass's span, current for the rest of the calling task (the pass's):
        call it in the pass's own task, once its records are loaded."""
        carrier: Mapping[str, object] | None = None
        if describe is not None:
            try:
                tenant, carrier = describe(records)
            except Exception:  # a record of another shape: the pass itself will say so
                tenant, carrier = None, None
            if tenant is not None:
                self.tenant = tenant
        if tracing_on():
            self._trace = Consuming(
                self.kind,
                carrier,
                {
                    "messaging.message.id": self.workflow,
                    "durably.workflow.id": self.workflow,
                    "durably.workflow.kind": self.kind,
                    "durably.tenant": self.tenant,
                    "durably.worker": self.worker,
                },
            )
            self._trace.attach()  # never detached: the task ends with the pass

    def attach(self) -> None:
        """Make the pass's span current in the calling task too (the worker's, which logs
        and settles the pass), until `end`."""
        if self._trace is not None and self._token is None:
            self._token = self._trace.attach()

    def claim_lost(self) -> None:
        """Count the pass's claim as lost."""
        instruments.lease_lost(self.tenant, kind=self.kind)

    def end(self, error: BaseException | None = None) -> None:
        """Count the outcome and end the span (call it in the task that called `attach`)."""
        instruments.pass_ended(self.kind, self.tenant, self.outcome)
        if self._token is not None:
            Consuming.detach(self._token)
            self._token = None
        if self._trace is not None:
            self._trace.outcome = self.outcome
            self._trace.end(error)


__all__ = ["Describe", "PassProbe"]
