"""The App the scale tests run, in this process or in many worker processes: an order pays
three parts at once (a gather of steps), ships through a child workflow, then waits for a
note (a message). Each step appends its key to a ledger file (`DURABLY_SCALE_LEDGER`), so
what ran is counted from outside the stores, across processes."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import durably
from durably.app import App, Context, Topic

NOTE: Topic[str] = Topic("note", str)
PARTS = 3


def build(dsn: str, ledger: Path, **options: object) -> tuple[App, durably.Workflow[..., int]]:
    """An App over ``dsn`` whose steps write to ``ledger``, and its order workflow."""
    app = App(dsn, migrate=False, **options)  # type: ignore[arg-type]

    @app.step(name="pay")
    async def pay(key: str) -> int:
        _append(ledger, key)
        return 1

    @app.workflow(name="ship")
    async def ship(ctx: Context) -> int:
        paid: int = await pay(f"{ctx.id}/ship")
        return 10 * paid

    @app.workflow(name="order")
    async def order(ctx: Context, n: int) -> int:
        parts = await ctx.gather(*(pay(f"{ctx.id}/part-{i}") for i in range(PARTS)))
        shipped: int = await ctx.child(ship, id=f"{ctx.id}-ship")
        note = await ctx.recv(NOTE, timeout=120)
        return int(sum(parts)) + shipped + len(note or "") + n * 0

    return app, order


def _append(ledger: Path, key: str) -> None:
    """Append ``key`` as one line (one short write: lines of processes never interleave)."""
    with open(ledger, "a", encoding="utf-8") as paid:
        paid.write(f"{key}\n")
        paid.flush()
        os.fsync(paid.fileno())


EXPECTED = PARTS + 10 + len("paid")
"""What every order returns once its note ("paid") arrived."""


def ledger_counts(ledger: Path) -> Counter[str]:
    """How often each step key was paid."""
    if not ledger.exists():
        return Counter()
    return Counter(line for line in ledger.read_text().splitlines() if line)


def expected_keys(order_ids: list[str]) -> set[str]:
    """Every step key the orders ``order_ids`` pay."""
    keys = {f"{oid}/part-{i}" for oid in order_ids for i in range(PARTS)}
    return keys | {f"{oid}-ship/ship" for oid in order_ids}
