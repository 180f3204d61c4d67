"""The demo's bookkeeping in the demo file: batches, the model provider's bill, and which
steps ran or were replayed by which worker.

None of it is durably's own state: it is what the demo reads to tell (and prove) its story.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, Literal

StepOutcome = Literal["ran", "replayed", "failed"]

_NAME = re.compile(r"^--\s*name:\s*(\S+)\s*$", re.MULTILINE)


def _statements() -> dict[str, str]:
    text = (files("durably.demo") / "ledger.sql").read_text(encoding="utf-8")
    parts = _NAME.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


_SQL = _statements()
_TABLES = ("create_batches", "create_calls", "create_steps", "create_control")


@dataclass(frozen=True, slots=True)
class Call:
    """One request to the simulated model; billed when ``billed_at`` is set."""

    workflow: str
    step: str
    worker: str
    started_at: float
    billed_at: float | None
    input_tokens: int
    output_tokens: int
    cost_micros: int

    @property
    def billed(self) -> bool:
        """Whether the provider answered (and charged for) this call."""
        return self.billed_at is not None


@dataclass(frozen=True, slots=True)
class StepEvent:
    """A step of a workflow that ran, was answered from the record, or failed."""

    workflow: str
    step: str
    outcome: str
    worker: str


class Ledger:
    """The demo tables, written through the SQLite `Database` durably's stores use."""

    def __init__(self, database: Any) -> None:
        self._db = database

    async def prepare(self) -> None:
        """Create the demo tables if missing (idempotent)."""

        def create(tx: Any) -> None:
            for name in _TABLES:
                tx.execute(_SQL[name])

        await self._db.transaction(create)

    async def earlier_batches(self) -> int:
        """How many demo batches this file already holds."""
        return int(await self._one(_SQL["count_batches"], ()))

    async def new_batch(self, now: float) -> int:
        """Number a new batch of runs (one more than the last)."""
        return int(await self._one(_SQL["new_batch"], (now,)))

    async def set_provider(self, *, answering: bool) -> None:
        """Let the provider answer calls, or stall every call until told to answer."""
        value = "answering" if answering else "stalled"
        await self._db.transaction(lambda tx: tx.execute(_SQL["set_provider"], (value,)))

    async def start_call(
        self, batch: int, workflow: str, step: str, worker: str, now: float
    ) -> int:
        """Note a request as sent (not yet billed); its id."""
        return int(await self._one(_SQL["start_call"], (batch, workflow, step, worker, now)))

    async def bill_call(
        self, call_id: int, *, now: float, input_tokens: int, output_tokens: int, cost_micros: int
    ) -> bool:
        """Bill the call if the provider is answering; False while it is stalled."""
        params = (now, input_tokens, output_tokens, cost_micros, call_id)
        count = await self._db.transaction(
            lambda tx: tx.execute(_SQL["bill_call"], params).rowcount
        )
        return bool(count)

    async def record_step(
        self, batch: int, workflow: str, step: str, outcome: StepOutcome, worker: str, now: float
    ) -> None:
        """Note that ``step`` ran, was replayed or failed in ``worker``."""
        params = (batch, workflow, step, outcome, worker, now)
        await self._db.transaction(lambda tx: tx.execute(_SQL["record_step"], params))

    async def calls(self, batch: int) -> list[Call]:
        """Every model request of the batch, in the order sent."""
        rows = await self._db.transaction(
            lambda tx: tx.all(_SQL["calls_of_batch"], (batch,)), write=False
        )
        return [
            Call(
                workflow=r[0],
                step=r[1],
                worker=r[2],
                started_at=r[3],
                billed_at=r[4],
                input_tokens=r[5] or 0,
                output_tokens=r[6] or 0,
                cost_micros=r[7] or 0,
            )
            for r in rows
        ]

    async def steps(self, batch: int) -> list[StepEvent]:
        """Every step event of the batch, in order."""
        rows = await self._db.transaction(
            lambda tx: tx.all(_SQL["steps_of_batch"], (batch,)), write=False
        )
        return [StepEvent(workflow=r[0], step=r[1], outcome=r[2], worker=r[3]) for r in rows]

    async def _one(self, sql: str, params: tuple[Any, ...]) -> Any:
        row = await self._db.transaction(lambda tx: tx.one(sql, params))
        return None if row is None else row[0]


__all__ = ["Call", "Ledger", "StepEvent", "StepOutcome"]
