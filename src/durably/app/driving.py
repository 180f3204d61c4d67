"""How an `App` runs its workflows: `serve` over the engine's `Worker`, and
`run_until_idle` (for tests) over the same per-kind service, one pass at a time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from durably.clock import ManualClock
from durably.errors import ConfigurationError
from durably.serving import Context as ServingContext
from durably.serving import WorkflowService
from durably.work import QueuePolicy
from durably.worker import LOGGER_NAME, Worker

if TYPE_CHECKING:
    from durably.app.app import App
    from durably.app.workflow import Workflow

# A guard against a workflow that never stops being ready (a bug, not a test's intent).
MAX_PASSES = 100_000


class Driver:
    """Serves or drives the workflows registered on one App."""

    def __init__(self, app: App) -> None:
        self._app = app
        self._dues: list[float] = []

    def _kinds(self, names: Iterable[str] | None) -> list[str]:
        registered = self._app.workflows
        if names is None:
            return list(registered)
        kinds = list(names)
        unknown = [kind for kind in kinds if kind not in registered]
        if unknown:
            raise ConfigurationError(f"no workflow registered under kind(s) {unknown}")
        return kinds

    async def serve(self, workflows: Iterable[str] | None, queues: Iterable[str] | None) -> None:
        """Run a `Worker` for the kinds named (default: all) until it is stopped."""
        kinds = self._kinds(workflows)
        if queues is not None and list(queues):
            raise ConfigurationError(f"no task queue registered under {list(queues)}")
        await self._app.stores()
        worker = Worker(clock=self._app.clock)
        for kind in kinds:
            workflow = self._app.workflows[kind]
            worker.workflow(kind, workflow.body, self._app.durable(kind), **_options(workflow))
        await worker.run()

    async def run_until_idle(self, *, advance: bool) -> int:
        """Run every ready workflow one pass at a time until none is; with ``advance`` and a
        `ManualClock`, move the clock to the next deadline noted and go on."""
        await self._app.stores()
        clock = self._app.clock
        ctx = ServingContext(
            worker="run_until_idle",
            clock=clock,
            logger=logging.getLogger(LOGGER_NAME),
            poll_seconds=0.05,
            stopping=asyncio.Event(),
            note_due=self._dues.append,
            fatal=_raise,
        )
        services = [
            WorkflowService(
                kind, workflow.body, self._app.durable(kind), concurrency=1, **_options(workflow)
            )
            for kind, workflow in self._app.workflows.items()
        ]
        passes = 0
        while passes < MAX_PASSES:
            now = clock.now()
            ran = False
            for service in services:
                scheduler = service.durable.scheduler
                await scheduler.wake_due(now)
                while (delivery := await scheduler.next_ready(0.0)) is not None:
                    await service.serve_one(ctx, delivery)
                    passes += 1
                    ran = True
            if ran:
                continue
            self._dues[:] = [due for due in self._dues if due > now]
            if not advance or not self._dues or not isinstance(clock, ManualClock):
                return passes
            clock.advance(min(self._dues) - now)
        raise RuntimeError(f"run_until_idle: still busy after {MAX_PASSES} passes")


def _options(workflow: Workflow[Any, Any]) -> dict[str, Any]:
    """How the engine serves ``workflow``: its body retries (only with ``retry=``; a store
    error on the way is retried by the default policy), its crash recoveries, a pass's
    budget and liveness window."""
    retry = workflow.retry
    policy = (
        QueuePolicy()
        if retry is None
        else QueuePolicy(
            max_attempts=retry.max_attempts,
            backoff_seconds=max(retry.initial, 0.001),
            backoff_cap_seconds=max(retry.maximum, retry.initial, 0.001),
        )
    )
    return {
        "policy": policy,
        "max_recoveries": workflow.max_recovery_attempts,
        "budget": 3600.0,
        "alive": 30.0,
    }


def _raise(exc: BaseException) -> None:
    raise exc


__all__ = ["MAX_PASSES", "Driver"]
