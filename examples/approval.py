"""An expense approval: a workflow that waits for a person, for days if need be.

The workflow checks the request, asks an approver, then waits for their answer on a
topic. While it waits no worker holds it: the wait survives restarts and deploys. If
nobody answers within the timeout it escalates instead. Run it:

    python examples/approval.py            # on a SQLite file in a temporary directory
    DURABLY_DSN=postgresql://localhost/app python examples/approval.py
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from datetime import timedelta

from pydantic import BaseModel

import durably


class Expense(BaseModel):
    employee: str
    amount_cents: int
    reason: str


class Decision(BaseModel):
    approver: str
    approved: bool


class Outcome(BaseModel):
    status: str  # "paid", "rejected" or "escalated"
    note: str


DECISION = durably.Topic("decision", Decision)

# $DURABLY_DSN, or a SQLite file of the example's own.
DSN = os.environ.get("DURABLY_DSN") or f"sqlite:///{tempfile.mkdtemp()}/approval.db"
app = durably.App(DSN)
# Workflow ids are idempotency keys: a second run over the same database would find this
# run's workflows finished, so each run names its own.
RUN = uuid.uuid4().hex[:8]


@app.step
async def check_policy(expense: Expense) -> bool:
    return expense.amount_cents <= 500_00  # larger expenses need the finance team


@app.step
async def ask_approver(expense: Expense) -> str:
    # A real step would send an e-mail or a chat message; its result is recorded, so a
    # replay after a crash does not ask twice.
    return f"asked the manager of {expense.employee} about {expense.reason!r}"


@app.step
async def pay(expense: Expense) -> str:
    # durably.context() gives an id that stays the same across retries and replays: pass
    # it to the payment provider as an idempotency key.
    step = durably.context()
    return f"paid with idempotency key {step.workflow}/{step.step}"


@app.workflow(name="expense-approval")
async def approve_expense(
    ctx: durably.Context, expense: Expense, wait_seconds: float = 2 * 24 * 3600
) -> Outcome:
    if not await check_policy(expense):
        return Outcome(status="escalated", note="over the policy limit")
    await ask_approver(expense)
    await ctx.set_event("stage", "waiting for the approver")
    decision = await ctx.recv(DECISION, timeout=timedelta(seconds=wait_seconds))
    if decision is None:
        return Outcome(status="escalated", note="no answer in time")
    if not decision.approved:
        return Outcome(status="rejected", note=f"rejected by {decision.approver}")
    receipt = await pay(expense)
    return Outcome(status="paid", note=f"approved by {decision.approver}; {receipt}")


async def main() -> None:
    serving = asyncio.create_task(app.serve(signals=False))
    try:
        lunch = await approve_expense.start(
            Expense(employee="ada", amount_cents=42_00, reason="team lunch"), id=f"exp-1-{RUN}"
        )
        print(await lunch.get_event("stage", timeout=30))  # waiting for the approver
        await lunch.send(DECISION, Decision(approver="grace", approved=True))
        print("exp-1:", (await lunch.result(timeout=30)).status)

        # Nobody answers this one: after its (short, for the example) wait it escalates.
        taxi = await approve_expense.start(
            Expense(employee="alan", amount_cents=18_00, reason="taxi"), 1.0, id=f"exp-2-{RUN}"
        )
        print("exp-2:", (await taxi.result(timeout=30)).status)

        yacht = await approve_expense.start(
            Expense(employee="linus", amount_cents=9_000_00, reason="yacht"), id=f"exp-3-{RUN}"
        )
        print("exp-3:", (await yacht.result(timeout=30)).status)
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        await app.close()


if __name__ == "__main__":
    asyncio.run(main())
