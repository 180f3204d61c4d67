"""What a driver error means (SQLSTATE mapping) and how unbound calls retry.

Transient failures (lost connections, server shutdown, serialization failures, deadlocks)
are retried with doubling, jittered backoff up to ``max_attempts``; a missing table or
column is a deployment error (`ConfigurationError` naming `migrate`); an exhausted pool is
raised at once. No message ever carries the DSN: connection errors are reported by type.
"""

from __future__ import annotations

import asyncio
import functools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import SecretStr

from durably.clock import Clock, SystemClock
from durably.errors import (
    ConfigurationError,
    DurablyError,
    InvalidInputError,
    PoolExhaustedError,
    QueueUnavailableError,
    StatePersistenceError,
    StoreUnavailableError,
)
from durably.stores.backoff import FAILOVER_SECONDS, PAUSE_CAP_SECONDS, Jitter, pause_seconds
from durably.stores.dsn import scrub

Kind = Literal["configuration", "contended", "transient", "invalid", "failed", "exhausted"]

_CONFIGURATION = frozenset({"42P01", "42703", "3F000", "42883", "42704"})
_CONTENDED = frozenset({"40001", "40P01"})
_TOO_MANY_CONNECTIONS = "53300"
# The server's words for 53300, for psycopg, which reports a refused connection without
# its SQLSTATE: the server is out of connections (for everyone, the role or the database).
_OUT_OF_CONNECTIONS = (
    "too many clients",
    "too many connections",
    "remaining connection slots are reserved",
)
# Connection exceptions, insufficient resources, operator intervention (admin shutdown,
# crash recovery), and the two contention states: worth another try on a fresh connection.
_TRANSIENT_PREFIXES = ("08", "53", "57P", "40")


@dataclass(frozen=True, slots=True)
class RetryBudget:
    """How hard an unbound call tries: attempts (first included) and the first delay; the
    pauses run on ``clock`` (the store's) with ``jitter`` drawn as `pause_seconds` says."""

    max_attempts: int = 100
    backoff_seconds: float = 0.05
    pool_timeout_seconds: float = 5.0
    budget_seconds: float = FAILOVER_SECONDS
    cap_seconds: float = PAUSE_CAP_SECONDS
    clock: Clock = field(default_factory=SystemClock)
    jitter: Jitter = random.random

    def delay(self, attempt: int) -> float:
        """Jittered delay after failed try number ``attempt`` (1-based), doubling."""
        return pause_seconds(self.backoff_seconds, attempt, self.jitter, self.cap_seconds)


class EffectFailed(Exception):
    """Carries an exception raised by caller code (a `transact` effect) past the mapping,
    so it is re-raised unchanged and never retried."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


def sqlstate(error: BaseException) -> str | None:
    """The SQLSTATE of a psycopg or asyncpg error, when the server sent one."""
    code = getattr(error, "sqlstate", None)
    return code if isinstance(code, str) else None


def _driver_error(error: BaseException) -> bool:
    module = type(error).__module__
    return module.startswith(("psycopg", "asyncpg")) or isinstance(
        error, OSError | ConnectionError | asyncio.TimeoutError
    )


def classify(error: BaseException) -> Kind | None:
    """How to treat ``error``; None for anything that is not a driver error."""
    if not _driver_error(error):
        return None
    code = sqlstate(error)
    if out_of_connections(error):
        return "exhausted"
    if code is None:
        name = type(error).__name__
        # Client-side errors with no SQLSTATE: a dropped connection is transient, a value
        # the driver refused to send (e.g. a NUL in text) is not.
        if name == "DataError":
            return "invalid"
        if name in ("ProgrammingError", "NotSupportedError"):
            return "failed"
        return "transient"
    if code.startswith("22"):  # data exception: the value, not the server, is at fault
        return "invalid"
    if code in _CONFIGURATION:
        return "configuration"
    if code in _CONTENDED:
        return "contended"
    if code.startswith(_TRANSIENT_PREFIXES):
        return "transient"
    return "failed"


def out_of_connections(error: BaseException) -> bool:
    """Whether the server refused a connection because it has none left (SQLSTATE 53300):
    not transient for this caller, who should back off (`PoolExhaustedError`)."""
    code = sqlstate(error)
    if code is not None:
        return code == _TOO_MANY_CONNECTIONS
    return any(words in str(error) for words in _OUT_OF_CONNECTIONS)


def server_words(error: BaseException) -> str:
    """What the server said, after ``FATAL:`` when a refused connection quotes it (psycopg
    prefixes the host and port)."""
    text = str(error).strip()
    return text.split("FATAL:", 1)[1].strip() if "FATAL:" in text else text.splitlines()[0]


def describe(error: BaseException) -> str:
    """A DSN-free description: the type, the SQLSTATE and the server's primary message."""
    code = sqlstate(error)
    if code is None:
        return type(error).__name__
    diag = getattr(error, "diag", None)
    message = getattr(diag, "message_primary", None) if diag is not None else None
    if message is None:
        message = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__} (SQLSTATE {code}): {message}"


def connect_error(error: BaseException, dsn: str | SecretStr) -> DurablyError:
    """What a failed first connection means, without the DSN's secrets: what the server
    refused for who or where (a database or role that does not exist, a failed login, no
    access) is a `ConfigurationError`; a server out of connections a `PoolExhaustedError`;
    anything else (refused, unreachable, starting up, shutting down, timed out) a
    `StoreUnavailableError`."""
    code = sqlstate(error)
    words = scrub(server_words(error), dsn) or type(error).__name__
    if out_of_connections(error):
        return PoolExhaustedError("postgres", None, f"the server refused: {words}")
    refused = code.startswith(("3D", "28", "42")) if code is not None else None
    if refused is None:  # psycopg: no SQLSTATE, only the server's words after FATAL
        refused = "FATAL:" in str(error) and any(w in words for w in _REFUSED_WORDS)
    if refused:
        return ConfigurationError(f"the server refused the connection: {words}")
    return StoreUnavailableError(f"cannot connect: {words}")


# What the server says when it refuses a connection for who or where it is to: the
# deployment is wrong, and trying again will not help.
_REFUSED_WORDS = ("does not exist", "authentication failed", "pg_hba.conf", "permission denied")


ErrorFactory = Callable[[Kind, str], DurablyError]


def state_errors(kind: Kind, detail: str) -> DurablyError:
    """Errors for the state store, checkpointer and scheduler."""
    if kind == "configuration":
        return _configuration(detail)
    if kind == "invalid":
        return _invalid(detail)
    reason: Literal["contended", "unavailable"] = (
        "contended" if kind == "contended" else "unavailable"
    )
    return StatePersistenceError("postgres", reason, detail)


@functools.lru_cache(maxsize=1024)
def queue_errors(queue: str, operation: str) -> ErrorFactory:
    """Errors for one queue operation (one factory per queue and operation, not per call)."""

    def build(kind: Kind, detail: str) -> DurablyError:
        if kind == "configuration":
            return _configuration(detail)
        if kind == "invalid":
            return _invalid(detail)
        return QueueUnavailableError(queue, operation, detail)

    return build


def _invalid(detail: str) -> InvalidInputError:
    # What durably's own checks let through (a custom codec's text that is not JSON, say)
    # and PostgreSQL refused as data: the input's fault, so never "unavailable".
    return InvalidInputError(f"PostgreSQL refused the value ({detail})")


def _configuration(detail: str) -> ConfigurationError:
    return ConfigurationError(
        f"durably's PostgreSQL schema is missing or out of date ({detail}); "
        "apply it with durably.postgres.migrate() or `durably migrate`"
    )


async def after_failure(
    error: Exception,
    number: int,
    tries: int,
    budget: RetryBudget,
    errors: ErrorFactory,
    pool_size: int | None = None,
    deadline: float = math.inf,
) -> None:
    """Try ``number`` of ``tries`` failed with ``error``: return after the backoff when a
    transient error leaves tries (and time before ``deadline``, on the budget's clock) to
    spend, else raise what the caller should see (a server out of connections at once, as
    `PoolExhaustedError` of a pool of ``pool_size``)."""
    if isinstance(error, EffectFailed):
        raise error.error from None
    if isinstance(error, DurablyError):
        raise error
    kind = classify(error)
    if kind is None:
        raise error
    if kind == "exhausted":
        detail = f"the server refused a connection: {server_words(error)}"
        raise PoolExhaustedError("postgres", pool_size, detail) from None
    if kind in ("transient", "contended") and number < tries:
        pause = budget.delay(number)
        if budget.clock.now() + pause <= deadline:
            await budget.clock.sleep(pause)
            return
    mapped = errors(kind, describe(error))
    if sqlstate(error) is None:
        # A client-side error may quote connection parameters: do not chain it.
        raise mapped from None
    raise mapped from error


__all__ = [
    "EffectFailed",
    "RetryBudget",
    "after_failure",
    "classify",
    "describe",
    "queue_errors",
    "state_errors",
]
