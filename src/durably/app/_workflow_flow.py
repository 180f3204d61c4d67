"""`WorkflowFlow`: what a workflow's schedule and debounce options make of its starts.

``cron=`` and ``tz=`` register the kind as a `Schedule` whose ticks start one workflow
each, named by the tick; ``debounce=`` (with ``debounce_key=``) folds the starts of one key
within the window into one pending workflow that runs once, with the last arguments. Both
are checked when the workflow is registered.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from durably.app._task_flow import cron_of, key_answer, key_function
from durably.app._values import Duration, Signature, seconds_of
from durably.engine.schedules import Schedule


@dataclass(frozen=True, slots=True)
class WorkflowFlow:
    """A workflow kind's cron schedule and debounce window, checked at registration."""

    kind: str
    cron: str | None = None
    tz: str = "UTC"
    tick_parameter: str | None = None
    debounce: float | None = None
    key_of: Callable[..., object] | None = None

    @classmethod
    def of(
        cls,
        kind: str,
        signature: Signature,
        *,
        cron: object = None,
        tz: object = None,
        debounce: Duration | None = None,
        debounce_key: object = None,
    ) -> WorkflowFlow:
        """The flow of workflow ``kind`` from its options and its body's ``signature``.

        Raises `InvalidInputError` naming a bad option, and `ConfigurationError` for a
        cron workflow whose parameters a tick cannot fill.
        """
        expression, zone, tick_parameter = cron_of(
            f"cron workflow {kind!r}", kind, cron, tz, signature
        )
        window = None if debounce is None else seconds_of(debounce, "debounce")
        key_of = key_function(
            debounce_key,
            "debounce_key",
            "workflow",
            needs="debounce= (the window)" if window is None else None,
        )
        return cls(
            kind=kind,
            cron=expression,
            tz=zone,
            tick_parameter=tick_parameter,
            debounce=window,
            key_of=key_of,
        )

    def schedule(
        self, tenant: str, starts: Callable[[float], Awaitable[object]]
    ) -> Schedule | None:
        """The cron schedule whose ticks start this workflow (None: not a cron workflow)."""
        if self.cron is None:
            return None
        return Schedule(
            self.kind, self.cron, tz=self.tz, tenant=tenant, workflow=self.kind, starts=starts
        )

    def slot(self, tenant: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
        """The debounce slot of one start: its tenant, kind and key, digested.

        `InvalidInputError` when ``debounce_key`` fails or answers no usable string.
        """
        key = ""
        if self.key_of is not None:
            key = key_answer(self.key_of, args, kwargs, f"workflow {self.kind!r}", "debounce_key")
        named = json.dumps([tenant, self.kind, key], ensure_ascii=False)
        return hashlib.sha256(named.encode()).hexdigest()


__all__ = ["WorkflowFlow"]
