"""One process of `test_admission_race`: start workflows of one tenant at once and print
how many were created and how many refused by the tenant's cap."""

from __future__ import annotations

import asyncio
import sys

from durably import App, Context, Limits, WorkflowLimitError


async def _race(dsn: str, tenant: str, starts: int, cap: int, prefix: str) -> None:
    app = App(dsn, limits=Limits(running_per_tenant=cap), migrate=False)

    @app.workflow(name="admission-race")
    async def idle(ctx: Context) -> None:
        return None

    async def one(n: int) -> str:
        try:
            handle = await idle.start(id=f"{prefix}-{n}", tenant=tenant)
        except WorkflowLimitError:
            return "refused"
        return "created" if handle.created else "found"

    async with app:
        outcomes = await asyncio.gather(*(one(n) for n in range(starts)))
    print(outcomes.count("created"), outcomes.count("refused"))


if __name__ == "__main__":
    dsn, tenant, starts, cap, prefix = sys.argv[1:6]
    asyncio.run(_race(dsn, tenant, int(starts), int(cap), prefix))
