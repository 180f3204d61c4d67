"""`TaskFlow`: what a task's flow-control and schedule options make of its items.

The options (``concurrency=``, ``concurrency_key=``, ``throttle=``, ``cron=``, ``tz=``)
are checked when the task is registered; each item `Task.enqueue` queues then carries the
gates (`durably.stores.work.flow_fields`), and a cron task is registered as a `Schedule`
whose ticks the worker's maintenance enqueues.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from durably.app._values import Signature
from durably.engine.schedules import Schedule
from durably.errors import ConfigurationError, InvalidInputError
from durably.stores.flow import Throttle, flow_limit
from durably.stores.work import FlowFields, flow_fields
from durably.validation import identifier

OPTIONS = frozenset({"concurrency", "concurrency_key", "throttle", "cron", "tz"})
"""The task options `TaskFlow` reads from ``TaskOptions.more``."""


@dataclass(frozen=True, slots=True)
class TaskFlow:
    """A task's gates and cron schedule, checked at registration."""

    name: str
    concurrency: int | None = None
    key_of: Callable[..., object] | None = None
    throttle: Throttle | None = None
    cron: str | None = None
    tz: str = "UTC"
    tick_parameter: str | None = None

    @classmethod
    def of(cls, name: str, more: Mapping[str, object], signature: Signature) -> TaskFlow:
        """The flow of task ``name`` from its options ``more`` and its ``signature``.

        Raises `InvalidInputError` naming a bad option, and `ConfigurationError` for a
        cron task whose parameters a tick cannot fill.
        """
        unknown = sorted(set(more) - OPTIONS)
        if unknown:
            raise InvalidInputError(
                f"task {name!r}: unknown option {unknown[0]!r} (options beside queue, retry, "
                f"timeout and dedupe_ttl: {', '.join(sorted(OPTIONS))})"
            )
        concurrency = more.get("concurrency")
        if concurrency is not None:
            flow_limit(concurrency, "concurrency")
        key_of = key_function(
            more.get("concurrency_key"),
            "concurrency_key",
            "task",
            needs=None if concurrency is not None else "concurrency= (the limit per key)",
        )
        throttle = _throttle(more.get("throttle"))
        cron, tz, tick_parameter = cron_of(
            f"cron task {name!r}", name, more.get("cron"), more.get("tz"), signature
        )
        if cron is not None and key_of is not None:
            raise InvalidInputError(
                "concurrency_key does not apply to a cron task: its ticks share one key"
            )
        return cls(
            name=name,
            concurrency=concurrency if isinstance(concurrency, int) else None,
            key_of=key_of if callable(key_of) else None,
            throttle=throttle,
            cron=cron,
            tz=tz,
            tick_parameter=tick_parameter,
        )

    def fields(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> FlowFields:
        """The gates of one call's item.

        A ``concurrency_key`` callable is called with the call's arguments;
        `InvalidInputError` when it fails or answers no usable string.
        """
        if self.concurrency is None and self.throttle is None:
            return {}
        key = None
        if self.concurrency is not None:
            key = flow_key(f"task {self.name!r}", self.name, self.key_of, args, kwargs)
        return flow_fields(
            concurrency_key=key,
            concurrency_limit=self.concurrency,
            throttle=self.throttle,
            throttle_key=None if self.throttle is None else self.name,
        )

    def schedule(self, queue: str, tenant: str, payload: dict[str, str]) -> Schedule | None:
        """The cron schedule whose ticks enqueue this task (None: not a cron task)."""
        if self.cron is None:
            return None
        return Schedule(
            self.name,
            self.cron,
            tz=self.tz,
            queue=queue,
            tenant=tenant,
            payload=payload,
            gates=self.fields((), {}),
        )


def flow_key(
    what: str,
    name: str,
    key_of: Callable[..., object] | None,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> str:
    """The concurrency key of one call of ``what`` (a task or a workflow kind).

    That is ``name``, or ``name:key`` where ``key_of`` is given, called with the call's
    arguments.

    Raises:
        InvalidInputError: ``key_of`` failed, or answered no string, an unusable one or
            one too long (naming ``concurrency_key``).
    """
    if key_of is None:
        return name
    key = key_answer(key_of, args, kwargs, what, "concurrency_key")
    return identifier(f"{name}:{key}", "concurrency_key")


def key_function(
    value: object, option: str, whose: str, *, needs: str | None
) -> Callable[..., object] | None:
    """Key option ``option`` (``value``) of a ``whose`` (a task or a workflow), checked.

    Raises `InvalidInputError` for one that is not callable, or given while the option
    it needs is not (``needs`` names that option; None: it is given).
    """
    if value is None:
        return None
    if not callable(value):
        raise InvalidInputError(
            f"{option} must be a callable of the {whose}'s arguments, got {value!r}"
        )
    if needs is not None:
        raise InvalidInputError(f"{option} needs {needs}")
    return value


def flow_throttle(value: object) -> Throttle | None:
    """A ``throttle=`` option as a `Throttle` (text such as ``'10/s'`` parsed), or None.

    Raises `InvalidInputError` for anything else.
    """
    return _throttle(value)


def _throttle(value: object) -> Throttle | None:
    if value is None or isinstance(value, Throttle):
        return value
    if isinstance(value, str):
        return Throttle.parse(value)
    raise InvalidInputError(
        f"throttle must be a durably.Throttle or text like '100/minute', got {value!r}"
    )


def key_answer(
    key_of: Callable[..., object],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    what: str,
    option: str,
) -> str:
    """What key callable ``option`` of ``what`` answers for one call's arguments.

    `InvalidInputError` when it fails or answers no usable string (an id's bounds).
    """
    try:
        value = key_of(*args, **kwargs)
    except Exception as exc:
        raise InvalidInputError(f"{what}: {option} failed: {exc!r}") from None
    if not isinstance(value, str):
        raise InvalidInputError(
            f"{what}: {option} must return a string, got {type(value).__name__}"
        )
    return identifier(value, option)


def cron_of(
    what: str, name: str, cron: object, tz: object, signature: Signature
) -> tuple[str | None, str, str | None]:
    """The ``cron=`` and ``tz=`` of ``what`` (a cron task or workflow ``name``), checked.

    Returns the cron expression (None: none), the time zone and the parameter that
    receives the tick's time. Raises `InvalidInputError` naming a bad option and
    `ConfigurationError` for parameters a tick cannot fill.
    """
    if cron is None:
        if tz is not None:
            raise InvalidInputError("tz applies to cron= only: give cron= too")
        return None, "UTC", None
    if not isinstance(cron, str):
        raise InvalidInputError(f"cron must be a cron expression string, got {cron!r}")
    if tz is not None and not isinstance(tz, str):
        raise InvalidInputError(f"tz must be an IANA time zone name, got {tz!r}")
    zone = "UTC" if tz is None else tz
    Schedule(name, cron, tz=zone)  # the cron and tz parse
    return cron, zone, tick_parameter_of(what, signature)


def tick_parameter_of(what: str, signature: Signature) -> str | None:
    """The parameter of a cron task or workflow (``what``) that receives the tick's time.

    That is its one parameter (a workflow's beside the Context), annotated `datetime`;
    None for none, `ConfigurationError` for any other.
    """
    if not signature.parameters:
        return None
    only, *rest = signature.parameters
    if rest or signature.hints.get(only.name) is not datetime:
        raise ConfigurationError(
            f"{what}: it may take no parameter, or one annotated datetime (the tick's time)"
        )
    return str(only.name)


__all__ = [
    "OPTIONS",
    "TaskFlow",
    "cron_of",
    "flow_key",
    "flow_throttle",
    "key_answer",
    "key_function",
    "tick_parameter_of",
]
