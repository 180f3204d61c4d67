"""Driving every backing in lockstep: one random sequence of calls, made on memory, SQLite,
PostgreSQL and Redis alike, each answer compared with memory's.

A machine (a hypothesis `RuleBasedStateMachine`) builds one fresh store per backing for
each example, each over its own `ManualClock`, and moves the clocks together. Every rule
calls `Lockstep.each`: the same call on every backing, answers (values or exceptions)
normalised by `canon` and required equal. What legitimately differs is normalised away by
the machine (claim tokens, receipts, cursors, times from a store's own clock).

Budget: a few short, derandomized examples by default, so CI replays the same sequences
every run; ``make fuzz`` sets DURABLY_FUZZ_EXAMPLES (and optionally DURABLY_FUZZ_STEPS) for
long random runs, which print a ``@reproduce_failure`` blob for anything they find.
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test
from pydantic import BaseModel

from durably.clock import ManualClock
from durably.errors import (
    Interruption,
    LeaseLostError,
    StateConflictError,
    StateNotFoundError,
    StatePersistenceError,
)
from durably.postgres import StateTables, migrate
from durably.sqlite import Database, connect
from tests.pg_service import close_pool, open_pool
from tests.redis_service import drop_namespaces, unique_namespace

T = TypeVar("T")
S = TypeVar("S")

START = 1_000_000.0
BACKINGS = ("memory", "sqlite", "postgres", "redis")

_FUZZ_EXAMPLES = int(os.environ.get("DURABLY_FUZZ_EXAMPLES", "0"))
_FUZZ_STEPS = int(os.environ.get("DURABLY_FUZZ_STEPS", "0"))


def budget(examples: int, steps: int) -> settings:
    """The machine's budget: ``examples`` sequences of up to ``steps`` rules, derandomized
    (the same sequences every run), unless DURABLY_FUZZ_EXAMPLES asks for a random hunt.
    Only a hunt shrinks what it finds: shrinking a sequence over four datastores takes
    minutes, longer than CI gives a test."""
    fuzz = _FUZZ_EXAMPLES > 0
    return settings(
        max_examples=_FUZZ_EXAMPLES or examples,
        stateful_step_count=_FUZZ_STEPS or steps,
        deadline=None,
        derandomize=not fuzz,
        database=None,
        phases=tuple(Phase) if fuzz else (Phase.explicit, Phase.reuse, Phase.generate),
        print_blob=True,
        suppress_health_check=list(HealthCheck),
    )


class Services:
    """One event loop and the servers' clients, shared by the examples of a machine test.

    Hypothesis runs a machine synchronously, so every call goes through `run` on this
    loop. Stores are made fresh per example (`database`, `tables`, `namespace`) and what
    they hold open is closed by `release` when the example ends.
    """

    def __init__(self, postgres_dsn: str, redis_port: int) -> None:
        from redis.asyncio import Redis

        self.loop = asyncio.new_event_loop()
        self._directory = Path(tempfile.mkdtemp(prefix="durably-lockstep-"))
        self.pool: Any = self.run(open_pool("psycopg", postgres_dsn))
        self.redis: Any = Redis(host="127.0.0.1", port=redis_port)
        self._databases: list[Database] = []
        self._closers: list[Any] = []
        self._namespaces: list[str] = []

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    async def database(self) -> Database:
        """A fresh SQLite file."""
        database = await connect(self._directory / f"{uuid.uuid4().hex}.db")
        self._databases.append(database)
        return database

    async def tables(self) -> StateTables:
        """A fresh, migrated PostgreSQL schema of tables."""
        tables = StateTables(schema=f"m_{uuid.uuid4().hex[:16]}")
        await migrate(self.pool, tables)
        return tables

    def namespace(self) -> str:
        """A fresh Redis key namespace (dropped by `release`)."""
        ns = unique_namespace()
        self._namespaces.append(ns)
        return ns

    def track(self, store: T) -> T:
        """Close ``store`` (a PostgreSQL listener) when the example ends."""
        self._closers.append(store)
        return store

    async def release(self) -> None:
        """Close what this example opened and drop its Redis keys."""
        while self._closers:
            await self._closers.pop().close()
        while self._databases:
            await self._databases.pop().close()
        await drop_namespaces(self.redis, self._namespaces)
        self._namespaces.clear()

    def close(self) -> None:
        self.run(self.release())
        self.run(self.redis.aclose())
        self.run(close_pool(self.pool))
        self.loop.close()
        shutil.rmtree(self._directory, ignore_errors=True)


@dataclass
class Backing(Generic[S]):
    """One backing's store(s) for an example, and the clock it was given."""

    name: str
    store: S
    clock: ManualClock = field(default_factory=lambda: ManualClock(START))


@dataclass(frozen=True)
class Raised:
    """An exception as compared across backings: its type and the fields callers read."""

    kind: str
    detail: tuple[object, ...] = ()


def raised(error: BaseException) -> Raised:
    """What of ``error`` every backing must agree on (messages may differ)."""
    if isinstance(error, LeaseLostError):
        return Raised("LeaseLostError", (error.reason, error.holder, error.worker))
    if isinstance(error, StateConflictError):
        return Raised("StateConflictError", (error.expected_version, error.actual_version))
    if isinstance(error, StateNotFoundError):
        return Raised("StateNotFoundError")
    if isinstance(error, StatePersistenceError):
        return Raised("StatePersistenceError", (error.reason,))
    return Raised(type(error).__name__)


def canon(value: object) -> object:
    """``value`` in a form where equal means the same to a caller: a float is not an int,
    ``-0.0`` is not ``0.0``, and a mapping's key order (which ``jsonb`` changes) is not
    part of a value. Models compare field by field."""
    if isinstance(value, BaseException):
        return raised(value)
    if isinstance(value, BaseModel):
        return canon(value.model_dump())
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", repr(value) if not math.isnan(value) else "nan")
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), canon(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("list", tuple(canon(v) for v in value))
    if isinstance(value, frozenset | set):
        return ("set", tuple(sorted(repr(canon(v)) for v in value)))
    return ("other", repr(value))


async def sweep_out(
    sweep: Callable[[int, Callable[[str], Awaitable[None]]], Awaitable[int]], limit: int
) -> tuple[list[int], list[list[str]]]:
    """Call ``sweep(limit, on_swept)`` until a batch comes back short: each batch's count,
    and the workflows each batch swept (sorted within it). Every backing takes the oldest
    finished first, so a limited batch's choice is compared too.
    """
    counts: list[int] = []
    batches: list[list[str]] = []

    async def note(workflow: str) -> None:
        batches[-1].append(workflow)

    while not counts or counts[-1] == limit:
        batches.append([])
        counts.append(await sweep(limit, note))
        batches[-1].sort()
    return counts, batches


def drive(machine: Callable[[], RuleBasedStateMachine], examples: int, steps: int) -> None:
    """Run the machine ``machine()`` builds within `budget` (``examples``, ``steps``)."""
    # Hypothesis accepts any factory of machines here; its annotation says a class.
    run_state_machine_as_test(machine, settings=budget(examples, steps))  # type: ignore[arg-type]


class Disagreement(AssertionError):
    """The backings answered one call differently."""


class Lockstep(RuleBasedStateMachine, Generic[S]):
    """A machine over one store per backing; subclasses build them in `build`."""

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.services = services
        self.backings: list[Backing[S]] = services.run(self.build())

    async def build(self) -> list[Backing[S]]:
        raise NotImplementedError

    def teardown(self) -> None:
        self.services.run(self.services.release())

    def advance(self, seconds: float) -> None:
        """Move every backing's clock by the same amount."""
        for backing in self.backings:
            backing.clock.advance(seconds)

    def each(
        self,
        call: Callable[[Backing[S]], Awaitable[T]],
        normal: Callable[[Any], object] = canon,
        label: str = "",
    ) -> list[T | BaseException]:
        """``call`` on every backing in turn; every answer, after it was checked equal."""

        async def all_of() -> list[T | BaseException]:
            answers: list[T | BaseException] = []
            for backing in self.backings:
                try:
                    answers.append(await call(backing))
                except (Exception, Interruption) as error:
                    answers.append(error)
            return answers

        answers = self.services.run(all_of())
        agree([b.name for b in self.backings], answers, normal, label)
        return answers


def agree(
    names: Sequence[str], answers: Sequence[object], normal: Callable[[Any], object], label: str
) -> None:
    """Raise `Disagreement` unless every answer normalises to the first one."""
    seen = [
        normal(answer) if not isinstance(answer, BaseException) else raised(answer)
        for answer in answers
    ]
    if any(one != seen[0] for one in seen[1:]):
        lines = "\n".join(
            f"  {name}: {one!r}" + (f"  ({answer!r})" if isinstance(answer, BaseException) else "")
            for name, one, answer in zip(names, seen, answers, strict=True)
        )
        raise Disagreement(f"backings disagree on {label}:\n{lines}")


__all__ = [
    "BACKINGS",
    "START",
    "Backing",
    "Disagreement",
    "Lockstep",
    "Raised",
    "Services",
    "agree",
    "budget",
    "canon",
    "drive",
    "raised",
    "sweep_out",
]
