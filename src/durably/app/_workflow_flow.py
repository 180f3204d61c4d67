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

from durably.app._task_flow import tick_parameter_of
from durably.app._values import Duration, Signature, seconds_of
from durably.engine.schedules import Schedule
from durably.errors import InvalidInputError
from durably.validation import identifier


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
        tick_parameter = None
        if cron is None:
            if tz is not None:
                raise InvalidInputError("tz applies to cron= only: give cron= too")
        else:
            if not isinstance(cron, str):
                raise InvalidInputError(f"cron must be a cron expression string, got {cron!r}")
            if tz is not None and not isinstance(tz, str):
                raise InvalidInputError(f"tz must be an IANA time zone name, got {tz!r}")
            Schedule(kind, cron, tz="UTC" if tz is None else tz)  # the cron and tz parse
            tick_parameter = tick_parameter_of(f"cron workflow {kind!r}", signature)
        window = None if debounce is None else seconds_of(debounce, "debounce")
        if debounce_key is not None:
            if not callable(debounce_key):
                raise InvalidInputError(
                    "debounce_key must be a callable of the workflow's arguments, "
                    f"got {debounce_key!r}"
                )
            if window is None:
                raise InvalidInputError("debounce_key needs debounce= (the window)")
        return cls(
            kind=kind,
            cron=cron if isinstance(cron, str) else None,
            tz=tz if isinstance(tz, str) else "UTC",
            tick_parameter=tick_parameter,
            debounce=window,
            key_of=debounce_key if callable(debounce_key) else None,
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
            try:
                value = self.key_of(*args, **kwargs)
            except Exception as exc:
                raise InvalidInputError(
                    f"workflow {self.kind!r}: debounce_key failed: {exc!r}"
                ) from None
            if not isinstance(value, str):
                raise InvalidInputError(
                    f"workflow {self.kind!r}: debounce_key must return a string, "
                    f"got {type(value).__name__}"
                )
            key = identifier(value, "debounce_key")
        named = json.dumps([tenant, self.kind, key], ensure_ascii=False)
        return hashlib.sha256(named.encode()).hexdigest()


__all__ = ["WorkflowFlow"]
