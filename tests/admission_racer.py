"""A racer of `test_admission_race`: open an App, say ``ready``, wait for a line on stdin,
then start workflows of one tenant at once and print how many were created and refused
by the tenant's cap. The test process races beside it with `race`."""

from __future__ import annotations

import asyncio
import sys

from durably import App, Context, Limits, WorkflowLimitError


def racing_app(dsn: str, cap: int) -> tuple[App, object]:
    """An App whose tenants may each hold ``cap`` unfinished workflows, and its kind."""
    app = App(dsn, limits=Limits(running_per_tenant=cap), migrate=False)

    @app.workflow(name="admission-race")
    async def idle(ctx: Context) -> None:
        return None

    return app, idle


async def race(workflow: object, tenant: str, starts: int, prefix: str) -> tuple[int, int]:
    """Start ``starts`` workflows at once; how many were created and how many refused."""

    async def one(n: int) -> str:
        try:
            handle = await workflow.start(id=f"{prefix}-{n}", tenant=tenant)  # type: ignore[attr-defined]
        except WorkflowLimitError:
            return "refused"
        return "created" if handle.created else "found"

    outcomes = await asyncio.gather(*(one(n) for n in range(starts)))
    return outcomes.count("created"), outcomes.count("refused")


async def _main(dsn: str, tenant: str, starts: int, cap: int, prefix: str) -> None:
    app, workflow = racing_app(dsn, cap)
    async with app:
        await app.stores()
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        created, refused = await race(workflow, tenant, starts, prefix)
    print(created, refused, flush=True)


if __name__ == "__main__":
    dsn, tenant, starts, cap, prefix = sys.argv[1:6]
    asyncio.run(_main(dsn, tenant, int(starts), int(cap), prefix))
