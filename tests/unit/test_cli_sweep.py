"""``durably sweep`` over real SQLite files: what goes, what stays, wakeups cancelled,
the limit, JSON, and arguments refused with exit code 2."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import durably
from durably.stores.opening import open_stores
from durably.stores.status import WorkflowStatus
from tests.unit.test_cli import dsn, run_cli


async def _seed(path: Path, *, finished: int = 1) -> None:
    stores = await open_stores(dsn(path))
    try:
        checkpointer = stores.checkpointer
        for n in range(finished):
            workflow = f"done {{{n}}}"
            holder = await checkpointer.claim(workflow, 5.0, 5.0)
            assert holder is not None
            await checkpointer.record(holder, "paid step", n)
            await checkpointer.set_status(holder, WorkflowStatus.COMPLETED)
            await checkpointer.release(holder)
            # A wakeup left behind by a value that arrived after the workflow finished.
            await stores.durable("greeter").arrive(workflow, "late", True)
        sleeping = await checkpointer.claim("sleeping", 5.0, 5.0)
        assert sleeping is not None
        await checkpointer.set_status(sleeping, WorkflowStatus.SLEEPING)
        await checkpointer.release(sleeping)
        live = await checkpointer.claim("live", 30.0, 30.0)
        assert live is not None
        await checkpointer.set_status(live, WorkflowStatus.COMPLETED)
    finally:
        await stores.close()


async def _left(path: Path) -> tuple[list[str], object]:
    stores = await open_stores(dsn(path))
    try:
        statuses = [info.workflow for info in await stores.checkpointer.list_status()]
        return statuses, await stores.durable("greeter").scheduler.next_ready(0)
    finally:
        await stores.close()


def test_sweep_deletes_old_finished_workflows_and_cancels_their_wakeups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "app.db"
    asyncio.run(_seed(path))
    code, out, _ = run_cli(
        capsys, "sweep", "--dsn", dsn(path), "--older-than", "0s", "--kind", "greeter", "--json"
    )
    assert code == 0
    report = json.loads(out)
    assert report["swept"] == 1
    assert report["workflows"] == ["done {0}"]
    assert report["more_may_remain"] is False
    statuses, ready = asyncio.run(_left(path))
    assert statuses == ["live", "sleeping"]
    assert ready is None, "the swept workflow's wakeup must not start it again from nothing"


def test_sweep_keeps_workflows_that_finished_more_recently_than_the_age(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "app.db"
    asyncio.run(_seed(path))
    code, out, _ = run_cli(capsys, "sweep", "--dsn", dsn(path), "--older-than", "7d")
    assert code == 0
    assert "swept 0 finished workflow(s)" in out
    statuses, _ = asyncio.run(_left(path))
    assert statuses == ["done {0}", "live", "sleeping"]


def test_sweep_stops_at_the_limit_and_says_more_may_remain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "app.db"
    asyncio.run(_seed(path, finished=3))
    argv = ("sweep", "--dsn", dsn(path), "--older-than", "0.5s", "--limit", "2")
    asyncio.run(asyncio.sleep(0.6))
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0
    assert "swept 2" in out
    assert "limit was reached" in out
    code, out, _ = run_cli(capsys, *argv)
    assert "swept 1" in out
    assert "limit was reached" not in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--older-than", "7x"], "--older-than takes a number and a unit"),
        (["--older-than=-1d"], "--older-than takes a number and a unit"),
        (["--older-than", "7d", "--limit", "0"], "--limit must be between"),
        ([], "--older-than"),
        (["--older-than", "3000000d"], "at most 100 years"),
        (["--older-than", "99999999999w"], "at most 100 years"),
        (["--older-than", "0s", "--kind", ""], "--kind must not be empty"),
    ],
)
def test_sweep_refuses_bad_arguments_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    path = tmp_path / "app.db"
    code, _, err = run_cli(capsys, "sweep", "--dsn", dsn(path), *extra)
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    assert not path.exists(), "arguments are refused before the store is opened"


async def _seed_app_workflow(path: Path) -> None:
    app = durably.App(f"sqlite:///{path}")

    @app.workflow(name="agent")
    async def agent(ctx: durably.Context, n: int) -> int:
        return n

    await agent.start(1, id="agent-wf")
    await app.close()
    stores = await open_stores(dsn(path))
    try:
        # Finished by some pass while its start's wakeup is still waiting in "agent".
        holder = await stores.checkpointer.claim("agent-wf", 5.0, 5.0)
        assert holder is not None
        await stores.checkpointer.set_status(holder, WorkflowStatus.COMPLETED)
        await stores.checkpointer.release(holder)
    finally:
        await stores.close()


async def _ready_in(path: Path, kind: str) -> object:
    stores = await open_stores(dsn(path))
    try:
        return await stores.durable(kind).scheduler.next_ready(0)
    finally:
        await stores.close()


def test_sweep_cancels_an_app_workflows_wakeups_in_the_scheduler_of_its_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "app.db"
    asyncio.run(_seed_app_workflow(path))
    code, out, _ = run_cli(capsys, "sweep", "--dsn", dsn(path), "--older-than", "0s", "--json")
    assert code == 0
    assert json.loads(out)["workflows"] == ["agent-wf"]
    assert asyncio.run(_ready_in(path, "agent")) is None, "no wakeup of the swept workflow stays"
